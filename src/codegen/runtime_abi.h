// The runtime's C ABI as LLVM function types, read from runtime/include/meshrt.h: the
// header is the one declaration of every function generated code calls (`decltype` reads
// a signature; nothing here links against the runtime). Used by the generator's
// declarations (generator.h) and the GPU offload rewrite (gpu.cpp).
#pragma once

#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/LLVMContext.h>

#include <cstdint>
#include <type_traits>

#include "meshrt.h"

namespace meshc::codegen {

/// The LLVM type of a C type of the ABI (pointers are opaque; enums travel as int32_t).
template <typename T>
llvm::Type* abi_type(llvm::LLVMContext& c) {
    if constexpr (std::is_void_v<T>) return llvm::Type::getVoidTy(c);
    else if constexpr (std::is_pointer_v<T>) return llvm::PointerType::get(c, 0);
    else if constexpr (std::is_same_v<T, int32_t>) return llvm::Type::getInt32Ty(c);
    else if constexpr (std::is_same_v<T, int64_t>) return llvm::Type::getInt64Ty(c);
    else static_assert(sizeof(T) == 0, "a runtime ABI type with no LLVM type here");
}

template <typename R, typename... A>
llvm::FunctionType* abi_function_type(llvm::LLVMContext& c, R (*)(A...)) {
    return llvm::FunctionType::get(abi_type<R>(c), {abi_type<A>(c)...}, false);
}

}  // namespace meshc::codegen

/// The LLVM type of runtime function `fn` as meshrt.h declares it.
#define MESHC_ABI_TYPE(context, fn) ::meshc::codegen::abi_function_type(context, static_cast<decltype(&::fn)>(nullptr))

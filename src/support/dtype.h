// Element types of tensors, shared by every layer: the AST (type syntax), the typed IRs,
// code generation. The numbering is the runtime's `meshrt_dtype` (runtime/include/meshrt.h);
// codegen/ checks that with static_asserts.
#pragma once

#include <cstdint>
#include <string_view>

namespace meshc {

enum class DType : uint8_t { Bool, I32, I64, F16, BF16, F32, F64 };
std::string_view dtype_name(DType t);
/// The element type spelled `name` (`f32`, `bf16`, ...); false when it names none.
bool dtype_from_name(std::string_view name, DType& out);
inline bool dtype_is_float(DType t) {
    return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

}  // namespace meshc

// The LLVM generator of one local module: its state, its helpers (element types, loops,
// buffers, GPU regions) and the lowering of each op family, whose larger pieces are in
// lower_*.cpp. Internal to codegen/.
//
// Local IR -> LLVM IR. See codegen.h for what is generated inline and what is a runtime call.
//
// Values. Every local value, scalars included, is a buffer (a `ptr` to its per-device
// piece, row-major); a rank-0 value is a one-element buffer. Element types are stored as
// in the runtime ABI (bool: i8, f16: half, bf16: i16) and computed in a wider "compute"
// type (bool: i1, f16/bf16: float).
//
// Fusion. An element-wise or broadcast op whose only use is another element-wise or
// broadcast op of the same block is not materialised: its consumer evaluates it per
// element, so a chain `relu(x * a + b)` is one loop that reads x, a, b and writes once.
// Every node of a fused tree is evaluated at the root's element index, broadcasting
// trailing-aligned (NumPy), which is how both broadcasting operands and `broadcast` read.
//
// Lifetimes. A block (a function body, a loop body, an if branch) frees each buffer it
// defines after the buffer's last use in that block (a use inside a nested block counts
// as a use by the op that owns the nested block); yielded and returned buffers change
// owner instead. A function returns buffers its caller owns (a parameter returned as is
// is copied); loop-carried values are owned by the loop.
#pragma once

#include "codegen/gpu.h"
#include "codegen/runtime_abi.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "support/diagnostics.h"

namespace meshc::codegen::lower {

using meshc::DType;
using ir::Ew;
using ir::Op;
using ir::OpKind;
using ir::ValueId;


inline bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
inline bool is_int(DType t) { return t == DType::I32 || t == DType::I64; }

inline int64_t product(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

inline std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

/// A reduction's output strides over its input's dims (0 for the reduced dims), so that
/// the output element of input index i is sum(i[d] * stride[d]).
inline std::vector<int64_t> reduced_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& dims) {
    std::vector<bool> reduced(in.size(), false);
    for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
    std::vector<int64_t> kept;
    for (size_t d = 0; d < in.size(); ++d) {
        if (!reduced[d]) kept.push_back(in[d]);
    }
    auto kst = strides_of(kept);
    std::vector<int64_t> out(in.size(), 0);
    for (size_t d = 0, k = 0; d < in.size(); ++d) {
        if (!reduced[d]) out[d] = kst[k++];
    }
    return out;
}

class Generator {
public:
    Generator(llvm::LLVMContext& ctx, llvm::Module& mod, const spmd::LocalModule& lm, bool gpu,
              std::function<std::string(Span)> locate = {})
        : ctx_(ctx), mod_(mod), b_(ctx), lm_(lm), gm_(*lm.global), gpu_(gpu), locate_(std::move(locate)) {
        ptr_ = llvm::PointerType::get(ctx_, 0);
        i1_ = b_.getInt1Ty();
        i8_ = b_.getInt8Ty();
        i32_ = b_.getInt32Ty();
        i64_ = b_.getInt64Ty();
        f32_ = b_.getFloatTy();
        f64_ = b_.getDoubleTy();
        void_ = b_.getVoidTy();
        declare_runtime();
    }

    void generate(const std::string& program_name) {
        for (size_t i = 0; i < gm_.functions.size(); ++i) {
            auto* ft = llvm::FunctionType::get(void_, {ptr_, ptr_, ptr_}, false);
            auto* f = llvm::Function::Create(ft, llvm::Function::InternalLinkage,
                                             fmt::format("mesh.{}", ir::function_label(gm_.functions[i])), mod_);
            fns_.push_back(f);
        }
        for (size_t i = 0; i < gm_.functions.size(); ++i) function(i);
        entry_and_main(program_name);
    }

    /// The data-parallel loops generated as GPU regions (with --gpu), and the PTX image's
    /// placeholder their launches pass (null when there is none).
    const std::vector<gpu::Region>& regions() const { return regions_; }
    llvm::GlobalVariable* image() const { return image_; }
    /// The first block of each run of kChunkOps top-level ops, per function with more
    /// than one run: split_chunks() (codegen.cpp) makes each run but the last a function
    /// of its own, so that no function the optimiser sees grows with the program.
    const std::map<llvm::Function*, std::vector<llvm::BasicBlock*>>& chunks() const { return chunks_; }
    static constexpr size_t kChunkOps = 48;

private:
    llvm::LLVMContext& ctx_;
    llvm::Module& mod_;
    llvm::IRBuilder<> b_;
    const spmd::LocalModule& lm_;
    const ir::Module& gm_;
    llvm::PointerType* ptr_;
    llvm::Type *i1_, *i8_, *i32_, *i64_, *f32_, *f64_, *void_;
    std::map<std::string, llvm::FunctionCallee> rt_;
    std::vector<llvm::Function*> fns_;
    std::map<std::string, llvm::Constant*> constants_;
    bool gpu_ = false;                     // --gpu: data-parallel loops also as GPU regions
    std::function<std::string(Span)> locate_;
    /// Tells the runtime the source location of the collective `op` (meshrt_comm_site).
    void comm_site(const Op& op) {
        std::string where = locate_ ? locate_(op.span) : std::string();
        if (!where.empty()) call("meshrt_comm_site", {dev_, cstring(where)});
    }
    std::vector<gpu::Region> regions_;
    llvm::GlobalVariable* image_ = nullptr;
    std::map<llvm::Function*, std::vector<llvm::BasicBlock*>> chunks_;

    // Per function.
    const ir::Function* fn_ = nullptr;
    int loop_depth_ = 0;  // `for` loops being lowered around the current op
    const spmd::LocalFunction* lf_ = nullptr;
    llvm::Function* llfn_ = nullptr;
    llvm::Value* dev_ = nullptr;
    std::vector<llvm::Value*> val_;
    std::vector<int32_t> use_count_;
    std::vector<const Op*> def_;      // defining op of each value (null: parameter, region arg)
    std::vector<const Op*> user_;     // the last op seen using it (meaningful when used once)
    std::vector<bool> inlined_;       // fused into its only user: no buffer
    std::vector<bool> immediate_;     // a constant only element-wise ops read: no buffer
    std::map<const Op*, const Op*> root_;  // inlined op -> the materialised op that evaluates it

    // Automatic differentiation (autodiff section below).

    // ------------------------------------------------------------ runtime declarations

    void decl(const std::string& name, llvm::Type* ret, std::vector<llvm::Type*> params) {
        rt_[name] = mod_.getOrInsertFunction(name, llvm::FunctionType::get(ret, params, false));
    }

    /// Declares runtime function `fn` with the signature runtime/include/meshrt.h gives it.
#define MESHC_RUNTIME(fn) rt_[#fn] = mod_.getOrInsertFunction(#fn, MESHC_ABI_TYPE(ctx_, fn))

    void declare_runtime() {
        MESHC_RUNTIME(meshrt_main);
        MESHC_RUNTIME(meshrt_coord);
        MESHC_RUNTIME(meshrt_alloc);
        // A fresh buffer aliases nothing: loops writing it need no runtime alias checks.
        llvm::cast<llvm::Function>(rt_["meshrt_alloc"].getCallee())->addRetAttr(llvm::Attribute::NoAlias);
        MESHC_RUNTIME(meshrt_free);
        MESHC_RUNTIME(meshrt_comm_site);
        MESHC_RUNTIME(meshrt_all_reduce);
        MESHC_RUNTIME(meshrt_all_gather);
        MESHC_RUNTIME(meshrt_reduce_scatter);
        MESHC_RUNTIME(meshrt_all_to_all);
        MESHC_RUNTIME(meshrt_broadcast_all);
        MESHC_RUNTIME(meshrt_contract);
        MESHC_RUNTIME(meshrt_random);
        MESHC_RUNTIME(meshrt_embedding);
        MESHC_RUNTIME(meshrt_one_hot);
        MESHC_RUNTIME(meshrt_slice);
        MESHC_RUNTIME(meshrt_concat_part);
        MESHC_RUNTIME(meshrt_load);
        MESHC_RUNTIME(meshrt_arg);
        MESHC_RUNTIME(meshrt_arg_path);
        MESHC_RUNTIME(meshrt_check_slice);
        MESHC_RUNTIME(meshrt_save);
        MESHC_RUNTIME(meshrt_load_tensor);
        MESHC_RUNTIME(meshrt_save_tensor);
        MESHC_RUNTIME(meshrt_save_finish);
        MESHC_RUNTIME(meshrt_permutation);
        MESHC_RUNTIME(meshrt_print);
        MESHC_RUNTIME(meshrt_trace_begin);
        MESHC_RUNTIME(meshrt_trace_end);
        if (gpu_) {
            MESHC_RUNTIME(meshrt_offload);
            MESHC_RUNTIME(meshrt_kernel_thread);
            MESHC_RUNTIME(meshrt_kernel_threads);
        }
    }
#undef MESHC_RUNTIME

    llvm::CallInst* call(const std::string& name, std::vector<llvm::Value*> args) { return b_.CreateCall(rt_.at(name), args); }

    // ------------------------------------------------------------ constants

    llvm::Constant* i32c(int64_t v) { return llvm::ConstantInt::get(i32_, static_cast<uint64_t>(v), true); }
    llvm::Constant* i64c(int64_t v) { return llvm::ConstantInt::get(i64_, static_cast<uint64_t>(v), true); }

    llvm::Constant* global_array(const std::string& key, llvm::Constant* init) {
        auto it = constants_.find(key);
        if (it != constants_.end()) return it->second;
        auto* g = new llvm::GlobalVariable(mod_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "mesh.const");
        g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
        constants_[key] = g;
        return g;
    }
    llvm::Constant* i64_array(const std::vector<int64_t>& v) {
        std::vector<llvm::Constant*> items;
        for (int64_t x : v) items.push_back(i64c(x));
        if (items.empty()) items.push_back(i64c(0));
        return global_array(fmt::format("i64:{}", fmt::join(v, ",")),
                            llvm::ConstantArray::get(llvm::ArrayType::get(i64_, items.size()), items));
    }
    llvm::Constant* i32_array(const std::vector<int32_t>& v) {
        std::vector<llvm::Constant*> items;
        for (int32_t x : v) items.push_back(i32c(x));
        if (items.empty()) items.push_back(i32c(0));
        return global_array(fmt::format("i32:{}", fmt::join(v, ",")),
                            llvm::ConstantArray::get(llvm::ArrayType::get(i32_, items.size()), items));
    }
    llvm::Constant* cstring(const std::string& s) {
        auto it = constants_.find("s:" + s);
        if (it != constants_.end()) return it->second;
        llvm::Constant* g = b_.CreateGlobalString(s, "mesh.str", 0, &mod_);
        constants_["s:" + s] = g;
        return g;
    }
    /// A meshrt_layout for a global type: {i32 mesh, i32 rank, ptr shape, ptr count, ptr axes}.
    llvm::Constant* layout_of(const ir::TensorType& t) {
        std::vector<int32_t> counts, axes;
        for (size_t d = 0; d < t.shape.size(); ++d) {
            const ir::AxisList empty;
            const ir::AxisList& list = d < t.layout.dims.size() ? t.layout.dims[d] : empty;
            counts.push_back(t.mesh >= 0 ? static_cast<int32_t>(list.size()) : 0);
            if (t.mesh >= 0) {
                for (uint8_t a : list) axes.push_back(a);
            }
        }
        std::string key = fmt::format("layout:{}:{}:{}:{}", t.mesh, fmt::join(t.shape, ","), fmt::join(counts, ","), fmt::join(axes, ","));
        auto it = constants_.find(key);
        if (it != constants_.end()) return it->second;
        auto* st = llvm::StructType::get(ctx_, {i32_, i32_, ptr_, ptr_, ptr_});
        auto* init = llvm::ConstantStruct::get(st, {i32c(t.mesh), i32c(static_cast<int64_t>(t.shape.size())), i64_array(t.shape),
                                                    i32_array(counts), i32_array(axes)});
        auto* g = new llvm::GlobalVariable(mod_, st, true, llvm::GlobalValue::PrivateLinkage, init, "mesh.layout");
        constants_[key] = g;
        return g;
    }

    // ------------------------------------------------------------ element types

    llvm::Type* storage(DType t) {
        switch (t) {
        case DType::Bool: return i8_;
        case DType::I32: return i32_;
        case DType::I64: return i64_;
        case DType::F16: return b_.getHalfTy();
        case DType::BF16: return b_.getInt16Ty();
        case DType::F32: return f32_;
        case DType::F64: return f64_;
        }
        return f32_;
    }
    llvm::Type* compute(DType t) {
        switch (t) {
        case DType::Bool: return i1_;
        case DType::I32: return i32_;
        case DType::I64: return i64_;
        case DType::F64: return f64_;
        default: return f32_;
        }
    }
    int64_t bytes(DType t) { return static_cast<int64_t>(ir::dtype_bytes(t)); }

    llvm::Value* load_elem(DType t, llvm::Value* base, llvm::Value* index) {
        llvm::Value* p = b_.CreateGEP(storage(t), base, index);
        llvm::Value* v = b_.CreateLoad(storage(t), p);
        switch (t) {
        case DType::Bool: return b_.CreateICmpNE(v, llvm::ConstantInt::get(i8_, 0));
        case DType::F16: return b_.CreateFPExt(v, f32_);
        case DType::BF16: return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, i32_), 16), f32_);
        default: return v;
        }
    }
    void store_elem(DType t, llvm::Value* base, llvm::Value* index, llvm::Value* v) {
        llvm::Value* p = b_.CreateGEP(storage(t), base, index);
        switch (t) {
        case DType::Bool: v = b_.CreateZExt(v, i8_); break;
        case DType::F16: v = b_.CreateFPTrunc(v, b_.getHalfTy()); break;
        case DType::BF16: v = bf16_bits(v); break;
        default: break;
        }
        b_.CreateStore(v, p);
    }
    /// A float's bfloat16 bits, rounded to nearest even (add 0x7fff plus the lowest kept
    /// bit, keep the top half); NaN stays NaN.
    llvm::Value* bf16_bits(llvm::Value* v) {
        llvm::Value* bits = b_.CreateBitCast(v, i32_);
        llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
        llvm::Value* rounded = b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7fff)));
        llvm::Value* top = b_.CreateTrunc(b_.CreateLShr(rounded, 16), b_.getInt16Ty());
        llvm::Value* nan = b_.CreateFCmpUNO(v, v);
        llvm::Value* quiet = b_.CreateOr(b_.CreateTrunc(b_.CreateLShr(bits, 16), b_.getInt16Ty()), b_.getInt16(0x40));
        return b_.CreateSelect(nan, quiet, top);
    }
    /// Converts a compute value of element type `from` to the compute type of `to`.
    llvm::Value* convert(llvm::Value* v, DType from, DType to) {
        llvm::Type* target = compute(to);
        if ((to == DType::F16 || to == DType::BF16) && from != to) {
            // Computed in float, but the value must be one a 16-bit float can hold.
            v = convert(v, from, DType::F32);
            if (to == DType::F16) return b_.CreateFPExt(b_.CreateFPTrunc(v, b_.getHalfTy()), f32_);
            return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bf16_bits(v), i32_), 16), f32_);
        }
        if (v->getType() == target) return v;
        if (to == DType::Bool) {
            if (is_float(from)) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
            return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
        }
        if (from == DType::Bool) return is_float(to) ? b_.CreateUIToFP(v, target) : b_.CreateZExt(v, target);
        if (is_float(from) && is_float(to)) return b_.CreateFPCast(v, target);
        if (is_int(from) && is_int(to)) return b_.CreateSExtOrTrunc(v, target);
        if (is_int(from)) return b_.CreateSIToFP(v, target);
        // float -> int saturates (NaN gives 0), never undefined.
        return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {target, v->getType()}, {v});
    }
    llvm::Value* const_of(DType t, double x) {
        llvm::Type* ty = compute(t);
        if (t == DType::Bool) return llvm::ConstantInt::get(i1_, x != 0);
        if (is_int(t)) return llvm::ConstantInt::get(ty, static_cast<uint64_t>(static_cast<int64_t>(x)), true);
        if (t == DType::F16 || t == DType::BF16) {
            // A literal that meets a 16-bit float tensor is rounded to its type first (as
            // NumPy and JAX do), then computed with in f32 like the tensor's elements.
            llvm::APFloat f(x);
            bool lost = false;
            f.convert(t == DType::F16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven, &lost);
            f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
            return llvm::ConstantFP::get(ctx_, f);
        }
        return llvm::ConstantFP::get(ty, x);
    }

    // ------------------------------------------------------------ loops

    /// for (i = first, c = inits; i < n; i += step) c = body(i, c), in the current block
    /// (`step` > 0); returns the carried values' final state, with the builder after the
    /// loop. The one loop shape every emitted loop uses.
    template <typename F>
    std::vector<llvm::Value*> counted_loop(llvm::Value* first, llvm::Value* n, llvm::Value* step,
                                           const std::vector<llvm::Value*>& inits, F&& body) {
        llvm::BasicBlock* pre = b_.GetInsertBlock();
        auto* head = llvm::BasicBlock::Create(ctx_, "loop", llfn_);
        auto* bodyb = llvm::BasicBlock::Create(ctx_, "body", llfn_);
        auto* exit = llvm::BasicBlock::Create(ctx_, "done", llfn_);
        b_.CreateBr(head);
        b_.SetInsertPoint(head);
        llvm::PHINode* i = b_.CreatePHI(n->getType(), 2, "i");
        i->addIncoming(first, pre);
        std::vector<llvm::Value*> carried;
        for (llvm::Value* init : inits) {
            llvm::PHINode* c = b_.CreatePHI(init->getType(), 2, "acc");
            c->addIncoming(init, pre);
            carried.push_back(c);
        }
        b_.CreateCondBr(b_.CreateICmpSLT(i, n), bodyb, exit);
        b_.SetInsertPoint(bodyb);
        std::vector<llvm::Value*> next = body(static_cast<llvm::Value*>(i), carried);
        llvm::BasicBlock* latch = b_.GetInsertBlock();
        i->addIncoming(b_.CreateAdd(i, step, "", true, true), latch);
        for (size_t k = 0; k < carried.size(); ++k) llvm::cast<llvm::PHINode>(carried[k])->addIncoming(next[k], latch);
        b_.CreateBr(head);
        b_.SetInsertPoint(exit);
        return carried;
    }
    /// for (i = 0; i < n; ++i) body(i).
    template <typename F>
    void loop(llvm::Value* n, F&& body) {
        llvm::Value* zero = llvm::ConstantInt::get(n->getType(), 0);
        llvm::Value* one = llvm::ConstantInt::get(n->getType(), 1);
        counted_loop(zero, n, one, {}, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
            body(i);
            return std::vector<llvm::Value*>{};
        });
    }
    /// Nested loops over `shape`, outermost first; body gets the index of each dim.
    template <typename F>
    void loop_nest(const std::vector<int64_t>& shape, F&& body) {
        std::vector<llvm::Value*> idx;
        nest(shape, 0, idx, body);
    }
    template <typename F>
    void nest(const std::vector<int64_t>& shape, size_t d, std::vector<llvm::Value*>& idx, F& body) {
        if (d == shape.size()) {
            body(idx);
            return;
        }
        loop(i64c(shape[d]), [&](llvm::Value* i) {
            idx.push_back(i);
            nest(shape, d + 1, idx, body);
            idx.pop_back();
        });
    }

    /// for (i = 0, acc = init; i < n; ++i) acc = body(i, acc); returns the final acc.
    template <typename F>
    llvm::Value* loop_acc(llvm::Value* n, llvm::Value* init, F&& body) {
        llvm::Value* zero = llvm::ConstantInt::get(n->getType(), 0);
        llvm::Value* one = llvm::ConstantInt::get(n->getType(), 1);
        return counted_loop(zero, n, one, {init}, [&](llvm::Value* i, const std::vector<llvm::Value*>& acc) {
            return std::vector<llvm::Value*>{body(i, acc[0])};
        })[0];
    }
    /// The multi-index of row-major position `i` in `shape` (constant divisors).
    std::vector<llvm::Value*> unravel(llvm::Value* i, const std::vector<int64_t>& shape) {
        std::vector<llvm::Value*> idx(shape.size());
        for (size_t d = shape.size(); d-- > 0;) {
            if (d == 0) {
                idx[d] = i;
                break;
            }
            idx[d] = b_.CreateURem(i, i64c(shape[d]));
            i = b_.CreateUDiv(i, i64c(shape[d]));
        }
        return idx;
    }

    // ------------------------------------------------------------ GPU regions
    //
    // A data-parallel loop is emitted through offload(emit): emit(false, nest) writes it
    // for the host, nest being loop_nest. With --gpu the generated code first asks the
    // runtime (meshrt_offload) and, when the program runs its kernels, takes a second copy
    // written by emit(true, nest) where nest is a grid-stride loop over the same index
    // space; that copy is a region gpu::outline turns into a kernel and its launch. The
    // emit function must allocate, free and call the runtime only outside the nest (in
    // the host copy), and compute what the loop reads from the device's coordinates
    // before offload; everything else (preloaded scalars, the accumulators of a
    // reduction) it computes in each copy.
    using Body = std::function<void(const std::vector<llvm::Value*>&)>;
    using Nest = std::function<void(const std::vector<int64_t>&, const Body&)>;

    void offload(const std::string& what, const std::function<void(bool, const Nest&)>& emit) {
        Nest host = [this](const std::vector<int64_t>& shape, const Body& body) { loop_nest(shape, body); };
        if (!gpu_) {
            emit(false, host);
            return;
        }
        if (!image_) {
            image_ = new llvm::GlobalVariable(mod_, i8_, true, llvm::GlobalValue::ExternalLinkage, nullptr, "mesh.ptx");
        }
        llvm::Value* on = b_.CreateICmpNE(call("meshrt_offload", {dev_}), i32c(0));
        auto* gpu = llvm::BasicBlock::Create(ctx_, "gpu");
        auto* cpu = llvm::BasicBlock::Create(ctx_, "cpu", llfn_);
        b_.CreateCondBr(on, gpu, cpu);
        b_.SetInsertPoint(cpu);
        emit(false, host);
        llvm::BasicBlock* cpu_end = b_.GetInsertBlock();
        gpu->insertInto(llfn_);
        b_.SetInsertPoint(gpu);
        int64_t threads = -1;
        Nest grid = [&](const std::vector<int64_t>& shape, const Body& body) {
            MESHC_ASSERT(threads < 0, "a GPU region has one loop nest");
            threads = product(shape);
            grid_stride(shape, body);
        };
        emit(true, grid);
        MESHC_ASSERT(threads >= 0, "a GPU region has one loop nest");
        gpu::Region region;
        region.host = llfn_;
        region.dev = dev_;
        region.threads = threads;
        region.what = what;
        for (auto it = gpu->getIterator(); it != llfn_->end(); ++it) region.blocks.push_back(&*it);
        auto* join = llvm::BasicBlock::Create(ctx_, "offloaded", llfn_);
        b_.CreateBr(join);
        b_.SetInsertPoint(cpu_end);
        b_.CreateBr(join);
        b_.SetInsertPoint(join);
        regions_.push_back(std::move(region));
    }
    /// for (i = thread; i < product(shape); i += threads) body(unravel(i)).
    void grid_stride(const std::vector<int64_t>& shape, const Body& body) {
        llvm::Value* first = call(gpu::kThread, {});
        llvm::Value* step = call(gpu::kThreads, {});
        counted_loop(first, i64c(product(shape)), step, {},
                     [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
                         body(unravel(i, shape));
                         return std::vector<llvm::Value*>{};
                     });
    }

    /// A loop nest over `shape` whose iterations write distinct elements (so that the
    /// GPU may run them in any order): offload()ed; a loop that is not (`parallel` false:
    /// several iterations add into one element) stays a host loop nest.
    void data_parallel(const std::string& what, const std::vector<int64_t>& shape, const Body& body, bool parallel = true) {
        if (!parallel) {
            loop_nest(shape, body);
            return;
        }
        offload(what, [&](bool, const Nest& nest) { nest(shape, body); });
    }

    // ------------------------------------------------------------ buffers

    const std::vector<int64_t>& lshape(ValueId v) const { return lf_->shape[v]; }
    const ir::TensorType& gtype(ValueId v) const { return fn_->types[v]; }
    DType dt(ValueId v) const { return fn_->types[v].dtype; }
    int64_t nbytes(ValueId v) { return product(lshape(v)) * bytes(dt(v)); }

    llvm::Value* alloc(ValueId v) { return call("meshrt_alloc", {dev_, i64c(nbytes(v))}); }
    llvm::Value* copy_of(ValueId v) {
        llvm::Value* p = alloc(v);
        llvm::Value* src = val_[v];
        DType t = dt(v);
        offload("copy", [&](bool gpu, const Nest& nest) {
            if (!gpu) {
                b_.CreateMemCpy(p, llvm::MaybeAlign(64), src, llvm::MaybeAlign(64), nbytes(v));
                return;
            }
            nest({product(lshape(v))}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, p, i[0], load_elem(t, src, i[0])); });
        });
        return p;
    }
    llvm::Value* scalar_i64(ValueId v) { return convert(load_elem(dt(v), val_[v], i64c(0)), dt(v), DType::I64); }

    /// This device's coordinate on `axis` of `mesh`, 0 for a device outside the mesh.
    llvm::Value* coord(int32_t mesh, int32_t axis) {
        llvm::Value* c = call("meshrt_coord", {dev_, i32c(mesh), i32c(axis)});
        return b_.CreateIntrinsic(llvm::Intrinsic::smax, {i64_}, {c, i64c(0)});
    }
    /// Mixed-radix index of this device over `axes` (first major).
    llvm::Value* piece(int32_t mesh, const std::vector<int32_t>& axes) {
        llvm::Value* p = i64c(0);
        for (int32_t a : axes) {
            int64_t size = gm_.meshes[static_cast<size_t>(mesh)].axes[static_cast<size_t>(a)].size;
            p = b_.CreateAdd(b_.CreateMul(p, i64c(size)), coord(mesh, a));
        }
        return p;
    }
    /// The global offset of this device's piece along dim d of value v.
    llvm::Value* dim_offset(ValueId v, size_t d) {
        const ir::TensorType& t = gtype(v);
        if (t.mesh < 0 || t.layout.dims[d].empty()) return i64c(0);
        std::vector<int32_t> axes(t.layout.dims[d].begin(), t.layout.dims[d].end());
        return b_.CreateMul(piece(t.mesh, axes), i64c(lshape(v)[d]));
    }
    /// Runs `body` only on devices that belong to `mesh` (every device, unless the mesh
    /// is smaller than the program); on the others `otherwise` runs.
    template <typename F, typename G>
    void on_members(int32_t mesh, F&& body, G&& otherwise) {
        if (mesh < 0 || gm_.meshes[static_cast<size_t>(mesh)].device_count() >= lm_.device_count) {
            body();
            return;
        }
        llvm::Value* member = b_.CreateICmpSGE(call("meshrt_coord", {dev_, i32c(mesh), i32c(0)}), i64c(0));
        auto* yes = llvm::BasicBlock::Create(ctx_, "member", llfn_);
        auto* no = llvm::BasicBlock::Create(ctx_, "outside", llfn_);
        auto* join = llvm::BasicBlock::Create(ctx_, "joined", llfn_);
        b_.CreateCondBr(member, yes, no);
        b_.SetInsertPoint(yes);
        body();
        b_.CreateBr(join);
        b_.SetInsertPoint(no);
        otherwise();
        b_.CreateBr(join);
        b_.SetInsertPoint(join);
    }
    // -0.0 everywhere: the additive identity of IEEE arithmetic (x + -0.0 == x for every
    // x, +0.0 and -0.0 included), so a pending sum made of a piece and these fills adds
    // up to the piece bit for bit.
    void negative_zero(ValueId v, llvm::Value* p) {
        DType t = dt(v);
        offload("zeros", [&](bool, const Nest& nest) {
            nest({product(lshape(v))}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, p, i[0], const_of(t, -0.0)); });
        });
    }
    void zero(ValueId v, llvm::Value* p) {
        DType t = dt(v);
        offload("zeros", [&](bool gpu, const Nest& nest) {
            if (!gpu) {
                b_.CreateMemSet(p, b_.getInt8(0), nbytes(v), llvm::MaybeAlign(64));
                return;
            }
            nest({product(lshape(v))}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, p, i[0], const_of(t, 0)); });
        });
    }

    // ------------------------------------------------------------ functions

    void analyse() {
        size_t n = fn_->types.size();
        use_count_.assign(n, 0);
        def_.assign(n, nullptr);
        user_.assign(n, nullptr);
        inlined_.assign(n, false);
        immediate_.assign(n, true);
        root_.clear();
        std::map<const Op*, const std::vector<Op>*> list_of;
        std::function<void(const std::vector<Op>&)> walk = [&](const std::vector<Op>& ops) {
            for (const Op& op : ops) {
                list_of[&op] = &ops;
                for (ValueId r : op.results) def_[r] = &op;
                for (ValueId v : op.operands) {
                    ++use_count_[v];
                    user_[v] = &op;
                    if (op.kind != OpKind::Elementwise && op.kind != OpKind::Broadcast) immediate_[v] = false;
                }
                for (const ir::Region& r : op.regions) {
                    walk(r.ops);
                    for (ValueId v : r.yields) {
                        use_count_[v] += 2;  // a yield is never fused
                        immediate_[v] = false;
                    }
                }
            }
        };
        walk(fn_->ops);
        for (ValueId v : fn_->results) {
            use_count_[v] += 2;
            immediate_[v] = false;
        }
        for (ValueId v = 0; v < n; ++v) immediate_[v] = immediate_[v] && def_[v] && def_[v]->kind == OpKind::Constant;
        auto fusable = [](const Op* op) { return op && (op->kind == OpKind::Elementwise || op->kind == OpKind::Broadcast); };
        for (ValueId v = 0; v < n; ++v) {
            const Op* d = def_[v];
            if (use_count_[v] == 1 && fusable(d) && fusable(user_[v]) && list_of[d] == list_of[user_[v]]) {
                inlined_[v] = true;
            }
        }
        // Root of each inlined op: follow the single users to the first materialised one.
        for (ValueId v = 0; v < n; ++v) {
            if (!inlined_[v]) continue;
            const Op* r = user_[v];
            while (inlined_[r->results[0]]) r = user_[r->results[0]];
            root_[def_[v]] = r;
        }
    }

    void function(size_t index) {
        fn_ = &gm_.functions[index];
        lf_ = &lm_.functions[index];
        llfn_ = fns_[index];
        val_.assign(fn_->types.size(), nullptr);
        analyse();
        auto* entry = llvm::BasicBlock::Create(ctx_, "entry", llfn_);
        b_.SetInsertPoint(entry);
        dev_ = llfn_->getArg(0);
        for (size_t i = 0; i < fn_->params.size(); ++i) {
            val_[fn_->params[i]] = b_.CreateLoad(ptr_, b_.CreateConstGEP1_64(ptr_, llfn_->getArg(1), i));
        }
        block(fn_->ops, fn_->results);
        // Results: the caller owns them; parameters and repeats are copied.
        std::set<ValueId> given;
        std::set<ValueId> params(fn_->params.begin(), fn_->params.end());
        for (size_t i = 0; i < fn_->results.size(); ++i) {
            ValueId r = fn_->results[i];
            llvm::Value* p = (params.count(r) || given.count(r)) ? copy_of(r) : val_[r];
            given.insert(r);
            b_.CreateStore(p, b_.CreateConstGEP1_64(ptr_, llfn_->getArg(2), i));
        }
        b_.CreateRetVoid();
    }

    /// Emits a block: its ops in order, freeing each buffer it defines after its last use.
    /// Values in `keep` (yielded or returned) are not freed.
    void block(const std::vector<Op>& ops, const std::vector<ValueId>& keep) {
        std::map<const Op*, size_t> pos;
        for (size_t i = 0; i < ops.size(); ++i) pos[&ops[i]] = i;
        auto effective = [&](const Op& op) {
            auto it = root_.find(&op);
            return it == root_.end() ? pos[&op] : pos[it->second];
        };
        std::map<ValueId, size_t> last;
        for (size_t i = 0; i < ops.size(); ++i) {
            for (ValueId r : ops[i].results) last.emplace(r, i);  // unused: freed at once
        }
        std::function<void(const std::vector<Op>&, size_t)> nested = [&](const std::vector<Op>& inner, size_t at) {
            for (const Op& op : inner) {
                for (ValueId v : op.operands) {
                    if (last.count(v)) last[v] = std::max(last[v], at);
                }
                for (const ir::Region& r : op.regions) {
                    nested(r.ops, at);
                    for (ValueId v : r.yields) {
                        if (last.count(v)) last[v] = std::max(last[v], at);
                    }
                }
            }
        };
        for (size_t i = 0; i < ops.size(); ++i) {
            size_t at = effective(ops[i]);
            for (ValueId v : ops[i].operands) {
                if (last.count(v)) last[v] = std::max(last[v], at);
            }
            for (const ir::Region& r : ops[i].regions) {
                nested(r.ops, at);
                for (ValueId v : r.yields) {
                    if (last.count(v)) last[v] = std::max(last[v], at);
                }
            }
        }
        std::set<ValueId> kept(keep.begin(), keep.end());
        std::vector<std::vector<ValueId>> free_after(ops.size());
        for (auto [v, i] : last) {
            if (!kept.count(v) && !inlined_[v] && !immediate_[v]) free_after[i].push_back(v);
        }
        bool top = &ops == &fn_->ops && ops.size() > kChunkOps;
        for (size_t i = 0; i < ops.size(); ++i) {
            if (top && i % kChunkOps == 0) {
                auto* start = llvm::BasicBlock::Create(ctx_, "chunk", llfn_);
                b_.CreateBr(start);
                b_.SetInsertPoint(start);
                chunks_[llfn_].push_back(start);
            }
            bool materialise = ops[i].results.empty() || (!inlined_[ops[i].results[0]] && !immediate_[ops[i].results[0]]);
            if (materialise) emit(ops[i]);
            for (ValueId v : free_after[i]) call("meshrt_free", {dev_, val_[v]});
        }
    }

    // ------------------------------------------------------------ ops

    void emit(const Op& op);

    /// The file of a load or save: its literal, or the value of its path argument.
    llvm::Value* path_of(const Op& op);

    /// r = x[..., start:start+len, ...] along dim d.
    void slice(ValueId x, ValueId r, size_t d, llvm::Value* start, int64_t len);

    /// make_partial over axes A: the global value becomes the sum over A of the pieces.
    /// For an axis that splits a dim of the operand (and not of the result), each device
    /// puts its piece at its offset in zeros; for an axis the operand is replicated over,
    /// only the devices at coordinate 0 keep the value.
    /// Where make_partial puts a device's piece: per dim, the offset of the piece in the
    /// result (for the split axes the op removes), and whether this device keeps its
    /// value at all (coordinate 0 on the axes the operand is replicated over).
    llvm::Value* partial_placement(const Op& op, std::vector<llvm::Value*>& offset);

    void make_partial(const Op& op);

    void create(const Op& op);

    // Element-wise: evaluate the fused tree rooted at `op` at each element of its result.
    struct Leaf {
        llvm::Value* scalar = nullptr;     // preloaded (one element)
        std::vector<int64_t> stride;       // per result dim (0: broadcast)
    };

    void collect_leaves(const Op& op, const std::vector<int64_t>& out, std::map<ValueId, Leaf>& leaves, bool& flat);

    llvm::Value* element(ValueId v, std::map<ValueId, Leaf>& leaves, const std::vector<llvm::Value*>& idx, llvm::Value* flat_index);

    llvm::Value* evaluate(const Op& op, std::map<ValueId, Leaf>& leaves, const std::vector<llvm::Value*>& idx, llvm::Value* flat_index);

    llvm::Value* fcall(llvm::Intrinsic::ID id, llvm::Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

    /// One element-wise function on compute values. `rt`: result type; `in`, `in2`: the
    /// first two operands' types (`in3`: the third, for select).
    llvm::Value* ew(Ew e, DType rt, DType in, DType in2, std::vector<llvm::Value*> a, DType in3);

    /// The names of the element-wise functions of a fused tree: "mul,add,relu".
    void fused_names(const Op& op, std::string& names);
    /// Brackets a generated loop in the trace (`--trace`) when it is big enough to matter.
    template <typename F>
    void traced(const std::string& name, int64_t elements, F&& body) {
        bool trace = elements >= 4096;
        if (trace) call("meshrt_trace_begin", {dev_, cstring(name)});
        body();
        if (trace) call("meshrt_trace_end", {dev_});
    }

    void fused(const Op& op);

    void fused_loop(const Op& op, const std::string& what);

    void reduce(const Op& op);

    void contract(const Op& op);

    void collective(const Op& op);

    /// An all_reduce of several tensors of one element type (transform/combine_collectives):
    /// packed into one buffer, reduced with one runtime call, unpacked.
    void combined_all_reduce(const Op& op);

    /// A stack array in the entry block (an alloca in a loop body would grow the stack
    /// with every iteration).
    llvm::Value* entry_alloca(llvm::Type* type, size_t count) {
        llvm::IRBuilder<> eb(&llfn_->getEntryBlock(), llfn_->getEntryBlock().begin());
        return eb.CreateAlloca(type, i64c(static_cast<int64_t>(std::max<size_t>(1, count))));
    }
    llvm::Value* ptr_array(const std::vector<llvm::Value*>& items, size_t count) {
        llvm::Value* a = entry_alloca(ptr_, count);
        for (size_t i = 0; i < items.size(); ++i) b_.CreateStore(items[i], b_.CreateConstGEP1_64(ptr_, a, i));
        return a;
    }
    llvm::Value* slot(llvm::Value* array, size_t i) { return b_.CreateLoad(ptr_, b_.CreateConstGEP1_64(ptr_, array, i)); }

    void call_op(const Op& op);

    void print(const Op& op);

    void for_op(const Op& op);

    void if_op(const Op& op);

    llvm::Value* linear(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& strides) {
        llvm::Value* at = i64c(0);
        for (size_t d = 0; d < idx.size(); ++d) {
            if (strides[d]) at = b_.CreateAdd(at, b_.CreateMul(idx[d], i64c(strides[d])));
        }
        return at;
    }

    // ------------------------------------------------------------ entry and main

    void entry_and_main(const std::string& program_name);
};

}  // namespace meshc::codegen::lower

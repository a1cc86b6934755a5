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
#include "codegen/codegen.h"
#include "codegen/gpu.h"

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

namespace meshc::codegen {

using meshc::DType;
using ir::Ew;
using ir::Op;
using ir::OpKind;
using ir::ValueId;

namespace {

bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }
bool is_int(DType t) { return t == DType::I32 || t == DType::I64; }

int64_t product(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

/// A reduction's output strides over its input's dims (0 for the reduced dims), so that
/// the output element of input index i is sum(i[d] * stride[d]).
std::vector<int64_t> reduced_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& dims) {
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
    Generator(llvm::LLVMContext& ctx, llvm::Module& mod, const spmd::LocalModule& lm, bool gpu)
        : ctx_(ctx), mod_(mod), b_(ctx), lm_(lm), gm_(*lm.global), gpu_(gpu) {
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
    std::vector<gpu::Region> regions_;
    llvm::GlobalVariable* image_ = nullptr;

    // Per function.
    const ir::Function* fn_ = nullptr;
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

    void declare_runtime() {
        decl("meshrt_main", i32_, {i32_, ptr_, ptr_});
        decl("meshrt_coord", i64_, {ptr_, i32_, i32_});
        decl("meshrt_alloc", ptr_, {ptr_, i64_});
        // A fresh buffer aliases nothing: loops writing it need no runtime alias checks.
        llvm::cast<llvm::Function>(rt_["meshrt_alloc"].getCallee())->addRetAttr(llvm::Attribute::NoAlias);
        decl("meshrt_free", void_, {ptr_, ptr_});
        decl("meshrt_all_reduce", void_, {ptr_, i32_, i32_, ptr_, i32_, i32_, ptr_, ptr_, i64_});
        decl("meshrt_all_gather", void_, {ptr_, i32_, i32_, ptr_, i32_, ptr_, ptr_, i32_, ptr_, i32_});
        decl("meshrt_reduce_scatter", void_, {ptr_, i32_, i32_, ptr_, i32_, i32_, ptr_, ptr_, i32_, ptr_, i32_});
        decl("meshrt_all_to_all", void_, {ptr_, i32_, i32_, ptr_, i32_, ptr_, ptr_, i32_, ptr_, i32_, i32_});
        decl("meshrt_broadcast_all", void_, {ptr_, ptr_, i64_});
        decl("meshrt_contract", void_, {ptr_, i32_, ptr_, ptr_, i32_, ptr_, ptr_, i32_, ptr_, ptr_, i32_, ptr_});
        decl("meshrt_random", void_, {ptr_, i32_, i64_, i32_, ptr_, ptr_});
        decl("meshrt_embedding", void_, {ptr_, i32_, ptr_, i64_, i64_, i64_, i64_, i32_, ptr_, i64_, ptr_, ptr_});
        decl("meshrt_one_hot", void_, {ptr_, i32_, ptr_, i64_, i64_, ptr_});
        decl("meshrt_slice", void_, {ptr_, i32_, ptr_, i32_, ptr_, i32_, i64_, i64_, ptr_});
        decl("meshrt_concat_part", void_, {ptr_, i32_, ptr_, i32_, ptr_, i32_, i64_, i64_, ptr_});
        decl("meshrt_load", void_, {ptr_, ptr_, i32_, ptr_, ptr_});
        decl("meshrt_arg", void_, {ptr_, i32_, i32_, ptr_});
        decl("meshrt_arg_path", ptr_, {ptr_, i32_});
        decl("meshrt_check_slice", void_, {ptr_, i64_, i64_, i64_, ptr_});
        decl("meshrt_save", void_, {ptr_, ptr_, i32_, ptr_, ptr_});
        decl("meshrt_load_tensor", void_, {ptr_, ptr_, ptr_, i32_, ptr_, ptr_});
        decl("meshrt_save_tensor", void_, {ptr_, ptr_, ptr_, i32_, ptr_, ptr_});
        decl("meshrt_save_finish", void_, {ptr_, ptr_});
        decl("meshrt_permutation", void_, {ptr_, i64_, ptr_, ptr_});
        decl("meshrt_print", void_, {ptr_, ptr_, i32_, ptr_});
        decl("meshrt_trace_begin", void_, {ptr_, ptr_});
        decl("meshrt_trace_end", void_, {ptr_});
        if (gpu_) {
            decl("meshrt_offload", i32_, {ptr_});
            decl(gpu::kThread, i64_, {});
            decl(gpu::kThreads, i64_, {});
        }
    }

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
        for (size_t i = 0; i < ops.size(); ++i) {
            bool materialise = ops[i].results.empty() || (!inlined_[ops[i].results[0]] && !immediate_[ops[i].results[0]]);
            if (materialise) emit(ops[i]);
            for (ValueId v : free_after[i]) call("meshrt_free", {dev_, val_[v]});
        }
    }

    // ------------------------------------------------------------ ops

    void emit(const Op& op) {
        switch (op.kind) {
        case OpKind::Constant: {
            ValueId r = op.results[0];
            val_[r] = alloc(r);
            store_elem(dt(r), val_[r], i64c(0), const_of(dt(r), op.number));
            return;
        }
        case OpKind::Create: return create(op);
        case OpKind::Load: {
            ValueId r = op.results[0];
            val_[r] = alloc(r);
            on_members(gtype(r).mesh,
                       [&] {
                           if (!op.names.empty()) {  // a .safetensors file: the tensor names[0]
                               call("meshrt_load_tensor", {dev_, path_of(op), cstring(op.names[0]), i32c(static_cast<int>(dt(r))), layout_of(gtype(r)), val_[r]});
                           } else {
                               call("meshrt_load", {dev_, path_of(op), i32c(static_cast<int>(dt(r))), layout_of(gtype(r)), val_[r]});
                           }
                       },
                       [&] { zero(r, val_[r]); });
            return;
        }
        case OpKind::Arg: {
            ValueId r = op.results[0];
            val_[r] = alloc(r);
            call("meshrt_arg", {dev_, i32c(op.ints[0]), i32c(static_cast<int>(dt(r))), val_[r]});
            return;
        }
        case OpKind::Elementwise:
        case OpKind::Broadcast: return fused(op);
        case OpKind::Reduce:
            return traced(fmt::format("reduce {}", ir::reduce_name(op.reduce)), product(lshape(op.operands[0])), [&] { reduce(op); });
        case OpKind::Contract: return contract(op);
        case OpKind::AllReduce:
        case OpKind::AllGather:
        case OpKind::ReduceScatter:
        case OpKind::AllToAll: return collective(op);
        case OpKind::LocalSlice: {
            ValueId x = op.operands[0], r = op.results[0];
            val_[r] = alloc(r);
            auto axes = spmd::group_axes(*fn_, op);
            int64_t len = lshape(r)[static_cast<size_t>(op.dim)];
            llvm::Value* start = b_.CreateMul(piece(gtype(x).mesh, axes), i64c(len));
            slice(x, r, static_cast<size_t>(op.dim), start, len);
            return;
        }
        case OpKind::MakePartial: return make_partial(op);
        case OpKind::Place:
        case OpKind::Reshape: {
            ValueId x = op.operands[0], r = op.results[0];
            val_[r] = copy_of(x);
            int32_t from = gtype(x).mesh;
            if (op.kind == OpKind::Place && from >= 0 && gtype(r).mesh < 0 &&
                gm_.meshes[static_cast<size_t>(from)].device_count() < lm_.device_count) {
                call("meshrt_broadcast_all", {dev_, val_[r], i64c(nbytes(r))});
            }
            return;
        }
        case OpKind::Slice: {
            ValueId x = op.operands[0], r = op.results[0];
            auto d = static_cast<size_t>(op.dim);
            llvm::Value* start = i64c(op.ints[0]);
            if (op.operands.size() == 2) {
                // A run-time start: checked against the (unsplit) dim before anything is read.
                start = scalar_i64(op.operands[1]);
                call("meshrt_check_slice", {dev_, start, i64c(op.ints[1]), i64c(lshape(x)[d]), cstring(op.text)});
            }
            val_[r] = alloc(r);
            slice(x, r, d, start, op.ints[1]);
            return;
        }
        case OpKind::Pad: {
            // Zeros with the operand at `start` along the (unsplit) dim.
            ValueId g = op.operands[0], r = op.results[0];
            auto d = static_cast<size_t>(op.dim);
            llvm::Value* start = op.operands.size() == 2 ? scalar_i64(op.operands[1]) : i64c(op.ints[0]);
            val_[r] = alloc(r);
            zero(r, val_[r]);
            int64_t total = lshape(r)[d];
            offload("pad", [&](bool gpu, const Nest& nest) {
                if (!gpu) {
                    call("meshrt_concat_part", {dev_, i32c(static_cast<int>(dt(g))), val_[g], i32c(static_cast<int64_t>(lshape(g).size())),
                                                i64_array(lshape(g)), i32c(op.dim), i64c(total), start, val_[r]});
                    return;
                }
                nest(lshape(g), [&](const std::vector<llvm::Value*>& idx) {
                    std::vector<llvm::Value*> at = idx;
                    at[d] = b_.CreateAdd(idx[d], start);
                    store_elem(dt(r), val_[r], linear(at, strides_of(lshape(r))), load_elem(dt(g), val_[g], linear(idx, strides_of(lshape(g)))));
                });
            });
            return;
        }
        case OpKind::Concat: {
            ValueId r = op.results[0];
            val_[r] = alloc(r);
            int64_t offset = 0;
            int64_t total = lshape(r)[static_cast<size_t>(op.dim)];
            auto d = static_cast<size_t>(op.dim);
            for (ValueId p : op.operands) {
                offload("concat", [&](bool gpu, const Nest& nest) {
                    if (!gpu) {
                        call("meshrt_concat_part", {dev_, i32c(static_cast<int>(dt(p))), val_[p], i32c(static_cast<int64_t>(lshape(p).size())),
                                                    i64_array(lshape(p)), i32c(op.dim), i64c(total), i64c(offset), val_[r]});
                        return;
                    }
                    nest(lshape(p), [&](const std::vector<llvm::Value*>& idx) {
                        std::vector<llvm::Value*> at = idx;
                        at[d] = b_.CreateAdd(idx[d], i64c(offset));
                        store_elem(dt(r), val_[r], linear(at, strides_of(lshape(r))), load_elem(dt(p), val_[p], linear(idx, strides_of(lshape(p)))));
                    });
                });
                offset += lshape(p)[d];
            }
            return;
        }
        case OpKind::OneHot: {
            ValueId ids = op.operands[0], r = op.results[0];
            val_[r] = alloc(r);
            int64_t n = product(lshape(ids)), classes = op.ints[0];
            MESHC_ASSERT(product(lshape(r)) == n * classes, "one_hot's classes are not split");
            offload("one_hot", [&](bool gpu, const Nest& nest) {
                if (!gpu) {
                    call("meshrt_one_hot", {dev_, i32c(static_cast<int>(dt(ids))), val_[ids], i64c(n), i64c(classes), val_[r]});
                    return;
                }
                nest({n, classes}, [&](const std::vector<llvm::Value*>& idx) {
                    llvm::Value* id = convert(load_elem(dt(ids), val_[ids], idx[0]), dt(ids), DType::I64);
                    llvm::Value* hot = b_.CreateICmpEQ(id, idx[1]);
                    store_elem(DType::F32, val_[r], b_.CreateAdd(b_.CreateMul(idx[0], i64c(classes)), idx[1]),
                               b_.CreateSelect(hot, llvm::ConstantFP::get(f32_, 1.0), llvm::ConstantFP::get(f32_, 0.0)));
                });
            });
            return;
        }
        case OpKind::Embedding: {
            ValueId table = op.operands[0], ids = op.operands[1], r = op.results[0];
            val_[r] = alloc(r);
            int64_t rows = lshape(table)[0];
            call("meshrt_embedding", {dev_, i32c(static_cast<int>(dt(table))), val_[table], i64c(rows), dim_offset(table, 0),
                                      i64c(gtype(table).shape[0]), i64c(lshape(table)[1]), i32c(static_cast<int>(dt(ids))), val_[ids],
                                      i64c(product(lshape(ids))), val_[r], gtype(ids).mesh >= 0 ? layout_of(gtype(ids)) : llvm::ConstantPointerNull::get(ptr_)});
            return;
        }
        case OpKind::Call: return call_op(op);
        case OpKind::Print: return print(op);
        case OpKind::Save: {
            if (!op.names.empty()) {  // a .safetensors file: one tensor per operand, then the file
                llvm::Value* path = path_of(op);
                for (size_t i = 0; i < op.operands.size(); ++i) {
                    ValueId x = op.operands[i];
                    call("meshrt_save_tensor", {dev_, path, cstring(op.names[i]), i32c(static_cast<int>(dt(x))), layout_of(gtype(x)), val_[x]});
                }
                call("meshrt_save_finish", {dev_, path});
                return;
            }
            ValueId x = op.operands[0];
            // Every device of the program calls save (devices outside the value's mesh
            // contribute nothing; the runtime ends it with a barrier over all devices).
            call("meshrt_save", {dev_, path_of(op), i32c(static_cast<int>(dt(x))), layout_of(gtype(x)), val_[x]});
            return;
        }
        case OpKind::For: return for_op(op);
        case OpKind::If: return if_op(op);
        case OpKind::Grad: MESHC_ASSERT(false, "autodiff (transform/) replaces every grad op");
        }
    }

    /// The file of a load or save: its literal, or the value of its path argument.
    llvm::Value* path_of(const Op& op) {
        if (op.ints.empty()) return cstring(op.text);
        return call("meshrt_arg_path", {dev_, i32c(op.ints[0])});
    }

    /// r = x[..., start:start+len, ...] along dim d.
    void slice(ValueId x, ValueId r, size_t d, llvm::Value* start, int64_t len) {
        offload("slice", [&](bool gpu, const Nest& nest) {
            if (!gpu) {
                call("meshrt_slice", {dev_, i32c(static_cast<int>(dt(x))), val_[x], i32c(static_cast<int64_t>(lshape(x).size())),
                                      i64_array(lshape(x)), i32c(static_cast<int64_t>(d)), start, i64c(len), val_[r]});
                return;
            }
            nest(lshape(r), [&](const std::vector<llvm::Value*>& idx) {
                std::vector<llvm::Value*> at = idx;
                at[d] = b_.CreateAdd(idx[d], start);
                store_elem(dt(r), val_[r], linear(idx, strides_of(lshape(r))), load_elem(dt(x), val_[x], linear(at, strides_of(lshape(x)))));
            });
        });
    }

    /// make_partial over axes A: the global value becomes the sum over A of the pieces.
    /// For an axis that splits a dim of the operand (and not of the result), each device
    /// puts its piece at its offset in zeros; for an axis the operand is replicated over,
    /// only the devices at coordinate 0 keep the value.
    /// Where make_partial puts a device's piece: per dim, the offset of the piece in the
    /// result (for the split axes the op removes), and whether this device keeps its
    /// value at all (coordinate 0 on the axes the operand is replicated over).
    llvm::Value* partial_placement(const Op& op, std::vector<llvm::Value*>& offset) {
        ValueId x = op.operands[0], r = op.results[0];
        int32_t mesh = gtype(x).mesh;
        ir::AxisSet split_removed = 0;
        offset.assign(lshape(x).size(), nullptr);
        for (size_t d = 0; d < lshape(x).size(); ++d) {
            const ir::AxisList& in = gtype(x).layout.dims[d];
            const ir::AxisList& out = gtype(r).layout.dims[d];
            std::vector<int32_t> removed;
            for (size_t k = out.size(); k < in.size(); ++k) {
                removed.push_back(in[k]);
                split_removed |= ir::axis_bit(in[k]);
            }
            offset[d] = removed.empty() ? i64c(0) : b_.CreateMul(piece(mesh, removed), i64c(lshape(x)[d]));
        }
        llvm::Value* keep = b_.getTrue();
        for (int32_t a : spmd::group_axes(*fn_, op)) {
            if (split_removed & ir::axis_bit(static_cast<size_t>(a))) continue;
            keep = b_.CreateAnd(keep, b_.CreateICmpEQ(coord(mesh, a), i64c(0)));
        }
        return keep;
    }

    void make_partial(const Op& op) {
        ValueId x = op.operands[0], r = op.results[0];
        val_[r] = alloc(r);
        zero(r, val_[r]);
        std::vector<llvm::Value*> offset;
        llvm::Value* keep = partial_placement(op, offset);
        auto* copy = llvm::BasicBlock::Create(ctx_, "keep", llfn_);
        auto* join = llvm::BasicBlock::Create(ctx_, "partial", llfn_);
        b_.CreateCondBr(keep, copy, join);
        b_.SetInsertPoint(copy);
        auto in_strides = strides_of(lshape(x));
        auto out_strides = strides_of(lshape(r));
        DType t = dt(x);
        offload("make_partial", [&](bool, const Nest& nest) {
            nest(lshape(x), [&](const std::vector<llvm::Value*>& idx) {
                llvm::Value* ia = i64c(0);
                llvm::Value* oa = i64c(0);
                for (size_t d = 0; d < idx.size(); ++d) {
                    ia = b_.CreateAdd(ia, b_.CreateMul(idx[d], i64c(in_strides[d])));
                    oa = b_.CreateAdd(oa, b_.CreateMul(b_.CreateAdd(idx[d], offset[d]), i64c(out_strides[d])));
                }
                store_elem(t, val_[r], oa, load_elem(t, val_[x], ia));
            });
        });
        b_.CreateBr(join);
        b_.SetInsertPoint(join);
    }

    void create(const Op& op) {
        ValueId r = op.results[0];
        DType t = dt(r);
        val_[r] = alloc(r);
        llvm::Value* out = val_[r];
        switch (op.create) {
        case ir::CreateKind::Zeros: zero(r, out); return;
        case ir::CreateKind::Ones:
        case ir::CreateKind::Full: {
            llvm::Value* c = const_of(t, op.create == ir::CreateKind::Ones ? 1.0 : op.number);
            offload("fill", [&](bool, const Nest& nest) {
                nest({product(lshape(r))}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, out, i[0], c); });
            });
            return;
        }
        case ir::CreateKind::Iota: {
            auto d = static_cast<size_t>(op.dim);
            llvm::Value* offset = dim_offset(r, d);
            auto strides = strides_of(lshape(r));
            offload("iota", [&](bool, const Nest& nest) {
                nest(lshape(r), [&](const std::vector<llvm::Value*>& idx) {
                    llvm::Value* at = i64c(0);
                    for (size_t k = 0; k < idx.size(); ++k) at = b_.CreateAdd(at, b_.CreateMul(idx[k], i64c(strides[k])));
                    store_elem(t, out, at, convert(b_.CreateAdd(idx[d], offset), DType::I64, t));
                });
            });
            return;
        }
        case ir::CreateKind::RandomNormal:
        case ir::CreateKind::RandomUniform:
            call("meshrt_random", {dev_, i32c(op.create == ir::CreateKind::RandomNormal ? 0 : 1),
                                   op.operands.empty() ? i64c(op.seed) : scalar_i64(op.operands[0]),
                                   i32c(static_cast<int>(t)), layout_of(gtype(r)), out});
            return;
        case ir::CreateKind::Permutation:
            call("meshrt_permutation", {dev_, op.operands.empty() ? i64c(op.seed) : scalar_i64(op.operands[0]), layout_of(gtype(r)), out});
            return;
        }
    }

    // Element-wise: evaluate the fused tree rooted at `op` at each element of its result.
    struct Leaf {
        llvm::Value* scalar = nullptr;     // preloaded (one element)
        std::vector<int64_t> stride;       // per result dim (0: broadcast)
    };

    void collect_leaves(const Op& op, const std::vector<int64_t>& out, std::map<ValueId, Leaf>& leaves, bool& flat) {
        for (ValueId v : op.operands) {
            if (inlined_[v]) {
                collect_leaves(*def_[v], out, leaves, flat);
                continue;
            }
            if (leaves.count(v)) continue;
            if (def_[v] && def_[v]->kind == OpKind::Constant) continue;  // an immediate
            Leaf leaf;
            const auto& s = lshape(v);
            if (product(s) == 1) {
                leaf.scalar = load_elem(dt(v), val_[v], i64c(0));
            } else {
                if (s != out) flat = false;
                auto st = strides_of(s);
                leaf.stride.assign(out.size(), 0);
                size_t off = out.size() - s.size();
                for (size_t d = 0; d < s.size(); ++d) leaf.stride[off + d] = s[d] == 1 ? 0 : st[d];
            }
            leaves.emplace(v, std::move(leaf));
        }
    }

    llvm::Value* element(ValueId v, std::map<ValueId, Leaf>& leaves, const std::vector<llvm::Value*>& idx, llvm::Value* flat_index) {
        if (inlined_[v]) return evaluate(*def_[v], leaves, idx, flat_index);
        if (def_[v] && def_[v]->kind == OpKind::Constant) return const_of(dt(v), def_[v]->number);
        Leaf& leaf = leaves.at(v);
        if (leaf.scalar) return leaf.scalar;
        llvm::Value* at = flat_index;
        if (!at) {
            at = i64c(0);
            for (size_t d = 0; d < idx.size(); ++d) {
                if (leaf.stride[d]) at = b_.CreateAdd(at, b_.CreateMul(idx[d], i64c(leaf.stride[d])));
            }
        }
        return load_elem(dt(v), val_[v], at);
    }

    llvm::Value* evaluate(const Op& op, std::map<ValueId, Leaf>& leaves, const std::vector<llvm::Value*>& idx, llvm::Value* flat_index) {
        DType rt = dt(op.results[0]);
        if (op.kind == OpKind::Broadcast) return element(op.operands[0], leaves, idx, flat_index);
        std::vector<llvm::Value*> a;
        for (ValueId v : op.operands) a.push_back(element(v, leaves, idx, flat_index));
        DType in = dt(op.operands[0]);
        return ew(op.ew, rt, in, op.operands.size() > 1 ? dt(op.operands[1]) : in, a,
                  op.operands.size() > 2 ? dt(op.operands[2]) : in);
    }

    llvm::Value* fcall(llvm::Intrinsic::ID id, llvm::Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

    /// One element-wise function on compute values. `rt`: result type; `in`, `in2`: the
    /// first two operands' types (`in3`: the third, for select).
    llvm::Value* ew(Ew e, DType rt, DType in, DType in2, std::vector<llvm::Value*> a, DType in3) {
        switch (e) {
        case Ew::Cast: return convert(a[0], in, rt);
        case Ew::Select: return b_.CreateSelect(convert(a[0], in, DType::Bool), convert(a[1], in2, rt), convert(a[2], in3, rt));
        case Ew::Eq: case Ew::Ne: case Ew::Lt: case Ew::Le: case Ew::Gt: case Ew::Ge: {
            // Compare in the wider of the two operand types.
            DType ct = in;
            if (in2 != in && (is_float(in2) || in == DType::Bool)) ct = in2;
            if (ct == DType::F16 || ct == DType::BF16) ct = DType::F32;
            llvm::Value* x = convert(a[0], in, ct);
            llvm::Value* y = convert(a[1], in2, ct);
            if (is_float(ct)) {
                static const llvm::CmpInst::Predicate fp[] = {llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::FCMP_UNE, llvm::CmpInst::FCMP_OLT,
                                                              llvm::CmpInst::FCMP_OLE, llvm::CmpInst::FCMP_OGT, llvm::CmpInst::FCMP_OGE};
                return b_.CreateFCmp(fp[static_cast<int>(e) - static_cast<int>(Ew::Eq)], x, y);
            }
            bool u = ct == DType::Bool;
            static const llvm::CmpInst::Predicate sp[] = {llvm::CmpInst::ICMP_EQ, llvm::CmpInst::ICMP_NE, llvm::CmpInst::ICMP_SLT,
                                                          llvm::CmpInst::ICMP_SLE, llvm::CmpInst::ICMP_SGT, llvm::CmpInst::ICMP_SGE};
            static const llvm::CmpInst::Predicate up[] = {llvm::CmpInst::ICMP_EQ, llvm::CmpInst::ICMP_NE, llvm::CmpInst::ICMP_ULT,
                                                          llvm::CmpInst::ICMP_ULE, llvm::CmpInst::ICMP_UGT, llvm::CmpInst::ICMP_UGE};
            return b_.CreateICmp((u ? up : sp)[static_cast<int>(e) - static_cast<int>(Ew::Eq)], x, y);
        }
        case Ew::And: return b_.CreateAnd(convert(a[0], in, DType::Bool), convert(a[1], in2, DType::Bool));
        case Ew::Or: return b_.CreateOr(convert(a[0], in, DType::Bool), convert(a[1], in2, DType::Bool));
        case Ew::Not: return b_.CreateNot(convert(a[0], in, DType::Bool));
        default: break;
        }
        // Arithmetic: in the result's compute type. Math functions of integers go through f64.
        bool unary_math = e == Ew::Exp || e == Ew::Log || e == Ew::Sqrt || e == Ew::Rsqrt || e == Ew::Tanh ||
                          e == Ew::Sigmoid || e == Ew::Gelu;
        DType ct = rt;
        if (unary_math && !is_float(rt)) ct = DType::F64;
        llvm::Value* x = convert(a[0], in, ct);
        llvm::Value* y = a.size() > 1 ? convert(a[1], in2, ct) : nullptr;
        llvm::Value* r = nullptr;
        if (ct == DType::Bool) {
            // Booleans as 0/1 integers: + and max are `or`, * and min are `and`.
            switch (e) {
            case Ew::Add: case Ew::Max: case Ew::Sub: return b_.CreateOr(x, y);
            case Ew::Mul: case Ew::Min: return b_.CreateAnd(x, y);
            case Ew::Abs: case Ew::Relu: return x;
            default: ct = DType::I64; x = convert(x, DType::Bool, ct); y = y ? convert(y, DType::Bool, ct) : nullptr; break;
            }
        }
        if (is_float(ct)) {
            llvm::Type* ty = compute(ct);
            auto c = [&](double v) { return llvm::ConstantFP::get(ty, v); };
            switch (e) {
            case Ew::Add: r = b_.CreateFAdd(x, y); break;
            case Ew::Sub: r = b_.CreateFSub(x, y); break;
            case Ew::Mul: r = b_.CreateFMul(x, y); break;
            case Ew::Div: r = b_.CreateFDiv(x, y); break;
            case Ew::Mod: {
                // NumPy: the remainder takes the divisor's sign.
                llvm::Value* m = b_.CreateFRem(x, y);
                llvm::Value* fix = b_.CreateAnd(b_.CreateFCmpUNE(m, c(0)),
                                                b_.CreateXor(b_.CreateFCmpOLT(m, c(0)), b_.CreateFCmpOLT(y, c(0))));
                r = b_.CreateSelect(fix, b_.CreateFAdd(m, y), m);
                break;
            }
            case Ew::Max: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y); break;
            case Ew::Min: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y); break;
            case Ew::Neg: r = b_.CreateFNeg(x); break;
            case Ew::Exp: r = fcall(llvm::Intrinsic::exp, x); break;
            case Ew::Log: r = fcall(llvm::Intrinsic::log, x); break;
            case Ew::Sqrt: r = fcall(llvm::Intrinsic::sqrt, x); break;
            case Ew::Rsqrt: r = b_.CreateFDiv(c(1), fcall(llvm::Intrinsic::sqrt, x)); break;
            case Ew::Tanh: r = fcall(llvm::Intrinsic::tanh, x); break;
            case Ew::Sigmoid: r = b_.CreateFDiv(c(1), b_.CreateFAdd(c(1), fcall(llvm::Intrinsic::exp, b_.CreateFNeg(x)))); break;
            case Ew::Relu: r = b_.CreateSelect(b_.CreateFCmpOGT(x, c(0)), x, c(0)); break;
            case Ew::Gelu: {
                // The tanh approximation (as jax.nn.gelu's default):
                // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
                llvm::Value* x3 = b_.CreateFMul(x, b_.CreateFMul(x, x));
                llvm::Value* inner = b_.CreateFMul(c(0.7978845608028654), b_.CreateFAdd(x, b_.CreateFMul(c(0.044715), x3)));
                r = b_.CreateFMul(b_.CreateFMul(c(0.5), x), b_.CreateFAdd(c(1), fcall(llvm::Intrinsic::tanh, inner)));
                break;
            }
            case Ew::Abs: r = fcall(llvm::Intrinsic::fabs, x); break;
            default: internal_error(fmt::format("element-wise {} on floats", ir::ew_name(e)), __FILE__, __LINE__);
            }
            // A 16-bit float result is rounded after each op, as NumPy does.
            if (ct == rt && (rt == DType::F16 || rt == DType::BF16)) return convert(r, DType::F32, rt);
            return convert(r, ct, rt);
        }
        llvm::Type* ty = compute(ct);
        auto c = [&](int64_t v) { return llvm::ConstantInt::get(ty, static_cast<uint64_t>(v), true); };
        switch (e) {
        case Ew::Add: r = b_.CreateAdd(x, y); break;
        case Ew::Sub: r = b_.CreateSub(x, y); break;
        case Ew::Mul: r = b_.CreateMul(x, y); break;
        case Ew::Div:
        case Ew::Mod: {
            // NumPy floor division and modulo; a zero divisor gives 0 (never undefined),
            // and so does the one overflowing quotient (MIN / -1 wraps to MIN).
            llvm::Value* zero_div = b_.CreateICmpEQ(y, c(0));
            llvm::Value* minus_one = b_.CreateICmpEQ(y, c(-1));
            llvm::Value* safe = b_.CreateSelect(b_.CreateOr(zero_div, minus_one), c(1), y);
            llvm::Value* q = b_.CreateSDiv(x, safe);
            llvm::Value* m = b_.CreateSRem(x, safe);
            llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(m, c(0)), b_.CreateXor(b_.CreateICmpSLT(m, c(0)), b_.CreateICmpSLT(safe, c(0))));
            if (e == Ew::Div) {
                q = b_.CreateSelect(adjust, b_.CreateSub(q, c(1)), q);
                q = b_.CreateSelect(minus_one, b_.CreateSub(c(0), x), q);
                r = b_.CreateSelect(zero_div, c(0), q);
            } else {
                m = b_.CreateSelect(adjust, b_.CreateAdd(m, safe), m);
                r = b_.CreateSelect(b_.CreateOr(zero_div, minus_one), c(0), m);
            }
            break;
        }
        case Ew::Max: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y); break;
        case Ew::Min: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y); break;
        case Ew::Neg: r = b_.CreateSub(c(0), x); break;
        case Ew::Relu: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, c(0)); break;
        case Ew::Abs: r = b_.CreateSelect(b_.CreateICmpSLT(x, c(0)), b_.CreateSub(c(0), x), x); break;
        default: internal_error(fmt::format("element-wise {} on integers", ir::ew_name(e)), __FILE__, __LINE__);
        }
        return convert(r, ct, rt);
    }

    /// The names of the element-wise functions of a fused tree: "mul,add,relu".
    void fused_names(const Op& op, std::string& names) {
        for (ValueId v : op.operands) {
            if (inlined_[v]) fused_names(*def_[v], names);
        }
        names += (names.empty() ? "" : ",") + std::string(op.kind == OpKind::Broadcast ? "broadcast" : ir::ew_name(op.ew));
    }
    /// Brackets a generated loop in the trace (`--trace`) when it is big enough to matter.
    template <typename F>
    void traced(const std::string& name, int64_t elements, F&& body) {
        bool trace = elements >= 4096;
        if (trace) call("meshrt_trace_begin", {dev_, cstring(name)});
        body();
        if (trace) call("meshrt_trace_end", {dev_});
    }

    void fused(const Op& op) {
        std::string names;
        fused_names(op, names);
        traced("elementwise " + names, product(lshape(op.results[0])), [&] { fused_loop(op, "elementwise " + names); });
    }

    void fused_loop(const Op& op, const std::string& what) {
        ValueId r = op.results[0];
        val_[r] = alloc(r);
        const auto& out = lshape(r);
        DType t = dt(r);
        llvm::Value* base = val_[r];
        offload(what, [&](bool, const Nest& nest) {
            std::map<ValueId, Leaf> leaves;
            bool flat = true;
            collect_leaves(op, out, leaves, flat);
            if (flat) {
                nest({product(out)}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, base, i[0], evaluate(op, leaves, {}, i[0])); });
                return;
            }
            auto strides = strides_of(out);
            nest(out, [&](const std::vector<llvm::Value*>& idx) {
                llvm::Value* at = i64c(0);
                for (size_t k = 0; k < idx.size(); ++k) at = b_.CreateAdd(at, b_.CreateMul(idx[k], i64c(strides[k])));
                store_elem(t, base, at, evaluate(op, leaves, idx, nullptr));
            });
        });
    }

    void reduce(const Op& op) {
        ValueId x = op.operands[0], r = op.results[0];
        DType t = dt(r);
        DType acc_t = is_float(t) ? DType::F64 : (t == DType::Bool ? DType::Bool : DType::I64);
        int64_t n_out = product(lshape(r));
        // Accumulate in f64 (floats) or i64 (integers), convert once at the end.
        llvm::Type* acc_ty = acc_t == DType::F64 ? f64_ : i64_;
        bool is_max = op.reduce == ir::ReduceKind::Max;
        llvm::Value* init = acc_t == DType::F64
                                ? static_cast<llvm::Value*>(is_max ? llvm::ConstantFP::getInfinity(f64_, true) : llvm::ConstantFP::get(f64_, 0.0))
                                : static_cast<llvm::Value*>(i64c(is_max ? INT64_MIN : 0));
        const auto& in = lshape(x);
        auto ostride = reduced_strides(in, op.ints);
        auto istride = strides_of(in);
        DType xt = dt(x);
        DType xacc = acc_t == DType::Bool ? DType::I64 : acc_t;
        // Mean: the local sum over the *global* count (a split dim's pieces sum to the mean).
        int64_t count = 1;
        for (int64_t d : op.ints) count *= gtype(x).shape[static_cast<size_t>(d)];
        auto combine = [&](llvm::Value* old, llvm::Value* v) -> llvm::Value* {
            if (xacc == DType::F64) return is_max ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, old, v) : b_.CreateFAdd(old, v);
            return is_max ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, old, v) : b_.CreateAdd(old, v);
        };
        auto finish = [&](llvm::Value* v, llvm::Value* at) {
            DType vt = xacc;
            if (op.reduce == ir::ReduceKind::Mean) {
                if (vt != DType::F64) v = convert(v, vt, DType::F64);
                v = b_.CreateFDiv(v, llvm::ConstantFP::get(f64_, static_cast<double>(count)));
                vt = DType::F64;
            }
            store_elem(t, val_[r], at, convert(v, vt, t));
        };
        val_[r] = alloc(r);
        // The host loop: every input element added into its result's accumulator, in
        // row-major order.
        auto host_reduce = [&] {
            llvm::Value* acc = call("meshrt_alloc", {dev_, i64c(n_out * 8)});
            loop(i64c(n_out), [&](llvm::Value* i) { b_.CreateStore(init, b_.CreateGEP(acc_ty, acc, i)); });
            loop_nest(in, [&](const std::vector<llvm::Value*>& idx) {
                llvm::Value* ia = i64c(0);
                llvm::Value* oa = i64c(0);
                for (size_t d = 0; d < idx.size(); ++d) {
                    ia = b_.CreateAdd(ia, b_.CreateMul(idx[d], i64c(istride[d])));
                    if (ostride[d]) oa = b_.CreateAdd(oa, b_.CreateMul(idx[d], i64c(ostride[d])));
                }
                llvm::Value* v = convert(load_elem(xt, val_[x], ia), xt, xacc);
                llvm::Value* p = b_.CreateGEP(acc_ty, acc, oa);
                b_.CreateStore(combine(b_.CreateLoad(acc_ty, p), v), p);
            });
            loop(i64c(n_out), [&](llvm::Value* i) { finish(b_.CreateLoad(acc_ty, b_.CreateGEP(acc_ty, acc, i)), i); });
            call("meshrt_free", {dev_, acc});
        };
        // On the GPU: a thread per result element (and per chunk of its inputs, below),
        // adding its inputs in row-major order.
        std::vector<int64_t> kept, reduced, kept_dims, reduced_dims;
        for (size_t d = 0; d < in.size(); ++d) {
            bool red = std::find(op.ints.begin(), op.ints.end(), static_cast<int64_t>(d)) != op.ints.end();
            (red ? reduced : kept).push_back(in[d]);
            (red ? reduced_dims : kept_dims).push_back(static_cast<int64_t>(d));
        }
        int64_t n_red = product(reduced);
        // Adds `count` inputs of the result element at kidx to `init`: those at positions
        // first, first + step, ... (row-major over the reduced dims), in that order.
        auto partial_sum = [&](const std::vector<llvm::Value*>& kidx, llvm::Value* first, llvm::Value* count, int64_t step) {
            llvm::Value* base = i64c(0);
            for (size_t j = 0; j < kidx.size(); ++j)
                base = b_.CreateAdd(base, b_.CreateMul(kidx[j], i64c(istride[static_cast<size_t>(kept_dims[j])])));
            return loop_acc(count, init, [&](llvm::Value* i, llvm::Value* a) {
                std::vector<llvm::Value*> ridx = unravel(b_.CreateAdd(first, b_.CreateMul(i, i64c(step))), reduced);
                llvm::Value* ia = base;
                for (size_t j = 0; j < ridx.size(); ++j)
                    ia = b_.CreateAdd(ia, b_.CreateMul(ridx[j], i64c(istride[static_cast<size_t>(reduced_dims[j])])));
                return combine(a, convert(load_elem(xt, val_[x], ia), xt, xacc));
            });
        };
        auto out_at = [&](const std::vector<llvm::Value*>& kidx) {
            llvm::Value* oa = i64c(0);
            for (size_t j = 0; j < kidx.size(); ++j)
                oa = b_.CreateAdd(oa, b_.CreateMul(kidx[j], i64c(ostride[static_cast<size_t>(kept_dims[j])])));
            return oa;
        };
        // Few results over many inputs (a loss, a norm) would leave the GPU nearly idle
        // with a thread per result: each result's inputs are then dealt to `chunks`
        // threads (thread c adds inputs c, c + chunks, ...: neighbouring threads read
        // neighbouring inputs when the innermost dim is reduced; otherwise the chunk is
        // the outer index, so that neighbouring threads are neighbouring results), and a
        // second kernel adds each result's chunk sums in order. Rounding then follows the
        // chunks (the host adds in one run). That second kernel is a thread per result
        // (for a scalar, one thread adding up to kReduceThreads sums).
        constexpr int64_t kReduceChunk = 256, kReduceThreads = 65536;
        int64_t chunks = 1;
        if (gpu_ && n_out < kReduceThreads && n_red >= 2 * kReduceChunk)
            chunks = std::min((n_red + kReduceChunk - 1) / kReduceChunk, (kReduceThreads + n_out - 1) / n_out);
        std::string what = "reduce " + std::string(ir::reduce_name(op.reduce));
        if (chunks == 1) {
            offload(what, [&](bool gpu, const Nest& nest) {
                if (!gpu) return host_reduce();
                nest(kept, [&](const std::vector<llvm::Value*>& kidx) { finish(partial_sum(kidx, i64c(0), i64c(n_red), 1), out_at(kidx)); });
            });
            return;
        }
        llvm::Value* partials = call("meshrt_alloc", {dev_, i64c(n_out * chunks * 8)});
        bool inner_reduced = !reduced_dims.empty() && reduced_dims.back() == static_cast<int64_t>(in.size()) - 1;
        std::vector<int64_t> chunked = kept;
        if (inner_reduced) chunked.push_back(chunks);
        else chunked.insert(chunked.begin(), chunks);
        offload(what + " (chunks)", [&](bool gpu, const Nest& nest) {
            if (!gpu) return host_reduce();
            nest(chunked, [&](const std::vector<llvm::Value*>& idx) {
                std::vector<llvm::Value*> kidx = idx;
                llvm::Value* c = inner_reduced ? kidx.back() : kidx.front();
                if (inner_reduced) kidx.pop_back();
                else kidx.erase(kidx.begin());
                // Inputs c, c + chunks, ... below n_red: (n_red - c + chunks - 1) / chunks of them.
                llvm::Value* count = b_.CreateUDiv(b_.CreateSub(i64c(n_red + chunks - 1), c), i64c(chunks));
                llvm::Value* at = b_.CreateAdd(b_.CreateMul(out_at(kidx), i64c(chunks)), c);
                b_.CreateStore(partial_sum(kidx, c, count, chunks), b_.CreateGEP(acc_ty, partials, at));
            });
        });
        offload(what + " (chunk sums)", [&](bool gpu, const Nest& nest) {
            if (!gpu) return;
            nest({n_out}, [&](const std::vector<llvm::Value*>& o) {
                llvm::Value* acc = loop_acc(i64c(chunks), init, [&](llvm::Value* c, llvm::Value* a) {
                    llvm::Value* at = b_.CreateAdd(b_.CreateMul(o[0], i64c(chunks)), c);
                    return combine(a, b_.CreateLoad(acc_ty, b_.CreateGEP(acc_ty, partials, at)));
                });
                finish(acc, o[0]);
            });
        });
        call("meshrt_free", {dev_, partials});
    }

    void contract(const Op& op) {
        ValueId r = op.results[0];
        val_[r] = alloc(r);
        ValueId a = op.operands[0];
        bool two = op.operands.size() > 1;
        ValueId bb = two ? op.operands[1] : a;
        llvm::Value* null = llvm::ConstantPointerNull::get(ptr_);
        call("meshrt_contract", {dev_, i32c(static_cast<int>(dt(r))), cstring(op.text), val_[a],
                                 i32c(static_cast<int64_t>(lshape(a).size())), i64_array(lshape(a)), two ? val_[bb] : null,
                                 i32c(two ? static_cast<int64_t>(lshape(bb).size()) : 0), two ? i64_array(lshape(bb)) : null, val_[r],
                                 i32c(static_cast<int64_t>(lshape(r).size())), i64_array(lshape(r))});
    }

    void collective(const Op& op) {
        // Over axes of size 1 every group has one member: the local piece is the result.
        if (gm_.meshes[static_cast<size_t>(gtype(op.operands[0]).mesh)].group_size(op.axes) == 1) {
            for (size_t i = 0; i < op.operands.size(); ++i) val_[op.results[i]] = copy_of(op.operands[i]);
            return;
        }
        if (op.kind == OpKind::AllReduce && op.operands.size() > 1) return combined_all_reduce(op);
        ValueId x = op.operands[0], r = op.results[0];
        val_[r] = alloc(r);
        int32_t mesh = gtype(x).mesh;
        auto axes = spmd::group_axes(*fn_, op);
        std::vector<int32_t> ax(axes.begin(), axes.end());
        llvm::Value* axes_c = i32_array(ax);
        llvm::Value* n = i32c(static_cast<int64_t>(ax.size()));
        llvm::Value* type = i32c(static_cast<int>(dt(x)));
        llvm::Value* red = i32c(op.reduce == ir::ReduceKind::Max ? 1 : 0);
        llvm::Value* rank = i32c(static_cast<int64_t>(lshape(x).size()));
        on_members(mesh, [&] {
            switch (op.kind) {
            case OpKind::AllReduce:
                call("meshrt_all_reduce", {dev_, i32c(mesh), n, axes_c, type, red, val_[x], val_[r], i64c(product(lshape(x)))});
                break;
            case OpKind::AllGather:
                call("meshrt_all_gather", {dev_, i32c(mesh), n, axes_c, type, val_[x], val_[r], rank, i64_array(lshape(x)), i32c(op.dim)});
                break;
            case OpKind::ReduceScatter:
                call("meshrt_reduce_scatter",
                     {dev_, i32c(mesh), n, axes_c, type, red, val_[x], val_[r], rank, i64_array(lshape(x)), i32c(op.dim)});
                break;
            default:
                call("meshrt_all_to_all",
                     {dev_, i32c(mesh), n, axes_c, type, val_[x], val_[r], rank, i64_array(lshape(x)), i32c(op.dim), i32c(op.dim2)});
                break;
            }
        }, [&] { zero(r, val_[r]); });
    }

    /// An all_reduce of several tensors of one element type (transform/combine_collectives):
    /// packed into one buffer, reduced with one runtime call, unpacked.
    void combined_all_reduce(const Op& op) {
        ValueId x0 = op.operands[0];
        int32_t mesh = gtype(x0).mesh;
        auto axes = spmd::group_axes(*fn_, op);
        std::vector<int32_t> ax(axes.begin(), axes.end());
        int64_t total = 0;
        for (ValueId x : op.operands) total += product(lshape(x));
        int64_t width = static_cast<int64_t>(ir::dtype_bytes(dt(x0)));
        llvm::Value* in = call("meshrt_alloc", {dev_, i64c(std::max<int64_t>(1, total) * width)});
        llvm::Value* out = call("meshrt_alloc", {dev_, i64c(std::max<int64_t>(1, total) * width)});
        int64_t offset = 0;
        for (ValueId x : op.operands) {
            int64_t bytes = product(lshape(x)) * width;
            b_.CreateMemCpy(b_.CreateGEP(b_.getInt8Ty(), in, i64c(offset)), llvm::MaybeAlign(1), val_[x], llvm::MaybeAlign(1), bytes);
            offset += bytes;
        }
        on_members(mesh, [&] {
            call("meshrt_all_reduce", {dev_, i32c(mesh), i32c(static_cast<int64_t>(ax.size())), i32_array(ax),
                                       i32c(static_cast<int>(dt(x0))), i32c(0), in, out, i64c(total)});
        }, [&] { b_.CreateMemSet(out, b_.getInt8(0), std::max<int64_t>(1, total) * width, llvm::MaybeAlign(1)); });
        offset = 0;
        for (size_t i = 0; i < op.results.size(); ++i) {
            ValueId r = op.results[i];
            val_[r] = alloc(r);
            int64_t bytes = product(lshape(r)) * width;
            b_.CreateMemCpy(val_[r], llvm::MaybeAlign(1), b_.CreateGEP(b_.getInt8Ty(), out, i64c(offset)), llvm::MaybeAlign(1), bytes);
            offset += bytes;
        }
        call("meshrt_free", {dev_, in});
        call("meshrt_free", {dev_, out});
    }

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

    void call_op(const Op& op) {
        const ir::Function& callee = gm_.functions[static_cast<size_t>(op.callee)];
        std::vector<llvm::Value*> args;
        for (ValueId v : op.operands) args.push_back(val_[v]);
        llvm::Value* argv = ptr_array(args, args.size());
        llvm::Value* res = entry_alloca(ptr_, callee.results.size());
        b_.CreateCall(fns_[static_cast<size_t>(op.callee)], {dev_, argv, res});
        for (size_t i = 0; i < op.results.size(); ++i) val_[op.results[i]] = slot(res, i);
    }

    void print(const Op& op) {
        auto* arg_ty = llvm::StructType::get(ctx_, {i32_, ptr_, ptr_});
        llvm::Value* args = entry_alloca(arg_ty, op.operands.size());
        int32_t mesh = -1;
        for (size_t i = 0; i < op.operands.size(); ++i) {
            ValueId v = op.operands[i];
            llvm::Value* slot = b_.CreateGEP(arg_ty, args, i64c(static_cast<int64_t>(i)));
            b_.CreateStore(i32c(static_cast<int>(dt(v))), b_.CreateStructGEP(arg_ty, slot, 0));
            b_.CreateStore(layout_of(gtype(v)), b_.CreateStructGEP(arg_ty, slot, 1));
            b_.CreateStore(val_[v], b_.CreateStructGEP(arg_ty, slot, 2));
            mesh = std::max(mesh, gtype(v).mesh);
        }
        call("meshrt_print", {dev_, cstring(op.text), i32c(static_cast<int64_t>(op.operands.size())), args});
    }

    void for_op(const Op& op) {
        const ir::Region& body = op.regions[0];
        llvm::Value* lo = scalar_i64(op.operands[0]);
        llvm::Value* hi = scalar_i64(op.operands[1]);
        size_t n = op.operands.size() - 2;
        // Loop-carried buffers live in stack slots; the loop owns them.
        std::vector<llvm::Value*> slots;
        llvm::IRBuilder<> entry_b(&llfn_->getEntryBlock(), llfn_->getEntryBlock().begin());
        for (size_t k = 0; k < n; ++k) {
            slots.push_back(entry_b.CreateAlloca(ptr_));
            b_.CreateStore(copy_of(op.operands[2 + k]), slots[k]);
        }
        ValueId iv = body.args[0];
        llvm::Value* count = b_.CreateIntrinsic(llvm::Intrinsic::smax, {i64_}, {b_.CreateSub(hi, lo), i64c(0)});
        llvm::Value* ibuf = call("meshrt_alloc", {dev_, i64c(8)});
        loop(count, [&](llvm::Value* step) {
            b_.CreateStore(convert(b_.CreateAdd(lo, step), DType::I64, dt(iv)), b_.CreateGEP(storage(dt(iv)), ibuf, i64c(0)));
            val_[iv] = ibuf;
            std::vector<llvm::Value*> old;
            for (size_t k = 0; k < n; ++k) {
                old.push_back(b_.CreateLoad(ptr_, slots[k]));
                val_[body.args[1 + k]] = old.back();
            }
            block(body.ops, body.yields);
            std::set<ValueId> taken;
            std::set<ValueId> defined;
            for (const Op& o : body.ops) {
                for (ValueId r : o.results) defined.insert(r);
            }
            std::vector<llvm::Value*> next;
            for (size_t k = 0; k < n; ++k) {
                ValueId y = body.yields[k];
                bool own = defined.count(y) && !taken.count(y);
                taken.insert(y);
                next.push_back(own ? val_[y] : copy_of(y));
            }
            for (size_t k = 0; k < n; ++k) call("meshrt_free", {dev_, old[k]});
            for (size_t k = 0; k < n; ++k) b_.CreateStore(next[k], slots[k]);
        });
        call("meshrt_free", {dev_, ibuf});
        for (size_t k = 0; k < n; ++k) val_[op.results[k]] = b_.CreateLoad(ptr_, slots[k]);
    }

    void if_op(const Op& op) {
        llvm::Value* c = convert(load_elem(dt(op.operands[0]), val_[op.operands[0]], i64c(0)), dt(op.operands[0]), DType::Bool);
        std::vector<llvm::Value*> slots;
        llvm::IRBuilder<> entry_b(&llfn_->getEntryBlock(), llfn_->getEntryBlock().begin());
        for (size_t k = 0; k < op.results.size(); ++k) slots.push_back(entry_b.CreateAlloca(ptr_));
        auto* then_b = llvm::BasicBlock::Create(ctx_, "then", llfn_);
        auto* else_b = llvm::BasicBlock::Create(ctx_, "else", llfn_);
        auto* join = llvm::BasicBlock::Create(ctx_, "endif", llfn_);
        b_.CreateCondBr(c, then_b, else_b);
        for (size_t r = 0; r < 2; ++r) {
            b_.SetInsertPoint(r == 0 ? then_b : else_b);
            if (r < op.regions.size()) {
                const ir::Region& region = op.regions[r];
                block(region.ops, region.yields);
                std::set<ValueId> defined, taken;
                for (const Op& o : region.ops) {
                    for (ValueId v : o.results) defined.insert(v);
                }
                for (size_t k = 0; k < op.results.size() && k < region.yields.size(); ++k) {
                    ValueId y = region.yields[k];
                    bool own = defined.count(y) && !taken.count(y);
                    taken.insert(y);
                    b_.CreateStore(own ? val_[y] : copy_of(y), slots[k]);
                }
            }
            b_.CreateBr(join);
        }
        b_.SetInsertPoint(join);
        for (size_t k = 0; k < op.results.size(); ++k) val_[op.results[k]] = b_.CreateLoad(ptr_, slots[k]);
    }

    llvm::Value* linear(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& strides) {
        llvm::Value* at = i64c(0);
        for (size_t d = 0; d < idx.size(); ++d) {
            if (strides[d]) at = b_.CreateAdd(at, b_.CreateMul(idx[d], i64c(strides[d])));
        }
        return at;
    }

    // ------------------------------------------------------------ entry and main

    void entry_and_main(const std::string& program_name) {
        auto* entry_ty = llvm::FunctionType::get(void_, {ptr_}, false);
        auto* entry = llvm::Function::Create(entry_ty, llvm::Function::InternalLinkage, "mesh.entry", mod_);
        b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
        llvm::Value* none = llvm::ConstantPointerNull::get(ptr_);
        b_.CreateCall(fns_[static_cast<size_t>(lm_.entry)], {entry->getArg(0), none, none});
        b_.CreateRetVoid();

        auto* mesh_ty = llvm::StructType::get(ctx_, {ptr_, i32_, ptr_, ptr_});
        std::vector<llvm::Constant*> meshes;
        for (const ir::Mesh& m : gm_.meshes) {
            std::vector<llvm::Constant*> names;
            std::vector<int64_t> sizes;
            for (const auto& a : m.axes) {
                names.push_back(cstring(a.name));
                sizes.push_back(a.size);
            }
            auto* names_init = llvm::ConstantArray::get(llvm::ArrayType::get(ptr_, names.size()), names);
            auto* names_g = new llvm::GlobalVariable(mod_, names_init->getType(), true, llvm::GlobalValue::PrivateLinkage, names_init, "mesh.axes");
            meshes.push_back(llvm::ConstantStruct::get(mesh_ty, {cstring(m.name), i32c(static_cast<int64_t>(m.axes.size())), names_g, i64_array(sizes)}));
        }
        llvm::Constant* meshes_g = llvm::ConstantPointerNull::get(ptr_);
        if (!meshes.empty()) {
            auto* init = llvm::ConstantArray::get(llvm::ArrayType::get(mesh_ty, meshes.size()), meshes);
            meshes_g = new llvm::GlobalVariable(mod_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "mesh.meshes");
        }
        // The program's arguments (meshrt_arg_desc): name, kind, default.
        auto* arg_ty = llvm::StructType::get(ctx_, {ptr_, i32_, ptr_});
        std::vector<llvm::Constant*> args;
        for (const ir::ProgramArg& a : gm_.args) {
            args.push_back(llvm::ConstantStruct::get(arg_ty, {cstring(a.name), i32c(static_cast<int64_t>(a.kind)), cstring(a.default_text)}));
        }
        llvm::Constant* args_g = llvm::ConstantPointerNull::get(ptr_);
        if (!args.empty()) {
            auto* init = llvm::ConstantArray::get(llvm::ArrayType::get(arg_ty, args.size()), args);
            args_g = new llvm::GlobalVariable(mod_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "mesh.args");
        }
        auto* prog_ty = llvm::StructType::get(ctx_, {ptr_, i32_, ptr_, i64_, ptr_, i32_, ptr_});
        auto* prog_init = llvm::ConstantStruct::get(prog_ty, {cstring(program_name), i32c(static_cast<int64_t>(meshes.size())), meshes_g,
                                                              i64c(lm_.device_count), entry, i32c(static_cast<int64_t>(args.size())), args_g});
        auto* prog = new llvm::GlobalVariable(mod_, prog_ty, true, llvm::GlobalValue::PrivateLinkage, prog_init, "mesh.program");

        auto* main_ty = llvm::FunctionType::get(i32_, {i32_, ptr_}, false);
        auto* main = llvm::Function::Create(main_ty, llvm::Function::ExternalLinkage, "main", mod_);
        b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", main));
        b_.CreateRet(call("meshrt_main", {main->getArg(0), main->getArg(1), prog}));
    }
};

llvm::TargetMachine* host_machine(int opt_level) {
    static bool initialised = [] {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        llvm::InitializeNativeTargetAsmParser();
        return true;
    }();
    (void)initialised;
    std::string triple = llvm::sys::getDefaultTargetTriple();
    std::string error;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
    if (!target) internal_error("no LLVM target for " + triple + ": " + error, __FILE__, __LINE__);
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    std::string features;
    for (auto& f : host) features += (features.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
    llvm::TargetOptions to;
    llvm::CodeGenOptLevel level = opt_level == 0   ? llvm::CodeGenOptLevel::None
                                  : opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                  : opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                                   : llvm::CodeGenOptLevel::Aggressive;
    return target->createTargetMachine(triple, llvm::sys::getHostCPUName(), features, to, llvm::Reloc::PIC_, std::nullopt, level);
}

/// glibc's vector math library (libmvec) for the vectorisers, on x86-64 glibc hosts
/// (link_executable links it there). LLVM 19's table of it has exp and log (and sin,
/// pow, ...) at 128 bits (SSE) and 256 bits (AVX2) only, and no tanh; glibc 2.35 and
/// later also have tanh, and every function at 512 bits (AVX-512). Added here, each at
/// the widths the target machine's features (the host CPU's) can run: the element-wise
/// loops call exp, log and tanh as intrinsics (sigmoid through exp, gelu through tanh),
/// and `call <16 x float> @_ZGVeN16v_tanhf` replaces 16 scalar calls. `names` holds the
/// strings the table points to; it must outlive the analysis managers.
void add_vector_math(llvm::TargetLibraryInfoImpl& tlii, const llvm::Triple& triple, const llvm::TargetMachine& tm,
                     std::deque<std::string>& names) {
#if defined(__x86_64__) && defined(__GLIBC__)
    if (triple.getArch() != llvm::Triple::x86_64 || !triple.isOSGlibc()) return;
    std::set<std::string> features;
    for (llvm::StringRef f : llvm::split(tm.getTargetFeatureString(), ','))
        if (f.consume_front("+")) features.insert(f.str());
    // LLVM's table has 256-bit variants for AVX2 only ("d"); without AVX2 it is left out.
    if (features.count("avx2")) tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
    // The vector ABI's ISA letter for each register width the CPU has.
    std::vector<std::pair<char, unsigned>> isas = {{'b', 128}};
    if (features.count("avx2")) isas.push_back({'d', 256});
    else if (features.count("avx")) isas.push_back({'c', 256});
    if (features.count("avx512f")) isas.push_back({'e', 512});
#if __GLIBC__ > 2 || __GLIBC_MINOR__ >= 35
    const char* functions[] = {"exp", "log", "tanh"};
#else
    const char* functions[] = {"exp", "log"};
#endif
    std::vector<llvm::VecDesc> table;
    for (const char* fn : functions) {
        for (bool f32 : {true, false}) {
            std::string libm = std::string(fn) + (f32 ? "f" : "");
            std::string intrinsic = fmt::format("llvm.{}.{}", fn, f32 ? "f32" : "f64");
            for (auto [isa, bits] : isas) {
                unsigned vf = bits / (f32 ? 32 : 64);
                const std::string& vector = names.emplace_back(fmt::format("_ZGV{}N{}v_{}", isa, vf, libm));
                const std::string& prefix = names.emplace_back(fmt::format("_ZGV_LLVM_N{}v", vf));
                for (const std::string& scalar : {libm, intrinsic}) {
                    if (tlii.isFunctionVectorizable(scalar, llvm::ElementCount::getFixed(vf))) continue;  // LLVM's table has it
                    table.emplace_back(names.emplace_back(scalar), vector, llvm::ElementCount::getFixed(vf), false, prefix);
                }
            }
        }
    }
    tlii.addVectorizableFunctions(table);
#else
    (void)tlii, (void)triple, (void)tm, (void)names;
#endif
}

}  // namespace

void optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level) {
    // The new pass manager's default pipelines.
    std::deque<std::string> vector_math_names;
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = opt_level >= 2;
    pto.SLPVectorization = opt_level >= 2;
    llvm::PassBuilder pb(&tm, pto);
    // The library functions the vectorisers may call: registered before the default
    // analyses, which keep an analysis already registered.
    llvm::Triple triple(module.getTargetTriple());
    llvm::TargetLibraryInfoImpl tlii(triple);
    add_vector_math(tlii, triple, tm, vector_math_names);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = opt_level <= 0   ? llvm::OptimizationLevel::O0
                                    : opt_level == 1 ? llvm::OptimizationLevel::O1
                                    : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                     : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager mpm = opt_level <= 0 ? pb.buildO0DefaultPipeline(level) : pb.buildPerModuleDefaultPipeline(level);
    mpm.run(module, mam);
}

std::string emit_file(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
    llvm::SmallVector<char, 0> buffer;
    llvm::raw_svector_ostream bos(buffer);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, bos, nullptr, type)) internal_error("the target cannot emit this file type", __FILE__, __LINE__);
    pm.run(module);
    return std::string(buffer.begin(), buffer.end());
}

std::string generate(const spmd::LocalModule& module, const Options& options, EmitKind kind) {
    MESHC_ASSERT(module.entry >= 0, "generate() needs an entry function");
    llvm::LLVMContext ctx;
    auto mod = std::make_unique<llvm::Module>(options.program_name, ctx);
    std::unique_ptr<llvm::TargetMachine> tm(host_machine(options.opt_level));
    mod->setTargetTriple(tm->getTargetTriple().str());
    mod->setDataLayout(tm->createDataLayout());
    bool gpu = options.gpu || kind == EmitKind::Ptx;
    Generator generator(ctx, *mod, module, gpu);
    generator.generate(options.program_name);
    std::string problems;
    llvm::raw_string_ostream problem_stream(problems);
    if (llvm::verifyModule(*mod, &problem_stream)) internal_error("invalid LLVM IR generated: " + problems, __FILE__, __LINE__);

    if (gpu) {
        // The GPU regions become kernels; their PTX is a constant of the host program.
        std::vector<gpu::Kernel> kernels = gpu::outline(*mod, generator.regions(), generator.image());
        if (llvm::verifyModule(*mod, &problem_stream)) internal_error("invalid LLVM IR after outlining: " + problems, __FILE__, __LINE__);
        std::string ptx = kernels.empty() ? fmt::format("//\n// meshc: no GPU kernels\n//\n.version 8.0\n.target {}\n.address_size 64\n", options.gpu_arch)
                                          : gpu::compile_ptx(*mod, kernels, options.gpu_arch, options.opt_level);
        if (kind == EmitKind::Ptx) return ptx;
        if (llvm::GlobalVariable* placeholder = generator.image()) {
            llvm::Constant* text = llvm::ConstantDataArray::getString(ctx, ptx, true);
            auto* image = new llvm::GlobalVariable(*mod, text->getType(), true, llvm::GlobalValue::PrivateLinkage, text, "mesh.ptx.image");
            image->setAlignment(llvm::Align(64));
            placeholder->replaceAllUsesWith(image);
            placeholder->eraseFromParent();
        }
    }

    optimize(*mod, *tm, options.opt_level);
    if (kind == EmitKind::LLVM) {
        std::string out;
        llvm::raw_string_ostream os(out);
        mod->print(os, nullptr);
        return out;
    }
    return emit_file(*mod, *tm, kind == EmitKind::Asm ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile);
}

}  // namespace meshc::codegen

// Reductions (one result per thread, in the host loop's order) and contractions (a
// runtime call).
#include "codegen/generator.h"

namespace meshc::codegen::lower {

void Generator::reduce(const Op& op) {
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

void Generator::contract(const Op& op) {
    ValueId r = op.results[0];
    val_[r] = alloc(r);
    ValueId a = op.operands[0];
    bool two = op.operands.size() > 1;
    ValueId bb = two ? op.operands[1] : a;
    llvm::Value* null = llvm::ConstantPointerNull::get(ptr_);
    comm_site(op);  // the trace's `at` for this contraction
    call("meshrt_contract", {dev_, i32c(static_cast<int>(dt(r))), cstring(op.text), val_[a],
                             i32c(static_cast<int64_t>(lshape(a).size())), i64_array(lshape(a)), two ? val_[bb] : null,
                             i32c(two ? static_cast<int64_t>(lshape(bb).size()) : 0), two ? i64_array(lshape(bb)) : null, val_[r],
                             i32c(static_cast<int64_t>(lshape(r).size())), i64_array(lshape(r))});
}

}  // namespace meshc::codegen::lower

// meshrt_contract: einsum on local shapes, as BLAS matrix products where possible.
//
// The plan (kernels/contract_plan.h, shared with the CUDA kernels) decides which letters
// are summed out first, which operand is read in place as a matrix (transposed or not,
// with a leading dimension) and which is permuted first; here the plan runs with
// cblas_?gemm, one call per batch index. f16/bf16 go through f32; i32/i64 use the same
// plan with a plain loop in place of BLAS. Under --device=cuda, floating-point
// contractions go to kernels/cuda/ instead (integers stay here, on the host).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "src/dtype.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/tensor.h"
#include "kernels/contract_plan.h"
#ifdef MESHRT_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

namespace meshrt::cpu {
namespace {

using namespace meshrt::contract;

/// An operand or the output: one letter per dim.
template <class T> struct Tensor {
    std::string letters;
    std::vector<int64_t> shape;
    T* data = nullptr;
};

/// Calls f(offset_in, offset_out) for every index of `shape` but the last dim (rank >= 1).
template <class F>
void walk_rows(const std::vector<int64_t>& shape, const std::vector<int64_t>& s_in,
               const std::vector<int64_t>& s_out, F&& f) {
    const size_t outer = shape.size() - 1;
    std::vector<int64_t> idx(outer, 0);
    int64_t oi = 0, oo = 0;
    for (;;) {
        f(oi, oo);
        size_t d = outer;
        for (; d-- > 0;) {
            oi += s_in[d];
            oo += s_out[d];
            if (++idx[d] < shape[d])
                break;
            oi -= s_in[d] * shape[d];
            oo -= s_out[d] * shape[d];
            idx[d] = 0;
        }
        if (d == size_t(-1))
            return;
    }
}

/// Accumulator for summing letters out: double for floats, unsigned 64-bit (wrapping,
/// like the integer types) for integers.
template <class T> using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

/// out = in with its letters permuted to out.letters, summing the letters out lacks.
template <class T> void unary(const Tensor<const T>& in, const Tensor<T>& out) {
    const int64_t n_out = num_elements(out.shape);
    if (n_out == 0)
        return;
    if (in.letters == out.letters) {
        std::memcpy(out.data, in.data, size_t(n_out) * sizeof(T));
        return;
    }
    const std::vector<int64_t> in_strides = row_major_strides(in.shape);
    const std::vector<int64_t> out_strides = row_major_strides(out.shape);
    if (in.letters.size() == out.letters.size()) {
        // Pure permutation: walk the output (contiguous writes), gather from the input.
        std::vector<int64_t> shape = out.shape, s_in, s_out = out_strides;
        for (char c : out.letters)
            s_in.push_back(stride_of(in.letters, in_strides, c));
        if (shape.empty()) {
            out.data[0] = in.data[0];
            return;
        }
        const int64_t row = shape.back(), step = s_in.back();
        walk_rows(shape, s_in, s_out, [&](int64_t oi, int64_t oo) {
            const T* src = in.data + oi;
            T* dst = out.data + oo;
            for (int64_t j = 0; j < row; ++j)
                dst[j] = src[j * step];
        });
        return;
    }
    // Summation: walk the input (contiguous reads), accumulate into the output's slots.
    std::vector<Acc<T>> acc(size_t(n_out), Acc<T>(0));
    if (num_elements(in.shape) > 0) {
        std::vector<int64_t> s_acc;
        for (char c : in.letters)
            s_acc.push_back(has(out.letters, c) ? stride_of(out.letters, out_strides, c) : 0);
        const int64_t row = in.shape.back(), step = s_acc.back();
        walk_rows(in.shape, in_strides, s_acc, [&](int64_t oi, int64_t oa) {
            const T* src = in.data + oi;
            Acc<T>* dst = acc.data() + oa;
            for (int64_t j = 0; j < row; ++j)
                dst[j * step] += Acc<T>(src[j]);
        });
    }
    for (int64_t i = 0; i < n_out; ++i)
        out.data[i] = T(acc[size_t(i)]);
}

template <class T>
void gemm(meshrt_device* dev, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
          int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc) {
    if constexpr (std::is_floating_point_v<T>) {
        for (int64_t v : {M, N, K, lda, ldb, ldc})
            if (v > INT_MAX)
                fail(dev, "contract: a matrix dimension of " + std::to_string(v) +
                              " exceeds the BLAS's 32-bit integers");
        const auto tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
        if constexpr (std::is_same_v<T, float>)
            cblas_sgemm(CblasRowMajor, tA, tB, int(M), int(N), int(K), 1.0f, A, int(lda), B,
                        int(ldb), 0.0f, C, int(ldc));
        else
            cblas_dgemm(CblasRowMajor, tA, tB, int(M), int(N), int(K), 1.0, A, int(lda), B,
                        int(ldb), 0.0, C, int(ldc));
    } else {
        // Integers: i-k-j loops, wrapping arithmetic like the integer types themselves.
        using U = std::make_unsigned_t<T>;
        for (int64_t i = 0; i < M; ++i) {
            T* c = C + i * ldc;
            for (int64_t j = 0; j < N; ++j)
                c[j] = 0;
            for (int64_t p = 0; p < K; ++p) {
                const U aip = U(ta ? A[p * lda + i] : A[i * lda + p]);
                if (aip == 0)
                    continue;
                if (tb) {
                    for (int64_t j = 0; j < N; ++j)
                        c[j] = T(U(c[j]) + aip * U(B[j * ldb + p]));
                } else {
                    const T* b = B + p * ldb;
                    for (int64_t j = 0; j < N; ++j)
                        c[j] = T(U(c[j]) + aip * U(b[j]));
                }
            }
        }
    }
}

template <class T>
void binary(meshrt_device* dev, const Spec& spec, Tensor<const T> a, Tensor<const T> b,
            Tensor<T> out, Stats* stats) {
    const int64_t* extent = spec.extent;
    if (num_elements(out.shape) == 0)
        return;
    const BinaryPlan plan = plan_binary(spec);
    std::vector<Scratch> temps;
    // t becomes a temporary holding t with the given letters (summed or permuted).
    auto materialize = [&](Tensor<const T>& t, const std::string& letters) {
        Tensor<T> r{letters, shape_of(letters, extent), nullptr};
        temps.emplace_back(size_t(std::max<int64_t>(1, num_elements(r.shape))) * sizeof(T));
        r.data = temps.back().template get<T>();
        unary<T>(t, r);
        t = Tensor<const T>{r.letters, r.shape, r.data};
        ++stats->copies;
    };
    // 1. Private letters summed out.
    if (plan.a_summed)
        materialize(a, plan.a_letters);
    if (plan.b_summed)
        materialize(b, plan.b_letters);
    // 2. An empty sum.
    if (plan.K == 0) {
        std::memset(out.data, 0, size_t(num_elements(out.shape)) * sizeof(T));
        return;
    }
    // 3. The output, or a canonical temporary.
    Tensor<T> c = out;
    Scratch out_temp;
    if (plan.out_temp) {
        c.letters = plan.c_letters;
        c.shape = shape_of(c.letters, extent);
        out_temp.resize(size_t(num_elements(c.shape)) * sizeof(T));
        c.data = out_temp.get<T>();
        ++stats->copies;
    }
    // 4. The operands in their roles.
    Tensor<const T> left = plan.swapped ? b : a, right = plan.swapped ? a : b;
    if (plan.left.permuted)
        materialize(left, plan.left.letters);
    if (plan.right.permuted)
        materialize(right, plan.right.letters);
    const MatrixView lv = plan.left.view, rv = plan.right.view;

    // 5. One product per batch index.
    const std::vector<int64_t>& bshape = plan.batch_shape;
    const std::vector<int64_t>&bl = plan.batch_left, &br = plan.batch_right, &bc = plan.batch_c;
    std::vector<int64_t> idx(bshape.size(), 0);
    int64_t ol = 0, orr = 0, oc = 0;
    for (;;) {
        gemm<T>(dev, lv.trans, rv.trans, plan.R, plan.C, plan.K, left.data + ol, lv.ld,
                right.data + orr, rv.ld, c.data + oc, plan.ldc);
        size_t d = bshape.size();
        for (; d-- > 0;) {
            ol += bl[d];
            orr += br[d];
            oc += bc[d];
            if (++idx[d] < bshape[d])
                break;
            ol -= bl[d] * bshape[d];
            orr -= br[d] * bshape[d];
            oc -= bc[d] * bshape[d];
            idx[d] = 0;
        }
        if (d == size_t(-1))
            break;
    }
    stats->flops = plan.flops;
    if (plan.out_temp)
        unary<T>(Tensor<const T>{c.letters, c.shape, c.data}, out);
}

template <class T>
void run(meshrt_device* dev, const Spec& spec, const void* a, const int64_t* shape_a, const void* b,
         const int64_t* shape_b, void* out, const int64_t* shape_out, Stats* stats) {
    auto make = [](const std::string& letters, const int64_t* shape, auto* data) {
        using P = std::remove_pointer_t<decltype(data)>;
        return Tensor<P>{letters, std::vector<int64_t>(shape, shape + letters.size()), data};
    };
    Tensor<T> o = make(spec.output, shape_out, static_cast<T*>(out));
    Tensor<const T> ta = make(spec.inputs[0], shape_a, static_cast<const T*>(a));
    if (spec.inputs.size() == 1) {
        unary<T>(ta, o);
        return;
    }
    Tensor<const T> tb = make(spec.inputs[1], shape_b, static_cast<const T*>(b));
    binary<T>(dev, spec, ta, tb, o, stats);
}

} // namespace
} // namespace meshrt::cpu

extern "C" void meshrt_contract(meshrt_device* dev, int32_t dtype, const char* spec, const void* a,
                                int32_t rank_a, const int64_t* shape_a, const void* b,
                                int32_t rank_b, const int64_t* shape_b, void* out, int32_t rank_out,
                                const int64_t* shape_out) {
    using namespace meshrt;
    using namespace meshrt::cpu;
    TraceScope scope(dev, "contract");
    scope.at_site();
    const int32_t noperands = b ? 2 : 1;
    if (noperands == 1 && rank_b != 0)
        fail(dev, std::string("contract \"") + (spec ? spec : "") +
                      "\": no operand b but rank_b is " + std::to_string(rank_b));
    // The operands' ranks and shapes, then the output's.
    int32_t ranks[3] = {rank_a, rank_b, rank_out};
    const int64_t* shapes[3] = {shape_a, shape_b, shape_out};
    ranks[noperands] = rank_out;
    shapes[noperands] = shape_out;
    const Spec p = parse_spec(dev, spec, noperands, ranks, shapes);
    Stats stats;
    bool done = false; // by the GPU (floating point under --device=cuda)
#ifdef MESHRT_HAVE_CUDA
    done = cuda::enabled(dev) &&
           cuda::contract(dev, dtype, p, a, shape_a, b, shape_b, out, shape_out, &stats);
#endif
    if (!done) switch (dtype) {
    case MESHRT_F32:
        run<float>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_F64:
        run<double>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_I32:
        run<int32_t>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_I64:
        run<int64_t>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_F16:
    case MESHRT_BF16: {
        // Through f32: convert the operands, contract, round the result once.
        auto widen = [&](const void* h, int32_t rank, const int64_t* shape, Scratch& buf) {
            const int64_t n = num_elements(std::span<const int64_t>(shape, size_t(rank)));
            buf.resize(size_t(std::max<int64_t>(1, n)) * sizeof(float));
            halves_to_f32(dtype, static_cast<const uint16_t*>(h), buf.get<float>(), n);
            return buf.get<float>();
        };
        Scratch fa, fb, fo;
        const float* wa = widen(a, rank_a, shape_a, fa);
        const float* wb = noperands == 2 ? widen(b, rank_b, shape_b, fb) : nullptr;
        const int64_t n_out = num_elements(std::span<const int64_t>(shape_out, size_t(rank_out)));
        fo.resize(size_t(std::max<int64_t>(1, n_out)) * sizeof(float));
        run<float>(dev, p, wa, shape_a, wb, shape_b, fo.get(), shape_out, &stats);
        f32_to_halves(dtype, fo.get<float>(), static_cast<uint16_t*>(out), n_out);
        break;
    }
    default:
        fail(dev, std::string("contract \"") + spec + "\": unsupported dtype " + dtype_name(dtype));
    }
    if (scope.active()) {
        scope.arg("spec", spec);
        scope.arg("dtype", dtype_name(dtype));
        if (stats.flops)
            scope.arg("flops", stats.flops);
        scope.arg("copies", stats.copies);
        if (done)
            scope.arg("on", "gpu");
    }
}

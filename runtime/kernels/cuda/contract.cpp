// meshrt_contract on the GPU: the plan of kernels/contract_plan.h (the same plan the
// CPU kernels run) with cuBLAS. Each batch of products is one strided-batched GEMM over
// the innermost batch dims whose strides chain (a loop over the others), with the
// transposes folded into the call; sums over private letters and permutations are the
// unary kernel (kernels.cu), exactly the CPU's arithmetic. f32: cublasSgemm* (full
// FP32, no TF32), f64: cublasDgemm*, f16/bf16: cublasGemmStridedBatchedEx with
// CUBLAS_COMPUTE_32F (f32 accumulation, rounded once) when the plan reads every tensor
// in place; when it needs a temporary, f16/bf16 go through f32 as on the CPU (widened,
// contracted in f32, rounded once), so no intermediate is rounded to 16 bits.
//
// cuBLAS is column-major: the row-major product C[R x C] = L[R x K] * Rt[K x C] is the
// column-major C^T = Rt^T * L^T, so the right operand is cuBLAS's A and the left its B,
// each with the leading dimension of its row-major view.
#include <climits>
#include <deque>
#include <string>

#include "kernels/cuda/device.h"
#include "kernels/cuda/kernels.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/tensor.h"

namespace meshrt::cuda {
namespace {

using namespace meshrt::contract;

/// An operand, a temporary or the output on the GPU: one letter per dim.
struct GpuTensor {
    std::string letters;
    void* data = nullptr;
};

/// out = in with its letters permuted to out.letters, summing the letters out lacks.
void gpu_unary(meshrt_device* dev, DeviceContext& c, int32_t dtype, const GpuTensor& in,
               const GpuTensor& out, const int64_t* extent) {
    const int64_t n_out = num_elements(shape_of(out.letters, extent));
    if (n_out == 0)
        return;
    if (in.letters == out.letters && !dtype_is_half(dtype)) {
        check(dev,
              cudaMemcpyAsync(out.data, in.data, size_t(n_out) * dtype_size(dtype),
                              cudaMemcpyDeviceToDevice, c.stream),
              "contract: cudaMemcpyAsync");
        return;
    }
    kernels::UnaryParams p;
    const std::vector<int64_t> in_strides = row_major_strides(shape_of(in.letters, extent));
    p.rank_out = int32_t(out.letters.size());
    for (size_t d = 0; d < out.letters.size(); ++d) {
        p.out_shape[d] = extent[out.letters[d] - 'a'];
        p.in_stride[d] = stride_of(in.letters, in_strides, out.letters[d]);
    }
    for (char ch : in.letters)
        if (!has(out.letters, ch)) {
            p.sum_shape[p.nsum] = extent[ch - 'a'];
            p.sum_stride[p.nsum] = stride_of(in.letters, in_strides, ch);
            ++p.nsum;
        }
    check(dev, kernels::unary(dtype, in.data, out.data, n_out, p, c.stream),
          "contract: the permute/sum kernel");
}

int as_int(meshrt_device* dev, int64_t v) {
    if (v > INT_MAX)
        fail(dev, "contract: a matrix dimension of " + std::to_string(v) +
                      " exceeds cuBLAS's 32-bit integers");
    return int(v);
}

/// For every batch index: c = left * right, as `plan` reads them.
void gemm_batches(meshrt_device* dev, DeviceContext& c, int32_t dtype, const BinaryPlan& plan,
                  const void* left, const void* right, void* out) {
    // Batch dims of extent 1 are no dims; the innermost ones whose strides chain in all
    // three tensors merge into the one batch dim of a strided-batched call.
    std::vector<int64_t> shape, sl, sr, sc;
    for (size_t i = 0; i < plan.batch_shape.size(); ++i)
        if (plan.batch_shape[i] != 1) {
            shape.push_back(plan.batch_shape[i]);
            sl.push_back(plan.batch_left[i]);
            sr.push_back(plan.batch_right[i]);
            sc.push_back(plan.batch_c[i]);
        }
    size_t outer = shape.size(); // dims [0, outer) are looped over here
    int64_t count = 1, stride_l = 0, stride_r = 0, stride_c = 0;
    if (!shape.empty()) {
        outer = shape.size() - 1;
        count = shape[outer];
        stride_l = sl[outer];
        stride_r = sr[outer];
        stride_c = sc[outer];
        while (outer > 0 && sl[outer - 1] == sl[outer] * shape[outer] &&
               sr[outer - 1] == sr[outer] * shape[outer] &&
               sc[outer - 1] == sc[outer] * shape[outer]) {
            --outer;
            count *= shape[outer];
        }
    }
    const int m = as_int(dev, plan.C), n = as_int(dev, plan.R), k = as_int(dev, plan.K);
    const int lda = as_int(dev, plan.right.view.ld), ldb = as_int(dev, plan.left.view.ld);
    const int ldc = as_int(dev, plan.ldc), batch = as_int(dev, count);
    const cublasOperation_t op_a = plan.right.view.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = plan.left.view.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const size_t elem = dtype_size(dtype);
    const char* L = static_cast<const char*>(left);
    const char* Rt = static_cast<const char*>(right);
    char* C = static_cast<char*>(out);

    std::vector<int64_t> idx(outer, 0);
    int64_t ol = 0, orr = 0, oc = 0;
    for (;;) {
        const void* A = Rt + size_t(orr) * elem;
        const void* B = L + size_t(ol) * elem;
        void* Cp = C + size_t(oc) * elem;
        switch (dtype) {
        case MESHRT_F32: {
            const float one = 1.0f, zero = 0.0f;
            check(dev,
                  cublasSgemmStridedBatched(c.blas, op_a, op_b, m, n, k, &one,
                                            static_cast<const float*>(A), lda, stride_r,
                                            static_cast<const float*>(B), ldb, stride_l, &zero,
                                            static_cast<float*>(Cp), ldc, stride_c, batch),
                  "cublasSgemmStridedBatched");
            break;
        }
        case MESHRT_F64: {
            const double one = 1.0, zero = 0.0;
            check(dev,
                  cublasDgemmStridedBatched(c.blas, op_a, op_b, m, n, k, &one,
                                            static_cast<const double*>(A), lda, stride_r,
                                            static_cast<const double*>(B), ldb, stride_l, &zero,
                                            static_cast<double*>(Cp), ldc, stride_c, batch),
                  "cublasDgemmStridedBatched");
            break;
        }
        default: { // f16, bf16: f32 accumulation, one rounding
            const cudaDataType_t t = dtype == MESHRT_F16 ? CUDA_R_16F : CUDA_R_16BF;
            const float one = 1.0f, zero = 0.0f;
            check(dev,
                  cublasGemmStridedBatchedEx(c.blas, op_a, op_b, m, n, k, &one, A, t, lda, stride_r,
                                             B, t, ldb, stride_l, &zero, Cp, t, ldc, stride_c,
                                             batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmStridedBatchedEx");
            break;
        }
        }
        size_t d = outer;
        for (; d-- > 0;) {
            ol += sl[d];
            orr += sr[d];
            oc += sc[d];
            if (++idx[d] < shape[d])
                break;
            ol -= sl[d] * shape[d];
            orr -= sr[d] * shape[d];
            oc -= sc[d] * shape[d];
            idx[d] = 0;
        }
        if (d == size_t(-1))
            break;
    }
}

/// The two-operand plan, run on the GPU in `dtype` (f32, f64, or f16/bf16 when the plan
/// materialises nothing).
void gpu_binary(meshrt_device* dev, DeviceContext& c, int32_t dtype, const Spec& spec,
                const BinaryPlan& plan, GpuTensor a, GpuTensor b, const GpuTensor& out,
                Stats* stats) {
    const int64_t* extent = spec.extent;
    const size_t elem = dtype_size(dtype);
    const int64_t n_out = num_elements(shape_of(out.letters, extent));
    if (n_out == 0)
        return;
    std::deque<DeviceScratch> temps;
    auto materialize = [&](GpuTensor& t, const std::string& letters) {
        const int64_t n = num_elements(shape_of(letters, extent));
        temps.emplace_back(dev, c, size_t(std::max<int64_t>(1, n)) * elem);
        GpuTensor r{letters, temps.back().get()};
        gpu_unary(dev, c, dtype, t, r, extent);
        t = r;
        ++stats->copies;
    };
    if (plan.a_summed)
        materialize(a, plan.a_letters);
    if (plan.b_summed)
        materialize(b, plan.b_letters);
    if (plan.K == 0) {
        check(dev, cudaMemsetAsync(out.data, 0, size_t(n_out) * elem, c.stream),
              "contract: cudaMemsetAsync");
        return;
    }
    GpuTensor cc = out;
    if (plan.out_temp) {
        temps.emplace_back(dev, c, size_t(num_elements(shape_of(plan.c_letters, extent))) * elem);
        cc = GpuTensor{plan.c_letters, temps.back().get()};
        ++stats->copies;
    }
    GpuTensor left = plan.swapped ? b : a, right = plan.swapped ? a : b;
    if (plan.left.permuted)
        materialize(left, plan.left.letters);
    if (plan.right.permuted)
        materialize(right, plan.right.letters);
    gemm_batches(dev, c, dtype, plan, left.data, right.data, cc.data);
    stats->flops = plan.flops;
    if (plan.out_temp)
        gpu_unary(dev, c, dtype, cc, out, extent);
}

} // namespace

bool contract(meshrt_device* dev, int32_t dtype, const Spec& spec, const void* a,
              const int64_t* shape_a, const void* b, const int64_t* shape_b, void* out,
              const int64_t* shape_out, Stats* stats) {
    (void)shape_a;
    (void)shape_b;
    (void)shape_out; // equal to the spec's extents (parse_spec checked them)
    if (dtype != MESHRT_F32 && dtype != MESHRT_F64 && !dtype_is_half(dtype))
        return false;
    DeviceContext& c = context(dev);
    const int64_t* extent = spec.extent;
    const size_t elem = dtype_size(dtype);
    const bool binary = spec.inputs.size() == 2;
    auto bytes_of = [&](const std::string& letters) {
        return size_t(num_elements(shape_of(letters, extent))) * elem;
    };
    DeviceBuffer da(dev, c, a, bytes_of(spec.inputs[0]), true, false);
    DeviceBuffer db(dev, c, binary ? b : nullptr, binary ? bytes_of(spec.inputs[1]) : 0, true,
                    false);
    DeviceBuffer dout(dev, c, out, bytes_of(spec.output), false, true);
    GpuTensor ta{spec.inputs[0], da.get()}, to{spec.output, dout.get()};

    if (!binary) {
        // f16/bf16 too: the kernel widens each element and rounds once, as the CPU does.
        gpu_unary(dev, c, dtype, ta, to, extent);
    } else {
        GpuTensor tb{spec.inputs[1], db.get()};
        const BinaryPlan plan = plan_binary(spec);
        if (!dtype_is_half(dtype) || plan.copies == 0) {
            gpu_binary(dev, c, dtype, spec, plan, ta, tb, to, stats);
        } else {
            // Through f32, as on the CPU: widen, contract, round the result once.
            const int64_t na = num_elements(shape_of(spec.inputs[0], extent));
            const int64_t nb = num_elements(shape_of(spec.inputs[1], extent));
            const int64_t no = num_elements(shape_of(spec.output, extent));
            DeviceScratch fa(dev, c, size_t(na) * 4), fb(dev, c, size_t(nb) * 4),
                fo(dev, c, size_t(no) * 4);
            check(dev,
                  kernels::halves_to_f32(dtype, da.get<uint16_t>(), fa.get<float>(), na, c.stream),
                  "contract: f16/bf16 to f32");
            check(dev,
                  kernels::halves_to_f32(dtype, db.get<uint16_t>(), fb.get<float>(), nb, c.stream),
                  "contract: f16/bf16 to f32");
            gpu_binary(dev, c, MESHRT_F32, spec, plan, GpuTensor{spec.inputs[0], fa.get()},
                       GpuTensor{spec.inputs[1], fb.get()}, GpuTensor{spec.output, fo.get()},
                       stats);
            check(
                dev,
                kernels::f32_to_halves(dtype, fo.get<float>(), dout.get<uint16_t>(), no, c.stream),
                "contract: f32 to f16/bf16");
        }
    }
    dout.finish();
    sync(dev, c, "contract");
    return true;
}

} // namespace meshrt::cuda

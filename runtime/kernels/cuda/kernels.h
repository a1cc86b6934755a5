// The runtime's own CUDA kernels (kernels.cu), behind host launchers that plain C++
// (g++) calls: the permute/sum of a one-operand contraction, f16/bf16 <-> f32
// conversions, Philox random numbers, and the rank-order reduction of n slices that the
// NCCL handler uses where NCCL's own reductions differ from meshrt.h. Each launcher
// enqueues on `stream` and returns the launch's error (cudaSuccess when fine); nothing
// waits. Every kernel computes exactly what its CPU counterpart computes, with the same
// integer and floating-point operations in the same order, so results match bitwise
// (random normals: see random()).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace meshrt::cuda::kernels {

constexpr int kMaxRank = 26; // letters of a contraction; also the rank limit of random()

/// out (rank_out dims) = in permuted, summing the letters out lacks: the CPU's unary()
/// of kernels/cpu/contract.cpp. For output element o (row-major multi-index i over
/// out_shape), the input offset is sum_d i[d] * in_stride[d], plus, for each index j of
/// sum_shape in row-major order, sum_e j[e] * sum_stride[e] (in the input's letter
/// order, so the addends come in increasing input offset, as the CPU adds them).
struct UnaryParams {
    int32_t rank_out = 0;
    int64_t out_shape[kMaxRank] = {};
    int64_t in_stride[kMaxRank] = {};
    int32_t nsum = 0;
    int64_t sum_shape[kMaxRank] = {};
    int64_t sum_stride[kMaxRank] = {};
};
/// dtype: f32 or f64 (accumulated in double), f16 or bf16 (each element through f32,
/// accumulated in double, rounded to f32 and then to the half type, as the CPU does).
cudaError_t unary(int32_t dtype, const void* in, void* out, int64_t n_out, const UnaryParams& p,
                  cudaStream_t stream);

/// n f16/bf16 values (dtype) to f32 and back (round to nearest even): dtype.h's
/// halves_to_f32 / f32_to_halves.
cudaError_t halves_to_f32(int32_t dtype, const uint16_t* in, float* out, int64_t n,
                          cudaStream_t stream);
cudaError_t f32_to_halves(int32_t dtype, const float* in, uint16_t* out, int64_t n,
                          cudaStream_t stream);

/// meshrt_random's values for a piece of rank `rank` (local_shape, offset: where the
/// piece starts in the global tensor, gstride: row-major strides of the global shape),
/// n = elements of the piece, written row-major to out as dtype. The integer math
/// (Philox4x32-10) is the CPU's; the double-precision formula is the same expression,
/// but CUDA's log and cos may differ from glibc's in the last bit of a double, so
/// normals can differ from the CPU's by one unit in the last place of f64, and (very
/// rarely) of f32/f16/bf16 when that bit decides the rounding. Uniforms are exact.
struct RandomParams {
    int32_t rank = 0;
    int64_t local_shape[kMaxRank] = {};
    int64_t offset[kMaxRank] = {};
    int64_t gstride[kMaxRank] = {};
};
cudaError_t random(int32_t kind, int64_t seed, int32_t dtype, const RandomParams& p, void* out,
                   int64_t n, cudaStream_t stream);

/// out[i] = op over in[k * stride + i] for k = 0 .. n-1, in that order (i < count): the
/// reductions of comm/reduce.h, bitwise (f16/bf16 in f32, rounded once; bool: any; ints
/// wrap; float max propagates NaN). stride and count are in elements.
cudaError_t reduce_slices(int32_t dtype, int32_t op, const void* in, int64_t n, int64_t stride,
                          void* out, int64_t count, cudaStream_t stream);

} // namespace meshrt::cuda::kernels

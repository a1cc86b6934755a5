// The runtime's CUDA kernels (see kernels.h): grid-stride loops, one element per
// thread per step. The f16/bf16 conversions and Philox4x32-10 are the integer code of
// src/dtype.h and src/philox.h written for the device (those headers are host C++), so
// every bit matches; runtime/tests/cuda_check.cpp compares them on a GPU.
#include "kernels/cuda/kernels.h"

#include <cstdint>

#include "meshrt.h"

namespace meshrt::cuda::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return unsigned(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                      \
         i += int64_t(blockDim.x) * gridDim.x)

// ---------------------------------------------------------------- f16 / bf16 (dtype.h)

__device__ float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            uint32_t e = 113;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --e;
            }
            bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    return __uint_as_float(bits);
}

__device__ uint16_t f32_to_f16(float f) {
    const uint32_t x = __float_as_uint(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u)
        return uint16_t(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        ax += 0xfffu + ((ax >> 13) & 1u);
        return uint16_t(sign | ((ax - 0x38000000u) >> 13));
    }
    if (ax <= 0x33000000u)
        return sign;
    const uint32_t e = ax >> 23;
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;
    uint32_t m = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u)))
        ++m;
    return uint16_t(sign | m);
}

__device__ float bf16_to_f32(uint16_t h) {
    return __uint_as_float(uint32_t(h) << 16);
}

__device__ uint16_t f32_to_bf16(float f) {
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return uint16_t((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}

/// How each element type is read as a double and written from one. F16/BF16 go through
/// f32 both ways, as the CPU kernels (which widen halves to f32 first) do.
struct F32 {
    using T = float;
    static __device__ double load(float x) { return x; }
    static __device__ float store(double v) { return float(v); }
};
struct F64 {
    using T = double;
    static __device__ double load(double x) { return x; }
    static __device__ double store(double v) { return v; }
};
struct F16 {
    using T = uint16_t;
    static __device__ double load(uint16_t x) { return f16_to_f32(x); }
    static __device__ uint16_t store(double v) { return f32_to_f16(float(v)); }
};
struct BF16 {
    using T = uint16_t;
    static __device__ double load(uint16_t x) { return bf16_to_f32(x); }
    static __device__ uint16_t store(double v) { return f32_to_bf16(float(v)); }
};

// ---------------------------------------------------------------- unary (permute / sum)

template <class E, bool kHalf>
__global__ void unary_kernel(const typename E::T* in, typename E::T* out, int64_t n_out,
                             UnaryParams p) {
    GRID_STRIDE(o, n_out) {
        int64_t rest = o, base = 0;
        for (int d = p.rank_out - 1; d >= 0; --d) {
            base += (rest % p.out_shape[d]) * p.in_stride[d];
            rest /= p.out_shape[d];
        }
        if (p.nsum == 0) {
            // A pure permutation: floats are copied (the CPU copies them); halves make
            // the CPU's round trip through f32.
            out[o] = kHalf ? E::store(E::load(in[base])) : in[base];
            continue;
        }
        int64_t total = 1;
        for (int e = 0; e < p.nsum; ++e)
            total *= p.sum_shape[e];
        int64_t idx[kMaxRank];
        for (int e = 0; e < p.nsum; ++e)
            idx[e] = 0;
        double acc = 0.0;
        int64_t off = 0;
        for (int64_t t = 0; t < total; ++t) {
            acc += E::load(in[base + off]);
            for (int e = p.nsum - 1; e >= 0; --e) {
                off += p.sum_stride[e];
                if (++idx[e] < p.sum_shape[e])
                    break;
                off -= p.sum_stride[e] * p.sum_shape[e];
                idx[e] = 0;
            }
        }
        out[o] = E::store(acc);
    }
}

template <class E, bool kHalf>
cudaError_t launch_unary(const void* in, void* out, int64_t n_out, const UnaryParams& p,
                         cudaStream_t stream) {
    using T = typename E::T;
    unary_kernel<E, kHalf><<<blocks_for(n_out), kThreads, 0, stream>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n_out, p);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- conversions

__global__ void halves_to_f32_kernel(bool bf16, const uint16_t* in, float* out, int64_t n) {
    GRID_STRIDE(i, n) {
        out[i] = bf16 ? bf16_to_f32(in[i]) : f16_to_f32(in[i]);
    }
}

__global__ void f32_to_halves_kernel(bool bf16, const float* in, uint16_t* out, int64_t n) {
    GRID_STRIDE(i, n) {
        out[i] = bf16 ? f32_to_bf16(in[i]) : f32_to_f16(in[i]);
    }
}

// ---------------------------------------------------------------- Philox (philox.h)

struct Words {
    uint32_t x[4];
};

__device__ Words philox_for_index(int64_t seed, int64_t index) {
    const uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
    const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    const uint64_t s = uint64_t(seed), i = uint64_t(index);
    uint32_t c0 = uint32_t(i), c1 = uint32_t(i >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = uint32_t(s), k1 = uint32_t(s >> 32);
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        const uint64_t p0 = uint64_t(kM0) * c0;
        const uint64_t p1 = uint64_t(kM1) * c2;
        const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
        const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    return Words{{c0, c1, c2, c3}};
}

__device__ void store_value(int32_t dtype, void* out, int64_t i, double v) {
    switch (dtype) {
    case MESHRT_BOOL:
        static_cast<uint8_t*>(out)[i] = v != 0.0;
        break;
    case MESHRT_I32:
        static_cast<int32_t*>(out)[i] = int32_t(v);
        break;
    case MESHRT_I64:
        static_cast<int64_t*>(out)[i] = int64_t(v);
        break;
    case MESHRT_F16:
        static_cast<uint16_t*>(out)[i] = f32_to_f16(float(v));
        break;
    case MESHRT_BF16:
        static_cast<uint16_t*>(out)[i] = f32_to_bf16(float(v));
        break;
    case MESHRT_F32:
        static_cast<float*>(out)[i] = float(v);
        break;
    case MESHRT_F64:
        static_cast<double*>(out)[i] = v;
        break;
    default:
        break;
    }
}

__global__ void random_kernel(int32_t kind, int64_t seed, int32_t dtype, RandomParams p, void* out,
                              int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t rest = i, g = 0;
        for (int d = p.rank - 1; d >= 0; --d) {
            g += (p.offset[d] + rest % p.local_shape[d]) * p.gstride[d];
            rest /= p.local_shape[d];
        }
        const Words w = philox_for_index(seed, g);
        double v;
        if (kind == MESHRT_UNIFORM) {
            v = double(w.x[0] >> 8) * 0x1p-24;
        } else {
            // src/random.cpp's philox_normal, operation for operation (no additions, so
            // nothing for the compiler to fuse into an FMA).
            const double u1 = double((w.x[0] >> 8) + 1) * 0x1p-24;
            const double u2 = double(w.x[1] >> 8) * 0x1p-24;
            constexpr double kTwoPi = 2.0 * 3.141592653589793238462643383279502884;
            v = ::sqrt(-2.0 * ::log(u1)) * ::cos(kTwoPi * u2);
        }
        store_value(dtype, out, i, v);
    }
}

// ---------------------------------------------------------------- reductions (reduce.h)

template <class T> __device__ T max_of(T a, T b) {
    return b > a ? b : a;
}
template <> __device__ float max_of(float a, float b) {
    return (b > a || isnan(b)) ? b : a;
}
template <> __device__ double max_of(double a, double b) {
    return (b > a || isnan(b)) ? b : a;
}

/// Plain types: floats add in their own precision, integers wrap (through the unsigned
/// type of the same width).
template <class T, class U>
__global__ void reduce_kernel(bool sum, const T* in, int64_t n, int64_t stride, T* out,
                              int64_t count) {
    GRID_STRIDE(i, count) {
        T acc = in[i];
        for (int64_t k = 1; k < n; ++k) {
            const T x = in[k * stride + i];
            acc = sum ? T(U(acc) + U(x)) : max_of(acc, x);
        }
        out[i] = acc;
    }
}

template <class E>
__global__ void reduce_half_kernel(bool sum, const uint16_t* in, int64_t n, int64_t stride,
                                   uint16_t* out, int64_t count) {
    GRID_STRIDE(i, count) {
        float acc = float(E::load(in[i]));
        for (int64_t k = 1; k < n; ++k) {
            const float x = float(E::load(in[k * stride + i]));
            acc = sum ? acc + x : max_of(acc, x);
        }
        out[i] = E::store(acc);
    }
}

__global__ void reduce_bool_kernel(const uint8_t* in, int64_t n, int64_t stride, uint8_t* out,
                                   int64_t count) {
    GRID_STRIDE(i, count) {
        uint8_t acc = in[i] != 0;
        for (int64_t k = 1; k < n; ++k)
            acc = uint8_t(acc | (in[k * stride + i] != 0));
        out[i] = acc;
    }
}

template <class T, class U>
cudaError_t launch_reduce(bool sum, const void* in, int64_t n, int64_t stride, void* out,
                          int64_t count, cudaStream_t stream) {
    reduce_kernel<T, U><<<blocks_for(count), kThreads, 0, stream>>>(
        sum, static_cast<const T*>(in), n, stride, static_cast<T*>(out), count);
    return cudaGetLastError();
}

} // namespace

cudaError_t unary(int32_t dtype, const void* in, void* out, int64_t n_out, const UnaryParams& p,
                  cudaStream_t stream) {
    if (n_out <= 0)
        return cudaSuccess;
    switch (dtype) {
    case MESHRT_F32:
        return launch_unary<F32, false>(in, out, n_out, p, stream);
    case MESHRT_F64:
        return launch_unary<F64, false>(in, out, n_out, p, stream);
    case MESHRT_F16:
        return launch_unary<F16, true>(in, out, n_out, p, stream);
    case MESHRT_BF16:
        return launch_unary<BF16, true>(in, out, n_out, p, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

cudaError_t halves_to_f32(int32_t dtype, const uint16_t* in, float* out, int64_t n,
                          cudaStream_t stream) {
    if (n <= 0)
        return cudaSuccess;
    halves_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dtype == MESHRT_BF16, in, out, n);
    return cudaGetLastError();
}

cudaError_t f32_to_halves(int32_t dtype, const float* in, uint16_t* out, int64_t n,
                          cudaStream_t stream) {
    if (n <= 0)
        return cudaSuccess;
    f32_to_halves_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dtype == MESHRT_BF16, in, out, n);
    return cudaGetLastError();
}

cudaError_t random(int32_t kind, int64_t seed, int32_t dtype, const RandomParams& p, void* out,
                   int64_t n, cudaStream_t stream) {
    if (n <= 0)
        return cudaSuccess;
    random_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kind, seed, dtype, p, out, n);
    return cudaGetLastError();
}

cudaError_t reduce_slices(int32_t dtype, int32_t op, const void* in, int64_t n, int64_t stride,
                          void* out, int64_t count, cudaStream_t stream) {
    if (count <= 0)
        return cudaSuccess;
    const bool sum = op == MESHRT_SUM;
    const unsigned blocks = blocks_for(count);
    switch (dtype) {
    case MESHRT_BOOL:
        reduce_bool_kernel<<<blocks, kThreads, 0, stream>>>(
            static_cast<const uint8_t*>(in), n, stride, static_cast<uint8_t*>(out), count);
        return cudaGetLastError();
    case MESHRT_I32:
        return launch_reduce<int32_t, uint32_t>(sum, in, n, stride, out, count, stream);
    case MESHRT_I64:
        return launch_reduce<int64_t, uint64_t>(sum, in, n, stride, out, count, stream);
    case MESHRT_F32:
        return launch_reduce<float, float>(sum, in, n, stride, out, count, stream);
    case MESHRT_F64:
        return launch_reduce<double, double>(sum, in, n, stride, out, count, stream);
    case MESHRT_F16:
        reduce_half_kernel<F16><<<blocks, kThreads, 0, stream>>>(
            sum, static_cast<const uint16_t*>(in), n, stride, static_cast<uint16_t*>(out), count);
        return cudaGetLastError();
    case MESHRT_BF16:
        reduce_half_kernel<BF16><<<blocks, kThreads, 0, stream>>>(
            sum, static_cast<const uint16_t*>(in), n, stride, static_cast<uint16_t*>(out), count);
        return cudaGetLastError();
    default:
        return cudaErrorInvalidValue;
    }
}

} // namespace meshrt::cuda::kernels

// Element types as the runtime sees them: sizes and names of meshrt_dtype values, and the
// binary16/bfloat16 <-> float conversions (round to nearest even) every kernel that
// touches f16/bf16 uses. Shared by kernels, collectives, npy I/O and printing.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "meshrt.h"

namespace meshrt {

/// Bytes per element; 0 for a value that is no meshrt_dtype.
size_t dtype_size(int32_t dtype);
/// "f32", "bf16", ...; "dtype#N" for a value that is no meshrt_dtype.
std::string dtype_name(int32_t dtype);
inline bool dtype_valid(int32_t dtype) {
    return dtype_size(dtype) != 0;
}
inline bool dtype_is_half(int32_t dtype) {
    return dtype == MESHRT_F16 || dtype == MESHRT_BF16;
}

/// "f32[16, 32]" (the form error messages use); "f32[]" for a scalar.
std::string type_string(int32_t dtype, const std::vector<int64_t>& shape);

inline float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {              // subnormal: mant * 2^-24; normalise into a float
            uint32_t e = 113; // float exponent field of 2^-14, minus the shifts below
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --e;
            }
            bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13); // inf, or NaN with its payload
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) // inf stays inf; NaN stays a quiet NaN
        return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) // >= 65520 rounds past the largest half (65504)
        return uint16_t(sign | 0x7c00u);
    if (ax >= 0x38800000u) { // normal half: rebias the exponent, round the mantissa
        ax += 0xfffu + ((ax >> 13) & 1u);
        return uint16_t(sign | ((ax - 0x38000000u) >> 13));
    }
    if (ax <= 0x33000000u) // at most 2^-25: rounds to zero (2^-25 itself ties to even 0)
        return sign;
    // Subnormal half: value = m * 2^-24 with m = mant * 2^(e - 126).
    uint32_t e = ax >> 23;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; // 14 .. 24
    uint32_t m = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u)))
        ++m;
    return uint16_t(sign | m);
}

inline float bf16_to_f32(uint16_t h) {
    return std::bit_cast<float>(uint32_t(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return uint16_t((x >> 16) | 0x40u); // keep NaN a (quiet) NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}

inline float half_to_f32(int32_t dtype, uint16_t h) {
    return dtype == MESHRT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}
inline uint16_t f32_to_half(int32_t dtype, float f) {
    return dtype == MESHRT_F16 ? f32_to_f16(f) : f32_to_bf16(f);
}
/// n f16/bf16 values <-> f32.
void halves_to_f32(int32_t dtype, const uint16_t* in, float* out, int64_t n);
void f32_to_halves(int32_t dtype, const float* in, uint16_t* out, int64_t n);

/// Element i of a buffer of any dtype, as a double (bool 0/1) - for printing and tests.
double element_as_double(int32_t dtype, const void* data, int64_t i);

} // namespace meshrt

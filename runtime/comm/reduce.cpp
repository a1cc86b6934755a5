// reduce_into (see reduce.h). Works in tiles so the accumulator stays in L1 while each
// input streams through once; the inner loops are plain element-wise and vectorise.
#include "comm/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "meshrt.h"
#include "src/dtype.h"

namespace meshrt::comm {
namespace {

constexpr int64_t kTile = 2048;

template <class T> T reduce_max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        return (b > a || std::isnan(b)) ? b : a;
    else
        return b > a ? b : a;
}

template <class T>
void reduce_typed(int32_t op, T* out, const void* const* inputs, int64_t n, int64_t count) {
    for (int64_t t = 0; t < count; t += kTile) {
        const int64_t len = std::min(kTile, count - t);
        // __restrict: the output never aliases an input, and saying so lets GCC's -O2
        // cost model vectorise these loops (it will not add runtime alias checks).
        T* __restrict o = out + t;
        std::memcpy(o, static_cast<const T*>(inputs[0]) + t, size_t(len) * sizeof(T));
        for (int64_t i = 1; i < n; ++i) {
            const T* __restrict in = static_cast<const T*>(inputs[i]) + t;
            if (op == MESHRT_SUM) {
                if constexpr (std::is_integral_v<T>) {
                    // Integer sums wrap (two's complement) instead of overflowing.
                    using U = std::make_unsigned_t<T>;
                    for (int64_t j = 0; j < len; ++j)
                        o[j] = T(U(o[j]) + U(in[j]));
                } else {
                    for (int64_t j = 0; j < len; ++j)
                        o[j] += in[j];
                }
            } else {
                for (int64_t j = 0; j < len; ++j)
                    o[j] = reduce_max(o[j], in[j]);
            }
        }
    }
}

void reduce_bool(uint8_t* out, const void* const* inputs, int64_t n, int64_t count) {
    // Sum and max of bools are both "any": the result stays 0/1.
    for (int64_t t = 0; t < count; t += kTile) {
        const int64_t len = std::min(kTile, count - t);
        uint8_t* o = out + t;
        for (int64_t j = 0; j < len; ++j)
            o[j] = static_cast<const uint8_t*>(inputs[0])[t + j] != 0;
        for (int64_t i = 1; i < n; ++i) {
            const uint8_t* in = static_cast<const uint8_t*>(inputs[i]) + t;
            for (int64_t j = 0; j < len; ++j)
                o[j] = uint8_t(o[j] | (in[j] != 0));
        }
    }
}

void reduce_half(int32_t dtype, int32_t op, uint16_t* out, const void* const* inputs, int64_t n,
                 int64_t count) {
    float acc[kTile];
    float tmp[kTile];
    for (int64_t t = 0; t < count; t += kTile) {
        const int64_t len = std::min(kTile, count - t);
        halves_to_f32(dtype, static_cast<const uint16_t*>(inputs[0]) + t, acc, len);
        for (int64_t i = 1; i < n; ++i) {
            halves_to_f32(dtype, static_cast<const uint16_t*>(inputs[i]) + t, tmp, len);
            if (op == MESHRT_SUM) {
                for (int64_t j = 0; j < len; ++j)
                    acc[j] += tmp[j];
            } else {
                for (int64_t j = 0; j < len; ++j)
                    acc[j] = reduce_max(acc[j], tmp[j]);
            }
        }
        f32_to_halves(dtype, acc, out + t, len);
    }
}

} // namespace

void reduce_into(int32_t dtype, int32_t op, void* out, const void* const* inputs, int64_t n,
                 int64_t count) {
    switch (dtype) {
    case MESHRT_BOOL:
        reduce_bool(static_cast<uint8_t*>(out), inputs, n, count);
        break;
    case MESHRT_I32:
        reduce_typed(op, static_cast<int32_t*>(out), inputs, n, count);
        break;
    case MESHRT_I64:
        reduce_typed(op, static_cast<int64_t*>(out), inputs, n, count);
        break;
    case MESHRT_F32:
        reduce_typed(op, static_cast<float*>(out), inputs, n, count);
        break;
    case MESHRT_F64:
        reduce_typed(op, static_cast<double*>(out), inputs, n, count);
        break;
    case MESHRT_F16:
    case MESHRT_BF16:
        reduce_half(dtype, op, static_cast<uint16_t*>(out), inputs, n, count);
        break;
    default:
        break;
    }
}

} // namespace meshrt::comm

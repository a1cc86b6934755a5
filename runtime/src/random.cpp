// meshrt_random: counter-based random tensors. The value at a global index depends only
// on the seed and the index, so every layout of the same tensor holds the same values
// and no device needs to talk to another. Integer and bool dtypes take the float value
// and convert it as C does (truncation toward zero; bool: nonzero), so a uniform i32 is
// all zeros: the type checker is expected to allow only float dtypes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <utility>
#include <vector>

#include "src/dtype.h"
#include "src/errors.h"
#include "src/layout.h"
#include "src/philox.h"
#include "src/runtime.h"
#ifdef MESHRT_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

namespace meshrt {

double philox_normal(const PhiloxCounter& x) {
    const double u1 = double((x[0] >> 8) + 1) * 0x1p-24;
    const double u2 = double(x[1] >> 8) * 0x1p-24;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

namespace {

void store(int32_t dtype, void* out, int64_t i, double v) {
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
    case MESHRT_BF16:
        static_cast<uint16_t*>(out)[i] = f32_to_half(dtype, float(v));
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

} // namespace
} // namespace meshrt

extern "C" void meshrt_random(meshrt_device* dev, int32_t kind, int64_t seed, int32_t dtype,
                              const meshrt_layout* layout, void* out) {
    using namespace meshrt;
    TraceScope scope(dev, "random");
    if (kind != MESHRT_NORMAL && kind != MESHRT_UNIFORM)
        fail(dev, "random: unknown kind " + std::to_string(kind));
    if (!dtype_valid(dtype))
        fail(dev, "random: unknown dtype " + std::to_string(dtype));
    Piece p = local_piece(dev, "random", layout);
    if (!p.member)
        return;
    const int64_t n = num_elements(p.local_shape);
    scope.arg("bytes", n * int64_t(dtype_size(dtype)));
    if (n == 0)
        return;
#ifdef MESHRT_HAVE_CUDA
    if (cuda::enabled(dev) && cuda::random(dev, kind, seed, dtype, p, out))
        return; // computed on the GPU
#endif
    const size_t rank = p.local_shape.size();
    const std::vector<int64_t> gstride = row_major_strides(p.global_shape);
    // Walk the piece row-major; `g` is the global linear index of the current row start.
    std::vector<int64_t> idx(rank, 0);
    int64_t g = 0;
    for (size_t d = 0; d < rank; ++d)
        g += p.offset[d] * gstride[d];
    const int64_t row = rank ? p.local_shape[rank - 1] : 1;
    int64_t i = 0;
    for (;;) {
        for (int64_t j = 0; j < row; ++j, ++i) {
            const PhiloxCounter x = philox_for_index(seed, g + j);
            store(dtype, out, i, kind == MESHRT_UNIFORM ? philox_uniform(x) : philox_normal(x));
        }
        if (rank <= 1)
            return;
        size_t d = rank - 1;
        for (; d-- > 0;) {
            g += gstride[d];
            if (++idx[d] < p.local_shape[d])
                break;
            g -= gstride[d] * p.local_shape[d];
            idx[d] = 0;
        }
        if (d == size_t(-1))
            return;
    }
}

extern "C" void meshrt_permutation(meshrt_device* dev, int64_t seed, const meshrt_layout* layout,
                                   int64_t* out) {
    using namespace meshrt;
    TraceScope scope(dev, "permutation");
    Piece p = local_piece(dev, "permutation", layout);
    if (!p.member)
        return;
    if (p.global_shape.size() != 1)
        fail(dev, "permutation: a permutation is a vector");
    const int64_t n = p.global_shape[0];
    scope.arg("bytes", p.local_shape[0] * int64_t(sizeof(int64_t)));
    // Every device sorts the whole 0..n by 64-bit Philox keys (ties by index) and keeps
    // its piece: the same permutation on every mesh, layout and device count.
    std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const PhiloxCounter x = philox_for_index(seed, i);
        keyed[size_t(i)] = {uint64_t(x[0]) << 32 | x[1], i};
    }
    std::sort(keyed.begin(), keyed.end());
    for (int64_t i = 0; i < p.local_shape[0]; ++i)
        out[i] = keyed[size_t(p.offset[0] + i)].second;
}

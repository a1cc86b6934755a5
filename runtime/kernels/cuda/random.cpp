// meshrt_random on the GPU: the piece's values by the Philox kernel (kernels.cu), keyed
// by the global index exactly as src/random.cpp keys them.
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernels.h"
#include "src/dtype.h"
#include "src/tensor.h"

namespace meshrt::cuda {

bool random(meshrt_device* dev, int32_t kind, int64_t seed, int32_t dtype, const Piece& piece,
            void* out) {
    const size_t rank = piece.local_shape.size();
    if (rank > size_t(kernels::kMaxRank))
        return false;
    const int64_t n = num_elements(piece.local_shape);
    if (n == 0)
        return true;
    DeviceContext& c = context(dev);
    kernels::RandomParams p;
    p.rank = int32_t(rank);
    const std::vector<int64_t> gstride = row_major_strides(piece.global_shape);
    for (size_t d = 0; d < rank; ++d) {
        p.local_shape[d] = piece.local_shape[d];
        p.offset[d] = piece.offset[d];
        p.gstride[d] = gstride[d];
    }
    DeviceBuffer o(dev, c, out, size_t(n) * dtype_size(dtype), false, true);
    check(dev, kernels::random(kind, seed, dtype, p, o.get(), n, c.stream), "random: the kernel");
    o.finish();
    sync(dev, c, "random");
    return true;
}

} // namespace meshrt::cuda

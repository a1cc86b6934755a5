// copy_box (see tensor.h).
#include "src/tensor.h"

#include <cstring>

namespace meshrt {

void copy_box(size_t elem, std::span<const int64_t> box, const void* src,
              std::span<const int64_t> src_shape, std::span<const int64_t> src_start, void* dst,
              std::span<const int64_t> dst_shape, std::span<const int64_t> dst_start) {
    const size_t rank = box.size();
    if (num_elements(box) == 0)
        return;
    const char* s = static_cast<const char*>(src);
    char* d = static_cast<char*>(dst);
    if (rank == 0) {
        std::memcpy(d, s, elem);
        return;
    }
    std::vector<int64_t> ss = row_major_strides(src_shape), ds = row_major_strides(dst_shape);
    int64_t soff = 0, doff = 0;
    for (size_t i = 0; i < rank; ++i) {
        soff += src_start[i] * ss[i];
        doff += dst_start[i] * ds[i];
    }
    // Merge trailing dims: [k, rank) is contiguous in both arrays when every dim after k
    // is covered entirely by the box.
    size_t k = rank - 1;
    int64_t run = box[k];
    while (k > 0 && box[k] == src_shape[k] && box[k] == dst_shape[k]) {
        --k;
        run *= box[k];
    }
    const size_t run_bytes = size_t(run) * elem;
    // Odometer over dims [0, k).
    std::vector<int64_t> idx(k, 0);
    for (;;) {
        std::memcpy(d + size_t(doff) * elem, s + size_t(soff) * elem, run_bytes);
        size_t j = k;
        for (; j-- > 0;) {
            soff += ss[j];
            doff += ds[j];
            if (++idx[j] < box[j])
                break;
            soff -= ss[j] * box[j];
            doff -= ds[j] * box[j];
            idx[j] = 0;
        }
        if (j == size_t(-1))
            return;
    }
}

} // namespace meshrt

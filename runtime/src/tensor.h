// Dense row-major tensor helpers shared by kernels, collectives and I/O: element counts,
// strides, a hyper-rectangle copy between two arrays, and an uninitialised aligned
// scratch buffer. Nothing here fails the run; callers validate shapes first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>
#include <vector>

namespace meshrt {

inline int64_t num_elements(std::span<const int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

/// Row-major strides in elements.
inline std::vector<int64_t> row_major_strides(std::span<const int64_t> shape) {
    std::vector<int64_t> s(shape.size());
    int64_t acc = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        s[i] = acc;
        acc *= shape[i];
    }
    return s;
}

/// Copies the box of extents `box` at `src_start` in `src` (shape src_shape) to
/// `dst_start` in `dst` (shape dst_shape), elements of `elem` bytes. Trailing dims that
/// the box covers entirely in both arrays are merged, so the common cases (a slab along
/// the outermost split dim) are one memcpy or one per outer row.
void copy_box(size_t elem, std::span<const int64_t> box, const void* src,
              std::span<const int64_t> src_shape, std::span<const int64_t> src_start, void* dst,
              std::span<const int64_t> dst_shape, std::span<const int64_t> dst_start);

/// Uninitialised, 64-byte aligned scratch memory (std::vector would zero it).
class Scratch {
public:
    Scratch() = default;
    explicit Scratch(size_t bytes) { resize(bytes); }
    void resize(size_t bytes) {
        size_t rounded = (bytes + 63) / 64 * 64;
        ptr_.reset(rounded ? static_cast<char*>(std::aligned_alloc(64, rounded)) : nullptr);
        if (rounded && !ptr_)
            throw std::bad_alloc();
        size_ = bytes;
    }
    template <class T = void> T* get() const { return reinterpret_cast<T*>(ptr_.get()); }
    size_t size() const { return size_; }

private:
    struct Free {
        void operator()(char* p) const { std::free(p); }
    };
    std::unique_ptr<char, Free> ptr_;
    size_t size_ = 0;
};

} // namespace meshrt

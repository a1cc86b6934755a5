// Meshes and layouts, the vocabulary of every typed IR: a mesh has named, ordered axes
// (major first), sizes and per-axis link costs; a layout says, per tensor dim, which mesh
// axes split it (major first), and which axes hold a pending sum (`partial`). Meshes are
// built from `mesh` items by sema (sema/mesh.h); consumed by the checker, the GIR, the
// cost model, the partitioner and code generation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>


namespace meshc::ir {

/// docs/language.md, "Cost model": an axis declared without a link gets 5 µs and 100 GB/s.
inline constexpr double kDefaultLatency = 5e-6;
inline constexpr double kDefaultBandwidth = 1e11;
/// Axes per mesh (name resolution reports E0302 beyond it): one dim can then be split
/// over all of them with an inline AxisList.
inline constexpr size_t kMaxMeshAxes = 15;

struct MeshAxis {
    std::string name;
    int64_t size = 1;
    double latency = kDefaultLatency;      // seconds per step
    double bandwidth = kDefaultBandwidth;  // bytes per second
};

/// A set of axes of one mesh, as a bit mask over their indices.
using AxisSet = uint64_t;
inline AxisSet axis_bit(size_t index) { return AxisSet{1} << index; }

struct Mesh {
    std::string name;
    std::vector<MeshAxis> axes;  // major -> minor

    std::optional<size_t> axis_index(std::string_view axis) const;
    int64_t device_count() const;
    /// Product of the sizes of `axes`.
    int64_t group_size(AxisSet axes) const;
    /// Axis names of a set in mesh order: "data, model".
    std::string axis_names(AxisSet axes) const;
};

/// The mesh axes splitting one dim, major first: a small list stored inline, since
/// every value's type holds one per dim and types are copied often.
class AxisList {
public:
    AxisList() = default;
    AxisList(std::initializer_list<uint8_t> axes) {
        for (uint8_t a : axes) push_back(a);
    }
    AxisList(const uint8_t* first, const uint8_t* last) {
        for (; first != last; ++first) push_back(*first);
    }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    void push_back(uint8_t axis) {
        if (size_ < kMaxMeshAxes) axes_[size_++] = axis;  // a type uses each axis once
    }
    void pop_back() { --size_; }
    uint8_t back() const { return axes_[size_ - 1]; }
    uint8_t operator[](size_t i) const { return axes_[i]; }
    void clear() { size_ = 0; }
    void resize(size_t n) {
        while (size_ < n && size_ < kMaxMeshAxes) axes_[size_++] = 0;
        if (n < size_) size_ = static_cast<uint8_t>(n);
    }
    const uint8_t* begin() const { return axes_; }
    const uint8_t* end() const { return axes_ + size_; }
    friend bool operator==(const AxisList& a, const AxisList& b) {
        return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
    }

private:
    uint8_t axes_[kMaxMeshAxes] = {};
    uint8_t size_ = 0;
};

struct Layout {
    /// Per tensor dim: the mesh axes splitting it, major first (empty: not split).
    std::vector<AxisList> dims;
    /// Axes over which the global value is the sum of the per-device values.
    AxisSet partial = 0;

    static Layout replicated(size_t rank) { return Layout{std::vector<AxisList>(rank), 0}; }
    AxisSet split_axes() const;
    bool is_replicated() const { return split_axes() == 0 && partial == 0; }
    /// Number of pieces dim `d` is split into on `mesh`.
    int64_t split_factor(const Mesh& mesh, size_t d) const;
    bool operator==(const Layout& other) const = default;
};

/// `{0: data, 2: (data2, model)} partial {x}` in the type syntax, keyed by position, or
/// by `dim_names[d]` where given and non-empty. `{}` for a replicated layout.
std::string layout_to_string(const Layout& layout, const Mesh& mesh,
                             const std::vector<std::string>& dim_names = {});

}  // namespace meshc::ir

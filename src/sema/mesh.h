// Meshes and layouts as the checker sees them: a mesh is a type-level value with named,
// ordered axes (major first), sizes and per-axis link costs; a layout says, per tensor
// dim, which mesh axes split it (major first), and which axes hold a pending sum
// (`partial`). Built from `mesh` items by mesh_from_item(); consumed by type inference,
// the cost model (cost_model.h) and `meshc explain`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "syntax/ast.h"

namespace meshc::sema {

/// LANGUAGE.md section 8: an axis declared without a link gets 5 µs and 100 GB/s.
inline constexpr double kDefaultLatency = 5e-6;
inline constexpr double kDefaultBandwidth = 1e11;
/// Axes per mesh (AxisSet is a 64-bit mask over axis indices).
inline constexpr size_t kMaxMeshAxes = 64;

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

/// A concrete mesh from its declaration (name resolution has checked it: distinct axes,
/// sizes >= 1, known link properties).
Mesh mesh_from_item(const ast::Item& item);

struct Layout {
    /// Per tensor dim: the mesh axes splitting it, major first (empty: not split).
    std::vector<std::vector<uint8_t>> dims;
    /// Axes over which the global value is the sum of the per-device values.
    AxisSet partial = 0;

    static Layout replicated(size_t rank) { return Layout{std::vector<std::vector<uint8_t>>(rank), 0}; }
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

}  // namespace meshc::sema

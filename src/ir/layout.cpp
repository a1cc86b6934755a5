// Meshes and layouts; see layout.h.
#include "ir/layout.h"

#include <fmt/format.h>

namespace meshc::ir {

std::optional<size_t> Mesh::axis_index(std::string_view axis) const {
    for (size_t i = 0; i < axes.size(); ++i) {
        if (axes[i].name == axis) return i;
    }
    return std::nullopt;
}

int64_t Mesh::device_count() const {
    int64_t n = 1;
    for (const MeshAxis& a : axes) n *= a.size;
    return n;
}

int64_t Mesh::group_size(AxisSet set) const {
    int64_t n = 1;
    for (size_t i = 0; i < axes.size(); ++i) {
        if (set & axis_bit(i)) n *= axes[i].size;
    }
    return n;
}

std::string Mesh::axis_names(AxisSet set) const {
    std::string out;
    for (size_t i = 0; i < axes.size(); ++i) {
        if (!(set & axis_bit(i))) continue;
        if (!out.empty()) out += ", ";
        out += axes[i].name;
    }
    return out;
}

AxisSet Layout::split_axes() const {
    AxisSet set = 0;
    for (const auto& d : dims) {
        for (uint8_t a : d) set |= axis_bit(a);
    }
    return set;
}

int64_t Layout::split_factor(const Mesh& mesh, size_t d) const {
    int64_t n = 1;
    for (uint8_t a : dims[d]) n *= mesh.axes[a].size;
    return n;
}

std::string layout_to_string(const Layout& layout, const Mesh& mesh,
                             const std::vector<std::string>& dim_names) {
    std::string out = "{";
    bool first = true;
    for (size_t d = 0; d < layout.dims.size(); ++d) {
        const auto& axes = layout.dims[d];
        if (axes.empty()) continue;
        if (!first) out += ", ";
        first = false;
        out += d < dim_names.size() && !dim_names[d].empty() ? dim_names[d] : std::to_string(d);
        out += ": ";
        // An index that is not an axis of the mesh (broken IR, shown by the verifier) is
        // printed `#i` rather than read out of range.
        auto name = [&](uint8_t a) { return a < mesh.axes.size() ? mesh.axes[a].name : "#" + std::to_string(a); };
        if (axes.size() == 1) {
            out += name(axes[0]);
        } else {
            out += "(";
            for (size_t i = 0; i < axes.size(); ++i) {
                if (i) out += ", ";
                out += name(axes[i]);
            }
            out += ")";
        }
    }
    out += "}";
    if (layout.partial) out += " partial {" + mesh.axis_names(layout.partial) + "}";
    return out;
}

}  // namespace meshc::ir

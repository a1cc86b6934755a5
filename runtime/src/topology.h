// The program's meshes and which device sits where: built once by meshrt_main from the
// meshrt_program the generated code passes; read by coordinates, groups (comm/group.h),
// layouts (layout.h) and --help.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "meshrt.h"

namespace meshrt {

struct MeshInfo {
    std::string name;
    std::vector<std::string> axis_names; // major -> minor
    std::vector<int64_t> axis_sizes;
    int64_t size = 1; // product of axis_sizes
};

class Topology {
public:
    Topology() = default;
    /// Checks the description (sizes positive, every mesh fits in ndevices); on a bad
    /// one returns false with *error set (a compiler bug: the generated main is static).
    bool init(const meshrt_program& program, std::string* error);

    int64_t ndevices() const { return ndevices_; }
    int32_t nmeshes() const { return int32_t(meshes_.size()); }
    const MeshInfo& mesh(int32_t m) const { return meshes_[size_t(m)]; }
    bool is_member(int64_t device, int32_t m) const { return device < meshes_[size_t(m)].size; }
    /// The device's coordinates on mesh m (row-major decomposition of its index, first
    /// axis major), or nullptr when the device is not part of that mesh.
    const int64_t* coords(int64_t device, int32_t m) const;
    /// Inverse of coords().
    int64_t device_at(int32_t m, std::span<const int64_t> coords) const;

private:
    std::vector<MeshInfo> meshes_;
    int64_t ndevices_ = 1;
    std::vector<std::vector<int64_t>> coords_; // [mesh][device * naxes + axis]
};

} // namespace meshrt

// Topology (see topology.h).
#include "src/topology.h"

namespace meshrt {

bool Topology::init(const meshrt_program& program, std::string* error) {
    meshes_.clear();
    coords_.clear();
    if (program.ndevices < 1) {
        *error = "the program runs on " + std::to_string(program.ndevices) + " devices";
        return false;
    }
    ndevices_ = program.ndevices;
    if (program.nmeshes < 0 || (program.nmeshes > 0 && !program.meshes)) {
        *error = "bad mesh table";
        return false;
    }
    for (int32_t m = 0; m < program.nmeshes; ++m) {
        const meshrt_mesh_desc& d = program.meshes[m];
        MeshInfo info;
        info.name = d.name ? d.name : "mesh" + std::to_string(m);
        if (d.naxes < 0 || (d.naxes > 0 && (!d.axis_sizes || !d.axis_names))) {
            *error = "mesh " + info.name + ": bad axis table";
            return false;
        }
        bool too_big = false;
        for (int32_t a = 0; a < d.naxes; ++a) {
            info.axis_names.push_back(d.axis_names[a] ? d.axis_names[a] : std::to_string(a));
            if (d.axis_sizes[a] < 1) {
                *error = "mesh " + info.name + ": axis " + info.axis_names.back() + " has size " +
                         std::to_string(d.axis_sizes[a]);
                return false;
            }
            info.axis_sizes.push_back(d.axis_sizes[a]);
            if (__builtin_mul_overflow(info.size, d.axis_sizes[a], &info.size) ||
                info.size > ndevices_) {
                too_big = true;
                break;
            }
        }
        if (too_big) {
            *error = "mesh " + info.name + " needs more devices than the program's " +
                     std::to_string(ndevices_);
            return false;
        }
        // Row-major decomposition: the last axis varies fastest.
        const size_t naxes = info.axis_sizes.size();
        std::vector<int64_t> table(size_t(info.size) * naxes);
        for (int64_t dev = 0; dev < info.size; ++dev) {
            int64_t rest = dev;
            for (size_t a = naxes; a-- > 0;) {
                table[size_t(dev) * naxes + a] = rest % info.axis_sizes[a];
                rest /= info.axis_sizes[a];
            }
        }
        meshes_.push_back(std::move(info));
        coords_.push_back(std::move(table));
    }
    return true;
}

const int64_t* Topology::coords(int64_t device, int32_t m) const {
    if (!is_member(device, m))
        return nullptr;
    return coords_[size_t(m)].data() + size_t(device) * meshes_[size_t(m)].axis_sizes.size();
}

int64_t Topology::device_at(int32_t m, std::span<const int64_t> coords) const {
    const MeshInfo& info = meshes_[size_t(m)];
    int64_t d = 0;
    for (size_t a = 0; a < info.axis_sizes.size(); ++a)
        d = d * info.axis_sizes[a] + coords[a];
    return d;
}

} // namespace meshrt

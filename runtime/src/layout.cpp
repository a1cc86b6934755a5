// Pieces of laid-out tensors and their assembly on device 0 (see layout.h).
#include "src/layout.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "comm/comm.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/topology.h"

namespace meshrt {

Piece piece_at(meshrt_device* dev, const char* op, const Topology& topology,
               const meshrt_layout* layout, const int64_t* coords) {
    auto bad = [&](const std::string& why) { fail(dev, std::string(op) + ": bad layout: " + why); };
    if (!layout)
        bad("null");
    if (layout->rank < 0 || (layout->rank > 0 && !layout->global_shape))
        bad("rank " + std::to_string(layout->rank));
    Piece p;
    p.global_shape.assign(layout->global_shape, layout->global_shape + layout->rank);
    for (int64_t d : p.global_shape)
        if (d < 0)
            bad("negative extent");
    p.local_shape = p.global_shape;
    p.offset.assign(size_t(layout->rank), 0);
    if (layout->mesh == -1)
        return p;
    if (layout->mesh < -1 || layout->mesh >= topology.nmeshes())
        bad("no mesh " + std::to_string(layout->mesh));
    const MeshInfo& mesh = topology.mesh(layout->mesh);
    if (layout->rank > 0 && !layout->split_count)
        bad("no split counts");
    std::vector<bool> used(mesh.axis_sizes.size(), false);
    size_t next = 0;
    for (int32_t d = 0; d < layout->rank; ++d) {
        const int32_t k = layout->split_count[d];
        if (k < 0 || (k > 0 && !layout->split_axes))
            bad("split count " + std::to_string(k));
        int64_t parts = 1, piece_index = 0;
        for (int32_t j = 0; j < k; ++j) {
            const int32_t a = layout->split_axes[next++];
            if (a < 0 || size_t(a) >= mesh.axis_sizes.size() || used[size_t(a)])
                bad("split axis " + std::to_string(a) + " of mesh " + mesh.name);
            used[size_t(a)] = true;
            parts *= mesh.axis_sizes[size_t(a)];
            if (coords)
                piece_index = piece_index * mesh.axis_sizes[size_t(a)] + coords[a];
        }
        if (p.global_shape[size_t(d)] % parts != 0)
            bad("dim " + std::to_string(d) + " of extent " +
                std::to_string(p.global_shape[size_t(d)]) + " split into " + std::to_string(parts) +
                " pieces");
        p.local_shape[size_t(d)] = p.global_shape[size_t(d)] / parts;
        p.offset[size_t(d)] = piece_index * p.local_shape[size_t(d)];
    }
    for (size_t a = 0; a < used.size(); ++a)
        if (used[a])
            p.split_axes.push_back(int32_t(a));
    return p;
}

Piece local_piece(meshrt_device* dev, const char* op, const meshrt_layout* layout) {
    Runtime& rt = runtime_of(dev, op);
    if (layout && layout->mesh >= 0 && layout->mesh < rt.topology.nmeshes() &&
        !rt.topology.is_member(dev->index, layout->mesh)) {
        Piece p = piece_at(dev, op, rt.topology, layout, nullptr);
        p.member = false;
        return p;
    }
    const int64_t* coords = layout && layout->mesh >= 0 && layout->mesh < rt.topology.nmeshes()
                                ? rt.topology.coords(dev->index, layout->mesh)
                                : nullptr;
    return piece_at(dev, op, rt.topology, layout, coords);
}

bool assemble_on_device0(meshrt_device* dev, const char* op, int32_t dtype,
                         const meshrt_layout* layout, const void* local, Scratch* global) {
    Runtime& rt = runtime_of(dev, op);
    const size_t elem = dtype_size(dtype);
    Piece piece = local_piece(dev, op, layout);
    const size_t global_bytes = size_t(num_elements(piece.global_shape)) * elem;
    if (layout->mesh == -1) { // replicated everywhere: device 0 already has it all
        if (dev->index != 0)
            return false;
        global->resize(global_bytes);
        if (global_bytes)
            std::memcpy(global->get(), local, global_bytes);
        return true;
    }
    if (!piece.member)
        return false;
    const int32_t m = layout->mesh;
    const MeshInfo& mesh = rt.topology.mesh(m);
    const int64_t* coords = rt.topology.coords(dev->index, m);
    // Only the representatives (coordinate 0 on every axis that splits nothing) take part:
    // they form the group over the splitting axes that contains device 0.
    for (size_t a = 0; a < mesh.axis_sizes.size(); ++a)
        if (coords[a] != 0 &&
            !std::binary_search(piece.split_axes.begin(), piece.split_axes.end(), int32_t(a)))
            return false;
    comm::GroupMember gm = rt.groups->lookup(dev, op, m, piece.split_axes);
    const int64_t piece_bytes = num_elements(piece.local_shape) * int64_t(elem);
    const int64_t n = gm.group->size();
    Scratch pieces;
    if (dev->index == 0)
        pieces.resize(size_t(n * piece_bytes));
    if (piece_bytes > 0)
        rt.comm->gather(dev, *gm.group, gm.rank, 0, local, piece_bytes, pieces.get());
    if (dev->index != 0)
        return false;
    global->resize(global_bytes);
    for (int64_t r = 0; r < n && piece_bytes > 0; ++r) {
        const int64_t member = gm.group->members[size_t(r)];
        Piece p = piece_at(dev, op, rt.topology, layout, rt.topology.coords(member, m));
        copy_box(elem, p.local_shape, pieces.get<char>() + r * piece_bytes, p.local_shape,
                 std::vector<int64_t>(p.local_shape.size(), 0), global->get(), p.global_shape,
                 p.offset);
    }
    return true;
}

} // namespace meshrt

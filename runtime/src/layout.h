// meshrt_layout made concrete: which block of the global tensor a device holds, and the
// assembly of a global value on device 0 (for save and print). Used by load, save,
// print and random.
#pragma once

#include <cstdint>
#include <vector>

#include "meshrt.h"
#include "src/tensor.h"

namespace meshrt {

class Topology;

struct Piece {
    bool member = true; // false: the device is not on the layout's mesh
    std::vector<int64_t> global_shape;
    std::vector<int64_t> local_shape; // == global_shape when replicated
    std::vector<int64_t> offset;      // where the piece starts in the global tensor
    /// Axes of the mesh that split some dim (ascending); devices differing only in the
    /// other axes hold copies.
    std::vector<int32_t> split_axes;
};

/// Checks the layout (a malformed one is a compiler bug: fails the run, naming `op`) and
/// returns the piece of the device with coordinates `coords` on the layout's mesh
/// (coords unused when the layout is replicated everywhere, mesh == -1).
Piece piece_at(meshrt_device* dev, const char* op, const Topology& topology,
               const meshrt_layout* layout, const int64_t* coords);
/// The calling device's piece.
Piece local_piece(meshrt_device* dev, const char* op, const meshrt_layout* layout);

/// Every device of the layout's mesh calls this with its piece; device 0 gets the global
/// value in *global and true, the others false. Only one device per distinct piece
/// (coordinate 0 on the axes splitting nothing) sends anything.
bool assemble_on_device0(meshrt_device* dev, const char* op, int32_t dtype,
                         const meshrt_layout* layout, const void* local, Scratch* global);

} // namespace meshrt

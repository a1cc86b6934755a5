// SPMD partitioning: typed global IR (GIR) -> local IR, the one program every mesh device
// runs. The local IR keeps the GIR's ops (one local meaning per op kind, below) and gives
// every value its per-device shape; each collective gets its device group (the mesh axes
// it runs over, in the order that numbers the group's members) and each local slice the
// axes whose coordinates pick the piece. Consumed by codegen/ and printed by
// `meshc build --emit=local`.
//
// Local meaning of each op (device d, coordinates c on the value's mesh):
//   elementwise, reduce, contract, reshape, broadcast, slice, concat, one_hot: the same
//     op on the local pieces (the checker only leaves splits these ops preserve);
//     reduce `mean` divides the local sum by the *global* count;
//   create/load: the piece of the global value at this device's offsets;
//   embedding: rows of this device's table piece, zeros for ids outside it (partial);
//   all_reduce / reduce_scatter / all_gather / all_to_all: the runtime collective over
//     `group` (members numbered mixed-radix over group axes, first major);
//   local_slice: piece mixed-radix(c[group axes]) of the local block along `dim`;
//   make_partial: for an axis that splits a dim of the operand, each device puts its
//     piece at its offset in zeros (the result is unsplit there); for an axis the operand
//     is replicated over, the value stays on devices at coordinate 0 and is zeros
//     elsewhere (so the pending sum equals the value);
//   place: a copy; leaving a mesh smaller than the program's device count, device 0's
//     value is broadcast to every device.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ir/gir.h"

namespace meshc::spmd {

struct LocalFunction {
    const ir::Function* global = nullptr;
    /// Per value (indexed like global->types): its per-device shape.
    std::vector<std::vector<int64_t>> shape;
};

struct LocalModule {
    const ir::Module* global = nullptr;
    std::vector<LocalFunction> functions;  // indexed like global->functions
    int32_t entry = -1;                    // `main`
    int64_t device_count = 1;              // the largest mesh's size
};

/// The per-device shape of a global type.
std::vector<int64_t> local_shape(const ir::Module& module, const ir::TensorType& type);

/// Device-group axes of a collective or local slice, in member-numbering order (first
/// major). The op's operand and result types decide the order: an all_gather takes the
/// split's minor axes off, a reduce_scatter / local_slice appends them, an all_to_all
/// moves the from-dim's minor axes to the end of the to-dim's list.
std::vector<int32_t> group_axes(const ir::Function& fn, const ir::Op& op);

/// Partitions every function. `entry` stays -1 when there is no `main`.
LocalModule partition(const ir::Module& module);

/// Local-IR invariants (per-device shapes consistent with each op's local meaning,
/// group axes valid); returns the problems (a problem is a compiler bug).
std::vector<std::string> verify(const LocalModule& module);

/// The textual form (`--emit=local`).
void print(std::ostream& out, const LocalModule& module);

}  // namespace meshc::spmd

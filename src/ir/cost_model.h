// The communication cost model of docs/language.md, "Sharding rules" and "Cost model": what each collective
// sends per device over a ring and what it costs in seconds. Consumed by coercion
// planning (ir/reshard_plan.h) (choosing the cheapest plan) and by `meshc explain`.
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/layout.h"

namespace meshc::ir {

enum class CollectiveKind : uint8_t { AllReduce, ReduceScatter, AllGather, AllToAll };
std::string_view collective_name(CollectiveKind kind);

/// The link of a group of axes: a collective over several axes at once runs over the
/// group of devices differing only in those axes, at the slowest link among them
/// (largest latency, smallest bandwidth).
struct Link {
    double latency;
    double bandwidth;
};
Link group_link(const Mesh& mesh, AxisSet axes);

struct CollectiveCost {
    int64_t group_size = 1;  // n: devices in one group
    int64_t steps = 0;       // ring steps: n-1, or 2(n-1) for all_reduce
    double bytes_sent = 0;   // per device: 2(n-1)/n·b for all_reduce, (n-1)/n·b otherwise
    double seconds = 0;      // steps·latency + bytes_sent/bandwidth
};

/// Cost of one collective over `axes` of `mesh`, where `buffer_bytes` is the per-device
/// buffer b on the unsplit side (the input of all_reduce and reduce_scatter, the output
/// of all_gather, either side of all_to_all), with splits over other axes applied.
CollectiveCost collective_cost(CollectiveKind kind, const Mesh& mesh, AxisSet axes,
                               double buffer_bytes);

}  // namespace meshc::ir

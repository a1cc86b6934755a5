// Collective costs; see cost_model.h.
#include "ir/cost_model.h"

#include <algorithm>
#include <limits>

namespace meshc::ir {

std::string_view collective_name(CollectiveKind kind) {
    switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::AllToAll: return "all_to_all";
    }
    return "collective";
}

Link group_link(const Mesh& mesh, AxisSet axes) {
    Link link{0, std::numeric_limits<double>::infinity()};
    for (size_t i = 0; i < mesh.axes.size(); ++i) {
        if (!(axes & axis_bit(i))) continue;
        link.latency = std::max(link.latency, mesh.axes[i].latency);
        link.bandwidth = std::min(link.bandwidth, mesh.axes[i].bandwidth);
    }
    return link;
}

CollectiveCost collective_cost(CollectiveKind kind, const Mesh& mesh, AxisSet axes,
                               double buffer_bytes) {
    CollectiveCost cost;
    cost.group_size = mesh.group_size(axes);
    int64_t n = cost.group_size;
    if (n <= 1) return cost;  // a group of one device moves nothing
    double fraction = static_cast<double>(n - 1) / static_cast<double>(n);
    if (kind == CollectiveKind::AllReduce) {
        cost.steps = 2 * (n - 1);
        cost.bytes_sent = 2 * fraction * buffer_bytes;
    } else {
        cost.steps = n - 1;
        cost.bytes_sent = fraction * buffer_bytes;
    }
    Link link = group_link(mesh, axes);
    cost.seconds = static_cast<double>(cost.steps) * link.latency + cost.bytes_sent / link.bandwidth;
    return cost;
}

}  // namespace meshc::ir

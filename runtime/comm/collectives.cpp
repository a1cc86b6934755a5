// The collectives of the C ABI: validate the arguments (a mismatch is a compiler bug and
// fails the run), find the caller's group, trace, and hand over to the run's handler.
#include <string>

#include "comm/comm.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/tensor.h"

namespace meshrt::comm {
namespace {

struct Call {
    meshrt_device* dev;
    Runtime* rt;
    GroupMember member;
};

Call begin(meshrt_device* dev, const char* op, int32_t mesh, int32_t naxes, const int32_t* axes) {
    Runtime& rt = runtime_of(dev, op);
    if (naxes < 0 || (naxes > 0 && !axes))
        fail(dev, std::string(op) + ": bad axis list");
    GroupMember m = rt.groups->lookup(dev, op, mesh, std::span<const int32_t>(axes, size_t(naxes)));
    return Call{dev, &rt, m};
}

size_t check_dtype(meshrt_device* dev, const char* op, int32_t dtype) {
    size_t elem = dtype_size(dtype);
    if (elem == 0)
        fail(dev, std::string(op) + ": unknown dtype " + std::to_string(dtype));
    return elem;
}

void check_op(meshrt_device* dev, const char* what, int32_t op) {
    if (op != MESHRT_SUM && op != MESHRT_MAX)
        fail(dev, std::string(what) + ": unknown reduce op " + std::to_string(op));
}

std::span<const int64_t> check_shape(meshrt_device* dev, const char* op, int32_t rank,
                                     const int64_t* shape) {
    if (rank < 0 || (rank > 0 && !shape))
        fail(dev, std::string(op) + ": bad shape");
    for (int32_t d = 0; d < rank; ++d)
        if (shape[d] < 0)
            fail(dev, std::string(op) + ": negative extent in the shape");
    return {shape, size_t(rank)};
}

void check_dim(meshrt_device* dev, const char* op, int32_t dim, int32_t rank) {
    if (dim < 0 || dim >= rank)
        fail(dev, std::string(op) + ": dim " + std::to_string(dim) + " of a rank-" +
                      std::to_string(rank) + " tensor");
}

/// "model" or "data,model": the group's axes by name, for the trace.
std::string axes_label(const Runtime& rt, const Group& g) {
    if (g.mesh < 0)
        return "all";
    std::string s;
    for (int32_t a : g.axes) {
        if (!s.empty())
            s += ',';
        s += rt.topology.mesh(g.mesh).axis_names[size_t(a)];
    }
    return s;
}

void trace_args(TraceScope& scope, const Call& c, int64_t bytes) {
    if (!scope.active())
        return;
    scope.arg("bytes", bytes);
    scope.arg("group", c.member.group->size());
    scope.arg("over", axes_label(*c.rt, *c.member.group));
    scope.at_site();
}

} // namespace
} // namespace meshrt::comm

using namespace meshrt;
using namespace meshrt::comm;

extern "C" {

void meshrt_comm_site(meshrt_device* dev, const char* site) { dev->comm_site = site; }

void meshrt_all_reduce(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                       int32_t dtype, int32_t op, const void* in, void* out, int64_t count) {
    TraceScope scope(dev, "all_reduce");
    const size_t elem = check_dtype(dev, "all_reduce", dtype);
    check_op(dev, "all_reduce", op);
    if (count < 0)
        fail(dev, "all_reduce: negative count");
    Call c = begin(dev, "all_reduce", mesh, naxes, axes);
    trace_args(scope, c, count * int64_t(elem));
    if (count == 0)
        return; // every member has the same count: nobody waits
    c.rt->comm->all_reduce(dev, *c.member.group, c.member.rank, dtype, op, in, out, count);
}

void meshrt_all_gather(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                       int32_t dtype, const void* in, void* out, int32_t rank,
                       const int64_t* in_shape, int32_t dim) {
    TraceScope scope(dev, "all_gather");
    const size_t elem = check_dtype(dev, "all_gather", dtype);
    auto shape = check_shape(dev, "all_gather", rank, in_shape);
    check_dim(dev, "all_gather", dim, rank);
    Call c = begin(dev, "all_gather", mesh, naxes, axes);
    // b of the cost model: the unsplit side, here the gathered output.
    trace_args(scope, c, num_elements(shape) * int64_t(elem) * c.member.group->size());
    if (num_elements(shape) == 0)
        return;
    c.rt->comm->all_gather(dev, *c.member.group, c.member.rank, dtype, in, out, shape, dim);
}

void meshrt_reduce_scatter(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                           int32_t dtype, int32_t op, const void* in, void* out, int32_t rank,
                           const int64_t* in_shape, int32_t dim) {
    TraceScope scope(dev, "reduce_scatter");
    const size_t elem = check_dtype(dev, "reduce_scatter", dtype);
    check_op(dev, "reduce_scatter", op);
    auto shape = check_shape(dev, "reduce_scatter", rank, in_shape);
    check_dim(dev, "reduce_scatter", dim, rank);
    Call c = begin(dev, "reduce_scatter", mesh, naxes, axes);
    const int64_t n = c.member.group->size();
    if (shape[size_t(dim)] % n != 0)
        fail(dev, "reduce_scatter: dim " + std::to_string(dim) + " of " +
                      type_string(dtype, {shape.begin(), shape.end()}) +
                      " is not divisible by the group size " + std::to_string(n));
    trace_args(scope, c, num_elements(shape) * int64_t(elem));
    if (num_elements(shape) == 0)
        return;
    c.rt->comm->reduce_scatter(dev, *c.member.group, c.member.rank, dtype, op, in, out, shape, dim);
}

void meshrt_all_to_all(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                       int32_t dtype, const void* in, void* out, int32_t rank,
                       const int64_t* in_shape, int32_t from_dim, int32_t to_dim) {
    TraceScope scope(dev, "all_to_all");
    const size_t elem = check_dtype(dev, "all_to_all", dtype);
    auto shape = check_shape(dev, "all_to_all", rank, in_shape);
    check_dim(dev, "all_to_all", from_dim, rank);
    check_dim(dev, "all_to_all", to_dim, rank);
    if (from_dim == to_dim)
        fail(dev, "all_to_all: from_dim and to_dim are both " + std::to_string(to_dim));
    Call c = begin(dev, "all_to_all", mesh, naxes, axes);
    const int64_t n = c.member.group->size();
    if (shape[size_t(to_dim)] % n != 0)
        fail(dev, "all_to_all: dim " + std::to_string(to_dim) + " of " +
                      type_string(dtype, {shape.begin(), shape.end()}) +
                      " is not divisible by the group size " + std::to_string(n));
    trace_args(scope, c, num_elements(shape) * int64_t(elem));
    if (num_elements(shape) == 0)
        return;
    c.rt->comm->all_to_all(dev, *c.member.group, c.member.rank, dtype, in, out, shape, from_dim,
                           to_dim);
}

void meshrt_barrier(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes) {
    TraceScope scope(dev, "barrier");
    Call c = begin(dev, "barrier", mesh, naxes, axes);
    trace_args(scope, c, 0);
    c.rt->comm->barrier(dev, *c.member.group, c.member.rank);
}

void meshrt_broadcast_all(meshrt_device* dev, void* buf, int64_t bytes) {
    TraceScope scope(dev, "broadcast_all");
    Runtime& rt = runtime_of(dev, "broadcast_all");
    if (bytes < 0)
        fail(dev, "broadcast_all: negative size");
    GroupMember m = rt.groups->world(dev);
    if (scope.active()) {
        scope.arg("bytes", bytes);
        scope.arg("group", m.group->size());
    }
    if (bytes == 0)
        return;
    rt.comm->broadcast(dev, *m.group, m.rank, 0, buf, bytes);
}

} // extern "C"

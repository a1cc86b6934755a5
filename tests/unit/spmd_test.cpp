// Unit tests for SPMD partitioning (src/spmd/): per-device shapes from layouts, the
// device group (and member order) of each collective and local slice, and the local-IR
// verifier, on ops built by hand with the figures worked out from docs/language.md, "Sharding rules".
#include <catch2/catch.hpp>

#include "ir/gir.h"
#include "spmd/spmd.h"

using namespace meshc;
using namespace meshc::ir;

namespace {

Mesh cube() {
    Mesh mesh;
    mesh.name = "Cube";
    mesh.axes = {ir::MeshAxis{"a", 2}, ir::MeshAxis{"b", 3}, ir::MeshAxis{"c", 4}};
    return mesh;
}

TensorType tensor(std::vector<int64_t> shape, std::vector<std::vector<uint8_t>> dims, AxisSet partial = 0) {
    TensorType t;
    t.shape = std::move(shape);
    t.mesh = 0;
    for (const auto& d : dims) t.layout.dims.emplace_back(d.data(), d.data() + d.size());
    t.layout.partial = partial;
    return t;
}

Op unary(OpKind kind, ValueId in, ValueId out, AxisSet axes, int32_t dim, int32_t dim2 = -1) {
    Op op{kind};
    op.operands = {in};
    op.results = {out};
    op.axes = axes;
    op.dim = dim;
    op.dim2 = dim2;
    return op;
}

}  // namespace

TEST_CASE("local shapes divide each dim by the sizes of the axes that split it", "[spmd]") {
    Module m;
    m.meshes.push_back(cube());
    CHECK(spmd::local_shape(m, tensor({24, 8}, {{0, 1}, {2}})) == std::vector<int64_t>{4, 2});
    CHECK(spmd::local_shape(m, tensor({24, 8}, {{}, {}}, ir::axis_bit(1))) == std::vector<int64_t>{24, 8});
    TensorType unplaced = tensor({5}, {{}});
    unplaced.mesh = -1;
    CHECK(spmd::local_shape(m, unplaced) == std::vector<int64_t>{5});
}

TEST_CASE("device groups are ordered like the split they take or give", "[spmd]") {
    Function fn;
    // all_gather over c of a dim split (a, c): the group is the minor axis c.
    ValueId x = fn.add_value(tensor({16, 4}, {{0, 2}, {}}));
    ValueId g = fn.add_value(tensor({16, 4}, {{0}, {}}));
    CHECK(spmd::group_axes(fn, unary(OpKind::AllGather, x, g, ir::axis_bit(2), 0)) == std::vector<int32_t>{2});
    // reduce_scatter / local_slice append axes in the result's order (c before b here).
    ValueId p = fn.add_value(tensor({24, 4}, {{}, {}}, ir::axis_bit(1) | ir::axis_bit(2)));
    ValueId s = fn.add_value(tensor({24, 4}, {{2, 1}, {}}));
    CHECK(spmd::group_axes(fn, unary(OpKind::ReduceScatter, p, s, ir::axis_bit(1) | ir::axis_bit(2), 0)) ==
          std::vector<int32_t>{2, 1});
    // all_to_all moves the from-dim's minor axes to the to-dim.
    ValueId t0 = fn.add_value(tensor({8, 8}, {{0, 1}, {}}));
    ValueId t1 = fn.add_value(tensor({8, 8}, {{0}, {1}}));
    CHECK(spmd::group_axes(fn, unary(OpKind::AllToAll, t0, t1, ir::axis_bit(1), 0, 1)) == std::vector<int32_t>{1});
    // all_reduce and make_partial: the axes in mesh order.
    ValueId r = fn.add_value(tensor({4}, {{}}));
    CHECK(spmd::group_axes(fn, unary(OpKind::AllReduce, p, r, ir::axis_bit(2) | ir::axis_bit(0), -1)) ==
          std::vector<int32_t>{0, 2});
}

TEST_CASE("the local-IR verifier checks each op's local shapes", "[spmd]") {
    Module m;
    m.meshes.push_back(cube());
    Function fn;
    fn.name = "f";
    ValueId x = fn.add_value(tensor({16, 4}, {{2}, {}}));   // local [4, 4]
    ValueId g = fn.add_value(tensor({16, 4}, {{}, {}}));    // local [16, 4]
    fn.ops.push_back(unary(OpKind::AllGather, x, g, ir::axis_bit(2), 0));
    m.functions.push_back(fn);
    CHECK(spmd::verify(spmd::partition(m)).empty());

    // A gather whose result keeps the split is inconsistent: caught, not miscompiled.
    Function bad = fn;
    bad.types[g] = tensor({16, 4}, {{1}, {}});
    m.functions[0] = bad;
    CHECK_FALSE(spmd::verify(spmd::partition(m)).empty());
}

TEST_CASE("partition finds main and the device count of the largest mesh", "[spmd]") {
    Module m;
    m.meshes.push_back(cube());
    Mesh small;
    small.name = "Two";
    small.axes = {ir::MeshAxis{"x", 2}};
    m.meshes.push_back(small);
    Function f;
    f.name = "main";
    m.functions.push_back(f);
    auto local = spmd::partition(m);
    CHECK(local.entry == 0);
    CHECK(local.device_count == 24);
}

// Unit tests for meshes, layouts and the collective cost model (docs/language.md, "Sharding rules" and "Cost model"),
// against figures worked out by hand from the coercion table of docs/language.md.
#include <catch2/catch.hpp>

#include "ir/cost_model.h"
#include "sema/mesh.h"
#include "syntax/parser.h"

using namespace meshc;
using namespace meshc::sema;

namespace {

Mesh parse_mesh(const std::string& text) {
    SourceManager sm;
    DiagnosticEngine diags;
    FileId f = sm.add_file("m.msh", text);
    auto module = syntax::parse_file(sm, f, diags);
    REQUIRE(!diags.has_errors());
    REQUIRE(module->items.size() == 1);
    return mesh_from_item(*module->items[0]);
}

}  // namespace

TEST_CASE("mesh from a declaration, with default and explicit links", "[mesh]") {
    Mesh net = parse_mesh("mesh Net = [data: 8 {latency: 5e-6, bandwidth: 25e9},\n"
                          "            model: 4 {latency: 1e-6, bandwidth: 3e11}, pipe: 2];");
    CHECK(net.name == "Net");
    REQUIRE(net.axes.size() == 3);
    CHECK(net.axes[0].bandwidth == 25e9);
    CHECK(net.axes[1].latency == 1e-6);
    CHECK(net.axes[2].latency == kDefaultLatency);
    CHECK(net.axes[2].bandwidth == kDefaultBandwidth);
    CHECK(net.device_count() == 64);
    CHECK(net.axis_index("model") == std::optional<size_t>(1));
    CHECK(!net.axis_index("nope"));
    CHECK(net.group_size(axis_bit(0) | axis_bit(1)) == 32);
    CHECK(net.axis_names(axis_bit(2) | axis_bit(0)) == "data, pipe");
}

TEST_CASE("the MLP of docs/language.md: all_reduce over model of a 256-byte buffer", "[cost]") {
    Mesh pod = parse_mesh("mesh Pod = [data: 2, model: 4];");
    // f32[8,16] with B split over data: the per-device buffer is 4x16 f32 = 256 bytes.
    CollectiveCost c = collective_cost(CollectiveKind::AllReduce, pod, axis_bit(1), 256);
    CHECK(c.group_size == 4);
    CHECK(c.steps == 6);
    CHECK(c.bytes_sent == Approx(384));  // 2(n-1)/n * b
    CHECK(c.seconds == Approx(6 * 5e-6 + 384 / 1e11));
}

TEST_CASE("reduce_scatter, all_gather and all_to_all send (n-1)/n of the buffer", "[cost]") {
    Mesh pod = parse_mesh("mesh Pod = [data: 2, model: 4];");
    for (CollectiveKind k : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                             CollectiveKind::AllToAll}) {
        CollectiveCost c = collective_cost(k, pod, axis_bit(1), 256);
        CHECK(c.steps == 3);
        CHECK(c.bytes_sent == Approx(192));
        CHECK(c.seconds == Approx(3 * 5e-6 + 192 / 1e11));
    }
}

TEST_CASE("a collective over several axes uses the slowest link", "[cost]") {
    Mesh net = parse_mesh("mesh Net = [data: 8 {latency: 5e-6, bandwidth: 25e9},\n"
                          "            model: 4 {latency: 1e-6, bandwidth: 3e11}];");
    Link link = group_link(net, axis_bit(0) | axis_bit(1));
    CHECK(link.latency == 5e-6);
    CHECK(link.bandwidth == 25e9);
    CollectiveCost c = collective_cost(CollectiveKind::AllReduce, net, axis_bit(0) | axis_bit(1), 1024);
    CHECK(c.group_size == 32);
    CHECK(c.steps == 62);
    CHECK(c.bytes_sent == Approx(2.0 * 31 / 32 * 1024));
    CHECK(c.seconds == Approx(62 * 5e-6 + 2.0 * 31 / 32 * 1024 / 25e9));
    // Over model alone the fast link applies.
    CollectiveCost m = collective_cost(CollectiveKind::AllGather, net, axis_bit(1), 1024);
    CHECK(m.seconds == Approx(3 * 1e-6 + 768 / 3e11));
}

TEST_CASE("a group of one device costs nothing", "[cost]") {
    Mesh one = parse_mesh("mesh One = [data: 1, model: 1];");
    CollectiveCost c = collective_cost(CollectiveKind::AllReduce, one, axis_bit(0) | axis_bit(1), 4096);
    CHECK(c.steps == 0);
    CHECK(c.bytes_sent == 0);
    CHECK(c.seconds == 0);
}

TEST_CASE("layouts print in the type syntax", "[mesh]") {
    Mesh pod = parse_mesh("mesh Pod = [data: 2, model: 4];");
    Layout l = Layout::replicated(3);
    CHECK(l.is_replicated());
    CHECK(layout_to_string(l, pod) == "{}");
    l.dims[0] = {0};
    l.dims[2] = {0, 1};  // not a valid type (data twice) but the printer shows what it holds
    l.partial = axis_bit(1);
    CHECK(layout_to_string(l, pod, {"B", "", "D"}) == "{B: data, D: (data, model)} partial {model}");
    l.dims[2] = {1};
    l.partial = 0;
    CHECK(l.split_axes() == (axis_bit(0) | axis_bit(1)));
    CHECK(l.split_factor(pod, 0) == 2);
    CHECK(l.split_factor(pod, 1) == 1);
    CHECK(layout_to_string(l, pod) == "{0: data, 2: model}");
}

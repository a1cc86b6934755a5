// The simulated mesh's collectives on a 2x4 mesh, a 3-device 1-D mesh and a program with
// two meshes, for every dtype, checked against references computed here from each
// device's input (groups recomputed independently of comm/group.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "src/dtype.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

namespace {

using Bytes = std::vector<unsigned char>;

void store(int32_t dtype, Bytes& buf, int64_t i, double v) {
    unsigned char* p = buf.data() + size_t(i) * dtype_size(dtype);
    switch (dtype) {
    case MESHRT_BOOL:
        *p = v != 0;
        break;
    case MESHRT_I32: {
        int32_t x = int32_t(v);
        std::memcpy(p, &x, 4);
        break;
    }
    case MESHRT_I64: {
        int64_t x = int64_t(v);
        std::memcpy(p, &x, 8);
        break;
    }
    case MESHRT_F16:
    case MESHRT_BF16: {
        uint16_t x = f32_to_half(dtype, float(v));
        std::memcpy(p, &x, 2);
        break;
    }
    case MESHRT_F32: {
        float x = float(v);
        std::memcpy(p, &x, 4);
        break;
    }
    case MESHRT_F64:
        std::memcpy(p, &v, 8);
        break;
    }
}

double load(int32_t dtype, const Bytes& buf, int64_t i) {
    return element_as_double(dtype, buf.data(), i);
}

/// Input element i of device d: small integers, so every sum is exact in every dtype.
double input_value(int32_t dtype, int64_t d, int64_t i) {
    if (dtype == MESHRT_BOOL)
        return (d + i) % 3 == 0;
    return double((d * 7 + i * 3) % 11 - 5);
}

Bytes make_input(int32_t dtype, int64_t d, int64_t n) {
    Bytes b(size_t(std::max<int64_t>(n, 1)) * dtype_size(dtype));
    for (int64_t i = 0; i < n; ++i)
        store(dtype, b, i, input_value(dtype, d, i));
    return b;
}

/// Members of device d's group over `axes` of a mesh with `sizes`, by rank.
std::vector<int64_t> group_of(int64_t d, const std::vector<int64_t>& sizes,
                              const std::vector<int32_t>& axes) {
    const size_t naxes = sizes.size();
    auto coords = [&](int64_t dev) {
        std::vector<int64_t> c(naxes);
        for (size_t a = naxes; a-- > 0;) {
            c[a] = dev % sizes[a];
            dev /= sizes[a];
        }
        return c;
    };
    int64_t total = 1;
    for (int64_t s : sizes)
        total *= s;
    std::vector<std::pair<int64_t, int64_t>> ranked; // (rank, device)
    const std::vector<int64_t> mine = coords(d);
    for (int64_t e = 0; e < total; ++e) {
        std::vector<int64_t> c = coords(e);
        bool same = true;
        for (size_t a = 0; a < naxes; ++a)
            if (std::find(axes.begin(), axes.end(), int32_t(a)) == axes.end() && c[a] != mine[a])
                same = false;
        if (!same)
            continue;
        int64_t rank = 0;
        for (int32_t a : axes)
            rank = rank * sizes[size_t(a)] + c[size_t(a)];
        ranked.emplace_back(rank, e);
    }
    std::sort(ranked.begin(), ranked.end());
    std::vector<int64_t> members;
    for (auto& [r, e] : ranked)
        members.push_back(e);
    return members;
}

int64_t rank_in(const std::vector<int64_t>& members, int64_t d) {
    return std::find(members.begin(), members.end(), d) - members.begin();
}

double combine(int32_t dtype, int32_t op, double a, double b) {
    if (dtype == MESHRT_BOOL)
        return (a != 0 || b != 0) ? 1 : 0;
    return op == MESHRT_SUM ? a + b : std::max(a, b);
}

const int32_t kAllDtypes[] = {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16,
                              MESHRT_BF16, MESHRT_F32, MESHRT_F64};

/// Runs every collective over `axes` of mesh 0 (sizes) of `prog` and checks the results.
void check_collectives(TestProgram& prog, const std::vector<int64_t>& sizes,
                       const std::vector<int32_t>& axes, int32_t dtype) {
    int64_t ndev = 1;
    for (int64_t s : sizes)
        ndev *= s;
    const int64_t n = int64_t(group_of(0, sizes, axes).size());
    INFO("dtype " << dtype_name(dtype) << ", " << axes.size() << " axes, group size " << n);
    const int64_t counts[] = {37, 1, 0, 5000};
    // Shapes for the dim-based collectives.
    const std::vector<int64_t> shape{2, 3 * n, 2 * n};
    const int64_t elems = 2 * 3 * n * 2 * n;
    struct Out {
        std::vector<Bytes> reduce_sum, reduce_max;
        Bytes gather[3], scatter[3], a2a[2];
    };
    std::vector<Out> out(static_cast<size_t>(ndev));
    const int32_t naxes = int32_t(axes.size());
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        if (d >= ndev)
            return;
        Out& o = out[size_t(d)];
        const size_t elem = dtype_size(dtype);
        for (int64_t count : counts) {
            Bytes in = make_input(dtype, d, count);
            Bytes s(std::max<size_t>(1, size_t(count)) * elem), m = s;
            meshrt_all_reduce(dev, 0, naxes, axes.data(), dtype, MESHRT_SUM, in.data(), s.data(),
                              count);
            meshrt_all_reduce(dev, 0, naxes, axes.data(), dtype, MESHRT_MAX, in.data(), m.data(),
                              count);
            o.reduce_sum.push_back(s);
            o.reduce_max.push_back(m);
        }
        Bytes in = make_input(dtype, d, elems);
        for (int32_t dim = 0; dim < 3; ++dim) {
            Bytes g(size_t(elems * n) * elem);
            meshrt_all_gather(dev, 0, naxes, axes.data(), dtype, in.data(), g.data(), 3,
                              shape.data(), dim);
            o.gather[dim] = g;
            if (shape[size_t(dim)] % n == 0) {
                Bytes r(size_t(elems / n) * elem);
                meshrt_reduce_scatter(dev, 0, naxes, axes.data(), dtype, MESHRT_SUM, in.data(),
                                      r.data(), 3, shape.data(), dim);
                o.scatter[dim] = r;
            }
        }
        for (int32_t from = 0; from < 2; ++from) {
            Bytes t(size_t(elems) * elem);
            meshrt_all_to_all(dev, 0, naxes, axes.data(), dtype, in.data(), t.data(), 3,
                              shape.data(), from, 2);
            o.a2a[from] = t;
        }
    }) == 0);

    for (int64_t d = 0; d < ndev; ++d) {
        const std::vector<int64_t> members = group_of(d, sizes, axes);
        const int64_t r = rank_in(members, d);
        INFO("device " << d << " rank " << r);
        for (size_t c = 0; c < std::size(counts); ++c) {
            for (int64_t i = 0; i < counts[c]; ++i) {
                double sum = input_value(dtype, members[0], i), mx = sum;
                for (size_t j = 1; j < members.size(); ++j) {
                    sum = combine(dtype, MESHRT_SUM, sum, input_value(dtype, members[j], i));
                    mx = combine(dtype, MESHRT_MAX, mx, input_value(dtype, members[j], i));
                }
                REQUIRE(load(dtype, out[size_t(d)].reduce_sum[c], i) == sum);
                REQUIRE(load(dtype, out[size_t(d)].reduce_max[c], i) == mx);
            }
        }
        // Element (x, y, z) of an input of `shape` is index (x * S1 + y) * S2 + z.
        const int64_t S1 = shape[1], S2 = shape[2];
        for (int32_t dim = 0; dim < 3; ++dim) {
            std::vector<int64_t> os = shape;
            os[size_t(dim)] *= n;
            for (int64_t x = 0; x < os[0]; ++x)
                for (int64_t y = 0; y < os[1]; ++y)
                    for (int64_t z = 0; z < os[2]; ++z) {
                        int64_t idx[3] = {x, y, z};
                        const int64_t src = idx[dim] / shape[size_t(dim)];
                        idx[dim] %= shape[size_t(dim)];
                        const double want = input_value(dtype, members[size_t(src)],
                                                        (idx[0] * S1 + idx[1]) * S2 + idx[2]);
                        REQUIRE(load(dtype, out[size_t(d)].gather[dim],
                                     (x * os[1] + y) * os[2] + z) == want);
                    }
            if (out[size_t(d)].scatter[dim].empty())
                continue;
            std::vector<int64_t> ss = shape;
            ss[size_t(dim)] /= n;
            for (int64_t x = 0; x < ss[0]; ++x)
                for (int64_t y = 0; y < ss[1]; ++y)
                    for (int64_t z = 0; z < ss[2]; ++z) {
                        int64_t idx[3] = {x, y, z};
                        idx[dim] += r * ss[size_t(dim)];
                        const int64_t i = (idx[0] * S1 + idx[1]) * S2 + idx[2];
                        double sum = input_value(dtype, members[0], i);
                        for (size_t j = 1; j < members.size(); ++j)
                            sum =
                                combine(dtype, MESHRT_SUM, sum, input_value(dtype, members[j], i));
                        REQUIRE(load(dtype, out[size_t(d)].scatter[dim],
                                     (x * ss[1] + y) * ss[2] + z) == sum);
                    }
        }
        for (int32_t from = 0; from < 2; ++from) {
            std::vector<int64_t> os = shape;
            os[size_t(from)] *= n;
            os[2] /= n;
            for (int64_t x = 0; x < os[0]; ++x)
                for (int64_t y = 0; y < os[1]; ++y)
                    for (int64_t z = 0; z < os[2]; ++z) {
                        int64_t idx[3] = {x, y, z};
                        const int64_t src = idx[from] / shape[size_t(from)]; // sender
                        idx[from] %= shape[size_t(from)];
                        idx[2] += r * os[2]; // the sender's piece for this member
                        const double want = input_value(dtype, members[size_t(src)],
                                                        (idx[0] * S1 + idx[1]) * S2 + idx[2]);
                        REQUIRE(load(dtype, out[size_t(d)].a2a[from],
                                     (x * os[1] + y) * os[2] + z) == want);
                    }
        }
    }
}

} // namespace

TEST_CASE("collectives on a 2x4 mesh for every group and dtype", "[comm]") {
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
    const std::vector<std::vector<int32_t>> groups = {{1}, {0}, {0, 1}, {1, 0}, {}};
    for (int32_t dtype : kAllDtypes)
        for (const auto& axes : groups)
            check_collectives(prog, {2, 4}, axes, dtype);
}

TEST_CASE("collectives on a 3-device 1-D mesh", "[comm]") {
    TestProgram prog({{"Ring", {"x"}, {3}}});
    for (int32_t dtype : kAllDtypes)
        check_collectives(prog, {3}, {0}, dtype);
}

TEST_CASE("collectives on the smaller of two meshes", "[comm]") {
    // Mesh 0 (3 devices) is checked while the program runs 8 (mesh 1 is 2x4): devices 3..7
    // are not on mesh 0 and sit the collectives out.
    TestProgram prog({{"Small", {"x"}, {3}}, {"Pod", {"data", "model"}, {2, 4}}});
    REQUIRE(prog.ndevices() == 8);
    check_collectives(prog, {3}, {0}, MESHRT_F32);
    std::vector<int64_t> coords(8 * 3);
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        coords[size_t(d * 3)] = meshrt_coord(dev, 0, 0);
        coords[size_t(d * 3 + 1)] = meshrt_coord(dev, 1, 0);
        coords[size_t(d * 3 + 2)] = meshrt_coord(dev, 1, 1);
    }) == 0);
    for (int64_t d = 0; d < 8; ++d) {
        CHECK(coords[size_t(d * 3)] == (d < 3 ? d : -1));
        CHECK(coords[size_t(d * 3 + 1)] == d / 4);
        CHECK(coords[size_t(d * 3 + 2)] == d % 4);
    }
}

TEST_CASE("broadcast_all and barrier", "[comm]") {
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
    std::vector<std::vector<int32_t>> got(8);
    std::atomic<int> arrived[2] = {0, 0};
    std::vector<int> seen(8, -1);
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        std::vector<int32_t> buf(100, int32_t(d == 0 ? 0 : -1));
        if (d == 0)
            for (int i = 0; i < 100; ++i)
                buf[size_t(i)] = i * i;
        meshrt_broadcast_all(dev, buf.data(), int64_t(buf.size() * 4));
        got[size_t(d)] = buf;
        // Barrier over model: every member has arrived before any member leaves.
        const int32_t model = 1;
        arrived[d / 4]++;
        meshrt_barrier(dev, 0, 1, &model);
        seen[size_t(d)] = arrived[d / 4].load();
    }) == 0);
    for (int64_t d = 0; d < 8; ++d) {
        for (int i = 0; i < 100; ++i)
            REQUIRE(got[size_t(d)][size_t(i)] == i * i);
        CHECK(seen[size_t(d)] == 4);
    }
}

TEST_CASE("many back-to-back collectives on overlapping groups", "[comm]") {
    // Reusing each group's rendezvous hundreds of times while other groups of the same
    // devices are in use: a missing barrier shows up as a wrong sum.
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
    std::atomic<int> wrong{0};
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        const int32_t axes[2][1] = {{0}, {1}};
        std::vector<float> in(257), out(257);
        for (int it = 0; it < 300; ++it) {
            const int g = it % 2;
            for (size_t i = 0; i < in.size(); ++i)
                in[i] = float(d + it + int64_t(i));
            meshrt_all_reduce(dev, 0, 1, axes[g], MESHRT_F32, MESHRT_SUM, in.data(), out.data(),
                              int64_t(in.size()));
            // The members' device indices: over data {m, m + 4}; over model {4q .. 4q + 3}.
            const double members_sum =
                g == 0 ? double(2 * (d % 4) + 4) : double(4 * (d / 4) * 4 + 6);
            for (size_t i = 0; i < in.size(); ++i) {
                const int64_t k = g == 0 ? 2 : 4;
                if (out[i] != float(members_sum + double(k * (it + int64_t(i)))))
                    wrong++;
            }
        }
    }) == 0);
    CHECK(wrong.load() == 0);
}

TEST_CASE("a collective from a device outside the mesh fails the run", "[comm]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Small", {"x"}, {2}}, {"Big", {"y"}, {4}}});
        prog.run([](meshrt_device* dev) {
            if (meshrt_device_index(dev) != 3)
                return;
            const int32_t axis = 0;
            float x = 0, y = 0;
            meshrt_all_reduce(dev, 0, 1, &axis, MESHRT_F32, MESHRT_SUM, &x, &y, 1);
        });
    });
    CHECK(r.exit_status == 1);
    CHECK(r.err == "error: device 3: all_reduce over mesh Small: this device is not on it\n");
}

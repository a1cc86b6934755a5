// meshrt-mpi-check: every collective of the C ABI, checked bitwise, under whichever
// handler runs it: `meshrt-mpi-check` (simulated mesh, 8 threads) or `mpirun -np 8
// meshrt-mpi-check --comm=mpi` (one process per device). Registered as the ctest
// runtime.mpi-check* (runtime/CMakeLists.txt). A mismatch fails the run naming the case.
//
// Every device can compute any device's input (a function of the device index), so each
// checks its own results against a reference computed here: reductions with reduce_into
// over the members' inputs in rank order (the contract both handlers keep, bitwise, for
// floating point too: the inputs are not small integers, so the order of the additions
// shows), data movement with copy_box. The one exception: a NaN matches any NaN. Which
// NaN an addition of two NaNs (or inf - inf) gives depends on the operand order the
// compiler picked for that loop (vector body or scalar tail), which is not specified. Groups are recomputed from coordinates, without
// comm/group.cpp. Meshes: Pod 2x4 and Cube 2x2x2 on all 8 devices, Hex 3x2 on the first
// 6 (devices 6 and 7 sit its collectives out), every axis subset in several orders.
// After `--`, scenarios of failure and of long runs (see main) for the tests of
// --comm-timeout and of multi-host runs (tests/multihost/).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/reduce.h"
#include "meshrt.h"
#include "src/dtype.h"
#include "src/runtime.h"
#include "src/tensor.h"
#include "tests/test_util.h"

#ifdef MESHRT_HAVE_MPI
#include "comm/mpi/mpi_handler.h"
#endif

using namespace meshrt;
using namespace meshrt::test;
using meshrt::comm::reduce_into;

namespace {

using Bytes = std::vector<unsigned char>;

struct MeshCase {
    const char* name;
    std::vector<int64_t> sizes;
    std::vector<std::vector<int32_t>> groups; // axis lists, major first
};

const std::vector<MeshCase> kMeshes = {
    {"Pod", {2, 4}, {{1}, {0}, {0, 1}, {1, 0}, {}}},
    {"Hex", {3, 2}, {{0}, {1}, {0, 1}, {1, 0}}},
    {"Cube", {2, 2, 2}, {{0}, {2}, {0, 2}, {2, 1}, {0, 1, 2}, {2, 0, 1}}},
};

const int32_t kDtypes[] = {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16,
                           MESHRT_BF16, MESHRT_F32, MESHRT_F64};

uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

/// Input element i of device d for case `salt`: floats of varied magnitude and sign
/// (sums round differently in another order), with a few NaNs, infinities and signed
/// zeros for max; integers spanning the whole range (sums wrap); bools.
Bytes make_input(int32_t dtype, int64_t d, int64_t n, uint64_t salt) {
    const size_t elem = dtype_size(dtype);
    Bytes b(size_t(std::max<int64_t>(n, 1)) * elem);
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t h = mix(salt * 1000003 + uint64_t(d) * 7919 + uint64_t(i));
        unsigned char* p = b.data() + size_t(i) * elem;
        double v = (double(int64_t(h % 2000001) - 1000000) / 997.0) * std::pow(10.0, int(h >> 60) % 5 - 2);
        switch (h % 97) {
        case 0:
            v = std::nan("");
            break;
        case 1:
            v = -0.0;
            break;
        case 2:
            v = 0.0;
            break;
        case 3:
            v = -INFINITY;
            break;
        default:
            break;
        }
        switch (dtype) {
        case MESHRT_BOOL:
            *p = (h >> 7) % 3 == 0;
            break;
        case MESHRT_I32: {
            const uint32_t x = uint32_t(h >> 11);
            std::memcpy(p, &x, 4);
            break;
        }
        case MESHRT_I64: {
            const uint64_t x = h * 0x2545f4914f6cdd1dull;
            std::memcpy(p, &x, 8);
            break;
        }
        case MESHRT_F16:
        case MESHRT_BF16: {
            const uint16_t x = f32_to_half(dtype, float(v));
            std::memcpy(p, &x, 2);
            break;
        }
        case MESHRT_F32: {
            const float x = float(v);
            std::memcpy(p, &x, 4);
            break;
        }
        default:
            std::memcpy(p, &v, 8);
        }
    }
    return b;
}

/// Members (device indices) of device d's group over `axes`, by rank; empty when d is
/// not on the mesh.
std::vector<int64_t> group_of(int64_t d, const std::vector<int64_t>& sizes,
                              const std::vector<int32_t>& axes) {
    int64_t total = 1;
    for (int64_t s : sizes)
        total *= s;
    if (d >= total)
        return {};
    std::vector<int64_t> c(sizes.size());
    for (size_t a = sizes.size(), rest = size_t(d); a-- > 0;) {
        c[a] = int64_t(rest % size_t(sizes[a]));
        rest /= size_t(sizes[a]);
    }
    int64_t n = 1;
    for (int32_t a : axes)
        n *= sizes[size_t(a)];
    std::vector<int64_t> members;
    for (int64_t r = 0; r < n; ++r) {
        int64_t rest = r;
        for (size_t j = axes.size(); j-- > 0;) {
            c[size_t(axes[j])] = rest % sizes[size_t(axes[j])];
            rest /= sizes[size_t(axes[j])];
        }
        int64_t dev = 0;
        for (size_t a = 0; a < sizes.size(); ++a)
            dev = dev * sizes[a] + c[a];
        members.push_back(dev);
    }
    return members;
}

class Checker {
public:
    Checker(meshrt_device* dev) : dev_(dev), d_(meshrt_device_index(dev)) {}

    void expect_same(const std::string& what, int32_t dtype, const Bytes& got, const Bytes& want,
                     int64_t n) {
        ++cases_;
        const size_t elem = dtype_size(dtype);
        for (int64_t i = 0; i < n; ++i)
            if (std::memcmp(got.data() + size_t(i) * elem, want.data() + size_t(i) * elem, elem) &&
                !(std::isnan(element_as_double(dtype, got.data(), i)) &&
                  std::isnan(element_as_double(dtype, want.data(), i)))) {
                const std::string msg = what + " (" + dtype_name(dtype) + "): element " +
                                        std::to_string(i) + " is " +
                                        std::to_string(element_as_double(dtype, got.data(), i)) +
                                        ", want " +
                                        std::to_string(element_as_double(dtype, want.data(), i));
                meshrt_fail(dev_, msg.c_str());
            }
    }

    meshrt_device* dev_;
    int64_t d_;
    int64_t cases_ = 0;
};

std::string label(const char* op, const MeshCase& m, const std::vector<int32_t>& axes) {
    std::string s = std::string(op) + " on " + m.name + " over (";
    for (size_t i = 0; i < axes.size(); ++i)
        s += (i ? "," : "") + std::to_string(axes[i]);
    return s + ")";
}

void check_group(Checker& ck, int32_t mesh, const MeshCase& m, const std::vector<int32_t>& axes) {
    meshrt_device* dev = ck.dev_;
    const std::vector<int64_t> members = group_of(ck.d_, m.sizes, axes);
    if (members.empty())
        return; // not on this mesh
    const int64_t n = int64_t(members.size());
    const int64_t rank = std::find(members.begin(), members.end(), ck.d_) - members.begin();
    const int32_t naxes = int32_t(axes.size());
    uint64_t salt = uint64_t(mesh) * 100 + uint64_t(axes.size()) * 10 + (axes.empty() ? 0 : axes[0]);

    for (int32_t dtype : kDtypes) {
        const size_t elem = dtype_size(dtype);
        // all_reduce: small (one all-gather), uneven and even slices, several segments.
        for (int64_t count : {int64_t(1), int64_t(5), int64_t(1000), int64_t(3001), int64_t(20011),
                              int64_t(24000)}) {
            for (int32_t op : {MESHRT_SUM, MESHRT_MAX}) {
                ++salt;
                std::vector<Bytes> ins;
                std::vector<const void*> ptrs;
                for (int64_t mb : members)
                    ins.push_back(make_input(dtype, mb, count, salt));
                for (const Bytes& b : ins)
                    ptrs.push_back(b.data());
                Bytes want(size_t(count) * elem), got(size_t(count) * elem);
                reduce_into(dtype, op, want.data(), ptrs.data(), n, count);
                meshrt_all_reduce(dev, mesh, naxes, axes.data(), dtype, op, ins[size_t(rank)].data(),
                                  got.data(), count);
                ck.expect_same(label(op == MESHRT_SUM ? "all_reduce sum" : "all_reduce max", m, axes) +
                                   " of " + std::to_string(count),
                               dtype, got, want, count);
            }
        }
        // Dim-based collectives on [2, 3n, 2n] and [3, 2, n] (every dim, outer > 1 too).
        const std::vector<std::vector<int64_t>> shapes = {{2, 3 * n, 2 * n}, {3, 2, n}, {4 * n}};
        for (const std::vector<int64_t>& shape : shapes) {
            const int32_t r = int32_t(shape.size());
            const int64_t elems = num_elements(shape);
            ++salt;
            std::vector<Bytes> ins;
            std::vector<const void*> ptrs;
            for (int64_t mb : members)
                ins.push_back(make_input(dtype, mb, elems, salt));
            for (const Bytes& b : ins)
                ptrs.push_back(b.data());
            const Bytes& in = ins[size_t(rank)];
            for (int32_t dim = 0; dim < r; ++dim) {
                // all_gather: member i's input at index i along dim.
                std::vector<int64_t> os = shape;
                os[size_t(dim)] *= n;
                Bytes want(size_t(elems * n) * elem), got(want.size());
                for (int64_t i = 0; i < n; ++i) {
                    std::vector<int64_t> at(size_t(r), 0);
                    at[size_t(dim)] = i * shape[size_t(dim)];
                    copy_box(elem, shape, ins[size_t(i)].data(), shape,
                             std::vector<int64_t>(size_t(r), 0), want.data(), os, at);
                }
                meshrt_all_gather(dev, mesh, naxes, axes.data(), dtype, in.data(), got.data(), r,
                                  shape.data(), dim);
                ck.expect_same(label("all_gather", m, axes) + " dim " + std::to_string(dim), dtype,
                               got, want, elems * n);
                if (shape[size_t(dim)] % n != 0)
                    continue;
                // reduce_scatter: piece `rank` along dim of the rank-order reduction.
                for (int32_t op : {MESHRT_SUM, MESHRT_MAX}) {
                    Bytes full(size_t(elems) * elem);
                    reduce_into(dtype, op, full.data(), ptrs.data(), n, elems);
                    std::vector<int64_t> ss = shape;
                    ss[size_t(dim)] /= n;
                    std::vector<int64_t> from(size_t(r), 0);
                    from[size_t(dim)] = rank * ss[size_t(dim)];
                    Bytes rs_want(size_t(elems / n) * elem), rs_got(rs_want.size());
                    copy_box(elem, ss, full.data(), shape, from, rs_want.data(), ss,
                             std::vector<int64_t>(size_t(r), 0));
                    meshrt_reduce_scatter(dev, mesh, naxes, axes.data(), dtype, op, in.data(),
                                          rs_got.data(), r, shape.data(), dim);
                    ck.expect_same(label(op == MESHRT_SUM ? "reduce_scatter sum" : "reduce_scatter max",
                                         m, axes) +
                                       " dim " + std::to_string(dim),
                                   dtype, rs_got, rs_want, elems / n);
                }
            }
            // all_to_all: every (from, to) pair whose to-dim divides.
            for (int32_t to = 0; to < r; ++to)
                for (int32_t from = 0; from < r; ++from) {
                    if (from == to || shape[size_t(to)] % n != 0)
                        continue;
                    std::vector<int64_t> os = shape, box = shape;
                    os[size_t(from)] *= n;
                    os[size_t(to)] /= n;
                    box[size_t(to)] /= n;
                    Bytes want(size_t(elems) * elem), got(want.size());
                    for (int64_t i = 0; i < n; ++i) {
                        std::vector<int64_t> src(size_t(r), 0), dst(size_t(r), 0);
                        src[size_t(to)] = rank * box[size_t(to)];
                        dst[size_t(from)] = i * shape[size_t(from)];
                        copy_box(elem, box, ins[size_t(i)].data(), shape, src, want.data(), os, dst);
                    }
                    meshrt_all_to_all(dev, mesh, naxes, axes.data(), dtype, in.data(), got.data(), r,
                                      shape.data(), from, to);
                    ck.expect_same(label("all_to_all", m, axes) + " " + std::to_string(from) +
                                       "<-" + std::to_string(to),
                                   dtype, got, want, elems);
                }
        }
    }
    meshrt_barrier(dev, mesh, naxes, axes.data());
}

#ifdef MESHRT_HAVE_MPI
/// Blocks of more than INT_MAX bytes are one derived element of the right size and
/// extent (built only: nothing that large is sent).
void check_big_types(Checker& ck) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        return; // the simulated mesh
    auto expect = [&](const char* what, const comm::mpi::BlockType& t, int64_t size, int64_t extent) {
        ++ck.cases_;
        MPI_Count s = 0, lb = 0, ext = 0;
        MPI_Type_size_x(t.type(), &s);
        MPI_Type_get_extent_x(t.type(), &lb, &ext);
        if (t.count() != 1 || s != size || lb != 0 || ext != extent)
            meshrt_fail(ck.dev_, (std::string(what) + ": count " + std::to_string(t.count()) +
                                  ", size " + std::to_string(s) + ", extent " + std::to_string(ext))
                                     .c_str());
    };
    const int64_t big = (int64_t(3) << 30) + 5;
    expect("contiguous 3 GiB + 5", comm::mpi::BlockType::contiguous(ck.dev_, big), big, big);
    expect("contiguous 4 GiB", comm::mpi::BlockType::contiguous(ck.dev_, int64_t(4) << 30),
           int64_t(4) << 30, int64_t(4) << 30);
    expect("strided 3 x (2 GiB + 7)",
           comm::mpi::BlockType::strided(ck.dev_, 3, (int64_t(2) << 30) + 7, int64_t(9) << 30,
                                         (int64_t(2) << 30) + 7),
           3 * ((int64_t(2) << 30) + 7), (int64_t(2) << 30) + 7);
}
#endif

void run_checks(meshrt_device* dev) {
    Checker ck(dev);
#ifdef MESHRT_HAVE_MPI
    check_big_types(ck);
#endif
    for (size_t m = 0; m < kMeshes.size(); ++m)
        for (const std::vector<int32_t>& axes : kMeshes[m].groups)
            check_group(ck, int32_t(m), kMeshes[m], axes);
    // broadcast_all: device 0's bytes everywhere.
    std::vector<int64_t> buf(1001);
    for (size_t i = 0; i < buf.size(); ++i)
        buf[i] = ck.d_ == 0 ? int64_t(mix(i)) : -1;
    meshrt_broadcast_all(dev, buf.data(), int64_t(buf.size() * 8));
    for (size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != int64_t(mix(i)))
            meshrt_fail(dev, "broadcast_all: wrong bytes");
    ++ck.cases_;
    if (ck.d_ == 0) {
        std::printf("mpi-check: %lld checks passed on device 0\n", static_cast<long long>(ck.cases_));
        std::fflush(stdout);
    }
}

/// `-- abort-during-save DIR`: device 0 saves a 512 MiB replicated tensor as DIR/out.npy;
/// device 3 waits until device 0's process has a file in DIR open (the unnamed file
/// save writes first, or its named temporary), then fails the run. The run must end with
/// status 1 and leave DIR empty, whether the failure ends device 0's thread (simulated
/// mesh) or mpirun stops rank 0 with SIGTERM and, milliseconds later, SIGKILL in the
/// middle of its write (check_abort_during_save.sh runs this).
void abort_during_save(meshrt_device* dev, const std::string& dir) {
    const int64_t d = meshrt_device_index(dev);
    int64_t pid = getpid(); // device 0's, everywhere
    meshrt_broadcast_all(dev, &pid, sizeof pid);
    if (d == 3) {
        const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
        for (int i = 0; i < 60000; ++i) {
            if (DIR* dp = opendir(fds.c_str())) {
                bool writing = false;
                while (dirent* e = readdir(dp)) {
                    char target[4096];
                    const ssize_t len =
                        readlink((fds + "/" + e->d_name).c_str(), target, sizeof target - 1);
                    writing = writing || (len > 0 && std::string(target, size_t(len))
                                                          .starts_with(dir + "/"));
                }
                closedir(dp);
                if (writing)
                    meshrt_fail(dev, "stopping while device 0 saves");
            }
            usleep(500);
        }
        meshrt_fail(dev, "device 0 never opened a file in the output directory");
    }
    const int64_t n = int64_t(128) << 20;
    const int64_t shape[1] = {n};
    meshrt_layout replicated{-1, 1, shape, nullptr, nullptr};
    std::vector<float> data(d == 0 ? size_t(n) : 1, 1.5f);
    meshrt_save(dev, (dir + "/out.npy").c_str(), MESHRT_F32, &replicated, data.data());
    meshrt_fail(dev, "the save finished before device 3 stopped the run");
}

/// `-- stall D SECONDS`: every device joins an all_reduce over all of Pod; device D
/// first sleeps SECONDS. Run with a shorter --comm-timeout, the others must end the job
/// naming the collective, its source location (as compiled programs give it with
/// meshrt_comm_site), its group and device D as the one that did not answer.
void stall(meshrt_device* dev, int64_t who, int64_t seconds) {
    const int64_t d = meshrt_device_index(dev);
    float x = float(d), y = 0;
    const int32_t pod[2] = {0, 1};
    meshrt_all_reduce(dev, 0, 2, pod, MESHRT_F32, MESHRT_SUM, &x, &y, 1); // all joined
    if (d == who)
        sleep(unsigned(seconds));
    meshrt_comm_site(dev, "stall.msh:12:9");
    meshrt_all_reduce(dev, 0, 2, pod, MESHRT_F32, MESHRT_SUM, &x, &y, 1);
    meshrt_fail(dev, "the stalled all_reduce completed before the timeout");
}

/// `-- mismatch D`: device D joins an all_reduce over Pod's data axis where every other
/// device joins one over all of Pod (both groups were used once before by everyone):
/// under a short --comm-timeout every member answers the roll call, and the message
/// says the members do not make the same collectives and where device D waits.
void mismatch(meshrt_device* dev, int64_t who) {
    const int64_t d = meshrt_device_index(dev);
    float x = float(d), y = 0;
    const int32_t pod[2] = {0, 1}, data[1] = {0};
    meshrt_all_reduce(dev, 0, 2, pod, MESHRT_F32, MESHRT_SUM, &x, &y, 1);
    meshrt_all_reduce(dev, 0, 1, data, MESHRT_F32, MESHRT_SUM, &x, &y, 1);
    if (d == who)
        meshrt_all_reduce(dev, 0, 1, data, MESHRT_F32, MESHRT_SUM, &x, &y, 1);
    else
        meshrt_all_reduce(dev, 0, 2, pod, MESHRT_F32, MESHRT_SUM, &x, &y, 1);
    meshrt_fail(dev, "a mismatched collective completed");
}

/// `-- loop SECONDS`: all_reduce over Pod's model axis and data axis, then a 10 ms
/// sleep, for SECONDS seconds (a long run for the lost-host test; device 0 prints a line
/// per second). The sums are checked.
void loop(meshrt_device* dev, int64_t seconds) {
    const int64_t d = meshrt_device_index(dev);
    const int32_t model[1] = {1}, data[1] = {0};
    const auto start = std::chrono::steady_clock::now();
    int64_t printed = -1;
    for (int64_t i = 0;; ++i) {
        int64_t x[2] = {d, i}, y[2] = {0, 0};
        meshrt_all_reduce(dev, 0, 1, model, MESHRT_I64, MESHRT_SUM, x, y, 2);
        meshrt_all_reduce(dev, 0, 1, data, MESHRT_I64, MESHRT_SUM, y, x, 2);
        if (x[0] != 28 || x[1] != 8 * i)
            meshrt_fail(dev, "loop: wrong sums");
        const auto s = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
        // Every device decides the same way whether to go on: device 0's clock.
        int64_t go = s < seconds, all = 0;
        meshrt_broadcast_all(dev, &go, sizeof go);
        all = go;
        if (d == 0 && s != printed) {
            printed = s;
            std::printf("loop: %lld s, %lld rounds\n", static_cast<long long>(s),
                        static_cast<long long>(i + 1));
            std::fflush(stdout);
        }
        if (!all)
            break;
        usleep(10000);
    }
}

#ifdef MESHRT_HAVE_MPI
/// `-- bootstrap` (under mpirun only): the NCCL handler's bootstrap path across hosts
/// with a CPU stand-in for ncclGetUniqueId. For every group of the meshes, the member of
/// rank 0 makes a 128-byte blob (its device index and a per-run random part), the
/// others get it through MpiHandler::bootstrap_group, and every member checks, by
/// all_gather, that all of them hold the same bytes, made by the group's first member.
void bootstrap(meshrt_device* dev) {
    auto* mpi = dynamic_cast<comm::mpi::MpiHandler*>(dev->runtime->comm.get());
    if (!mpi)
        meshrt_fail(dev, "-- bootstrap runs under mpirun with --comm=mpi");
    const int64_t d = meshrt_device_index(dev);
    int64_t groups = 0;
    for (size_t m = 0; m < kMeshes.size(); ++m)
        for (const std::vector<int32_t>& axes : kMeshes[m].groups) {
            const std::vector<int64_t> members = group_of(d, kMeshes[m].sizes, axes);
            if (members.empty())
                continue;
            comm::GroupMember gm = dev->runtime->groups->lookup(
                dev, "bootstrap", int32_t(m), std::span<const int32_t>(axes));
            std::array<uint64_t, 16> blob{};
            const uint64_t salt = uint64_t(getpid()) * 1000003 + uint64_t(groups);
            std::unique_ptr<comm::GroupState> st =
                mpi->bootstrap_group(dev, *gm.group, blob.data(), int(sizeof blob), [&](void* p) {
                    auto* b = static_cast<uint64_t*>(p);
                    b[0] = uint64_t(d);
                    for (size_t i = 1; i < blob.size(); ++i)
                        b[i] = mix(salt + i);
                });
            const int64_t n = int64_t(members.size());
            std::vector<uint64_t> all(blob.size() * size_t(n));
            const int64_t shape[1] = {int64_t(blob.size())};
            meshrt_all_gather(dev, int32_t(m), int32_t(axes.size()), axes.data(), MESHRT_I64,
                              blob.data(), all.data(), 1, shape, 0);
            for (int64_t r = 0; r < n; ++r)
                if (std::memcmp(all.data() + size_t(r) * blob.size(), blob.data(), sizeof blob) ||
                    blob[0] != uint64_t(members[0]))
                    meshrt_fail(dev, (label("bootstrap", kMeshes[m], axes) + ": member " +
                                      std::to_string(r) + " holds other bytes")
                                         .c_str());
            ++groups;
        }
    if (d == 0) {
        std::printf("bootstrap: %lld groups checked on device 0\n", static_cast<long long>(groups));
        std::fflush(stdout);
    }
}
#endif

} // namespace

int main(int argc, char** argv) {
    std::vector<MeshSpec> specs = {{"Pod", {"data", "model"}, {2, 4}},
                                   {"Hex", {"r", "c"}, {3, 2}},
                                   {"Cube", {"a", "b", "c"}, {2, 2, 2}}};
    TestProgram prog(specs, "meshrt-mpi-check");
    std::vector<std::string> args(argv + 1, argv + argc);
    // meshrt_main ignores what follows `--`: the scenario to run instead of the checks.
    auto sep = std::find(args.begin(), args.end(), "--");
    if (args.end() - sep == 3 && sep[1] == "abort-during-save") {
        const std::string dir = sep[2];
        return prog.run([&](meshrt_device* dev) { abort_during_save(dev, dir); }, args);
    }
    auto number = [](const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); };
    if (args.end() - sep == 4 && sep[1] == "stall") {
        const int64_t who = number(sep[2]), seconds = number(sep[3]);
        return prog.run([&](meshrt_device* dev) { stall(dev, who, seconds); }, args);
    }
    if (args.end() - sep == 3 && sep[1] == "mismatch") {
        const int64_t who = number(sep[2]);
        return prog.run([&](meshrt_device* dev) { mismatch(dev, who); }, args);
    }
    if (args.end() - sep == 3 && sep[1] == "loop") {
        const int64_t seconds = number(sep[2]);
        return prog.run([&](meshrt_device* dev) { loop(dev, seconds); }, args);
    }
#ifdef MESHRT_HAVE_MPI
    if (args.end() - sep == 2 && sep[1] == "bootstrap")
        return prog.run(bootstrap, args);
#endif
    if (sep != args.end()) {
        std::fprintf(stderr, "usage: meshrt-mpi-check [runtime options] [-- abort-during-save DIR "
                             "| stall DEVICE SECONDS | mismatch DEVICE | loop SECONDS | "
                             "bootstrap]\n");
        return 2;
    }
    return prog.run(run_checks, args);
}

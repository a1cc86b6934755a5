// meshrt-cuda-check: the CUDA device (--device=cuda) and the NCCL handler (--comm=nccl)
// against the CPU runtime, on a machine with a GPU (built with -DMESHC_CUDA=ON, run by
// tests/gpu/run.sh; not a ctest, since CI has no GPU). Every check runs the same code
// through meshrt_main twice, on the CPU and on the GPU, and compares:
//   - f16/bf16 conversions and the rank-order reduction kernel: bitwise, directly;
//   - contractions: one-operand specs (the permute/sum kernel) bitwise; two-operand specs
//     (cuBLAS) within a few units of the output's rounding, every dtype, specs that read
//     in place, transposed, batched (merged and not), summed first, and permuted;
//   - random numbers on a 2x4 mesh in several layouts: uniform bitwise in every dtype,
//     normal bitwise in f32/f16/bf16 (the double formula differs only through libm's last
//     bit; mismatches are counted and printed) and within 2 ulps in f64;
//   - collectives under NCCL, on min(GPUs, 8) devices (one per GPU), against the
//     simulated mesh: bitwise except f32/f64 sums (NCCL's order); on a 1-GPU machine
//     the 1-device paths, and that an 8-device program is refused (status 2).
// Prints one line per group of checks and exits 0 when all passed, 1 on a mismatch, 77
// without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "comm/reduce.h"
#include "kernels/cuda/kernels.h"
#include "meshrt.h"
#include "src/dtype.h"
#include "src/tensor.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;
namespace kernels = meshrt::cuda::kernels;

namespace {

using Bytes = std::vector<unsigned char>;

int g_failures = 0;

void report(const std::string& what, int64_t cases, int64_t bad, const std::string& detail = "") {
    std::printf("%-58s %8lld cases  %s%s\n", what.c_str(), static_cast<long long>(cases),
                bad ? "FAIL" : "ok", detail.empty() ? "" : ("  " + detail).c_str());
    std::fflush(stdout);
    if (bad)
        ++g_failures;
}

uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

/// n elements of dtype: floats in [-1, 1) with some NaNs, infinities and signed zeros
/// when `specials`; integers over their whole range; bools 0/1.
Bytes make_data(int32_t dtype, int64_t n, uint64_t salt, bool specials) {
    const size_t elem = dtype_size(dtype);
    Bytes b(size_t(std::max<int64_t>(n, 1)) * elem);
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t h = mix(salt * 1000003 + uint64_t(i));
        double v = double(int64_t(h % 2000001) - 1000000) / 1000000.0;
        if (specials)
            switch (h % 61) {
            case 0:
                v = std::nan("");
                break;
            case 1:
                v = -0.0;
                break;
            case 2:
                v = INFINITY;
                break;
            default:
                break;
            }
        unsigned char* p = b.data() + size_t(i) * elem;
        switch (dtype) {
        case MESHRT_BOOL:
            *p = (h >> 9) & 1;
            break;
        case MESHRT_I32: {
            const uint32_t x = uint32_t(h >> 7);
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

int64_t count_different(const Bytes& a, const Bytes& b, size_t elem) {
    int64_t bad = 0;
    for (size_t i = 0; i + elem <= std::min(a.size(), b.size()); i += elem)
        bad += std::memcmp(a.data() + i, b.data() + i, elem) != 0;
    return bad + int64_t(a.size() != b.size());
}

/// Runs `body` on every device of `prog` with the runtime options `args`; what the
/// devices store in the returned map (under a lock) is the result.
using Results = std::map<std::string, Bytes>;
Results run_collect(TestProgram& prog, const std::vector<std::string>& args,
                    const std::function<void(meshrt_device*, Results&, std::mutex&)>& body) {
    Results results;
    std::mutex m;
    const int status = prog.run([&](meshrt_device* dev) { body(dev, results, m); }, args);
    if (status != 0) {
        std::printf("a run with");
        for (const std::string& a : args)
            std::printf(" %s", a.c_str());
        std::printf(" exited with status %d\n", status);
        ++g_failures;
    }
    return results;
}

/// Copies `bytes` into a fresh meshrt_alloc buffer (managed memory under --device=cuda).
void* device_copy(meshrt_device* dev, const Bytes& b) {
    void* p = meshrt_alloc(dev, int64_t(b.size()));
    std::memcpy(p, b.data(), b.size());
    return p;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1)
        parts.push_back(s.substr(start, at - start));
    parts.push_back(s.substr(start));
    return parts;
}

/// n elements of managed memory.
template <class T> T* managed(int64_t n) {
    void* p = nullptr;
    if (cudaMallocManaged(&p, size_t(n) * sizeof(T)) != cudaSuccess) {
        std::printf("cudaMallocManaged failed\n");
        std::exit(1);
    }
    return static_cast<T*>(p);
}

Bytes host_copy(const void* p, size_t bytes) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    return Bytes(c, c + bytes);
}

// ---------------------------------------------------------------- kernels directly

void check_conversions() {
    // Every half value to f32, and f32 values around every rounding boundary back.
    const int64_t n = 65536;
    uint16_t* h = managed<uint16_t>(n);
    float* f = managed<float>(n);
    uint16_t* back = managed<uint16_t>(n);
    int64_t cases = 0, bad = 0;
    for (int32_t dtype : {MESHRT_F16, MESHRT_BF16}) {
        for (int64_t i = 0; i < n; ++i)
            h[i] = uint16_t(i);
        kernels::halves_to_f32(dtype, h, f, n, nullptr);
        cudaDeviceSynchronize();
        for (int64_t i = 0; i < n; ++i, ++cases) {
            const float want = half_to_f32(dtype, uint16_t(i));
            bad += std::memcmp(&want, &f[i], 4) != 0;
        }
        // f32 bit patterns: random ones, and the neighbours of every half's midpoints.
        for (int64_t i = 0; i < n; ++i) {
            uint32_t bits = uint32_t(mix(uint64_t(i) + 77));
            if (i % 2)
                bits = (std::bit_cast<uint32_t>(half_to_f32(dtype, uint16_t(i / 2))) +
                        (dtype == MESHRT_F16 ? 0x1000u : 0x8000u)) +
                       uint32_t(int32_t(i % 5) - 2);
            f[i] = std::bit_cast<float>(bits);
        }
        kernels::f32_to_halves(dtype, f, back, n, nullptr);
        cudaDeviceSynchronize();
        for (int64_t i = 0; i < n; ++i, ++cases)
            bad += back[i] != f32_to_half(dtype, f[i]);
    }
    cudaFree(h);
    cudaFree(f);
    cudaFree(back);
    report("f16/bf16 <-> f32 conversions (bitwise)", cases, bad);
}

void check_reduce_kernel() {
    int64_t cases = 0, bad = 0;
    for (int32_t dtype :
         {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16, MESHRT_BF16, MESHRT_F32, MESHRT_F64})
        for (int32_t op : {MESHRT_SUM, MESHRT_MAX})
            for (int64_t n : {1, 2, 3, 8})
                for (int64_t count : {1, 7, 5000}) {
                    const size_t elem = dtype_size(dtype);
                    const Bytes in =
                        make_data(dtype, n * count, uint64_t(dtype * 100 + op * 10 + n), true);
                    unsigned char* din = managed<unsigned char>(int64_t(in.size()));
                    unsigned char* dout = managed<unsigned char>(count * int64_t(elem));
                    std::memcpy(din, in.data(), in.size());
                    kernels::reduce_slices(dtype, op, din, n, count, dout, count, nullptr);
                    cudaDeviceSynchronize();
                    std::vector<const void*> inputs;
                    for (int64_t k = 0; k < n; ++k)
                        inputs.push_back(in.data() + size_t(k * count) * elem);
                    Bytes want(size_t(count) * elem);
                    comm::reduce_into(dtype, op, want.data(), inputs.data(), n, count);
                    bad += count_different(host_copy(dout, want.size()), want, elem);
                    cases += count;
                    cudaFree(din);
                    cudaFree(dout);
                }
    report("reduce_slices kernel vs comm/reduce.h (bitwise)", cases, bad);
}

// ---------------------------------------------------------------- contractions

struct ContractCase {
    std::string spec;
    std::map<char, int64_t> extent;
};

std::vector<int64_t> shape_of(const std::string& letters, const std::map<char, int64_t>& ext) {
    std::vector<int64_t> s;
    for (char c : letters)
        s.push_back(ext.at(c));
    return s;
}

void check_contract() {
    const std::map<char, int64_t> small = {{'i', 5}, {'j', 7}, {'k', 3}, {'b', 4},
                                           {'a', 2}, {'x', 3}, {'c', 6}};
    const std::map<char, int64_t> big = {{'i', 96}, {'j', 128}, {'k', 80}, {'b', 3}, {'a', 2}};
    const std::vector<ContractCase> cases = {
        {"ij,jk->ik", small},    {"ij,kj->ik", small},       {"ji,jk->ik", small},
        {"ji,kj->ik", small},    {"ij,jk->ki", small},       {"bij,bjk->bik", small},
        {"ibj,bjk->bik", small}, {"abij,abjk->abik", small}, {"abij,bajk->abik", small},
        {"ij,jk->i", small},     {"ijx,jk->ik", small},      {"ij,j->i", small},
        {"i,i->", small},        {"i,j->ij", small},         {"bij,bjk->kib", small},
        {"ij,jk->ik", big},      {"bij,bkj->bik", big},      {"aij,ajk->ika", big},
        {"ab->ba", small},       {"abc->cab", small},        {"abc->b", small},
        {"abc->ac", small},      {"ij->ij", small},          {"ijx->", small},
    };
    int64_t cases_n = 0, bad = 0;
    std::string worst;
    for (int32_t dtype : {MESHRT_F32, MESHRT_F64, MESHRT_F16, MESHRT_BF16}) {
        const size_t elem = dtype_size(dtype);
        for (size_t ci = 0; ci < cases.size(); ++ci) {
            const ContractCase& cc = cases[ci];
            const size_t arrow = cc.spec.find("->");
            const std::string lhs = cc.spec.substr(0, arrow), out_l = cc.spec.substr(arrow + 2);
            const size_t comma = lhs.find(',');
            const bool binary = comma != std::string::npos;
            const std::string a_l = lhs.substr(0, comma), b_l = binary ? lhs.substr(comma + 1) : "";
            const auto sa = shape_of(a_l, cc.extent), sb = shape_of(b_l, cc.extent),
                       so = shape_of(out_l, cc.extent);
            const Bytes a = make_data(dtype, num_elements(sa), ci * 2 + 1, false);
            const Bytes b = make_data(dtype, num_elements(sb), ci * 2 + 2, false);
            const size_t out_bytes = size_t(num_elements(so)) * elem;
            TestProgram prog({{"One", {"d"}, {1}}}, "cuda-check");
            auto body = [&](meshrt_device* dev, Results& r, std::mutex& m) {
                void* da = device_copy(dev, a);
                void* db = binary ? device_copy(dev, b) : nullptr;
                void* dout = meshrt_alloc(dev, int64_t(out_bytes));
                meshrt_contract(dev, dtype, cc.spec.c_str(), da, int32_t(sa.size()), sa.data(), db,
                                int32_t(sb.size()), sb.data(), dout, int32_t(so.size()), so.data());
                std::lock_guard lock(m);
                r["out"] = host_copy(dout, out_bytes);
                meshrt_free(dev, da);
                meshrt_free(dev, db);
                meshrt_free(dev, dout);
            };
            const Bytes cpu = run_collect(prog, {}, body)["out"];
            const Bytes gpu = run_collect(prog, {"--device=cuda"}, body)["out"];
            const int64_t n = num_elements(so);
            cases_n += n;
            if (!binary) {
                const int64_t diff = count_different(cpu, gpu, elem);
                if (diff && worst.empty())
                    worst = cc.spec + " " + dtype_name(dtype) + ": " + std::to_string(diff) +
                            " elements differ";
                bad += diff;
                continue;
            }
            // Two operands: the products' summation order differs (cuBLAS), nothing else.
            double scale = 1e-30;
            for (int64_t i = 0; i < n; ++i)
                scale = std::max(scale, std::fabs(element_as_double(dtype, cpu.data(), i)));
            const double rtol = dtype == MESHRT_F64   ? 1e-12
                                : dtype == MESHRT_F32 ? 2e-5
                                : dtype == MESHRT_F16 ? 2e-3
                                                      : 1.6e-2;
            for (int64_t i = 0; i < n; ++i) {
                const double c = element_as_double(dtype, cpu.data(), i);
                const double g = element_as_double(dtype, gpu.data(), i);
                if (!(std::fabs(c - g) <= rtol * std::max(std::fabs(c), scale * 1e-2))) {
                    if (worst.empty())
                        worst = cc.spec + " " + dtype_name(dtype) + " element " +
                                std::to_string(i) + ": cpu " + std::to_string(c) + ", gpu " +
                                std::to_string(g);
                    ++bad;
                }
            }
        }
    }
    report("contractions (cuBLAS, permute/sum kernel) vs CPU", cases_n, bad, worst);
}

// ---------------------------------------------------------------- random numbers

void check_random() {
    struct LayoutCase {
        std::vector<int64_t> shape;
        std::vector<std::vector<int32_t>> splits;
    };
    const std::vector<LayoutCase> layouts = {
        {{16, 24}, {}},
        {{16, 24}, {{0}}},
        {{16, 24}, {{0}, {1}}},
        {{3, 8, 40}, {{}, {1, 0}}},
        {{}, {}},
        {{1024, 1024}, {{}, {1}}},
    };
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}}, "cuda-check");
    auto body = [&](meshrt_device* dev, Results& r, std::mutex& m) {
        const int64_t d = meshrt_device_index(dev);
        for (size_t li = 0; li < layouts.size(); ++li)
            for (int32_t kind : {MESHRT_UNIFORM, MESHRT_NORMAL})
                for (int32_t dtype : {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16, MESHRT_BF16,
                                      MESHRT_F32, MESHRT_F64}) {
                    if (li + 1 == layouts.size() && dtype != MESHRT_F32 && dtype != MESHRT_F64)
                        continue; // the big one: f32 and f64 only
                    Layout layout(0, layouts[li].shape, layouts[li].splits);
                    // The piece's size: the global one over the splitting axes.
                    int64_t n = num_elements(layouts[li].shape);
                    for (const auto& axes : layouts[li].splits)
                        for (int32_t a : axes)
                            n /= a == 0 ? 2 : 4;
                    const size_t bytes = size_t(n) * dtype_size(dtype);
                    void* out = meshrt_alloc(dev, int64_t(bytes));
                    meshrt_random(dev, kind, 1234567890123 + int64_t(li), dtype, layout.get(), out);
                    std::lock_guard lock(m);
                    r[std::to_string(li) + "/" + std::to_string(kind) + "/" +
                      std::to_string(dtype) + "/" + std::to_string(d)] = host_copy(out, bytes);
                    meshrt_free(dev, out);
                }
    };
    const Results cpu = run_collect(prog, {}, body);
    const Results gpu = run_collect(prog, {"--device=cuda"}, body);
    int64_t cases = 0, bad = 0, f64_cases = 0, f64_inexact = 0, f64_bad = 0;
    std::string detail;
    for (const auto& [key, want] : cpu) {
        auto it = gpu.find(key);
        const std::vector<std::string> f = split(key, '/'); // layout/kind/dtype/device
        const int kind = std::atoi(f[1].c_str());
        const int32_t dtype = std::atoi(f[2].c_str());
        const size_t elem = dtype_size(dtype);
        if (it == gpu.end()) {
            ++bad;
            continue;
        }
        const Bytes& got = it->second;
        if (dtype == MESHRT_F64 && kind == MESHRT_NORMAL) {
            for (size_t i = 0; i + 8 <= want.size(); i += 8, ++f64_cases) {
                int64_t x, y;
                std::memcpy(&x, want.data() + i, 8);
                std::memcpy(&y, got.data() + i, 8);
                f64_inexact += x != y;
                f64_bad += std::llabs(x - y) > 2;
            }
            continue;
        }
        const int64_t diff = count_different(want, got, elem);
        cases += int64_t(want.size() / elem);
        bad += diff;
        if (diff && detail.size() < 200)
            detail += key + ": " + std::to_string(diff) + " differ; ";
    }
    report("random uniform (all dtypes) and normal (f32/f16/bf16/ints): bitwise", cases, bad,
           detail);
    report("random normal f64: within 2 ulps", f64_cases, f64_bad,
           std::to_string(f64_inexact) + " not bitwise equal (libm's last bit)");
}

// ---------------------------------------------------------------- NCCL

/// An 8-device program under --comm=nccl on fewer than 8 GPUs is refused with status 2.
/// Runs before this process touches CUDA (a forked child cannot use CUDA after its
/// parent did).
void check_nccl_refusal() {
    ChildResult cr = run_in_child([] {
        TestProgram p({{"Pod", {"data", "model"}, {2, 4}}}, "cuda-check");
        std::fflush(stdout);
        std::_Exit(p.run([](meshrt_device*) {}, {"--device=cuda", "--comm=nccl"}));
    });
    const bool ok =
        cr.exit_status == 2 && cr.err.find("one mesh device per GPU") != std::string::npos;
    report("--comm=nccl with more devices than GPUs: status 2", 1, !ok, ok ? "" : cr.err);
}

void check_nccl(int gpus) {
    const int64_t nd = std::min(gpus, 8);
    // Collectives over the whole 1-D mesh (and, with 4 or more GPUs, over each axis of a
    // 2-D one): bitwise against the simulated mesh, except f32/f64 sums.
    std::vector<MeshSpec> specs = {{"Ring", {"x"}, {nd}}};
    if (nd >= 4)
        specs.push_back({"Grid", {"a", "b"}, {2, nd / 2}});
    TestProgram prog(specs, "cuda-check");
    const int32_t dtypes[] = {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16,
                              MESHRT_BF16, MESHRT_F32, MESHRT_F64};
    auto body = [&](meshrt_device* dev, Results& r, std::mutex& m) {
        const int64_t d = meshrt_device_index(dev);
        auto keep = [&](const std::string& key, const void* p, size_t bytes) {
            std::lock_guard lock(m);
            r[key + "/" + std::to_string(d)] = host_copy(p, bytes);
        };
        for (int32_t mesh = 0; mesh < int32_t(specs.size()); ++mesh) {
            if (meshrt_coord(dev, mesh, 0) < 0)
                continue; // not on this (smaller) mesh
            std::vector<std::vector<int32_t>> groups = {{0}};
            if (mesh == 1)
                groups = {{0}, {1}, {1, 0}};
            for (const auto& axes : groups) {
                int64_t n = 1;
                for (int32_t a : axes)
                    n *= specs[size_t(mesh)].sizes[size_t(a)];
                const std::string g = std::to_string(mesh) + ":" + std::to_string(axes.size()) +
                                      std::to_string(axes[0]);
                for (int32_t dtype : dtypes) {
                    const size_t elem = dtype_size(dtype);
                    const std::string t = g + "/" + dtype_name(dtype);
                    for (int32_t op : {MESHRT_SUM, MESHRT_MAX})
                        for (int64_t count : {int64_t(1), int64_t(1001), int64_t(70000)}) {
                            const Bytes in = make_data(dtype, count, uint64_t(d * 7 + count), true);
                            void* din = device_copy(dev, in);
                            void* dout = meshrt_alloc(dev, int64_t(count * int64_t(elem)));
                            meshrt_all_reduce(dev, mesh, int32_t(axes.size()), axes.data(), dtype,
                                              op, din, dout, count);
                            keep("all_reduce/" + t + "/" + std::to_string(op) + "/" +
                                     std::to_string(count),
                                 dout, size_t(count) * elem);
                            meshrt_free(dev, din);
                            meshrt_free(dev, dout);
                        }
                    // [6, 2n, 5]: gathers along each dim, scatters along dim 1, moves dims.
                    const std::vector<int64_t> shape = {6, 2 * n, 5};
                    const int64_t cnt = num_elements(shape);
                    const Bytes in = make_data(dtype, cnt, uint64_t(d * 13 + 5), true);
                    void* din = device_copy(dev, in);
                    void* dout = meshrt_alloc(dev, cnt * n * int64_t(elem));
                    for (int32_t dim = 0; dim < 3; ++dim) {
                        meshrt_all_gather(dev, mesh, int32_t(axes.size()), axes.data(), dtype, din,
                                          dout, 3, shape.data(), dim);
                        keep("all_gather/" + t + "/" + std::to_string(dim), dout,
                             size_t(cnt * n) * elem);
                    }
                    for (int32_t op : {MESHRT_SUM, MESHRT_MAX}) {
                        meshrt_reduce_scatter(dev, mesh, int32_t(axes.size()), axes.data(), dtype,
                                              op, din, dout, 3, shape.data(), 1);
                        keep("reduce_scatter/" + t + "/" + std::to_string(op), dout,
                             size_t(cnt / n) * elem);
                    }
                    for (auto [from, to] : {std::pair{0, 1}, std::pair{2, 1}}) {
                        meshrt_all_to_all(dev, mesh, int32_t(axes.size()), axes.data(), dtype, din,
                                          dout, 3, shape.data(), from, to);
                        keep("all_to_all/" + t + "/" + std::to_string(from), dout,
                             size_t(cnt) * elem);
                    }
                    meshrt_free(dev, din);
                    meshrt_free(dev, dout);
                }
                meshrt_barrier(dev, mesh, int32_t(axes.size()), axes.data());
            }
        }
        // broadcast_all, and print's gather to device 0 (through a host buffer).
        Bytes bc = make_data(MESHRT_I64, 100, uint64_t(d + 1), false);
        void* dbc = device_copy(dev, bc);
        meshrt_broadcast_all(dev, dbc, int64_t(bc.size()));
        keep("broadcast_all", dbc, bc.size());
        meshrt_free(dev, dbc);
    };
    const Results sim = run_collect(prog, {"--device=cuda"}, body);
    const Results nccl = run_collect(prog, {"--device=cuda", "--comm=nccl"}, body);
    int64_t cases = 0, bad = 0, approx_bad = 0;
    std::string detail;
    for (const auto& [key, want] : sim) {
        auto it = nccl.find(key);
        if (it == nccl.end()) {
            ++bad;
            continue;
        }
        // op/group/dtype/.../device; all_reduce and reduce_scatter have the op next.
        const std::vector<std::string> f = split(key, '/');
        const bool reduces = f[0] == "all_reduce" || f[0] == "reduce_scatter";
        const bool float_sum =
            reduces && (f[2] == "f32" || f[2] == "f64") && f[3] == std::to_string(MESHRT_SUM);
        if (float_sum) {
            const int32_t dtype = f[2] == "f32" ? MESHRT_F32 : MESHRT_F64;
            const double tol = dtype == MESHRT_F32 ? 1e-5 : 1e-13;
            // NCCL's summation order: compare as numbers.
            for (int64_t i = 0; i < int64_t(want.size() / dtype_size(dtype)); ++i) {
                const double x = element_as_double(dtype, want.data(), i);
                const double y = element_as_double(dtype, it->second.data(), i);
                const bool same = (std::isnan(x) && std::isnan(y)) || x == y ||
                                  std::fabs(x - y) <= tol * (1 + std::fabs(x));
                approx_bad += !same;
            }
            continue;
        }
        const int64_t diff = want == it->second ? 0 : 1;
        ++cases;
        bad += diff;
        if (diff && detail.size() < 300)
            detail += key + "; ";
    }
    report("NCCL collectives on " + std::to_string(nd) + " GPU(s) vs the simulated mesh (bitwise)",
           cases, bad, detail);
    report("NCCL f32/f64 sums (NCCL's order) vs the simulated mesh", int64_t(sim.size()),
           approx_bad);
}

} // namespace

int main() {
    // The GPU count from a child: a forked child cannot use CUDA once its parent has, and
    // check_nccl_refusal forks one that must.
    const ChildResult probe = run_in_child([] {
        int n = 0;
        std::printf("%d", cudaGetDeviceCount(&n) == cudaSuccess ? n : 0);
    });
    const int gpus = std::atoi(probe.out.c_str());
    if (gpus < 1) {
        std::printf("meshrt-cuda-check: no GPU, nothing checked\n");
        return 77;
    }
    if (gpus < 8)
        check_nccl_refusal();
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("meshrt-cuda-check: %d GPU(s), %s\n", gpus, prop.name);
    check_conversions();
    check_reduce_kernel();
    check_contract();
    check_random();
    check_nccl(gpus);
    std::printf("%s\n", g_failures ? "meshrt-cuda-check: FAILED" : "meshrt-cuda-check: all passed");
    return g_failures ? 1 : 0;
}

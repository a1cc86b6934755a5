// Reference kernels for tests/bench/backend/run_backend_bench.py, compiled by the driver
// in the same run as the Mesh programs they are compared with:
//
//     c++ -std=c++20 -O3 -march=native reference.cpp -I<openblas include> -o reference -lopenblas
//
// (-O3 so that the diagnostic `chain` loop vectorises as meshc's does; sgemm and memcpy
// are library code and do not depend on it.)
//
// Every mode does one untimed warm-up call, then ITERS timed calls, and prints one JSON
// object on stdout: {"mode": ..., "seconds": [t1, t2, ...], ...}.
//
// The references the targets are measured against (warm buffers, touched before):
//   reference sgemm N THREADS ITERS       cblas_sgemm, N x N x N f32, row-major, no
//                                         transposes, OpenBLAS limited to THREADS threads
//   reference copy BYTES ITERS            memcpy of BYTES (one thread)
//
// Diagnostics (where the time of a generated program goes):
//   reference sgemm_fresh N THREADS ITERS sgemm into an output in fresh pages (mmap'd
//                                         before each call, unmapped after)
//   reference copy_fresh BYTES ITERS      memcpy into a buffer allocated before each call
//                                         (aligned_alloc, as meshrt_alloc) and freed after
//   reference chain N ITERS               the benchmark's element-wise chain in C over N
//                                         f32, into a warm buffer
//   reference chain_fresh N ITERS         the same into a buffer allocated for each call
//   reference allreduce DEVICES COUNT ITERS
//   reference allreduce_fresh DEVICES COUNT ITERS
//                                         the simulated mesh's all_reduce algorithm
//                                         (runtime/comm/sim: one thread per device,
//                                         reduce-scatter then all-gather through shared
//                                         memory, barriers between the phases) on COUNT
//                                         f32 per device, into warm outputs or into outputs
//                                         allocated before each call and freed after; a
//                                         time is one call, barrier to barrier
//   reference info                        OpenBLAS's configuration string
#include <cblas.h>

#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_config(void);

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

float* alloc_floats(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        std::fprintf(stderr, "out of memory\n");
        std::exit(1);
    }
    return static_cast<float*>(p);
}

void fill(float* p, size_t n, unsigned seed) {
    // Cheap deterministic values in [0, 1): no denormals, no NaNs.
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        p[i] = float(s >> 8) * (1.0f / 16777216.0f);
    }
}

void print_result(const char* mode, const std::vector<double>& seconds, const std::string& extra) {
    std::printf("{\"mode\": \"%s\", \"seconds\": [", mode);
    for (size_t i = 0; i < seconds.size(); ++i)
        std::printf("%s%.9f", i ? ", " : "", seconds[i]);
    std::printf("]%s}\n", extra.c_str());
}

// The same chain as the Mesh program run_backend_bench.py generates (8 operations).
void chain(const float* __restrict x, const float* __restrict y, float* __restrict z, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        // min(max(x * 1.5 + y - x * y, 0.25) * 0.5 + 0.125, 2.0)
        const float a = x[i], b = y[i];
        z[i] = std::min(std::max(a * 1.5f + b - a * b, 0.25f) * 0.5f + 0.125f, 2.0f);
    }
}

// runtime/comm/reduce.cpp's f32 sum: tiles of 2048, the first input copied, the others added.
void reduce_sum(float* out, const float* const* in, int n, size_t count) {
    constexpr size_t kTile = 2048;
    for (size_t t = 0; t < count; t += kTile) {
        const size_t len = std::min(kTile, count - t);
        std::memcpy(out + t, in[0] + t, len * sizeof(float));
        for (int i = 1; i < n; ++i)
            for (size_t j = 0; j < len; ++j)
                out[t + j] += in[i][t + j];
    }
}

std::vector<double> allreduce(int n, size_t count, int iters, bool fresh) {
    std::vector<float*> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int d = 0; d < n; ++d) {
        in[size_t(d)] = alloc_floats(count);
        fill(in[size_t(d)], count, unsigned(10 + d));
        if (!fresh) {
            out[size_t(d)] = alloc_floats(count);
            std::memset(out[size_t(d)], 0, count * sizeof(float));
        }
    }
    std::barrier sync(n);
    std::vector<double> seconds;
    auto device = [&](int r) {
        const size_t base = count / size_t(n), extra = count % size_t(n);
        auto chunk = [&](size_t j) {
            const size_t b = j * base + std::min(j, extra);
            return std::make_pair(b, b + base + (j < extra ? 1 : 0));
        };
        for (int it = -1; it < iters; ++it) {
            sync.arrive_and_wait();
            const double t = now();
            if (fresh)
                out[size_t(r)] = alloc_floats(count);
            sync.arrive_and_wait();   // buffers published
            auto [b, e] = chunk(size_t(r));
            std::vector<const float*> ins(static_cast<size_t>(n));
            for (int i = 0; i < n; ++i)
                ins[size_t(i)] = in[size_t(i)] + b;
            reduce_sum(out[size_t(r)] + b, ins.data(), n, e - b);
            sync.arrive_and_wait();   // every chunk reduced
            for (int j = 0; j < n; ++j) {
                if (j == r)
                    continue;
                auto [jb, je] = chunk(size_t(j));
                std::memcpy(out[size_t(r)] + jb, out[size_t(j)] + jb, (je - jb) * sizeof(float));
            }
            sync.arrive_and_wait();   // no peer reads my output any more
            if (r == 0 && it >= 0)
                seconds.push_back(now() - t);
            if (fresh) {
                sync.arrive_and_wait();   // the output is the next value; freed later
                std::free(out[size_t(r)]);
            }
        }
    };
    std::vector<std::thread> threads;
    for (int d = 0; d < n; ++d)
        threads.emplace_back(device, d);
    for (auto& t : threads)
        t.join();
    return seconds;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: reference sgemm[_fresh] N THREADS ITERS | copy[_fresh] BYTES ITERS"
                             " | chain[_fresh] N ITERS | allreduce[_fresh] DEVICES COUNT ITERS | info\n");
        return 2;
    }
    const std::string mode = argv[1];
    if (mode == "info") {
        std::printf("{\"mode\": \"info\", \"openblas\": \"%s\"}\n", openblas_get_config());
        return 0;
    }
    std::vector<double> seconds;
    if ((mode == "sgemm" || mode == "sgemm_fresh") && argc == 5) {
        const int n = std::atoi(argv[2]), threads = std::atoi(argv[3]), iters = std::atoi(argv[4]);
        openblas_set_num_threads(threads);
        float* a = alloc_floats(size_t(n) * n);
        float* b = alloc_floats(size_t(n) * n);
        float* c = alloc_floats(size_t(n) * n);
        fill(a, size_t(n) * n, 1);
        fill(b, size_t(n) * n, 2);
        std::memset(c, 0, size_t(n) * n * sizeof(float));
        const size_t cbytes = size_t(n) * n * sizeof(float);
        for (int it = -1; it < iters; ++it) {
            float* out = c;
            if (mode == "sgemm_fresh") {
                void* p = mmap(nullptr, cbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) {
                    std::fprintf(stderr, "mmap failed\n");
                    return 1;
                }
                out = static_cast<float*>(p);
            }
            const double t = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                        out, n);
            if (it >= 0)
                seconds.push_back(now() - t);
            if (mode == "sgemm_fresh") {
                c[0] = out[size_t(n) * n / 2];
                munmap(out, cbytes);
            }
        }
        print_result(mode.c_str(), seconds,
                     ", \"flops\": " + std::to_string(2.0 * n * n * n) +
                         ", \"threads\": " + std::to_string(threads) +
                         ", \"check\": " + std::to_string(double(c[0])));
        return 0;
    }
    if ((mode == "copy" || mode == "copy_fresh") && argc == 4) {
        const size_t bytes = size_t(std::atoll(argv[2]));
        const int iters = std::atoi(argv[3]);
        const size_t n = bytes / sizeof(float);
        float* src = alloc_floats(n);
        fill(src, n, 3);
        float* dst = nullptr;
        if (mode == "copy") {
            dst = alloc_floats(n);
            std::memset(dst, 0, n * sizeof(float));
        }
        double check = 0;
        for (int it = -1; it < iters; ++it) {
            const double t = now();
            float* d = mode == "copy" ? dst : alloc_floats(n);
            std::memcpy(d, src, n * sizeof(float));
            check += d[n / 2];
            if (mode == "copy_fresh")
                std::free(d);
            if (it >= 0)
                seconds.push_back(now() - t);
        }
        print_result(mode.c_str(), seconds,
                     ", \"bytes_moved\": " + std::to_string(2.0 * double(n * sizeof(float))) +
                         ", \"check\": " + std::to_string(check));
        return 0;
    }
    if ((mode == "chain" || mode == "chain_fresh") && argc == 4) {
        const size_t n = size_t(std::atoll(argv[2]));
        const int iters = std::atoi(argv[3]);
        const bool fresh = mode == "chain_fresh";
        float* x = alloc_floats(n);
        float* y = alloc_floats(n);
        float* z = alloc_floats(n);
        fill(x, n, 4);
        fill(y, n, 5);
        std::memset(z, 0, n * sizeof(float));
        double check = 0;
        for (int it = -1; it < iters; ++it) {
            const double t = now();
            float* out = fresh ? alloc_floats(n) : z;
            chain(x, y, out, n);
            check += out[n / 2];
            if (fresh)
                std::free(out);
            if (it >= 0)
                seconds.push_back(now() - t);
        }
        print_result(mode.c_str(), seconds,
                     ", \"bytes_moved\": " + std::to_string(3.0 * double(n * sizeof(float))) +
                         ", \"check\": " + std::to_string(check));
        return 0;
    }
    if ((mode == "allreduce" || mode == "allreduce_fresh") && argc == 5) {
        const int n = std::atoi(argv[2]), iters = std::atoi(argv[4]);
        const size_t count = size_t(std::atoll(argv[3]));
        seconds = allreduce(n, count, iters, mode == "allreduce_fresh");
        print_result(mode.c_str(), seconds,
                     ", \"bytes_per_device\": " + std::to_string(count * sizeof(float)));
        return 0;
    }
    std::fprintf(stderr, "reference: bad arguments (run without arguments for usage)\n");
    return 2;
}

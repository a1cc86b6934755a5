// Reference kernels for tests/bench/backend/run_backend_bench.py, compiled by the driver
// in the same run as the Mesh programs it is compared with:
//
//     c++ -O3 -march=native reference.cpp -I<openblas include> -lopenblas -o reference
//
// (-O3 so that the diagnostic `chain` loop vectorises as meshc's does; sgemm and memcpy
// are library code and do not depend on it.)
//
// Every mode does one untimed warm-up, then ITERS timed repetitions of the same call on
// the same (already touched) buffers, and prints one JSON object on stdout:
//     {"mode": ..., "seconds": [t1, t2, ...], ...}
//
//   reference sgemm N THREADS ITERS    cblas_sgemm of N x N x N f32 (row-major, no
//                                      transposes), OpenBLAS limited to THREADS threads
//   reference copy BYTES ITERS         memcpy of BYTES into a warm buffer (one thread)
//   reference copy_fresh BYTES ITERS   the same into a buffer allocated for each call and
//                                      freed after (page faults included: the cost a
//                                      fresh 64-byte aligned allocation adds)
//   reference chain N ITERS            the element-wise chain of the Mesh benchmark in C
//                                      over N floats, into a warm buffer (diagnostic)
//   reference info                     OpenBLAS's configuration string
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: reference sgemm N THREADS ITERS | copy BYTES ITERS | "
                             "copy_fresh BYTES ITERS | chain N ITERS | info\n");
        return 2;
    }
    const std::string mode = argv[1];
    if (mode == "info") {
        std::printf("{\"mode\": \"info\", \"openblas\": \"%s\"}\n", openblas_get_config());
        return 0;
    }
    std::vector<double> seconds;
    if (mode == "sgemm" && argc == 5) {
        const int n = std::atoi(argv[2]), threads = std::atoi(argv[3]), iters = std::atoi(argv[4]);
        openblas_set_num_threads(threads);
        float* a = alloc_floats(size_t(n) * n);
        float* b = alloc_floats(size_t(n) * n);
        float* c = alloc_floats(size_t(n) * n);
        fill(a, size_t(n) * n, 1);
        fill(b, size_t(n) * n, 2);
        std::memset(c, 0, size_t(n) * n * sizeof(float));
        for (int it = -1; it < iters; ++it) {
            const double t = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                        c, n);
            if (it >= 0)
                seconds.push_back(now() - t);
        }
        print_result("sgemm", seconds,
                     ", \"flops\": " + std::to_string(2.0 * n * n * n) +
                         ", \"threads\": " + std::to_string(threads) +
                         ", \"check\": " + std::to_string(double(c[size_t(n) * n / 2])));
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
    if (mode == "chain" && argc == 4) {
        const size_t n = size_t(std::atoll(argv[2]));
        const int iters = std::atoi(argv[3]);
        float* x = alloc_floats(n);
        float* y = alloc_floats(n);
        float* z = alloc_floats(n);
        fill(x, n, 4);
        fill(y, n, 5);
        std::memset(z, 0, n * sizeof(float));
        for (int it = -1; it < iters; ++it) {
            const double t = now();
            chain(x, y, z, n);
            if (it >= 0)
                seconds.push_back(now() - t);
        }
        print_result("chain", seconds,
                     ", \"bytes_moved\": " + std::to_string(3.0 * double(n * sizeof(float))) +
                         ", \"check\": " + std::to_string(double(z[n / 2])));
        return 0;
    }
    std::fprintf(stderr, "reference: bad arguments (run without arguments for usage)\n");
    return 2;
}

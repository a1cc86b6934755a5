// sgemm GFLOP/s with OpenBLAS's kernels as chosen at start-up, then (--switch NAME) after
// the in-process switch the meshc runtime makes (runtime/src/blas_kernels.cpp):
// OPENBLAS_CORETYPE=NAME, gotoblas_dynamic_quit(), gotoblas_dynamic_init(), unset again.
// Links only OpenBLAS (docs/benchmarks.md, "BLAS kernels"):
//
//   g++ -O2 -std=c++20 -I/usr/include/x86_64-linux-gnu/openblas-pthread \
//       tests/bench/blas/sgemm_cores.cpp -o /tmp/sgemm_cores -lopenblas
//   OPENBLAS_CORETYPE=Prescott /tmp/sgemm_cores --switch Zen [--m 2048 --n 1024 --k 1024]
//       [--repeat 5] [--threads N]
//
// Prints the core and the best of --repeat sgemm calls (C = A B, row-major, M x K times
// K x N) before and after, and how long the switch took.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
}

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

double best_gflops(int M, int N, int K, int repeat, double* checksum) {
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N);
    for (size_t i = 0; i < A.size(); ++i)
        A[i] = float(int(i * 7 % 13) - 6) / 8;
    for (size_t i = 0; i < B.size(); ++i)
        B[i] = float(int(i * 5 % 11) - 5) / 8;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, A.data(), K, B.data(),
                N, 0.f, C.data(), N); // warm-up
    double best = 1e30;
    for (int r = 0; r < repeat; ++r) {
        const double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, A.data(), K,
                    B.data(), N, 0.f, C.data(), N);
        best = std::min(best, now_s() - t0);
    }
    double s = 0;
    for (float c : C)
        s += c;
    *checksum = s;
    return 2.0 * M * N * K / best / 1e9;
}

} // namespace

int main(int argc, char** argv) {
    int M = 2048, N = 1024, K = 1024, repeat = 5, threads = 0;
    const char* target = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        int v = std::atoi(argv[i + 1]);
        if (a == "--switch") target = argv[i + 1];
        else if (a == "--m") M = v;
        else if (a == "--n") N = v;
        else if (a == "--k") K = v;
        else if (a == "--repeat") repeat = v;
        else if (a == "--threads") threads = v;
        else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (threads > 0)
        openblas_set_num_threads(threads);
    std::printf("%s; %d BLAS threads; sgemm %d x %d x %d, best of %d\n", openblas_get_config(),
                openblas_get_num_threads(), M, N, K, repeat);
    double sum0 = 0, sum1 = 0;
    const char* env = std::getenv("OPENBLAS_CORETYPE");
    std::printf("  start-up core %-12s (OPENBLAS_CORETYPE=%s): %7.1f GFLOP/s\n",
                openblas_get_corename(), env ? env : "(unset)",
                best_gflops(M, N, K, repeat, &sum0));
    if (!target)
        return 0;
    const double t0 = now_s();
    setenv("OPENBLAS_CORETYPE", target, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    const double dt = now_s() - t0;
    std::printf("  switched to  %-12s in %.1f us:                 %7.1f GFLOP/s\n",
                openblas_get_corename(), dt * 1e6, best_gflops(M, N, K, repeat, &sum1));
    std::printf("  same products: %s\n", sum0 == sum1 ? "yes" : "no (checksums differ)");
    return sum0 == sum1 ? 0 : 1;
}

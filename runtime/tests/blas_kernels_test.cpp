// The choice of OpenBLAS's kernels (src/blas_kernels.h): the CPUID -> core mapping and
// the decision as pure functions, then, in child processes, the switch itself on this
// machine (OpenBLAS first set to Prescott, as 0.3.21 does on a CPU model it does not
// know) and a user's OPENBLAS_CORETYPE left alone.
#include <catch2/catch.hpp>

#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/blas_kernels.h"
#include "tests/test_util.h"

using namespace meshrt::blas;
using meshrt::test::ChildResult;
using meshrt::test::run_in_child;

namespace {

CpuFeatures avx512(bool bf16, bool amd = false) {
    CpuFeatures f;
    f.amd = amd;
    f.avx = f.fma = f.avx2 = f.avx512 = true;
    f.avx512_bf16 = bf16;
    return f;
}

CpuFeatures avx2(bool amd = false) {
    CpuFeatures f;
    f.amd = amd;
    f.avx = f.fma = f.avx2 = true;
    return f;
}

/// A 64 x 48 x 80 sgemm against a plain loop: whichever kernels are in use compute it.
bool sgemm_right() {
    const int M = 64, N = 48, K = 80;
    std::vector<float> A(M * K), B(K * N), C(M * N, 0.f);
    for (int i = 0; i < M * K; ++i)
        A[size_t(i)] = float((i * 7) % 13) - 6.f;
    for (int i = 0; i < K * N; ++i)
        B[size_t(i)] = float((i * 5) % 11) - 5.f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, A.data(), K, B.data(),
                N, 0.f, C.data(), N);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float ref = 0;
            for (int k = 0; k < K; ++k)
                ref += A[size_t(i * K + k)] * B[size_t(k * N + j)];
            if (C[size_t(i * N + j)] != ref) // small integers: exact in any order
                return false;
        }
    return true;
}

/// In a child: OpenBLAS on its Prescott kernels with OPENBLAS_CORETYPE unset, as 0.3.21
/// leaves a CPU model it does not know; false (and a line the parent recognises) when
/// this OpenBLAS cannot re-initialise.
bool start_on_prescott() {
    unsetenv("OPENBLAS_CORETYPE");
    if (!reinit_with_coretype("Prescott")) {
        std::printf("no gotoblas_dynamic_init\n");
        return false;
    }
    return true;
}

/// In the parent: whether the child could not re-initialise OpenBLAS (a warning, no test).
bool fixed_kernels(const ChildResult& r) {
    if (r.out != "no gotoblas_dynamic_init\n") return false;
    WARN("this OpenBLAS is not a DYNAMIC_ARCH build: its kernels are fixed");
    return true;
}

} // namespace

TEST_CASE("CPU features map to OpenBLAS cores", "[blas]") {
    CHECK(best_core(avx512(true)) == "Cooperlake"); // Sapphire/Emerald Rapids, Zen 4
    CHECK(best_core(avx512(false)) == "SkylakeX");  // Skylake-SP, Cascade Lake, Ice Lake
    CHECK(best_core(avx512(true, true)) == "Cooperlake");
    CHECK(best_core(avx2()) == "Haswell");
    CHECK(best_core(avx2(true)) == "Zen");
    CpuFeatures no_fma = avx2();
    no_fma.fma = false;
    CHECK(best_core(no_fma) == "Sandybridge");
    CpuFeatures only_avx;
    only_avx.avx = true;
    CHECK(best_core(only_avx) == "Sandybridge");
    CHECK(best_core(CpuFeatures{}) == ""); // SSE only, or not x86: left to OpenBLAS

    CHECK(core_level("Prescott") == 0);
    CHECK(core_level("prescott") == 0);
    CHECK(core_level("Nehalem") == 0);
    CHECK(core_level("Core2") == 0);
    CHECK(core_level("Sandybridge") == 1);
    CHECK(core_level("Haswell") == 2);
    CHECK(core_level("ZEN") == 2);
    CHECK(core_level("SkylakeX") == 3);
    CHECK(core_level("Cooperlake") == 3);
    CHECK(core_level("Excavator") == -1); // recognised by OpenBLAS: never replaced
    CHECK(core_level("SapphireRapids") == -1);
    CHECK(core_level("Unknown") == -1);
    CHECK(core_level("NEOVERSEN1") == -1);
    CHECK(core_level("") == -1);
}

TEST_CASE("a core below the CPU's is replaced, never the user's", "[blas]") {
    // Emerald Rapids (family 6, model 0xCF) on OpenBLAS 0.3.21: Prescott.
    CHECK(core_to_select(nullptr, "Prescott", avx512(true)) == "Cooperlake");
    CHECK(core_to_select(nullptr, "Prescott", avx512(false)) == "SkylakeX");
    CHECK(core_to_select(nullptr, "Prescott", avx2()) == "Haswell"); // e.g. Raptor Lake
    CHECK(core_to_select(nullptr, "Haswell", avx512(false)) == "SkylakeX");
    CHECK(core_to_select(nullptr, "Sandybridge", avx2(true)) == "Zen");
    // The user's OPENBLAS_CORETYPE, whatever it says (even empty), is kept.
    CHECK(core_to_select("Prescott", "Prescott", avx512(true)) == "");
    CHECK(core_to_select("", "Prescott", avx512(true)) == "");
    CHECK(core_to_select("Haswell", "Haswell", avx512(false)) == "");
    // OpenBLAS's choice at the CPU's level, or one meshrt does not rank, stays.
    CHECK(core_to_select(nullptr, "SkylakeX", avx512(true)) == "");
    CHECK(core_to_select(nullptr, "Cooperlake", avx512(true)) == "");
    CHECK(core_to_select(nullptr, "Zen", avx2(true)) == "");
    CHECK(core_to_select(nullptr, "Haswell", avx2(true)) == "");
    CHECK(core_to_select(nullptr, "Excavator", avx2(true)) == "");
    CHECK(core_to_select(nullptr, "Unknown", avx512(true)) == "");
    CHECK(core_to_select(nullptr, "", avx512(true)) == ""); // no openblas_get_corename
    CHECK(core_to_select(nullptr, "Prescott", CpuFeatures{}) == "");
}

TEST_CASE("describe names the library, the kernels and who chose them", "[blas]") {
    BlasKernels k;
    k.library = "OpenBLAS 0.3.21";
    k.core = "Zen";
    CHECK(describe(k) == "OpenBLAS 0.3.21, Zen kernels (OpenBLAS's choice for this CPU)");
    k.core = "SkylakeX";
    k.replaced = "Prescott";
    k.source = BlasKernels::Source::Runtime;
    CHECK(describe(k) == "OpenBLAS 0.3.21, SkylakeX kernels (chosen by the runtime for this "
                         "CPU; OpenBLAS's own choice was Prescott)");
    k.core = "Prescott";
    k.user_coretype = "prescott";
    k.source = BlasKernels::Source::User;
    CHECK(describe(k) == "OpenBLAS 0.3.21, Prescott kernels (OPENBLAS_CORETYPE=prescott)");
    k.core = "";
    CHECK(describe(k) == "OpenBLAS 0.3.21");
}

TEST_CASE("this CPU's features are consistent", "[blas]") {
    const CpuFeatures f = detect_cpu_features();
    CHECK((!f.avx512 || f.avx2));
    CHECK((!f.avx2 || f.avx));
    CHECK((!f.fma || f.avx));
    CHECK((!f.avx512_bf16 || f.avx512));
    const std::string best = best_core(f);
    INFO("best core for this CPU: '" << best << "'");
    CHECK((best.empty() || core_level(best) > 0));
}

TEST_CASE("OpenBLAS's generic fallback is replaced in the running process", "[blas]") {
    const std::string best = best_core(detect_cpu_features());
    if (best.empty()) {
        WARN("this CPU has no AVX: nothing for the runtime to choose");
        return;
    }
    ChildResult r = run_in_child([] {
        if (!start_on_prescott()) return;
        std::printf("before %s %d\n", openblas_get_corename(), int(sgemm_right()));
        const BlasKernels k = choose_blas_kernels();
        std::printf("after %s %d source %d replaced %s env %s\n", openblas_get_corename(),
                    int(sgemm_right()), int(k.source), k.replaced.c_str(),
                    std::getenv("OPENBLAS_CORETYPE") ? "set" : "unset");
        std::printf("%s\n", describe(k).c_str());
    });
    INFO(r.out << r.err);
    REQUIRE(r.exit_status == 0);
    if (fixed_kernels(r)) return;
    CHECK_THAT(r.out, Catch::StartsWith("before Prescott 1\n"));
    // The core the CPU's features ask for (Cooperlake: OpenBLAS 0.3.21 takes that name
    // through its own AVX-512-BF16 fallback).
    CHECK_THAT(r.out,
               Catch::Contains("after " + best + " 1 source 2 replaced Prescott env unset\n"));
    CHECK_THAT(r.out, Catch::Contains(", " + best + " kernels (chosen by the runtime for this "
                                      "CPU; OpenBLAS's own choice was Prescott)\n"));
}

TEST_CASE("a user's OPENBLAS_CORETYPE is kept", "[blas]") {
    if (best_core(detect_cpu_features()).empty()) {
        WARN("this CPU has no AVX: nothing for the runtime to choose");
        return;
    }
    ChildResult r = run_in_child([] {
        // As if the program had been started with OPENBLAS_CORETYPE=prescott: the same
        // state as in the test above, but the variable stays set.
        if (!start_on_prescott()) return;
        setenv("OPENBLAS_CORETYPE", "prescott", 1);
        const BlasKernels k = choose_blas_kernels();
        std::printf("after %s %d source %d env %s\n", openblas_get_corename(),
                    int(sgemm_right()), int(k.source), std::getenv("OPENBLAS_CORETYPE"));
        std::printf("%s\n", describe(k).c_str());
    });
    INFO(r.out << r.err);
    REQUIRE(r.exit_status == 0);
    if (fixed_kernels(r)) return;
    CHECK_THAT(r.out, Catch::StartsWith("after Prescott 1 source 1 env prescott\n"));
    CHECK_THAT(r.out, Catch::EndsWith(", Prescott kernels (OPENBLAS_CORETYPE=prescott)\n"));
}

// Which OpenBLAS kernels the CPU contractions use, and choosing better ones when
// OpenBLAS's own choice is below what the CPU can run.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels ("core") from CPUID in its library
// constructor, before main. A CPU model it does not know can end up with generic kernels:
// 0.3.21 gives an Intel family-6 model it has no case for (Emerald Rapids, 0xCF; Raptor
// Lake, 0xB7; Arrow Lake, 0xC6, ...) its Prescott (SSE3) kernels, 5-6x slower than
// SkylakeX on an AVX-512 machine. blas_kernels() (meshrt_main, before anything else)
// then asks OpenBLAS for the core that matches the CPU's instruction set: it sets
// OPENBLAS_CORETYPE and re-runs OpenBLAS's dynamic initialisation in the process
// (gotoblas_dynamic_quit, gotoblas_dynamic_init), then unsets it again. A user's own
// OPENBLAS_CORETYPE is never overridden; anything unexpected (not x86, no such symbols,
// a core OpenBLAS does not take) leaves OpenBLAS's own choice. docs/running.md, "BLAS
// kernels".
#pragma once

#include <string>
#include <string_view>

namespace meshrt::blas {

/// What CPUID (and XGETBV: whether the OS saves the registers) says; all false off x86.
struct CpuFeatures {
    bool amd = false;     // AuthenticAMD or HygonGenuine
    bool avx = false;     // AVX, and the OS saves xmm/ymm (XCR0 bits 1, 2)
    bool fma = false;     // FMA3
    bool avx2 = false;
    bool avx512 = false;  // AVX512F, CD, BW, DQ and VL, and the OS saves zmm (XCR0 5-7)
    bool avx512_bf16 = false;
};

/// This CPU's features.
CpuFeatures detect_cpu_features();

/// The OpenBLAS core (an OPENBLAS_CORETYPE name) that suits the features: Cooperlake
/// (AVX-512 with BF16), SkylakeX (AVX-512), Zen (AMD) or Haswell (AVX2 and FMA),
/// Sandybridge (AVX); "" when only older ones would do (meshrt leaves those alone).
std::string best_core(const CpuFeatures& f);

/// How capable the kernels of OpenBLAS core `name` are: 0 SSE-era (Prescott, Nehalem,
/// Core2, Katmai, Atom, Barcelona, ...), 1 Sandybridge, 2 Haswell and Zen, 3 SkylakeX and
/// Cooperlake; -1 for a name meshrt does not rank (the Bulldozer family, cores of later
/// OpenBLAS versions, other architectures, "Unknown"), which it never replaces.
/// Case-insensitive.
int core_level(std::string_view name);

/// The decision, a pure function: the core to ask OpenBLAS for, or "" to keep the one it
/// has. `user_coretype` is getenv("OPENBLAS_CORETYPE") (null when unset: anything set,
/// even "", is the user's choice and is kept); `current` is openblas_get_corename().
/// A core is asked for only when `current` is ranked below best_core(f).
std::string core_to_select(const char* user_coretype, std::string_view current,
                           const CpuFeatures& f);

/// Re-runs OpenBLAS's kernel choice (gotoblas_dynamic_quit, then gotoblas_dynamic_init)
/// with OPENBLAS_CORETYPE=`name` (the variable is as before afterwards); false, changing nothing,
/// when this BLAS has no such entry points. OpenBLAS does not check that the CPU can run
/// the core named. Only while no other thread uses BLAS.
bool reinit_with_coretype(const std::string& name);

/// What the contractions run on.
struct BlasKernels {
    enum class Source {
        OpenBLAS, // OpenBLAS's own choice (also after a request it did not take)
        User,     // the user's OPENBLAS_CORETYPE
        Runtime,  // chosen here, replacing OpenBLAS's choice `replaced`
    };
    std::string library; // "OpenBLAS 0.3.21" (openblas_get_config), or "BLAS"
    std::string core;    // openblas_get_corename(), "" when unknown
    std::string replaced;
    std::string user_coretype; // Source::User: the value of OPENBLAS_CORETYPE
    Source source = Source::OpenBLAS;
    double switch_us = 0; // time the re-initialisation took (Source::Runtime)
};

/// Looks at OpenBLAS's choice and changes it if core_to_select says so; each call does
/// the work again (tests). Call only while no other thread uses BLAS.
BlasKernels choose_blas_kernels();

/// choose_blas_kernels() once per process (the first call; thread-safe).
const BlasKernels& blas_kernels();

/// One line for --help and the trace, e.g. "OpenBLAS 0.3.21, SkylakeX kernels (chosen
/// by the runtime for this CPU; OpenBLAS's own choice was Prescott)".
std::string describe(const BlasKernels& k);

} // namespace meshrt::blas

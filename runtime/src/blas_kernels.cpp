// Choosing OpenBLAS's kernels for the CPU when its own choice falls short (blas_kernels.h).
#include "src/blas_kernels.h"

#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

// OpenBLAS's entry points, declared weak (cblas.h is not included here): a BLAS without
// them (a build without DYNAMIC_ARCH has no gotoblas_dynamic_*) leaves the pointers null,
// and then nothing is changed. gotoblas_dynamic_quit forgets the kernel table;
// gotoblas_dynamic_init chooses one again, from OPENBLAS_CORETYPE when it is set (as at
// start-up), and initialises its block sizes. Both are exported by every DYNAMIC_ARCH
// libopenblas (driver/others/dynamic.c).
extern "C" {
__attribute__((weak)) char* openblas_get_corename(void);
__attribute__((weak)) char* openblas_get_config(void);
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
}

namespace meshrt::blas {
namespace {

constexpr const char* kCoretype = "OPENBLAS_CORETYPE";

bool iequal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

/// The library's name and version from openblas_get_config() ("OpenBLAS 0.3.21 ...").
std::string library_name() {
    const char* config = openblas_get_config ? openblas_get_config() : nullptr;
    if (!config || std::strncmp(config, "OpenBLAS ", 9) != 0)
        return "BLAS";
    std::string s(config);
    size_t end = s.find(' ', 9);
    return end == std::string::npos ? s : s.substr(0, end);
}

std::string current_core() {
    const char* name = openblas_get_corename ? openblas_get_corename() : nullptr;
    return name ? name : "";
}

} // namespace

bool reinit_with_coretype(const std::string& name) {
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || !openblas_get_corename)
        return false;
    const char* before = std::getenv(kCoretype);
    const std::optional<std::string> saved =
        before ? std::optional<std::string>(before) : std::nullopt;
    if (setenv(kCoretype, name.c_str(), 1) != 0)
        return false;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    if (saved)
        setenv(kCoretype, saved->c_str(), 1);
    else
        unsetenv(kCoretype);
    return true;
}

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    const unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf < 1)
        return f;
    __cpuid(0, a, b, c, d);
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.amd = std::strcmp(vendor, "AuthenticAMD") == 0 || std::strcmp(vendor, "HygonGenuine") == 0;

    __cpuid(1, a, b, c, d);
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
    // XGETBV only exists where the OS enabled XSAVE (CPUID.1:ECX.OSXSAVE), else #UD.
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
    }
    const bool ymm_saved = (xcr0 & 0x6) == 0x6;    // SSE and AVX state
    const bool zmm_saved = (xcr0 & 0xe6) == 0xe6;  // ... and opmask, ZMM_Hi256, Hi16_ZMM
    f.avx = avx && osxsave && ymm_saved;
    f.fma = f.avx && fma;
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        const unsigned subleaves = a;
        f.avx2 = f.avx && (b & (1u << 5));
        const unsigned avx512_bits = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) |
                                     (1u << 31); // F, DQ, CD, BW, VL
        f.avx512 = f.avx2 && zmm_saved && (b & avx512_bits) == avx512_bits;
        if (f.avx512 && subleaves >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f.avx512_bf16 = a & (1u << 5);
        }
    }
#endif
    return f;
}

std::string best_core(const CpuFeatures& f) {
    if (f.avx512)
        return f.avx512_bf16 ? "Cooperlake" : "SkylakeX";
    if (f.avx2 && f.fma)
        return f.amd ? "Zen" : "Haswell";
    if (f.avx)
        return "Sandybridge";
    return "";
}

int core_level(std::string_view name) {
    // The x86-64 cores of OpenBLAS 0.3.21's DYNAMIC_ARCH build (dynamic.c's corename[]).
    for (const char* n : {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom",
                          "Core2", "Penryn", "Dunnington", "Nehalem", "Athlon", "Opteron",
                          "Opteron_SSE3", "Barcelona", "Nano", "Bobcat"})
        if (iequal(name, n))
            return 0;
    if (iequal(name, "Sandybridge"))
        return 1;
    if (iequal(name, "Haswell") || iequal(name, "Zen"))
        return 2;
    if (iequal(name, "SkylakeX") || iequal(name, "Cooperlake"))
        return 3;
    return -1;
}

std::string core_to_select(const char* user_coretype, std::string_view current,
                           const CpuFeatures& f) {
    if (user_coretype)
        return "";
    const std::string best = best_core(f);
    const int have = core_level(current);
    if (best.empty() || have < 0 || have >= core_level(best))
        return "";
    return best;
}

BlasKernels choose_blas_kernels() {
    BlasKernels k;
    k.library = library_name();
    k.core = current_core();
    if (const char* user = std::getenv(kCoretype)) {
        k.source = BlasKernels::Source::User;
        k.user_coretype = user;
        return k;
    }
    const std::string want = core_to_select(nullptr, k.core, detect_cpu_features());
    if (want.empty() || !reinit_with_coretype(want))
        return k;
    const std::string now = current_core();
    if (core_level(now) > core_level(k.core)) {
        k.replaced = k.core;
        k.core = now;
        k.source = BlasKernels::Source::Runtime;
        return k;
    }
    // Not expected (OpenBLAS did not take the name): back to its first choice.
    if (!iequal(now, k.core))
        reinit_with_coretype(k.core);
    k.core = current_core();
    return k;
}

const BlasKernels& blas_kernels() {
    static const BlasKernels k = choose_blas_kernels();
    return k;
}

std::string describe(const BlasKernels& k) {
    if (k.core.empty())
        return k.library;
    std::string s = k.library + ", " + k.core + " kernels (";
    switch (k.source) {
    case BlasKernels::Source::User: s += std::string(kCoretype) + "=" + k.user_coretype; break;
    case BlasKernels::Source::Runtime:
        s += "chosen by the runtime for this CPU; OpenBLAS's own choice was " + k.replaced;
        break;
    case BlasKernels::Source::OpenBLAS: s += "OpenBLAS's choice for this CPU"; break;
    }
    return s + ")";
}

} // namespace meshrt::blas

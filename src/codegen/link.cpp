// The link step: the system C++ driver (the compiler meshc itself was built with, so the
// C++ runtime and any sanitizer runtime match libmeshrt's) links the program's object
// with libmeshrt.a and its libraries (OpenBLAS, threads, libm), and on x86-64 glibc with
// glibc's vector math library, whose functions the vectorised loops call (optimize()).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "codegen/codegen.h"
#include "support/install_paths.h"

#include <sys/stat.h>

namespace meshc::codegen {

namespace {

std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

/// The runtime library: $MESHC_RUNTIME, else the one beside the executable (an installed
/// prefix's lib/, or the build tree's runtime/), else the path recorded at build time.
std::string runtime_library() {
    if (const char* env = std::getenv("MESHC_RUNTIME")) return env;
    std::string found = find_beside_executable({"../lib/libmeshrt.a", "runtime/libmeshrt.a"});
    return found.empty() ? std::string(MESHRT_LIBRARY) : found;
}

/// The libraries the generated code itself calls: libmvec (and the libm it needs) where
/// optimize() lets the vectorisers call it.
const char* program_libraries() {
#if defined(__x86_64__) && defined(__GLIBC__)
    return "-lmvec -lm";
#else
    return "";
#endif
}

}  // namespace

std::string toolchain_identity() {
    std::string id;
    for (const std::string& path : {std::string("/proc/self/exe"), runtime_library()}) {
        struct stat st {};
        if (stat(path.c_str(), &st) == 0) {
            id += fmt::format("{}:{}:{}.{};", path, static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                              static_cast<long long>(st.st_mtim.tv_nsec));
        } else {
            id += path + ":?;";
        }
    }
    return id;
}

namespace {

/// Runs `command` (standard error joined to standard output); on failure false with what
/// it printed in `error`.
bool run_driver(const std::string& command, std::string& error) {
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (!pipe) {
        error = "cannot start the linker: " + command;
        return false;
    }
    std::array<char, 4096> buffer{};
    std::string text;
    size_t n;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) text.append(buffer.data(), n);
    int status = pclose(pipe);
    if (status != 0) {
        error = fmt::format("`{}` failed:\n{}", command, text);
        return false;
    }
    return true;
}

std::string quote_all(const std::vector<std::string>& paths) {
    std::string out;
    for (const std::string& p : paths) out += (out.empty() ? "" : " ") + quote(p);
    return out;
}

}  // namespace

bool link_executable(const std::vector<std::string>& objects, const std::string& output, std::string& error) {
    return run_driver(fmt::format("{} {} {} {} -o {} {} {}", MESHC_LINKER, MESHC_LINK_FLAGS, quote_all(objects),
                                  quote(runtime_library()), quote(output), program_libraries(), MESHRT_LINK_LIBS),
                      error);
}

bool combine_objects(const std::vector<std::string>& objects, const std::string& output, std::string& error) {
    return run_driver(fmt::format("{} -r -nostdlib {} -o {}", MESHC_LINKER, quote_all(objects), quote(output)), error);
}

}  // namespace meshc::codegen

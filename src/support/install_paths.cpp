#include "support/install_paths.h"

#include <filesystem>
#include <system_error>

namespace meshc {

std::string executable_dir() {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec || exe.empty()) return "";
    return exe.parent_path().string();
}

std::string find_beside_executable(std::initializer_list<const char*> relative) {
    std::string dir = executable_dir();
    if (dir.empty()) return "";
    for (const char* rel : relative) {
        std::error_code ec;
        std::filesystem::path candidate = std::filesystem::path(dir) / rel;
        if (std::filesystem::exists(candidate, ec)) {
            return std::filesystem::weakly_canonical(candidate, ec).string();
        }
    }
    return "";
}

}  // namespace meshc

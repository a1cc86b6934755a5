// meshrt_fail and the temporary-file registry (see errors.h).
//
// Several devices may fail at once (every device reading the same bad file, say): the
// first to get here prints its message and ends the process; the others park until it
// does, so exactly one message appears.
#include "src/errors.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <vector>

#include "src/runtime.h"

namespace meshrt {
namespace {

std::mutex& temp_mutex() {
    static std::mutex m;
    return m;
}
std::vector<std::string>& temp_files() {
    static std::vector<std::string> files;
    return files;
}
std::atomic<bool> g_failing{false};

} // namespace

void register_temp_file(const std::string& path) {
    std::lock_guard lock(temp_mutex());
    temp_files().push_back(path);
}

void unregister_temp_file(const std::string& path) {
    std::lock_guard lock(temp_mutex());
    auto& files = temp_files();
    auto it = std::find(files.begin(), files.end(), path);
    if (it != files.end())
        files.erase(it);
}

void fail(meshrt_device* dev, const std::string& message) {
    if (g_failing.exchange(true)) {
        // Another thread is already ending the process: wait for it, print nothing.
        for (;;)
            pause();
    }
    std::fflush(stdout);
    if (dev)
        std::fprintf(stderr, "error: device %lld: %s\n", static_cast<long long>(dev->index),
                     message.c_str());
    else
        std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
    {
        std::lock_guard lock(temp_mutex());
        for (const std::string& path : temp_files())
            unlink(path.c_str());
    }
    _exit(1);
}

} // namespace meshrt

extern "C" void meshrt_fail(meshrt_device* dev, const char* message) {
    meshrt::fail(dev, message ? message : "(no message)");
}

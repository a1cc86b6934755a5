// meshrt_fail, the temporary-file registry and the signal handlers (see errors.h).
//
// Several devices may fail at once (every device reading the same bad file, say): the
// first to get here prints its message and ends the process; the others park until it
// does, so exactly one message appears per process. (Under MPI each rank is a process:
// every rank that fails prints its own line before MPI_Abort ends the job.)
//
// The registry is a fixed table of path slots, each published by an atomic flag set
// after the path is written and cleared before the slot is reused, so the SIGTERM/SIGINT
// handler can walk it with nothing but atomic loads and unlink(2).
#include "src/errors.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "src/runtime.h"

namespace meshrt {
namespace {

constexpr int kMaxTempFiles = 16; // saves in flight at once (one per device at most)

struct TempSlot {
    std::atomic<bool> used{false};
    char path[PATH_MAX];
};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler reads the flags");

TempSlot g_temp[kMaxTempFiles];
std::mutex g_temp_mutex; // serialises register/unregister (not the signal handler)
std::atomic<bool> g_failing{false};
std::atomic<FailExit> g_fail_exit{nullptr};
std::once_flag g_catcher_started;

void remove_temp_files() {
    for (TempSlot& slot : g_temp)
        if (slot.used.load(std::memory_order_acquire))
            unlink(slot.path);
}

extern "C" void on_terminating_signal(int sig) {
    // Only async-signal-safe calls: atomic loads, unlink, raise. SA_RESETHAND restored
    // the default action, so re-raising ends the process with this signal's status.
    const int saved_errno = errno;
    remove_temp_files();
    errno = saved_errno;
    raise(sig);
}

} // namespace

bool register_temp_file(const std::string& path) {
    if (path.size() >= PATH_MAX)
        return false;
    std::lock_guard lock(g_temp_mutex);
    for (TempSlot& slot : g_temp) {
        if (slot.used.load(std::memory_order_relaxed))
            continue;
        std::memcpy(slot.path, path.c_str(), path.size() + 1);
        slot.used.store(true, std::memory_order_release);
        return true;
    }
    return false;
}

void unregister_temp_file(const std::string& path) {
    std::lock_guard lock(g_temp_mutex);
    for (TempSlot& slot : g_temp)
        if (slot.used.load(std::memory_order_relaxed) && path == slot.path) {
            slot.used.store(false, std::memory_order_release);
            return;
        }
}

void set_fail_exit(FailExit hook) {
    g_fail_exit.store(hook);
}

void install_signal_cleanup() {
    // The thread that is always free to take the signals (see SignalDeferral).
    std::call_once(g_catcher_started, [] {
        try {
            std::thread([] {
                for (;;)
                    pause();
            }).detach();
        } catch (const std::system_error&) {
            // No thread: signals then wait for a thread that does not block them.
        }
    });
    // The handlers every time: whoever installed others since (a test framework) is
    // overridden.
    for (int sig : {SIGTERM, SIGINT}) {
        struct sigaction old{};
        if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN)
            continue; // e.g. SIGINT of a background job stays ignored
        struct sigaction sa{};
        sa.sa_handler = on_terminating_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(sig, &sa, nullptr);
    }
}

SignalDeferral::SignalDeferral() {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old_);
}

SignalDeferral::~SignalDeferral() {
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
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
        std::lock_guard lock(g_temp_mutex);
        remove_temp_files();
    }
    if (FailExit hook = g_fail_exit.load())
        hook(1);
    _exit(1);
}

} // namespace meshrt

extern "C" void meshrt_fail(meshrt_device* dev, const char* message) {
    meshrt::fail(dev, message ? message : "(no message)");
}

// Tracing (--trace=FILE.json): each device appends complete events to its own buffer (no
// locking on the hot path); meshrt_main writes them all as one Chrome/Perfetto JSON trace
// after the devices have joined, one track (tid) per device. Under MPI every process
// renders its device's track and the process of device 0 writes the file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshrt.h"

namespace meshrt {

struct TraceEvent {
    std::string name;
    int64_t ts_ns = 0; // since the run started
    int64_t dur_ns = 0;
    std::string args; // body of the JSON "args" object, "" for none
};

/// One device's events, plus the regions generated code has opened (trace_begin).
struct TraceBuffer {
    std::vector<TraceEvent> events;
    std::vector<std::pair<std::string, int64_t>> open;
};

class Tracer {
public:
    bool enabled() const { return enabled_; }
    void start() {
        enabled_ = true;
        start_ = std::chrono::steady_clock::now();
    }
    int64_t now_ns() const {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start_)
            .count();
    }
private:
    bool enabled_ = false;
    std::chrono::steady_clock::time_point start_;
};

/// Appends `s` to `out` as a JSON string literal (with the quotes).
void append_json_string(std::string& out, std::string_view s);

/// Device `device`'s track: its metadata and events as JSON objects, each preceded by
/// ",\n" (the form write_trace joins).
std::string trace_track_json(int64_t device, const TraceBuffer& buffer);
/// Writes {"traceEvents": [...]} with the tracks in the order given, and `blas` (the
/// writing process's BLAS kernels, blas::describe) as "otherData": {"blas": ...} when not
/// empty; false with *error on an I/O failure.
bool write_trace(const std::string& path, const std::string& program_name,
                 const std::vector<std::string>& tracks, std::string* error,
                 std::string_view blas = {});

/// Records one complete event for the runtime's own work (a kernel, a collective, I/O)
/// from construction to destruction; does nothing when tracing is off (or dev is null).
class TraceScope {
public:
    TraceScope(meshrt_device* dev, const char* name);
    ~TraceScope();
    TraceScope(const TraceScope&) = delete;
    TraceScope& operator=(const TraceScope&) = delete;

    /// Whether arguments are recorded: build expensive argument strings only then.
    bool active() const { return dev_ != nullptr; }
    void arg(const char* key, int64_t value);
    void arg(const char* key, std::string_view value);
    /// The source location generated code gave for this call (meshrt_comm_site) as `at`.
    void at_site();

private:
    meshrt_device* dev_ = nullptr;
    const char* name_ = nullptr;
    int64_t start_ns_ = 0;
    std::string args_;
};

} // namespace meshrt

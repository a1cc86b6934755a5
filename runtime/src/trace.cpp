// Trace recording and the JSON writer (see trace.h). Timestamps are microseconds with
// nanosecond decimals, as the Trace Event Format expects.
#include "src/trace.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "src/errors.h"
#include "src/runtime.h"

namespace meshrt {

void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    for (char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += c;
            }
        }
    }
    out += '"';
}

namespace {

void append_us(std::string& out, int64_t ns) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
    out += buf;
}

} // namespace

TraceScope::TraceScope(meshrt_device* dev, const char* name) {
    if (dev && dev->tracing) {
        dev_ = dev;
        name_ = name;
        start_ns_ = dev->runtime->tracer.now_ns();
    }
}

TraceScope::~TraceScope() {
    if (!dev_)
        return;
    int64_t end = dev_->runtime->tracer.now_ns();
    dev_->trace.events.push_back(TraceEvent{name_, start_ns_, end - start_ns_, std::move(args_)});
}

void TraceScope::arg(const char* key, int64_t value) {
    if (!dev_)
        return;
    if (!args_.empty())
        args_ += ',';
    append_json_string(args_, key);
    args_ += ':';
    args_ += std::to_string(value);
}

void TraceScope::at_site() {
    if (dev_ && dev_->comm_site)
        arg("at", std::string_view(dev_->comm_site));
}

void TraceScope::arg(const char* key, std::string_view value) {
    if (!dev_)
        return;
    if (!args_.empty())
        args_ += ',';
    append_json_string(args_, key);
    args_ += ':';
    append_json_string(args_, value);
}

std::string trace_track_json(int64_t device, const TraceBuffer& buffer) {
    const std::string tid = std::to_string(device);
    std::string out = ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + tid +
                      ",\"args\":{\"name\":\"device " + tid + "\"}}";
    out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
    for (const TraceEvent& e : buffer.events) {
        out += ",\n{\"name\":";
        append_json_string(out, e.name);
        out += ",\"ph\":\"X\",\"pid\":0,\"tid\":" + tid + ",\"ts\":";
        append_us(out, e.ts_ns);
        out += ",\"dur\":";
        append_us(out, e.dur_ns);
        if (!e.args.empty())
            out += ",\"args\":{" + e.args + "}";
        out += "}";
    }
    return out;
}

bool write_trace(const std::string& path, const std::string& program_name,
                 const std::vector<std::string>& tracks, std::string* error,
                 std::string_view blas) {
    std::string out = "{\"displayTimeUnit\":\"ms\",";
    if (!blas.empty()) {
        out += "\"otherData\":{\"blas\":";
        append_json_string(out, blas);
        out += "},\n";
    }
    out += "\"traceEvents\":[\n";
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":";
    append_json_string(out, program_name);
    out += "}}";
    for (const std::string& track : tracks)
        out += track;
    out += "\n]}\n";
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) {
        *error = "cannot write the trace " + path;
        return false;
    }
    f.write(out.data(), std::streamsize(out.size()));
    f.close();
    if (!f) {
        *error = "cannot write the trace " + path;
        return false;
    }
    return true;
}

} // namespace meshrt

extern "C" void meshrt_trace_begin(meshrt_device* dev, const char* name) {
    if (!dev || !dev->tracing)
        return;
    dev->trace.open.emplace_back(name ? name : "region", dev->runtime->tracer.now_ns());
}

extern "C" void meshrt_trace_end(meshrt_device* dev) {
    if (!dev || !dev->tracing)
        return;
    if (dev->trace.open.empty())
        meshrt::fail(dev, "meshrt_trace_end without a matching meshrt_trace_begin");
    auto [name, start] = std::move(dev->trace.open.back());
    dev->trace.open.pop_back();
    dev->trace.events.push_back(
        meshrt::TraceEvent{std::move(name), start, dev->runtime->tracer.now_ns() - start, ""});
}

// meshrt_print: one line on stdout from device 0, every "{}" of the format replaced by the
// next argument's global value (assembled from the devices' pieces, layout.h); "{{" and
// "}}" are a literal brace.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "src/dtype.h"
#include "src/errors.h"
#include "src/layout.h"
#include "src/runtime.h"

namespace meshrt {
namespace {

constexpr int64_t kMaxListed = 64; // larger tensors print as a summary

bool is_float(int32_t dtype) {
    return dtype == MESHRT_F16 || dtype == MESHRT_BF16 || dtype == MESHRT_F32 ||
           dtype == MESHRT_F64;
}

void append_number(std::string& out, int32_t dtype, double v) {
    char buf[64];
    if (dtype == MESHRT_BOOL)
        std::snprintf(buf, sizeof buf, "%s", v != 0 ? "true" : "false");
    else if (dtype == MESHRT_F64)
        std::snprintf(buf, sizeof buf, "%.10g", v);
    else if (is_float(dtype))
        std::snprintf(buf, sizeof buf, "%.6g", v);
    else
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    out += buf;
}

void append_element(std::string& out, int32_t dtype, const void* data, int64_t i) {
    if (dtype == MESHRT_I64) { // exact: doubles lose digits past 2^53
        int64_t v;
        std::memcpy(&v, static_cast<const char*>(data) + i * 8, 8);
        out += std::to_string(v);
        return;
    }
    append_number(out, dtype, element_as_double(dtype, data, i));
}

/// Nested lists of dims [d, rank) starting at element `base`.
void append_list(std::string& out, int32_t dtype, const void* data,
                 const std::vector<int64_t>& shape, size_t d, int64_t base, int64_t stride) {
    if (d == shape.size()) {
        append_element(out, dtype, data, base);
        return;
    }
    const int64_t inner = stride / std::max<int64_t>(1, shape[d]);
    out += '[';
    for (int64_t i = 0; i < shape[d]; ++i) {
        if (i)
            out += ", ";
        append_list(out, dtype, data, shape, d + 1, base + i * inner, inner);
    }
    out += ']';
}

void append_summary(std::string& out, int32_t dtype, const void* data,
                    const std::vector<int64_t>& shape) {
    const int64_t n = num_elements(shape);
    out += "<" + type_string(dtype, shape);
    if (is_float(dtype)) {
        double sum = 0, lo = element_as_double(dtype, data, 0), hi = lo;
        for (int64_t i = 0; i < n; ++i) {
            const double v = element_as_double(dtype, data, i);
            sum += v;
            if (v < lo || std::isnan(v))
                lo = std::isnan(lo) ? lo : v;
            if (v > hi || std::isnan(v))
                hi = std::isnan(hi) ? hi : v;
        }
        out += " sum=";
        append_number(out, dtype, sum);
        out += " min=";
        append_number(out, dtype, lo);
        out += " max=";
        append_number(out, dtype, hi);
    } else {
        // Integers and bools exactly, in 64 bits (a bool's sum counts the trues).
        auto at = [&](int64_t i) -> int64_t {
            const char* p = static_cast<const char*>(data);
            switch (dtype) {
            case MESHRT_BOOL:
                return p[i] != 0;
            case MESHRT_I32: {
                int32_t v;
                std::memcpy(&v, p + i * 4, 4);
                return v;
            }
            default: {
                int64_t v;
                std::memcpy(&v, p + i * 8, 8);
                return v;
            }
            }
        };
        uint64_t sum = 0;
        int64_t lo = at(0), hi = lo;
        for (int64_t i = 0; i < n; ++i) {
            const int64_t v = at(i);
            sum += uint64_t(v);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        out += " sum=" + std::to_string(int64_t(sum));
        if (dtype == MESHRT_BOOL) {
            out += std::string(" min=") + (lo ? "true" : "false");
            out += std::string(" max=") + (hi ? "true" : "false");
        } else {
            out += " min=" + std::to_string(lo) + " max=" + std::to_string(hi);
        }
    }
    out += ">";
}

void append_value(std::string& out, int32_t dtype, const void* data,
                  const std::vector<int64_t>& shape) {
    const int64_t n = num_elements(shape);
    if (n > kMaxListed)
        append_summary(out, dtype, data, shape);
    else
        append_list(out, dtype, data, shape, 0, 0, n);
}

} // namespace
} // namespace meshrt

using namespace meshrt;

extern "C" void meshrt_print(meshrt_device* dev, const char* format, int32_t nargs,
                             const meshrt_print_arg* args) {
    TraceScope scope(dev, "print");
    runtime_of(dev, "print");
    if (!format || nargs < 0 || (nargs > 0 && !args))
        fail(dev, "print: bad arguments");
    for (int32_t i = 0; i < nargs; ++i)
        if (!dtype_valid(args[i].dtype) || !args[i].layout)
            fail(dev, "print: bad argument " + std::to_string(i));
    std::vector<Scratch> values(static_cast<size_t>(nargs));
    bool root = dev->index == 0;
    for (int32_t i = 0; i < nargs; ++i)
        assemble_on_device0(dev, "print", args[i].dtype, args[i].layout, args[i].data,
                            &values[size_t(i)]);
    if (!root)
        return;
    std::string line;
    int32_t next = 0;
    for (const char* p = format; *p; ++p) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            line += *p; // "{{" and "}}": a brace of the program's own text
            ++p;
        } else if (p[0] == '{' && p[1] == '}') {
            if (next == nargs)
                fail(dev, std::string("print: \"") + format + "\" has more {} than the " +
                              std::to_string(nargs) + " arguments");
            const meshrt_print_arg& a = args[next];
            append_value(line, a.dtype, values[size_t(next)].get(),
                         std::vector<int64_t>(a.layout->global_shape,
                                              a.layout->global_shape + a.layout->rank));
            ++next;
            ++p;
        } else {
            line += *p;
        }
    }
    if (next != nargs)
        fail(dev, std::string("print: \"") + format + "\" has " + std::to_string(next) +
                      " {} for " + std::to_string(nargs) + " arguments");
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
}

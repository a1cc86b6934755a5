// meshrt_load_tensor, meshrt_save_tensor and meshrt_save_finish: .safetensors files, one
// tensor per leaf of a struct or tuple (the checker names each leaf by its field path).
//
// Format: an 8-byte little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [8, 16], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"KEY": "VALUE", ...}}
// (padded with spaces to a multiple of 8 when written here), then the raw little-endian
// data; offsets count from the first data byte. dtypes: F32 F64 F16 BF16 I32 I64 BOOL
// (bf16 is stored as BF16, not widened as in .npy).
//
// Load: every device parses the header and reads only its own piece of the tensor (the
// positioned reads of read_piece, as for .npy). Save: each meshrt_save_tensor assembles
// the global value on device 0 (layout.h), which keeps it until meshrt_save_finish writes
// the whole file through a temporary and a rename (write_file_atomically) and every
// device waits at a barrier.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/comm.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/fileio.h"
#include "src/layout.h"
#include "src/runtime.h"
#include "src/tensor.h"

namespace meshrt {
namespace {

const char* st_name(int32_t dtype) {
    switch (dtype) {
    case MESHRT_BOOL:
        return "BOOL";
    case MESHRT_I32:
        return "I32";
    case MESHRT_I64:
        return "I64";
    case MESHRT_F16:
        return "F16";
    case MESHRT_BF16:
        return "BF16";
    case MESHRT_F32:
        return "F32";
    case MESHRT_F64:
        return "F64";
    default:
        return nullptr;
    }
}

int32_t st_dtype(const std::string& name) {
    for (int32_t dt : {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16, MESHRT_BF16, MESHRT_F32,
                       MESHRT_F64})
        if (name == st_name(dt))
            return dt;
    return -1;
}

struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    int64_t begin = -1, end = -1;
};

/// Reads the JSON of a safetensors header (nlohmann-json): an object of tensor entries
/// and "__metadata__" (skipped). false, with `error`, on malformed JSON or entries.
bool parse_header(const std::string& text, std::vector<std::pair<std::string, Entry>>* out, std::string* error) {
    using nlohmann::json;
    // The top-level keys as written: a name given twice is an error (a JSON object keeps
    // only the last).
    std::vector<std::string> keys;
    json::parser_callback_t note_keys = [&keys](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1) keys.push_back(parsed.get<std::string>());
        return true;
    };
    json header;
    try {
        header = json::parse(text, note_keys);
    } catch (const json::exception& e) {
        *error = e.what();
        return false;
    }
    auto bad = [&](const std::string& why) {
        *error = why;
        return false;
    };
    if (!header.is_object()) return bad("the header is not a JSON object");
    std::sort(keys.begin(), keys.end());
    if (auto dup = std::adjacent_find(keys.begin(), keys.end()); dup != keys.end()) {
        return bad("tensor '" + *dup + "' appears twice");
    }
    auto integers = [](const json& v, std::vector<int64_t>* xs) {
        if (!v.is_array()) return false;
        for (const json& x : v) {
            if (!x.is_number_unsigned() || x.get<uint64_t>() > uint64_t(INT64_MAX)) return false;
            xs->push_back(int64_t(x.get<uint64_t>()));
        }
        return true;
    };
    for (const auto& [name, value] : header.items()) {
        if (name == "__metadata__") continue;
        if (!value.is_object()) return bad("tensor '" + name + "': expected an object");
        Entry e;
        bool have_dtype = false, have_shape = false, have_offsets = false;
        for (const auto& [key, v] : value.items()) {
            if (key == "dtype") {
                if (!v.is_string()) return bad("tensor '" + name + "': dtype must be a string");
                e.dtype = v.get<std::string>();
                have_dtype = true;
            } else if (key == "shape") {
                if (!integers(v, &e.shape)) return bad("tensor '" + name + "': shape must be a list of non-negative integers");
                have_shape = true;
            } else if (key == "data_offsets") {
                std::vector<int64_t> o;
                if (!integers(v, &o) || o.size() != 2 || o[0] > o[1]) {
                    return bad("tensor '" + name + "': data_offsets must be [BEGIN, END]");
                }
                e.begin = o[0];
                e.end = o[1];
                have_offsets = true;
            } else {
                return bad("tensor '" + name + "': unknown key '" + key + "'");
            }
        }
        if (!have_dtype || !have_shape || !have_offsets) {
            return bad("tensor '" + name + "' lacks dtype, shape or data_offsets");
        }
        out->emplace_back(name, std::move(e));
    }
    return true;
}

std::string json_string(const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// A tensor waiting in device 0's memory for meshrt_save_finish.
struct Pending {
    std::string path, name;
    int32_t dtype;
    std::vector<int64_t> shape;
    Scratch data;
};

std::mutex pending_mutex;
std::map<meshrt_device*, std::vector<Pending>>& pending() {
    static std::map<meshrt_device*, std::vector<Pending>> p;
    return p;
}

std::string shape_json(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

} // namespace
} // namespace meshrt

using namespace meshrt;

extern "C" void meshrt_load_tensor(meshrt_device* dev, const char* path, const char* name,
                                   int32_t dtype, const meshrt_layout* layout, void* out) {
    TraceScope scope(dev, "load");
    const std::string file = path ? path : "(null)";
    const std::string what = "load " + file;
    const std::string want_name = name ? name : "";
    if (!dtype_valid(dtype))
        fail(dev, what + ": unknown dtype " + std::to_string(dtype));
    Piece p = local_piece(dev, "load", layout);
    if (!p.member)
        return;
    Fd f;
    struct stat st;
    open_for_load(dev, what, path, f, &st);
    unsigned char len8[8];
    if (st.st_size < 8 || !read_exact(f.fd, len8, 8, 0))
        fail(dev, what + ": not a .safetensors file: shorter than its 8-byte header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
        header_len = header_len << 8 | len8[i];
    if (header_len > (uint64_t(100) << 20))
        fail(dev, what + ": bad header: its length " + std::to_string(header_len) +
                      " is over the 100 MiB limit (not a .safetensors file?)");
    if (header_len > uint64_t(st.st_size) - 8)
        fail(dev, what + ": truncated: the header wants " + std::to_string(header_len) +
                      " bytes, the file has " + std::to_string(uint64_t(st.st_size) - 8) +
                      " after the length");
    std::string text(header_len, '\0');
    if (!read_exact(f.fd, text.data(), header_len, 8))
        fail(dev, what + ": read error");
    std::vector<std::pair<std::string, Entry>> entries;
    std::string header_error;
    if (!parse_header(text, &entries, &header_error))
        fail(dev, what + ": bad header: " + header_error);
    const Entry* e = nullptr;
    std::string found_name = want_name;
    if (want_name.empty()) {
        // A lone tensor: the file's only one, whatever its name.
        if (entries.size() != 1) {
            std::string names;
            for (size_t i = 0; i < entries.size() && i < 8; ++i)
                names += (i ? ", " : "") + entries[i].first;
            fail(dev, what + ": a tensor is loaded from a file of exactly one tensor; this one has " +
                          std::to_string(entries.size()) + (entries.empty() ? "" : " (" + names + (entries.size() > 8 ? ", ..." : "") + ")"));
        }
        e = &entries[0].second;
        found_name = entries[0].first;
    } else {
        for (const auto& [k, v] : entries)
            if (k == want_name)
                e = &v;
        if (!e) {
            std::string names;
            for (size_t i = 0; i < entries.size() && i < 8; ++i)
                names += (i ? ", " : "") + entries[i].first;
            fail(dev, what + ": no tensor '" + want_name + "' (the file has " +
                          (entries.empty() ? std::string("none") : names + (entries.size() > 8 ? ", ..." : "")) + ")");
        }
    }
    const std::string tname = what + ": tensor '" + found_name + "'";
    const std::string expected = type_string(dtype, p.global_shape);
    const int32_t found = st_dtype(e->dtype);
    if (found < 0)
        fail(dev, tname + ": expected " + expected + ", found unsupported dtype '" + e->dtype + "'");
    if (found != dtype || e->shape != p.global_shape)
        fail(dev, tname + ": expected " + expected + ", found " + type_string(found, e->shape));
    const size_t elem = dtype_size(dtype);
    const int64_t need = num_elements(p.global_shape) * int64_t(elem);
    if (e->end - e->begin != need)
        fail(dev, tname + ": bad header: data_offsets [" + std::to_string(e->begin) + ", " +
                      std::to_string(e->end) + "] hold " + std::to_string(e->end - e->begin) +
                      " bytes, " + expected + " needs " + std::to_string(need));
    const int64_t data_start = 8 + int64_t(header_len);
    const int64_t have = int64_t(st.st_size) - data_start;
    if (e->end > have)
        fail(dev, tname + ": truncated: its data ends at byte " + std::to_string(e->end) +
                      " of the data, the file has " + std::to_string(have) + " data bytes");
    const int64_t n = num_elements(p.local_shape);
    if (scope.active()) {
        scope.arg("path", path);
        scope.arg("bytes", n * int64_t(elem));
    }
    if (!read_piece(f.fd, data_start + e->begin, elem, p.global_shape, p.local_shape, p.offset,
                    static_cast<char*>(out)))
        fail(dev, tname + ": read error");
    if (dtype == MESHRT_BOOL)
        for (int64_t i = 0; i < n; ++i)
            static_cast<uint8_t*>(out)[i] = static_cast<uint8_t*>(out)[i] != 0;
}

extern "C" void meshrt_save_tensor(meshrt_device* dev, const char* path, const char* name,
                                   int32_t dtype, const meshrt_layout* layout,
                                   const void* local) {
    TraceScope scope(dev, "save");
    const std::string what = std::string("save ") + (path ? path : "(null)");
    if (!path || !*path)
        fail(dev, "save: no path");
    if (!st_name(dtype))
        fail(dev, what + ": unknown dtype " + std::to_string(dtype));
    Scratch global;
    if (assemble_on_device0(dev, "save", dtype, layout, local, &global)) {
        Pending e;
        e.path = path;
        e.name = name ? name : "";
        e.dtype = dtype;
        e.shape.assign(layout->global_shape, layout->global_shape + layout->rank);
        e.data = std::move(global);
        std::lock_guard<std::mutex> lock(pending_mutex);
        pending()[dev].push_back(std::move(e));
    }
}

extern "C" void meshrt_save_finish(meshrt_device* dev, const char* path) {
    TraceScope scope(dev, "save");
    Runtime& rt = runtime_of(dev, "save");
    const std::string file = path ? path : "";
    const std::string what = "save " + file;
    std::vector<Pending> mine;
    {
        std::lock_guard<std::mutex> lock(pending_mutex);
        auto it = pending().find(dev);
        if (it != pending().end()) {
            mine = std::move(it->second);
            pending().erase(it);
        }
    }
    bool writer = !mine.empty();
    // Two barriers, as in meshrt_save: no device has failed before the file is named, and
    // it is whole before any device goes on.
    comm::GroupMember world = rt.groups->world(dev);
    bool committed = false;
    auto barrier = [&] {
        rt.comm->barrier(dev, *world.group, world.rank);
        committed = true;
    };
    for (const Pending& e : mine)
        if (e.path != file)
            fail(dev, what + ": internal error: tensor '" + e.name + "' was saved to " + e.path);
    if (writer) {
        std::string json = "{\"__metadata__\": {\"format\": \"pt\", \"producer\": \"meshc\"}";
        int64_t offset = 0;
        std::vector<std::pair<const void*, size_t>> chunks(1);
        for (const Pending& e : mine) {
            const int64_t bytes = num_elements(e.shape) * int64_t(dtype_size(e.dtype));
            json += ", " + json_string(e.name) + ": {\"dtype\": \"" + st_name(e.dtype) +
                    "\", \"shape\": " + shape_json(e.shape) + ", \"data_offsets\": [" +
                    std::to_string(offset) + ", " + std::to_string(offset + bytes) + "]}";
            chunks.emplace_back(e.data.get(), size_t(bytes));
            offset += bytes;
        }
        json += "}";
        json.append((8 - json.size() % 8) % 8, ' ');
        std::string head(8, '\0');
        for (int i = 0; i < 8; ++i)
            head[size_t(i)] = char((uint64_t(json.size()) >> (8 * i)) & 0xff);
        head += json;
        chunks[0] = {head.data(), head.size()};
        if (scope.active()) {
            scope.arg("path", path);
            scope.arg("bytes", offset);
        }
        write_file_atomically(dev, what, file, chunks, [&] { barrier(); });
    }
    if (!committed)
        barrier(); // the others: the writer has the data written (not yet named)
    // Every device waits for the file: a later load of it on any device sees it whole.
    barrier();
}

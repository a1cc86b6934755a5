// meshrt_load and meshrt_save: NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Load: every device opens the file and reads only its own piece: one pread when the
// piece is a contiguous slab (only the outermost split dim is split, or nothing is),
// one per run when runs are long, else the slab of outermost rows it spans, cut in
// memory. Save: device 0 assembles the global value (layout.h), writes it to an unnamed
// file beside PATH and names it PATH only when complete (write_file_atomically), so a failed
// or killed run never leaves a partial file; every device then waits at a barrier so the
// file exists when any device goes on.
//
// dtypes: '<f4' f32, '<f8' f64, '<i4' i32, '<i8' i64, '|b1' bool, '<f2' f16. NumPy has
// no bfloat16: bf16 tensors are saved as '<f4' (exact) and loaded from '<f4' (rounded
// to nearest even).
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/fileio.h"
#include "src/layout.h"
#include "src/runtime.h"
#include "src/tensor.h"

namespace meshrt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

/// The dtype a tensor of `dtype` is stored as.
int32_t file_dtype(int32_t dtype) {
    return dtype == MESHRT_BF16 ? MESHRT_F32 : dtype;
}

const char* descr_of(int32_t file_dt) {
    switch (file_dt) {
    case MESHRT_BOOL:
        return "|b1";
    case MESHRT_I32:
        return "<i4";
    case MESHRT_I64:
        return "<i8";
    case MESHRT_F16:
        return "<f2";
    case MESHRT_F32:
        return "<f4";
    case MESHRT_F64:
        return "<f8";
    default:
        return nullptr;
    }
}

int32_t dtype_of_descr(const std::string& descr) {
    for (int32_t dt : {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16, MESHRT_F32, MESHRT_F64})
        if (descr == descr_of(dt))
            return dt;
    return -1;
}

struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
    int64_t data_offset = 0;
};

/// A parser for the Python dict literal of a .npy header:
/// {'descr': '<f4', 'fortran_order': False, 'shape': (16, 32), }
class HeaderParser {
public:
    explicit HeaderParser(const std::string& text) : s_(text) {}

    bool parse(NpyHeader* h) {
        bool have_descr = false, have_order = false, have_shape = false;
        if (!eat('{'))
            return false;
        for (;;) {
            if (eat('}'))
                break;
            std::string key;
            if (!string(&key) || !eat(':'))
                return false;
            if (key == "descr") {
                if (!string(&h->descr))
                    return false;
                have_descr = true;
            } else if (key == "fortran_order") {
                if (!boolean(&h->fortran_order))
                    return false;
                have_order = true;
            } else if (key == "shape") {
                if (!tuple(&h->shape))
                    return false;
                have_shape = true;
            } else {
                return false; // NumPy writes exactly these three keys
            }
            if (!eat(',')) {
                if (!eat('}'))
                    return false;
                break;
            }
        }
        return have_descr && have_order && have_shape;
    }

private:
    void skip() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n'))
            ++i_;
    }
    bool eat(char c) {
        skip();
        if (i_ < s_.size() && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    bool string(std::string* out) {
        skip();
        if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
            return false;
        const char q = s_[i_++];
        size_t end = s_.find(q, i_);
        if (end == std::string::npos)
            return false;
        *out = s_.substr(i_, end - i_);
        i_ = end + 1;
        return true;
    }
    bool boolean(bool* out) {
        skip();
        if (s_.compare(i_, 4, "True") == 0) {
            *out = true;
            i_ += 4;
            return true;
        }
        if (s_.compare(i_, 5, "False") == 0) {
            *out = false;
            i_ += 5;
            return true;
        }
        return false;
    }
    bool tuple(std::vector<int64_t>* out) {
        if (!eat('('))
            return false;
        for (;;) {
            if (eat(')'))
                return true;
            skip();
            int64_t v = 0;
            size_t digits = 0;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
                if (v > (INT64_MAX - 9) / 10)
                    return false;
                v = v * 10 + (s_[i_++] - '0');
                ++digits;
            }
            if (i_ < s_.size() && s_[i_] == 'L') // Python 2 longs
                ++i_;
            if (!digits)
                return false;
            out->push_back(v);
            if (!eat(',')) {
                return eat(')');
            }
        }
    }

    const std::string& s_;
    size_t i_ = 0;
};

} // namespace

void open_for_load(meshrt_device* dev, const std::string& what, const char* path, Fd& f, struct stat* st) {
    // O_NONBLOCK: opening a FIFO without a writer would wait for one forever; it (like
    // a device) is refused below. On a regular file O_NONBLOCK changes nothing.
    f.fd = open(path ? path : "", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f.fd < 0)
        fail(dev, what + ": cannot open: " + std::strerror(errno));
    if (fstat(f.fd, st) != 0 || !S_ISREG(st->st_mode))
        fail(dev, what + ": not a regular file");
}

bool read_exact(int fd, void* buf, size_t n, off_t offset) {
    char* p = static_cast<char*>(buf);
    while (n > 0) {
        ssize_t got = pread(fd, p, n, offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        n -= size_t(got);
        offset += got;
    }
    return true;
}

bool write_all(int fd, const void* buf, size_t n) {
    const char* p = static_cast<const char*>(buf);
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return false;
        p += put;
        n -= size_t(put);
    }
    return true;
}

namespace {

/// Reads and checks the header; fails the run with a message naming the file.
NpyHeader read_header(meshrt_device* dev, const std::string& what, int fd) {
    unsigned char pre[12];
    if (!read_exact(fd, pre, 10, 0) || std::memcmp(pre, kMagic, kMagicLen) != 0)
        fail(dev, what + ": not a .npy file");
    const int major = pre[6], minor = pre[7];
    size_t header_len, start;
    if (major == 1) {
        header_len = size_t(pre[8]) | size_t(pre[9]) << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (!read_exact(fd, pre + 10, 2, 10))
            fail(dev, what + ": not a .npy file");
        header_len =
            size_t(pre[8]) | size_t(pre[9]) << 8 | size_t(pre[10]) << 16 | size_t(pre[11]) << 24;
        start = 12;
    } else {
        fail(dev, what + ": unsupported .npy format version " + std::to_string(major) + "." +
                      std::to_string(minor));
    }
    if (header_len > (size_t(1) << 24))
        fail(dev, what + ": not a .npy file");
    std::string text(header_len, '\0');
    if (!read_exact(fd, text.data(), header_len, off_t(start)))
        fail(dev, what + ": not a .npy file");
    NpyHeader h;
    if (!HeaderParser(text).parse(&h))
        fail(dev, what + ": not a .npy file");
    h.data_offset = int64_t(start + header_len);
    return h;
}

std::string header_text(int32_t file_dt, const std::vector<int64_t>& shape) {
    std::string dict =
        std::string("{'descr': '") + descr_of(file_dt) + "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i)
            dict += ", ";
        dict += std::to_string(shape[i]);
    }
    if (shape.size() == 1)
        dict += ",";
    dict += "), }";
    // Pad with spaces and end with '\n' so the data starts at a multiple of 64 bytes.
    const bool v1 = (10 + dict.size() + 1 + 63) / 64 * 64 - 10 <= 65535;
    const size_t pre = v1 ? 10 : 12;
    const size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
    dict.append(total - pre - dict.size() - 1, ' ');
    dict += '\n';
    std::string out(kMagic, kMagicLen);
    out += char(v1 ? 1 : 2);
    out += char(0);
    const size_t len = dict.size();
    out += char(len & 0xff);
    out += char((len >> 8) & 0xff);
    if (!v1) {
        out += char((len >> 16) & 0xff);
        out += char((len >> 24) & 0xff);
    }
    return out + dict;
}

} // namespace

/// Reads the box `local` at `offset` of a row-major array `global` stored at
/// data_offset in fd (elements of `elem` bytes) into dst.
bool read_piece(int fd, int64_t data_offset, size_t elem, const std::vector<int64_t>& global,
                const std::vector<int64_t>& local, const std::vector<int64_t>& offset, char* dst) {
    const size_t rank = global.size();
    const int64_t n = num_elements(local);
    if (n == 0)
        return true;
    if (rank == 0)
        return read_exact(fd, dst, elem, off_t(data_offset));
    const std::vector<int64_t> gs = row_major_strides(global);
    // Dims [k, rank) after the first partially-read one form contiguous runs.
    size_t k = rank - 1;
    int64_t run = local[k];
    while (k > 0 && local[k] == global[k]) {
        --k;
        run *= local[k];
    }
    const int64_t nruns = n / run;
    const size_t run_bytes = size_t(run) * elem;
    if (nruns == 1 || run_bytes >= (size_t(64) << 10)) {
        std::vector<int64_t> idx(k, 0);
        for (int64_t r = 0; r < nruns; ++r) {
            int64_t pos = offset[k] * gs[k];
            for (size_t d = 0; d < k; ++d)
                pos += (offset[d] + idx[d]) * gs[d];
            if (!read_exact(fd, dst + size_t(r) * run_bytes, run_bytes,
                            off_t(data_offset + pos * int64_t(elem))))
                return false;
            for (size_t d = k; d-- > 0;) {
                if (++idx[d] < local[d])
                    break;
                idx[d] = 0;
            }
        }
        return true;
    }
    // Short runs: read the rows of dim 0 the piece spans, cut the piece out in memory.
    std::vector<int64_t> slab_shape = global;
    slab_shape[0] = local[0];
    Scratch slab(size_t(num_elements(slab_shape)) * elem);
    if (!read_exact(fd, slab.get(), slab.size(),
                    off_t(data_offset + offset[0] * gs[0] * int64_t(elem))))
        return false;
    std::vector<int64_t> start = offset;
    start[0] = 0;
    copy_box(elem, local, slab.get(), slab_shape, start, dst, local, std::vector<int64_t>(rank, 0));
    return true;
}

/// Writes the chunks, in order, as `path` so that no partial file ever appears, there or beside
/// it, however the process ends. The data goes to an unnamed file in path's directory
/// (O_TMPFILE), which vanishes with the process even on SIGKILL (mpirun follows its
/// SIGTERM with a SIGKILL within milliseconds); only when it is complete does it get a
/// name, PATH.tmp.PID, at once renamed over path. Where the file system has no
/// O_TMPFILE (or it cannot be linked: no /proc), the data goes to PATH.tmp.PID directly.
/// That name is registered while it exists, so a failure, SIGTERM or SIGINT removes it
/// (errors.h).
void write_file_atomically(meshrt_device* dev, const std::string& what, const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& chunks,
                           const std::function<void()>& commit) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    if (!register_temp_file(tmp))
        fail(dev, what + ": cannot create " + tmp +
                      (tmp.size() >= PATH_MAX ? ": path too long" : ": too many saves at once"));
    auto write_to = [&](int fd) {
        for (const auto& [data, bytes] : chunks)
            if (!write_all(fd, data, bytes))
                fail(dev, what + ": cannot write: " + std::strerror(errno));
    };
    bool committed = false; // once, though the data may be written twice (no O_TMPFILE link)
    auto run_commit = [&] {
        if (commit && !committed) {
            committed = true;
            commit();
        }
    };
    auto close_and_publish = [&](Fd& f) {
        const int fd = f.fd;
        f.fd = -1;
        if (close(fd) != 0)
            fail(dev, what + ": cannot write: " + std::strerror(errno));
        if (rename(tmp.c_str(), path.c_str()) != 0)
            fail(dev, what + ": cannot rename " + tmp + ": " + std::strerror(errno));
        unregister_temp_file(tmp);
    };

    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    Fd f;
    f.fd = open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (f.fd >= 0) {
        write_to(f.fd);
        run_commit(); // still unnamed: a run ended here leaves nothing
        unlink(tmp.c_str()); // left by an earlier process with this pid, killed at the wrong time
        const std::string self = "/proc/self/fd/" + std::to_string(f.fd);
        if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0 ||
            linkat(f.fd, "", AT_FDCWD, tmp.c_str(), AT_EMPTY_PATH) == 0) {
            close_and_publish(f);
            return;
        }
        close(f.fd);
        f.fd = -1;
    }
    // A named temporary. A SIGTERM must find a thread that can run its handler while
    // this one is inside a long write(2), which a handled signal does not interrupt.
    SignalDeferral defer_signals;
    f.fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0)
        fail(dev, what + ": cannot create " + tmp + ": " + std::strerror(errno));
    write_to(f.fd);
    run_commit(); // a run ended here removes the registered temporary
    close_and_publish(f);
}

} // namespace meshrt

using namespace meshrt;

extern "C" void meshrt_load(meshrt_device* dev, const char* path, int32_t dtype,
                            const meshrt_layout* layout, void* out) {
    TraceScope scope(dev, "load");
    const std::string what = std::string("load ") + (path ? path : "(null)");
    if (!dtype_valid(dtype))
        fail(dev, what + ": unknown dtype " + std::to_string(dtype));
    Piece p = local_piece(dev, "load", layout);
    if (!p.member)
        return;
    Fd f;
    struct stat st;
    open_for_load(dev, what, path, f, &st);
    NpyHeader h = read_header(dev, what, f.fd);
    const int32_t want = file_dtype(dtype);
    const std::string expected =
        type_string(dtype, p.global_shape) + (dtype == MESHRT_BF16 ? " (stored as f32)" : "");
    const int32_t found = dtype_of_descr(h.descr);
    if (found < 0)
        fail(dev, what + ": expected " + expected + ", found unsupported dtype '" + h.descr + "'");
    if (h.fortran_order)
        fail(dev, what + ": Fortran-order arrays are not supported (save it in C order)");
    if (found != want || h.shape != p.global_shape)
        fail(dev, what + ": expected " + expected + ", found " + type_string(found, h.shape));
    const size_t elem = dtype_size(want);
    const int64_t need = num_elements(p.global_shape) * int64_t(elem);
    const int64_t have = int64_t(st.st_size) - h.data_offset;
    if (have < need)
        fail(dev, what + ": truncated: expected " + std::to_string(need) + " data bytes, found " +
                      std::to_string(std::max<int64_t>(0, have)));
    const int64_t n = num_elements(p.local_shape);
    if (scope.active()) {
        scope.arg("path", path);
        scope.arg("bytes", n * int64_t(elem));
    }
    if (dtype == MESHRT_BF16) {
        Scratch wide(size_t(n) * sizeof(float));
        if (!read_piece(f.fd, h.data_offset, elem, p.global_shape, p.local_shape, p.offset,
                        wide.get<char>()))
            fail(dev, what + ": read error");
        f32_to_halves(MESHRT_BF16, wide.get<float>(), static_cast<uint16_t*>(out), n);
    } else if (!read_piece(f.fd, h.data_offset, elem, p.global_shape, p.local_shape, p.offset,
                           static_cast<char*>(out))) {
        fail(dev, what + ": read error");
    }
    if (dtype == MESHRT_BOOL) // NumPy's bools are 0/1 already; make sure of it
        for (int64_t i = 0; i < n; ++i)
            static_cast<uint8_t*>(out)[i] = static_cast<uint8_t*>(out)[i] != 0;
}

extern "C" void meshrt_save(meshrt_device* dev, const char* path, int32_t dtype,
                            const meshrt_layout* layout, const void* local) {
    TraceScope scope(dev, "save");
    Runtime& rt = runtime_of(dev, "save");
    const std::string what = std::string("save ") + (path ? path : "(null)");
    if (!path || !*path)
        fail(dev, "save: no path");
    if (!dtype_valid(dtype))
        fail(dev, what + ": unknown dtype " + std::to_string(dtype));
    // Two barriers: every device has reached the save (none has failed) before the file
    // gets its name, and the file is whole before any device goes on.
    comm::GroupMember world = rt.groups->world(dev);
    bool committed = false;
    auto barrier = [&] {
        rt.comm->barrier(dev, *world.group, world.rank);
        committed = true;
    };
    Scratch global;
    if (assemble_on_device0(dev, "save", dtype, layout, local, &global)) {
        const std::vector<int64_t> shape(layout->global_shape, layout->global_shape + layout->rank);
        const int64_t n = num_elements(shape);
        const int32_t fdt = file_dtype(dtype);
        Scratch wide;
        const void* data = global.get();
        if (dtype == MESHRT_BF16) {
            wide.resize(size_t(n) * sizeof(float));
            halves_to_f32(MESHRT_BF16, global.get<uint16_t>(), wide.get<float>(), n);
            data = wide.get();
        }
        const std::string header = header_text(fdt, shape);
        const size_t data_bytes = size_t(n) * dtype_size(fdt);
        if (scope.active()) {
            scope.arg("path", path);
            scope.arg("bytes", int64_t(data_bytes));
        }
        write_file_atomically(dev, what, path, {{header.data(), header.size()}, {data, data_bytes}},
                              [&] { barrier(); });
    }
    if (!committed)
        barrier(); // the others: device 0 has written the data (not yet named)
    // Every device waits for the file: a later load of it on any device sees it whole.
    barrier();
}

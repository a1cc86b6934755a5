// File helpers shared by the .npy (npy.cpp) and .safetensors (safetensors.cpp) readers
// and writers: positioned reads of a device's piece, and writes that publish a file only
// when it is complete.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "meshrt.h"

namespace meshrt {

/// A file descriptor, closed when it goes out of scope.
struct Fd {
    int fd = -1;
    Fd() = default;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0)
            close(fd);
    }
};

/// Opens `path` to load from into f, with its status in *st: it must be a regular file
/// (a FIFO without a writer, or a device, is refused at once, without waiting); fails the
/// run with a message starting with `what` otherwise.
void open_for_load(meshrt_device* dev, const std::string& what, const char* path, Fd& f, struct stat* st);

/// pread of exactly n bytes at offset (false on an error or end of file).
bool read_exact(int fd, void* buf, size_t n, off_t offset);
bool write_all(int fd, const void* buf, size_t n);

/// Reads the box `local` at `offset` of a row-major array `global` stored at
/// data_offset in fd (elements of `elem` bytes) into dst: only the bytes of the box's
/// rows are read (positioned reads), never the whole array.
bool read_piece(int fd, int64_t data_offset, size_t elem, const std::vector<int64_t>& global,
                const std::vector<int64_t>& local, const std::vector<int64_t>& offset, char* dst);

/// Writes the chunks, in order, as `path`, through an unnamed (or PATH.tmp.PID) file
/// renamed over path when complete; fails the run with a message starting with `what`.
/// `commit`, when given, runs once the data is written and before the file has its name:
/// the save's barrier, so that a run in which another device fails meanwhile (and which
/// is therefore ended before the barrier completes) never publishes the file.
void write_file_atomically(meshrt_device* dev, const std::string& what, const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& chunks,
                           const std::function<void()>& commit = {});

} // namespace meshrt

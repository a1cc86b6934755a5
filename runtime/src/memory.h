// A per-device cache of freed buffers, so that a program that allocates the same sizes
// over and over (every loop iteration, every training step) reuses warm memory instead
// of asking the system for fresh pages each time (glibc serves big blocks with mmap, and
// touching fresh pages costs a page fault each). Used only by the device's own thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace meshrt {

class BufferCache {
public:
    BufferCache() = default;
    BufferCache(const BufferCache&) = delete;
    BufferCache& operator=(const BufferCache&) = delete;
    ~BufferCache();

    /// A cached block of exactly `bytes`, or nullptr.
    void* take(uint64_t bytes);
    /// Keeps a freed block for reuse; false (the caller frees it) when the cache is full.
    bool keep(void* block, uint64_t bytes);

    /// At most this many bytes stay cached per device ($MESHRT_CACHE_MIB, default 1024).
    static uint64_t capacity();

private:
    std::unordered_map<uint64_t, std::vector<void*>> free_;
    uint64_t cached_ = 0;
};

} // namespace meshrt

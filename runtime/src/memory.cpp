// Device memory on the host: 64-byte aligned buffers for the generated code (the ABI
// promises that alignment, and it keeps vector loads and BLAS panels aligned). Each
// buffer has a 64-byte header holding its size, so that meshrt_free can hand it to the
// device's BufferCache (memory.h) for reuse by the next allocation of the same size.
// Sanitizer builds do not cache: reusing a block would hide a use after free from ASan.
#include "src/memory.h"

#include <cstdlib>
#include <string>

#include "src/errors.h"
#include "src/runtime.h"
#ifdef MESHRT_HAVE_CUDA
#include "kernels/cuda/cuda.h" // --device=cuda: managed memory instead
#endif

#if defined(__SANITIZE_ADDRESS__)
#define MESHRT_NO_CACHE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MESHRT_NO_CACHE 1
#endif
#endif

namespace meshrt {

namespace {
constexpr uint64_t kHeader = 64;
}

BufferCache::~BufferCache() {
    for (auto& [bytes, blocks] : free_) {
        for (void* b : blocks) std::free(b);
    }
}

void* BufferCache::take(uint64_t bytes) {
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* b = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return b;
}

bool BufferCache::keep(void* block, uint64_t bytes) {
#ifdef MESHRT_NO_CACHE
    (void)block;
    (void)bytes;
    return false;
#else
    if (cached_ + bytes > capacity()) return false;
    free_[bytes].push_back(block);
    cached_ += bytes;
    return true;
#endif
}

uint64_t BufferCache::capacity() {
    static const uint64_t bytes = [] {
        const char* env = std::getenv("MESHRT_CACHE_MIB");
        long long mib = env ? std::atoll(env) : 1024;
        return static_cast<uint64_t>(mib < 0 ? 0 : mib) << 20;
    }();
    return bytes;
}

} // namespace meshrt

extern "C" void* meshrt_alloc(meshrt_device* dev, int64_t bytes) {
#ifdef MESHRT_HAVE_CUDA
    if (meshrt::cuda::enabled(dev))
        return meshrt::cuda::alloc(dev, bytes);
#endif
    if (bytes < 0)
        meshrt::fail(dev, "alloc: negative size " + std::to_string(bytes));
    // A multiple of the alignment; 0 bytes still gets a unique pointer.
    uint64_t rounded = (uint64_t(bytes) + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void* block = dev ? dev->cache.take(rounded) : nullptr;
    if (!block) block = std::aligned_alloc(64, size_t(rounded + meshrt::kHeader));
    if (!block)
        meshrt::fail(dev, "out of memory: cannot allocate " + std::to_string(bytes) + " bytes");
    *static_cast<uint64_t*>(block) = rounded;
    return static_cast<char*>(block) + meshrt::kHeader;
}

extern "C" void meshrt_free(meshrt_device* dev, void* ptr) {
    if (!ptr) return;
#ifdef MESHRT_HAVE_CUDA
    if (meshrt::cuda::enabled(dev)) {
        meshrt::cuda::free(dev, ptr);
        return;
    }
#endif
    void* block = static_cast<char*>(ptr) - meshrt::kHeader;
    uint64_t rounded = *static_cast<uint64_t*>(block);
    if (dev && dev->cache.keep(block, rounded)) return;
    std::free(block);
}

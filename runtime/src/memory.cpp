// Device memory on the host: 64-byte aligned buffers for the generated code (the ABI
// promises that alignment, and it keeps vector loads and BLAS panels aligned).
#include <cstdlib>
#include <string>

#include "src/errors.h"
#include "src/runtime.h"

extern "C" void* meshrt_alloc(meshrt_device* dev, int64_t bytes) {
    if (bytes < 0)
        meshrt::fail(dev, "alloc: negative size " + std::to_string(bytes));
    // aligned_alloc wants a multiple of the alignment; 0 bytes still gets a unique pointer.
    const uint64_t rounded = (uint64_t(bytes) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded ? size_t(rounded) : 64);
    if (!p)
        meshrt::fail(dev, "out of memory: cannot allocate " + std::to_string(bytes) + " bytes");
    return p;
}

extern "C" void meshrt_free(meshrt_device*, void* ptr) {
    std::free(ptr);
}

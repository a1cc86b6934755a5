// meshrt_launch on the GPU: the program's PTX image, loaded once per process with the
// runtime API's library calls (context-independent, so every GPU of the process can use
// it), and its kernels, looked up once each.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/device.h"
#include "src/errors.h"

namespace meshrt::cuda {

namespace {

constexpr int64_t kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

std::mutex g_mutex;
std::map<const void*, cudaLibrary_t> g_libraries;
std::map<std::pair<const void*, std::string>, cudaKernel_t> g_kernels;

cudaKernel_t find_kernel(meshrt_device* dev, const char* image, const char* kernel) {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto key = std::make_pair(static_cast<const void*>(image), std::string(kernel));
    if (auto it = g_kernels.find(key); it != g_kernels.end())
        return it->second;
    auto lib = g_libraries.find(image);
    if (lib == g_libraries.end()) {
        // The driver compiles the PTX here; its error log goes into the message.
        cudaLibrary_t l = nullptr;
        char log[4096] = {};
        cudaJitOption options[] = {cudaJitErrorLogBuffer, cudaJitErrorLogBufferSizeBytes};
        void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log))};
        const cudaError_t e =
            cudaLibraryLoadData(&l, image, options, values, 2, nullptr, nullptr, 0);
        if (e != cudaSuccess)
            fail(dev, std::string("the program's GPU kernels (PTX) do not load: ") +
                          cudaGetErrorString(e) + (log[0] ? std::string(": ") + log : ""));
        lib = g_libraries.emplace(image, l).first;
    }
    cudaKernel_t k = nullptr;
    const cudaError_t e = cudaLibraryGetKernel(&k, lib->second, kernel);
    if (e != cudaSuccess)
        fail(dev, std::string("GPU kernel ") + kernel + " not found: " + cudaGetErrorString(e));
    g_kernels.emplace(key, k);
    return k;
}

} // namespace

void launch(meshrt_device* dev, const char* image, const char* kernel, void** args, int64_t n) {
    DeviceContext& c = context(dev);
    cudaKernel_t k = find_kernel(dev, image, kernel);
    const int64_t blocks = std::min(kMaxBlocks, (n + kThreadsPerBlock - 1) / kThreadsPerBlock);
    const std::string what = std::string("kernel ") + kernel;
    check(dev,
          cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(unsigned(blocks)),
                           dim3(unsigned(kThreadsPerBlock)), args, 0, c.stream),
          what.c_str());
    sync(dev, c, what.c_str());
}

} // namespace meshrt::cuda

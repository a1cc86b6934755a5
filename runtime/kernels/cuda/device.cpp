// The per-device GPU state, managed memory for meshrt_alloc/free, and the staging
// helpers (see device.h and cuda.h).
#include "kernels/cuda/device.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "src/errors.h"
#include "src/memory.h"
#include "src/runtime.h"

namespace meshrt::cuda {
namespace {

std::atomic<int> g_gpus{0};
constexpr uint64_t kAlign = 256; // what cudaMalloc guarantees; cuBLAS likes it

std::string describe(cudaError_t e) {
    return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void free_cached(DeviceContext& c) {
    for (auto& [bytes, blocks] : c.cached)
        for (void* p : blocks)
            cudaFree(p);
    c.cached.clear();
    c.cached_bytes = 0;
}

} // namespace

bool enabled(meshrt_device* dev) {
    return dev && dev->runtime && dev->runtime->options.device == "cuda";
}

bool init_process(std::string* error) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *error = "no usable GPU: cudaGetDeviceCount: " + describe(e);
        return false;
    }
    if (n < 1) {
        *error = "no GPU";
        return false;
    }
    g_gpus.store(n);
    return true;
}

int gpu_count() {
    return g_gpus.load();
}

void check(meshrt_device* dev, cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        fail(dev, std::string("CUDA: ") + what + ": " + describe(e));
}

void check(meshrt_device* dev, cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        fail(dev, std::string("cuBLAS: ") + what + ": " + cublasGetStatusName(s) + " (" +
                      cublasGetStatusString(s) + ")");
}

DeviceContext& context(meshrt_device* dev) {
    if (dev->cuda)
        return *dev->cuda;
    const int count = gpu_count();
    if (count < 1)
        fail(dev, "--device=cuda: no GPU (the CUDA device was not initialised)");
    dev->cuda = CudaContextPtr(new DeviceContext, &destroy_context);
    DeviceContext& c = *dev->cuda;
    c.gpu = int(dev->index % count);
    check(dev, cudaSetDevice(c.gpu), "cudaSetDevice");
    check(dev, cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(dev, cublasCreate(&c.blas), "cublasCreate");
    check(dev, cublasSetStream(c.blas, c.stream), "cublasSetStream");
    // Stream-ordered scratch memory stays in the GPU's pool between calls instead of
    // going back to the driver at every synchronisation.
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, c.gpu) == cudaSuccess) {
        uint64_t keep = UINT64_MAX;
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    cudaGetLastError(); // a pool without the attribute is no error for the next call
    return c;
}

void destroy_context(DeviceContext* c) {
    if (!c)
        return;
    // Teardown after the run: errors are ignored (nothing can be done about them).
    cudaSetDevice(c->gpu);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    for (auto& [p, bytes] : c->live)
        cudaFree(p);
    free_cached(*c);
    if (c->scratch_word)
        cudaFree(c->scratch_word);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    cudaGetLastError();
    delete c;
}

void sync(meshrt_device* dev, DeviceContext& c, const char* what) {
    const cudaError_t e = cudaStreamSynchronize(c.stream);
    if (e != cudaSuccess)
        fail(dev, std::string("CUDA: ") + what + ": " + describe(e));
}

bool device_accessible(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void* alloc(meshrt_device* dev, int64_t bytes) {
    if (bytes < 0)
        fail(dev, "alloc: negative size " + std::to_string(bytes));
    DeviceContext& c = context(dev);
    const uint64_t rounded =
        std::max<uint64_t>(kAlign, (uint64_t(bytes) + kAlign - 1) / kAlign * kAlign);
    void* p = nullptr;
    auto it = c.cached.find(rounded);
    if (it != c.cached.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        c.cached_bytes -= rounded;
    } else {
        cudaError_t e = cudaMallocManaged(&p, rounded, cudaMemAttachGlobal);
        if (e == cudaErrorMemoryAllocation && c.cached_bytes > 0) {
            cudaGetLastError();
            free_cached(c); // other sizes may be cached: give them back and retry
            e = cudaMallocManaged(&p, rounded, cudaMemAttachGlobal);
        }
        if (e != cudaSuccess)
            fail(dev, "out of memory: cannot allocate " + std::to_string(bytes) +
                          " bytes of managed memory on GPU " + std::to_string(c.gpu) +
                          ": cudaMallocManaged: " + describe(e));
    }
    c.live.emplace(p, rounded);
    return p;
}

void free(meshrt_device* dev, void* ptr) {
    DeviceContext& c = context(dev);
    auto it = c.live.find(ptr);
    if (it == c.live.end())
        fail(dev, "free: a pointer this device did not allocate");
    const uint64_t rounded = it->second;
    c.live.erase(it);
    // Under NCCL nothing is given back during the run: cudaFree may wait for work on the
    // GPUs, and a peer's NCCL kernel may be waiting for this very device to join it.
    // (The program's working set bounds the cache: it reuses blocks of the sizes it frees.)
    if (c.cached_bytes + rounded <= BufferCache::capacity() ||
        dev->runtime->options.comm == "nccl") {
        c.cached[rounded].push_back(ptr);
        c.cached_bytes += rounded;
        return;
    }
    check(dev, cudaFree(ptr), "cudaFree");
}

DeviceBuffer::DeviceBuffer(meshrt_device* dev, DeviceContext& c, const void* ptr, size_t bytes,
                           bool read, bool write)
    : dev_(dev), c_(c), host_(const_cast<void*>(ptr)), data_(const_cast<void*>(ptr)), bytes_(bytes),
      staged_(false), write_(write) {
    if (bytes == 0 || !ptr || device_accessible(ptr))
        return;
    check(dev, cudaMallocAsync(&data_, bytes, c.stream), "cudaMallocAsync");
    staged_ = true;
    if (read)
        check(dev, cudaMemcpyAsync(data_, ptr, bytes, cudaMemcpyHostToDevice, c.stream),
              "cudaMemcpyAsync to the GPU");
}

DeviceBuffer::~DeviceBuffer() {
    if (staged_)
        cudaFreeAsync(data_, c_.stream);
}

void DeviceBuffer::finish() {
    if (staged_ && write_)
        check(dev_, cudaMemcpyAsync(host_, data_, bytes_, cudaMemcpyDeviceToHost, c_.stream),
              "cudaMemcpyAsync to the host");
}

DeviceScratch::DeviceScratch(meshrt_device* dev, DeviceContext& c, size_t bytes) : c_(c) {
    check(dev, cudaMallocAsync(&data_, std::max<size_t>(bytes, 1), c.stream), "cudaMallocAsync");
}

DeviceScratch::~DeviceScratch() {
    cudaFreeAsync(data_, c_.stream);
}

} // namespace meshrt::cuda

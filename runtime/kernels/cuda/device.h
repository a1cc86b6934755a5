// A mesh device's GPU state under --device=cuda (internal to kernels/cuda/ and
// comm/nccl/): its GPU, its stream, its cuBLAS handle and its managed-memory cache; the
// error checks; and DeviceBuffer, which gives the GPU a buffer it can address (a host
// buffer is staged through stream-ordered device memory). Made on the device's first
// GPU call, on the device's own thread (which it binds to the GPU), and kept in
// meshrt_device::cuda.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "meshrt.h"

namespace meshrt::cuda {

struct DeviceContext {
    int gpu = 0;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    /// Live managed blocks (meshrt_alloc) and their rounded sizes.
    std::unordered_map<void*, uint64_t> live;
    /// Freed blocks kept for reuse, by rounded size, and their total.
    std::unordered_map<uint64_t, std::vector<void*>> cached;
    uint64_t cached_bytes = 0;
    /// Four bytes of device memory (made on first use): the NCCL handler's barrier word.
    void* scratch_word = nullptr;
};

/// The device's context, made on first use (on the device's thread, binding it to GPU
/// index % gpu_count()). Fails the run when CUDA reports an error.
DeviceContext& context(meshrt_device* dev);

/// Fail the run (naming the device and `what`) unless the call succeeded.
void check(meshrt_device* dev, cudaError_t e, const char* what);
void check(meshrt_device* dev, cublasStatus_t s, const char* what);

/// Waits for the device's stream; every GPU runtime call ends with it.
void sync(meshrt_device* dev, DeviceContext& c, const char* what);

/// Whether the GPU can read and write `p` directly: device or managed memory.
bool device_accessible(const void* p);

/// A buffer the GPU can address: `ptr` itself when it is device or managed memory (what
/// meshrt_alloc returns under --device=cuda), else a stream-ordered device copy, filled
/// from ptr when `read`, copied back to ptr by finish() when `write` (host buffers of
/// the runtime itself, e.g. the pieces save and print gather). The copy is freed in
/// stream order by the destructor.
class DeviceBuffer {
public:
    DeviceBuffer(meshrt_device* dev, DeviceContext& c, const void* ptr, size_t bytes, bool read,
                 bool write);
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    template <class T = void> T* get() const { return static_cast<T*>(data_); }
    /// Enqueues the copy back to the host buffer (a staged `write` buffer only).
    void finish();

private:
    meshrt_device* dev_;
    DeviceContext& c_;
    void* host_;
    void* data_;
    size_t bytes_;
    bool staged_, write_;
};

/// Stream-ordered device scratch memory (cudaMallocAsync / cudaFreeAsync).
class DeviceScratch {
public:
    DeviceScratch(meshrt_device* dev, DeviceContext& c, size_t bytes);
    ~DeviceScratch();
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;
    template <class T = void> T* get() const { return static_cast<T*>(data_); }

private:
    DeviceContext& c_;
    void* data_ = nullptr;
};

} // namespace meshrt::cuda

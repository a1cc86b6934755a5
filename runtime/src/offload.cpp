// The GPU kernels of a program built with `meshc build --gpu` (meshrt.h, "GPU kernels"):
// meshrt_offload says whether they run; meshrt_launch runs one, on the GPU
// (kernels/cuda/launch.cpp) or, under --device=gpu-emulator, on the host.
#include <string>

#include "src/errors.h"
#include "src/runtime.h"
#ifdef MESHRT_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

namespace {

// The emulated GPU thread the host copy of a kernel is running as.
thread_local int64_t t_thread = 0;
thread_local int64_t t_threads = 1;

// Emulated threads per launch: a prime, so that the grid-stride loops meet thread counts
// that divide nothing, and threads that have no element at all when n is small.
constexpr int64_t kEmulatedThreads = 7;

} // namespace

extern "C" int32_t meshrt_offload(meshrt_device* dev) { return dev && dev->offload ? 1 : 0; }

extern "C" int64_t meshrt_kernel_thread(void) { return t_thread; }
extern "C" int64_t meshrt_kernel_threads(void) { return t_threads; }

extern "C" void meshrt_launch(meshrt_device* dev, const char* image, const char* kernel,
                              void (*host)(void**), void** args, int64_t n) {
    meshrt::Runtime& rt = meshrt::runtime_of(dev, "meshrt_launch");
    if (!dev->offload)
        meshrt::fail(dev, std::string("GPU kernel ") + (kernel ? kernel : "?") +
                              " launched without --device=cuda or gpu-emulator");
    if (n <= 0)
        return;
    if (rt.options.device == "cuda") {
#ifdef MESHRT_HAVE_CUDA
        meshrt::cuda::launch(dev, image, kernel, args, n);
        return;
#endif
    }
    if (!host)
        meshrt::fail(dev, std::string("GPU kernel ") + (kernel ? kernel : "?") +
                              " has no host copy for --device=gpu-emulator");
    for (int64_t t = 0; t < kEmulatedThreads; ++t) {
        t_thread = t;
        t_threads = kEmulatedThreads;
        host(args);
    }
    t_thread = 0;
    t_threads = 1;
}

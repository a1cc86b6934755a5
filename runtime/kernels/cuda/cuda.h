// The CUDA device (--device=cuda), as the rest of the runtime sees it: what meshrt_main,
// meshrt_alloc/free, meshrt_contract and meshrt_random call when the run was started
// with --device=cuda. Only compiled with MESHRT_HAVE_CUDA (cmake -DMESHC_CUDA=ON).
//
// Memory is CUDA managed memory. Contractions (cuBLAS), random numbers, the program's
// kernels (`meshc build --gpu`: fused element-wise loops, reductions, fills, copies,
// compiled to PTX by LLVM) and, with --comm=nccl, collectives run on the GPU; the loops
// the compiler keeps on the host (and every loop of a program built without --gpu) run
// there over unified memory. Every runtime call
// that uses the GPU waits for its stream before it returns, so the host code may read
// the results right away.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/contract_plan.h"
#include "meshrt.h"
#include "src/layout.h"

namespace meshrt::cuda {

struct DeviceContext;

/// Whether the device's run was started with --device=cuda (false for a null dev).
bool enabled(meshrt_device* dev);

/// Called once by meshrt_main for --device=cuda: false with *error when no GPU can be
/// used (no driver, no device).
bool init_process(std::string* error);
/// The number of GPUs (after init_process); mesh device d runs on GPU d % gpu_count().
int gpu_count();

/// Frees a device's GPU state (its stream, cuBLAS handle, cached memory): the deleter of
/// meshrt_device::cuda. Called by the thread that destroys the device.
void destroy_context(DeviceContext* ctx);

/// meshrt_alloc / meshrt_free under --device=cuda: managed memory, freed blocks cached
/// per device by size (as BufferCache does on the host, same budget).
void* alloc(meshrt_device* dev, int64_t bytes);
void free(meshrt_device* dev, void* ptr);

/// meshrt_contract on the GPU for f32, f64, f16 and bf16 (the spec already parsed and
/// checked); false, doing nothing, for the other dtypes (the CPU kernels run them, on
/// the host, over the managed memory).
bool contract(meshrt_device* dev, int32_t dtype, const contract::Spec& spec, const void* a,
              const int64_t* shape_a, const void* b, const int64_t* shape_b, void* out,
              const int64_t* shape_out, contract::Stats* stats);

/// meshrt_random's values for this device's piece, computed on the GPU; false (nothing
/// done) when the piece's rank exceeds the kernel's limit (the CPU then does it).
bool random(meshrt_device* dev, int32_t kind, int64_t seed, int32_t dtype, const Piece& piece,
            void* out);

/// meshrt_launch under --device=cuda: loads the PTX image once per process
/// (cudaLibraryLoadData; the driver compiles it for the GPU), finds the kernel once, and
/// launches it over enough blocks of 256 threads for n (at most 65535 blocks: the kernels
/// are grid-stride loops), on the device's stream; waits for it. Fails the run, naming the
/// kernel, when the image does not load or the launch fails.
void launch(meshrt_device* dev, const char* image, const char* kernel, void** args, int64_t n);

} // namespace meshrt::cuda

// The CUDA device (--device=cuda), as the rest of the runtime sees it: what meshrt_main,
// meshrt_alloc/free, meshrt_contract and meshrt_random call when the run was started
// with --device=cuda. Only compiled with MESHRT_HAVE_CUDA (cmake -DMESHC_CUDA=ON).
//
// Memory is CUDA managed memory: the generated code's fused element-wise loops still run
// on the host (until the NVPTX kernels come), over unified memory; contractions (cuBLAS),
// random numbers and, with --comm=nccl, collectives run on the GPU. Every runtime call
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

} // namespace meshrt::cuda

// GPU kernels (`meshc build --gpu`): the data-parallel loops the generator marked as
// regions are outlined into kernels, compiled to PTX by LLVM's NVPTX back end, and
// launched through the runtime (meshrt_launch). Internal to src/codegen/.
//
// A region is a grid-stride loop: thread t of T handles elements t, t+T, t+2T, ... of the
// loop's index space, reading t and T from meshrt_kernel_thread / meshrt_kernel_threads.
// In the host module those stay runtime calls (the gpu-emulator device sets them); in the
// PTX module they become the thread and block registers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <llvm/IR/Module.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/codegen.h"

namespace meshc::codegen {

/// The pass manager's default pipeline at `opt_level` (0..3) for tm's target.
void optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level);
/// The module as assembly text or an object file (tm's target).
std::string emit_file(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type);

namespace gpu {

constexpr const char* kThread = "meshrt_kernel_thread";
constexpr const char* kThreads = "meshrt_kernel_threads";

struct Region {
    llvm::Function* host = nullptr;         // the function the region is in
    std::vector<llvm::BasicBlock*> blocks;  // the entry first; one exit edge
    llvm::Value* dev = nullptr;             // the host function's device argument
    int64_t threads = 0;                    // the loop's iteration count
    std::string what;                       // what the loop computes (a comment in the PTX)
};

struct Kernel {
    llvm::Function* fn = nullptr;  // meshk_N in the host module
    std::string what;
};

/// Outlines each region into a kernel `meshk_N` (and `meshk_N.host`, its entry for the
/// gpu-emulator), replacing the region by a meshrt_launch of it that passes `image`. A
/// region a GPU cannot run (it calls something, reads a global, takes an argument of a
/// type kernels do not take) stays in place and runs on the host as one thread. Returns
/// the kernels.
std::vector<Kernel> outline(llvm::Module& host, const std::vector<Region>& regions, llvm::GlobalVariable* image);

/// The kernels (cloned out of the host module) as PTX for `arch` (sm_NN), math functions
/// from CUDA's libdevice. Throws GpuError when libdevice or the NVPTX target is missing.
std::string compile_ptx(const llvm::Module& host, const std::vector<Kernel>& kernels, const std::string& arch,
                        int opt_level);

}  // namespace gpu
}  // namespace meshc::codegen

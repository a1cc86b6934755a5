// Code generation: local IR -> LLVM IR (LLVM 19 C++ API) -> optimised module -> text
// (LLVM IR, assembly) or an object file, and the link step that turns the object into an
// executable with libmeshrt. The generated object defines `main`, which hands a static
// description of the program's meshes and the SPMD entry function to meshrt_main.
//
// With --gpu the data-parallel loops (fused element-wise, reductions, fills, iota,
// copies) also become kernels, compiled to PTX by LLVM's NVPTX back end and launched
// through the runtime when the program runs with --device=cuda (codegen/gpu.h).
//
// What the generated code does itself: control flow (`for`, `if`, calls), element-wise
// chains fused into one loop nest each (no temporary per op; LLVM vectorises the loops),
// reductions, fills, iota, copies, and buffer lifetimes (each buffer is freed after its
// last use). What it calls the runtime for: contractions, collectives, random numbers,
// I/O, printing, lookups, slices and concatenation (runtime/include/meshrt.h).
#pragma once

#include <stdexcept>
#include <functional>
#include <string>
#include <vector>

#include "spmd/spmd.h"

namespace meshc::codegen {

enum class EmitKind { LLVM, Asm, Obj, Ptx };

/// A GPU build problem that is the environment's, not the program's (no CUDA libdevice,
/// no NVPTX target in this LLVM): the driver reports it as E0706.
struct GpuError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Options {
    int opt_level = 2;         // 0..3: the new pass manager's O0..O3
    std::string program_name;  // for the runtime's --help and messages
    /// GPU kernels (--gpu): the data-parallel loops are also compiled to PTX for
    /// `gpu_arch` and embedded; the program runs them under --device=cuda (and on the
    /// host under --device=gpu-emulator). EmitKind::Ptx implies it.
    bool gpu = false;
    std::string gpu_arch = "sm_90";
    /// `file:line:col` of a source span (empty when unknown): each collective tells the
    /// runtime where it comes from, for the messages of one that fails or times out.
    std::function<std::string(Span)> locate;
    /// Threads that optimise and emit a large program's object code (`meshc build -j`):
    /// 0 = one per core, 1 = the whole module on this thread. A small module is always
    /// compiled whole (generate_objects()).
    unsigned jobs = 0;
};

/// Generates the whole program (module.entry must be valid) and returns the LLVM IR text,
/// the assembly text, the object file's bytes or the GPU kernels' PTX. A missing GPU
/// tool (CUDA's libdevice, LLVM's NVPTX target) throws GpuError (codegen/gpu.h). An unsupported construct is a user
/// error reported by the caller before this point; anything else failing here is an
/// internal error (InternalError).
std::string generate(const spmd::LocalModule& module, const Options& options, EmitKind kind);

/// The program's object code, as generate(module, options, EmitKind::Obj) makes it, but a
/// large module (thousands of instructions; a program written layer by layer, a long
/// derived function) is split into parts optimised and emitted in parallel, one object
/// each, on up to `options.jobs` threads: link them all. Same behaviour either way.
/// `report`, when given, receives the CPU seconds each part's optimisation and emission
/// took (one entry when the module was compiled whole), for `--time-report`.
struct CodegenReport {
    std::vector<double> part_cpu_seconds;
};
std::vector<std::string> generate_objects(const spmd::LocalModule& module, const Options& options,
                                          CodegenReport* report = nullptr);

/// Links `objects` with libmeshrt into `output` through the system C++ driver. On failure
/// returns false with the driver's output in `error`.
bool link_executable(const std::vector<std::string>& objects, const std::string& output, std::string& error);

/// Combines `objects` into one relocatable object `output` (the C++ driver's `-r`), for
/// `--emit=obj` of a program compiled in parts. On failure returns false with the
/// driver's output in `error`.
bool combine_objects(const std::vector<std::string>& objects, const std::string& output, std::string& error);

/// What identifies the compiler and runtime that build a program (the meshc executable's
/// and libmeshrt's sizes and modification times): part of `meshc run`'s cache key, so a
/// rebuilt meshc never reuses executables its predecessor made.
std::string toolchain_identity();

}  // namespace meshc::codegen

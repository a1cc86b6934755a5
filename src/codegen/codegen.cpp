// Local IR -> LLVM IR: the target machine, optimisation and emission; the generator is in
// generator.h and lower_*.cpp. See codegen.h for what is generated inline and what is a
// runtime call.
#include "codegen/codegen.h"
#include "codegen/generator.h"

#include <algorithm>
#include <ctime>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/CodeExtractor.h>
#include <llvm/IR/CFG.h>
#include <llvm/Support/Threading.h>
#include <llvm/Support/thread.h>
#include <llvm/Transforms/Utils/SplitModule.h>

#include "support/diagnostics.h"

namespace meshc::codegen {

using meshc::DType;
using ir::Ew;
using ir::Op;
using ir::OpKind;
using ir::ValueId;

namespace {

llvm::TargetMachine* host_machine(int opt_level) {
    static bool initialised = [] {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        llvm::InitializeNativeTargetAsmParser();
        return true;
    }();
    (void)initialised;
    std::string triple = llvm::sys::getDefaultTargetTriple();
    std::string error;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
    if (!target) internal_error("no LLVM target for " + triple + ": " + error, __FILE__, __LINE__);
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    std::string features;
    for (auto& f : host) features += (features.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
    llvm::TargetOptions to;
    llvm::CodeGenOptLevel level = opt_level == 0   ? llvm::CodeGenOptLevel::None
                                  : opt_level == 1 ? llvm::CodeGenOptLevel::Less
                                  : opt_level == 2 ? llvm::CodeGenOptLevel::Default
                                                   : llvm::CodeGenOptLevel::Aggressive;
    return target->createTargetMachine(triple, llvm::sys::getHostCPUName(), features, to, llvm::Reloc::PIC_, std::nullopt, level);
}

/// glibc's vector math library (libmvec) for the vectorisers, on x86-64 glibc hosts
/// (link_executable links it there). LLVM 19's table of it has exp and log (and sin,
/// pow, ...) at 128 bits (SSE) and 256 bits (AVX2) only, and no tanh; glibc 2.35 and
/// later also have tanh, and every function at 512 bits (AVX-512). Added here, each at
/// the widths the target machine's features (the host CPU's) can run: the element-wise
/// loops call exp, log and tanh as intrinsics (sigmoid through exp, gelu through tanh),
/// and `call <16 x float> @_ZGVeN16v_tanhf` replaces 16 scalar calls. `names` holds the
/// strings the table points to; it must outlive the analysis managers.
void add_vector_math(llvm::TargetLibraryInfoImpl& tlii, const llvm::Triple& triple, const llvm::TargetMachine& tm,
                     std::deque<std::string>& names) {
#if defined(__x86_64__) && defined(__GLIBC__)
    if (triple.getArch() != llvm::Triple::x86_64 || !triple.isOSGlibc()) return;
    std::set<std::string> features;
    for (llvm::StringRef f : llvm::split(tm.getTargetFeatureString(), ','))
        if (f.consume_front("+")) features.insert(f.str());
    // LLVM's table has 256-bit variants for AVX2 only ("d"); without AVX2 it is left out.
    if (features.count("avx2")) tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
    // The vector ABI's ISA letter for each register width the CPU has.
    std::vector<std::pair<char, unsigned>> isas = {{'b', 128}};
    if (features.count("avx2")) isas.push_back({'d', 256});
    else if (features.count("avx")) isas.push_back({'c', 256});
    if (features.count("avx512f")) isas.push_back({'e', 512});
#if __GLIBC__ > 2 || __GLIBC_MINOR__ >= 35
    const char* functions[] = {"exp", "log", "tanh"};
#else
    const char* functions[] = {"exp", "log"};
#endif
    std::vector<llvm::VecDesc> table;
    for (const char* fn : functions) {
        for (bool f32 : {true, false}) {
            std::string libm = std::string(fn) + (f32 ? "f" : "");
            std::string intrinsic = fmt::format("llvm.{}.{}", fn, f32 ? "f32" : "f64");
            for (auto [isa, bits] : isas) {
                unsigned vf = bits / (f32 ? 32 : 64);
                const std::string& vector = names.emplace_back(fmt::format("_ZGV{}N{}v_{}", isa, vf, libm));
                const std::string& prefix = names.emplace_back(fmt::format("_ZGV_LLVM_N{}v", vf));
                for (const std::string& scalar : {libm, intrinsic}) {
                    if (tlii.isFunctionVectorizable(scalar, llvm::ElementCount::getFixed(vf))) continue;  // LLVM's table has it
                    table.emplace_back(names.emplace_back(scalar), vector, llvm::ElementCount::getFixed(vf), false, prefix);
                }
            }
        }
    }
    tlii.addVectorizableFunctions(table);
#else
    (void)tlii, (void)triple, (void)tm, (void)names;
#endif
}

}  // namespace

void optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level) {
    // The new pass manager's default pipelines.
    std::deque<std::string> vector_math_names;
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = opt_level >= 2;
    pto.SLPVectorization = opt_level >= 2;
    llvm::PassBuilder pb(&tm, pto);
    // The library functions the vectorisers may call: registered before the default
    // analyses, which keep an analysis already registered.
    llvm::Triple triple(module.getTargetTriple());
    llvm::TargetLibraryInfoImpl tlii(triple);
    add_vector_math(tlii, triple, tm, vector_math_names);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = opt_level <= 0   ? llvm::OptimizationLevel::O0
                                    : opt_level == 1 ? llvm::OptimizationLevel::O1
                                    : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                     : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager mpm = opt_level <= 0 ? pb.buildO0DefaultPipeline(level) : pb.buildPerModuleDefaultPipeline(level);
    mpm.run(module, mam);
}

std::string emit_file(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
    llvm::SmallVector<char, 0> buffer;
    llvm::raw_svector_ostream bos(buffer);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, bos, nullptr, type)) internal_error("the target cannot emit this file type", __FILE__, __LINE__);
    pm.run(module);
    return std::string(buffer.begin(), buffer.end());
}

// A long straight-line function (a program written layer by layer, a derived function
// with its calls inlined) would be one function of hundreds of thousands of
// instructions, and the optimiser's time on it grows faster than its size. Each run of
// top-level ops but the last becomes a function of its own (LLVM's CodeExtractor; the
// values that cross runs become arguments), kept out of line, so build time grows with
// the program's size.
void split_chunks(const std::map<llvm::Function*, std::vector<llvm::BasicBlock*>>& chunks) {
    for (const auto& [fn, starts] : chunks) {
        for (size_t k = 0; k + 1 < starts.size(); ++k) {
            // The run's blocks: everything reachable from its start before the next one.
            std::vector<llvm::BasicBlock*> blocks;
            std::set<llvm::BasicBlock*> seen = {starts[k]};
            std::vector<llvm::BasicBlock*> work = {starts[k]};
            while (!work.empty()) {
                llvm::BasicBlock* b = work.back();
                work.pop_back();
                blocks.push_back(b);
                for (llvm::BasicBlock* s : llvm::successors(b)) {
                    if (s != starts[k + 1] && seen.insert(s).second) work.push_back(s);
                }
            }
            llvm::CodeExtractorAnalysisCache cache(*fn);
            llvm::CodeExtractor ce(blocks);
            if (!ce.isEligible()) continue;
            if (llvm::Function* part = ce.extractCodeRegion(cache)) part->addFnAttr(llvm::Attribute::NoInline);
        }
    }
}

namespace {

/// The fewest instructions (after split_chunks, before optimisation) a part of a module
/// compiled in parallel gets: about half a second of -O2 on this machine's cores, worth a
/// thread. A module of fewer than two parts' worth is compiled whole. See part_count().
constexpr size_t kPartInstructions = 2500;

/// The host module of the program, verified, with its long functions split
/// (split_chunks) and not yet optimised; for EmitKind::Ptx (or a GPU build asked for the
/// PTX only) nothing: the kernels' PTX is in `ptx` then.
std::unique_ptr<llvm::Module> host_module(llvm::LLVMContext& ctx, const spmd::LocalModule& module, const Options& options,
                                          EmitKind kind, llvm::TargetMachine& tm, std::string& ptx) {
    MESHC_ASSERT(module.entry >= 0, "generate() needs an entry function");
    auto mod = std::make_unique<llvm::Module>(options.program_name, ctx);
    mod->setTargetTriple(tm.getTargetTriple().str());
    mod->setDataLayout(tm.createDataLayout());
    bool gpu = options.gpu || kind == EmitKind::Ptx;
    lower::Generator generator(ctx, *mod, module, gpu, options.locate);
    generator.generate(options.program_name);
    std::string problems;
    llvm::raw_string_ostream problem_stream(problems);
    if (llvm::verifyModule(*mod, &problem_stream)) internal_error("invalid LLVM IR generated: " + problems, __FILE__, __LINE__);

    if (gpu) {
        // The GPU regions become kernels; their PTX is a constant of the host program.
        std::vector<gpu::Kernel> kernels = gpu::outline(*mod, generator.regions(), generator.image());
        if (llvm::verifyModule(*mod, &problem_stream)) internal_error("invalid LLVM IR after outlining: " + problems, __FILE__, __LINE__);
        ptx = kernels.empty() ? fmt::format("//\n// meshc: no GPU kernels\n//\n.version 8.0\n.target {}\n.address_size 64\n", options.gpu_arch)
                              : gpu::compile_ptx(*mod, kernels, options.gpu_arch, options.opt_level);
        if (kind == EmitKind::Ptx) return nullptr;
        if (llvm::GlobalVariable* placeholder = generator.image()) {
            llvm::Constant* text = llvm::ConstantDataArray::getString(ctx, ptx, true);
            auto* image = new llvm::GlobalVariable(*mod, text->getType(), true, llvm::GlobalValue::PrivateLinkage, text, "mesh.ptx.image");
            image->setAlignment(llvm::Align(64));
            placeholder->replaceAllUsesWith(image);
            placeholder->eraseFromParent();
        }
    }

    split_chunks(generator.chunks());
    if (llvm::verifyModule(*mod, &problem_stream)) internal_error("invalid LLVM IR after splitting: " + problems, __FILE__, __LINE__);
    return mod;
}

/// How many parts generate_objects() compiles `module` in: one per job, but no more than
/// the module has defined functions or kPartInstructions; 1 (the module as it is) for one
/// job or a small module.
unsigned part_count(const llvm::Module& module, const Options& options) {
    unsigned jobs = options.jobs ? options.jobs : std::max(1u, llvm::heavyweight_hardware_concurrency().compute_thread_count());
    if (jobs <= 1) return 1;
    size_t instructions = 0, defined = 0;
    for (const llvm::Function& f : module) {
        if (f.isDeclaration()) continue;
        ++defined;
        instructions += f.getInstructionCount();
    }
    return static_cast<unsigned>(std::max<size_t>(1, std::min({size_t(jobs), defined, instructions / kPartInstructions})));
}

/// CPU seconds this thread has run.
double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

/// Optimises and emits `module` as `parts` object files, one thread each (this one does
/// the first part), and records each part's CPU time in `report` (when not null).
/// llvm::SplitModule partitions the module: every function and global is made external
/// with hidden visibility (the parts refer to each other's; hidden symbols leave no trace
/// outside the executable, and the generator names them all `mesh.*` or `meshk_*`, so
/// none meets a runtime or C library name), functions are dealt out round robin (split_chunks made
/// the long ones into functions of similar size), and each part refers to what the
/// others define by declarations. An LLVMContext belongs to one thread: each part goes
/// to its thread as bitcode and is read into a context of its own there, with a target
/// machine of its own.
std::vector<std::string> emit_parts(llvm::Module& module, unsigned parts, int opt_level, CodegenReport* report) {
    std::vector<llvm::SmallString<0>> bitcode;
    llvm::SplitModule(
        module, parts,
        [&](std::unique_ptr<llvm::Module> part) {
            llvm::raw_svector_ostream os(bitcode.emplace_back());
            llvm::WriteBitcodeToFile(*part, os);
        },
        /*PreserveLocals=*/false, /*RoundRobin=*/true);
    std::vector<std::unique_ptr<llvm::TargetMachine>> machines;
    for (size_t i = 0; i < bitcode.size(); ++i) machines.emplace_back(host_machine(opt_level));
    std::vector<std::string> objects(bitcode.size());
    std::vector<std::exception_ptr> failures(bitcode.size());
    std::vector<double> cpu(bitcode.size());
    auto compile = [&](size_t i) {
        double start = thread_cpu_seconds();
        try {
            llvm::LLVMContext ctx;
            llvm::Expected<std::unique_ptr<llvm::Module>> part =
                llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode[i].str(), fmt::format("part{}", i)), ctx);
            if (!part) internal_error("cannot read a module part back: " + llvm::toString(part.takeError()), __FILE__, __LINE__);
            optimize(**part, *machines[i], opt_level);
            objects[i] = emit_file(**part, *machines[i], llvm::CodeGenFileType::ObjectFile);
        } catch (...) {
            failures[i] = std::current_exception();
        }
        cpu[i] = thread_cpu_seconds() - start;
    };
    // The optimiser recurses on large functions: each thread gets the main thread's usual
    // 8 MiB of stack rather than the system default for new threads.
    std::vector<llvm::thread> threads;
    for (size_t i = 1; i < bitcode.size(); ++i) threads.emplace_back(std::optional<unsigned>(8u << 20), compile, i);
    compile(0);
    for (llvm::thread& t : threads) t.join();
    for (std::exception_ptr& failure : failures) {
        if (failure) std::rethrow_exception(failure);
    }
    if (report) report->part_cpu_seconds = cpu;
    return objects;
}

}  // namespace

std::string generate(const spmd::LocalModule& module, const Options& options, EmitKind kind) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::TargetMachine> tm(host_machine(options.opt_level));
    std::string ptx;
    std::unique_ptr<llvm::Module> mod = host_module(ctx, module, options, kind, *tm, ptx);
    if (!mod) return ptx;
    optimize(*mod, *tm, options.opt_level);
    if (kind == EmitKind::LLVM) {
        std::string out;
        llvm::raw_string_ostream os(out);
        mod->print(os, nullptr);
        return out;
    }
    return emit_file(*mod, *tm, kind == EmitKind::Asm ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile);
}

std::vector<std::string> generate_objects(const spmd::LocalModule& module, const Options& options, CodegenReport* report) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::TargetMachine> tm(host_machine(options.opt_level));
    std::string ptx;
    std::unique_ptr<llvm::Module> mod = host_module(ctx, module, options, EmitKind::Obj, *tm, ptx);
    unsigned parts = part_count(*mod, options);
    if (parts > 1) return emit_parts(*mod, parts, options.opt_level, report);
    double start = thread_cpu_seconds();
    optimize(*mod, *tm, options.opt_level);
    std::string object = emit_file(*mod, *tm, llvm::CodeGenFileType::ObjectFile);
    if (report) report->part_cpu_seconds = {thread_cpu_seconds() - start};
    return {std::move(object)};
}

}  // namespace meshc::codegen

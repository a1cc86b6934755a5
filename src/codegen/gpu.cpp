// GPU kernels: region outlining (host module) and the PTX module. See gpu.h.
//
// Outlining uses LLVM's CodeExtractor: a region's blocks become a function whose
// parameters are the values the region reads from the host function (buffer pointers,
// offsets computed from the device's coordinates). The call that replaces the region is
// then rewritten into meshrt_launch, which takes the arguments as an array of pointers
// (cudaLaunchKernel's convention) and a host entry for the gpu-emulator device.
//
// The PTX module is a clone of the host module that keeps only the kernels' bodies. In it
// the thread queries become the PTX special registers, the math functions CUDA's
// libdevice (__nv_expf, ...), NaN-propagating max/min a compare and select around
// maxnum/minnum, and floating remainders __nv_fmod; libdevice is linked in for what is
// used, NVVMReflect resolves its __nvvm_reflect queries (no flush-to-zero), and the
// NVPTX target machine optimises and prints the module.
#include "codegen/runtime_abi.h"
#include "codegen/gpu.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <llvm/ADT/SetVector.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/CodeExtractor.h>

#include "support/diagnostics.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

#ifndef MESHC_LIBDEVICE
#define MESHC_LIBDEVICE ""
#endif

namespace meshc::codegen::gpu {

namespace {

bool is_thread_query(const llvm::Function* f) {
    return f && (f->getName() == kThread || f->getName() == kThreads);
}

/// Whether a GPU can run the region: it calls only intrinsics and the thread queries,
/// reads no global, and every value it takes from outside is a pointer, an integer of 32
/// or 64 bits or a float or double.
bool offloadable(const Region& r) {
    for (llvm::BasicBlock* bb : r.blocks) {
        for (llvm::Instruction& inst : *bb) {
            if (auto* call = llvm::dyn_cast<llvm::CallInst>(&inst)) {
                llvm::Function* callee = call->getCalledFunction();
                if (!callee || !(callee->isIntrinsic() || is_thread_query(callee))) return false;
            }
            if (llvm::isa<llvm::AllocaInst>(inst)) return false;
            for (llvm::Value* op : inst.operands()) {
                if (llvm::isa<llvm::GlobalVariable>(op)) return false;
                if (auto* ce = llvm::dyn_cast<llvm::ConstantExpr>(op)) {
                    for (llvm::Value* inner : ce->operands())
                        if (llvm::isa<llvm::GlobalValue>(inner)) return false;
                }
            }
        }
    }
    llvm::CodeExtractor ce(r.blocks);
    if (!ce.isEligible()) return false;
    llvm::SetVector<llvm::Value*> inputs, outputs, sinks;
    ce.findInputsOutputs(inputs, outputs, sinks);
    if (!outputs.empty()) return false;
    for (llvm::Value* v : inputs) {
        llvm::Type* t = v->getType();
        bool ok = (t->isPointerTy() && t->getPointerAddressSpace() == 0) || t->isIntegerTy(32) || t->isIntegerTy(64) ||
                  t->isFloatTy() || t->isDoubleTy();
        if (!ok) return false;
    }
    return true;
}

/// Leaves a region where it is, run by the host thread alone: thread 0 of 1.
void serialise(const Region& r) {
    llvm::Type* i64 = llvm::Type::getInt64Ty(r.host->getContext());
    for (llvm::BasicBlock* bb : r.blocks) {
        for (auto it = bb->begin(); it != bb->end();) {
            llvm::Instruction& inst = *it++;
            auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
            if (!call || !is_thread_query(call->getCalledFunction())) continue;
            bool count = call->getCalledFunction()->getName() == kThreads;
            call->replaceAllUsesWith(llvm::ConstantInt::get(i64, count ? 1 : 0));
            call->eraseFromParent();
        }
    }
}

}  // namespace

std::vector<Kernel> outline(llvm::Module& m, const std::vector<Region>& regions, llvm::GlobalVariable* image) {
    llvm::LLVMContext& ctx = m.getContext();
    llvm::PointerType* ptr = llvm::PointerType::get(ctx, 0);
    llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
    llvm::Type* void_ty = llvm::Type::getVoidTy(ctx);
    llvm::FunctionCallee launch = m.getOrInsertFunction("meshrt_launch", MESHC_ABI_TYPE(ctx, meshrt_launch));
    std::vector<Kernel> kernels;
    for (const Region& r : regions) {
        if (!offloadable(r)) {
            serialise(r);
            continue;
        }
        llvm::CodeExtractorAnalysisCache cache(*r.host);
        llvm::CodeExtractor ce(r.blocks);
        llvm::SetVector<llvm::Value*> inputs, outputs;
        llvm::Function* k = ce.extractCodeRegion(cache, inputs, outputs);
        MESHC_ASSERT(k && outputs.empty(), "a GPU region could not be outlined");
        std::string name = fmt::format("meshk_{}", kernels.size());
        k->setName(name);
        k->setLinkage(llvm::GlobalValue::InternalLinkage);
        kernels.push_back({k, r.what});

        // The host entry (gpu-emulator): meshk_N.host(args) calls meshk_N(*args[0], ...).
        auto* entry = llvm::Function::Create(llvm::FunctionType::get(void_ty, {ptr}, false), llvm::GlobalValue::InternalLinkage,
                                             name + ".host", m);
        llvm::IRBuilder<> eb(llvm::BasicBlock::Create(ctx, "entry", entry));
        std::vector<llvm::Value*> args;
        for (llvm::Argument& a : k->args()) {
            llvm::Value* slot = eb.CreateLoad(ptr, eb.CreateConstGEP1_64(ptr, entry->getArg(0), a.getArgNo()));
            args.push_back(eb.CreateLoad(a.getType(), slot));
        }
        eb.CreateCall(k, args);
        eb.CreateRetVoid();

        // The region's call becomes meshrt_launch(dev, image, "meshk_N", entry, args, n).
        llvm::CallInst* call = nullptr;
        for (llvm::User* u : k->users()) {
            if (auto* c = llvm::dyn_cast<llvm::CallInst>(u); c && c->getCalledFunction() == k) call = c;
        }
        MESHC_ASSERT(call != nullptr, "an outlined GPU region has no call");
        llvm::IRBuilder<> b(call);
        llvm::BasicBlock& host_entry = r.host->getEntryBlock();
        llvm::IRBuilder<> ab(&host_entry, host_entry.getFirstInsertionPt());
        llvm::Value* argv = llvm::ConstantPointerNull::get(ptr);
        if (call->arg_size() > 0) argv = ab.CreateAlloca(ptr, ab.getInt64(call->arg_size()), name + ".args");
        for (unsigned j = 0; j < call->arg_size(); ++j) {
            llvm::Value* slot = ab.CreateAlloca(call->getArgOperand(j)->getType());
            b.CreateStore(call->getArgOperand(j), slot);
            b.CreateStore(slot, b.CreateConstGEP1_64(ptr, argv, j));
        }
        b.CreateCall(launch, {r.dev, image, b.CreateGlobalStringPtr(name, name + ".name"), entry, argv,
                              llvm::ConstantInt::get(i64, static_cast<uint64_t>(r.threads))});
        call->eraseFromParent();
    }
    return kernels;
}

std::string compile_ptx(const llvm::Module& host, const std::vector<Kernel>& kernels, const std::string& arch,
                        int opt_level) {
    static bool initialised = [] {
        LLVMInitializeNVPTXTargetInfo();
        LLVMInitializeNVPTXTarget();
        LLVMInitializeNVPTXTargetMC();
        LLVMInitializeNVPTXAsmPrinter();
        return true;
    }();
    (void)initialised;
    const std::string triple = "nvptx64-nvidia-cuda";
    std::string error;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
    if (!target) throw GpuError("this LLVM has no NVPTX target: " + error);
    llvm::TargetOptions to;
    std::unique_ptr<llvm::TargetMachine> tm(
        target->createTargetMachine(triple, arch, "+ptx80", to, std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    if (!tm) throw GpuError("the NVPTX target cannot compile for " + arch);

    // The kernels' bodies, alone.
    std::set<const llvm::GlobalValue*> keep;
    for (const Kernel& k : kernels) keep.insert(k.fn);
    llvm::ValueToValueMapTy vmap;
    std::unique_ptr<llvm::Module> gpu =
        llvm::CloneModule(host, vmap, [&](const llvm::GlobalValue* g) { return keep.count(g) > 0; });
    llvm::LLVMContext& ctx = gpu->getContext();
    gpu->setTargetTriple(triple);
    gpu->setDataLayout(tm->createDataLayout());
    gpu->setModuleIdentifier(host.getModuleIdentifier() + ".gpu");
    std::vector<llvm::Function*> gk;
    for (const Kernel& k : kernels) gk.push_back(llvm::cast<llvm::Function>(vmap[k.fn]));
    for (bool changed = true; changed;) {
        changed = false;
        for (auto it = gpu->global_begin(); it != gpu->global_end();) {
            llvm::GlobalVariable& g = *it++;
            if (g.use_empty()) {
                g.eraseFromParent();
                changed = true;
            }
        }
        for (auto it = gpu->begin(); it != gpu->end();) {
            llvm::Function& f = *it++;
            if (f.isDeclaration() && f.use_empty()) {
                f.eraseFromParent();
                changed = true;
            }
        }
    }

    llvm::Type* i32 = llvm::Type::getInt32Ty(ctx);
    llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
    llvm::NamedMDNode* annotations = gpu->getOrInsertNamedMetadata("nvvm.annotations");
    for (llvm::Function* k : gk) {
        k->setLinkage(llvm::GlobalValue::ExternalLinkage);
        k->setCallingConv(llvm::CallingConv::PTX_Kernel);
        annotations->addOperand(llvm::MDNode::get(ctx, {llvm::ValueAsMetadata::get(k), llvm::MDString::get(ctx, "kernel"),
                                                        llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 1))}));
    }

    // Thread queries, math functions, remainders.
    auto sreg = [&](llvm::IRBuilder<>& b, llvm::Intrinsic::ID id) {
        return b.CreateZExt(b.CreateCall(llvm::Intrinsic::getDeclaration(gpu.get(), id)), i64);
    };
    auto libdevice_fn = [&](const char* base, llvm::Type* t) {
        std::string name = fmt::format("__nv_{}{}", base, t->isFloatTy() ? "f" : "");
        unsigned n = std::string_view(base) == "fmod" ? 2 : 1;
        return gpu->getOrInsertFunction(name, llvm::FunctionType::get(t, std::vector<llvm::Type*>(n, t), false));
    };
    std::vector<llvm::Instruction*> dead;
    for (llvm::Function* k : gk) {
        for (llvm::Instruction& inst : llvm::instructions(*k)) {
            llvm::IRBuilder<> b(&inst);
            llvm::Value* repl = nullptr;
            if (auto* call = llvm::dyn_cast<llvm::CallInst>(&inst)) {
                llvm::Function* callee = call->getCalledFunction();
                if (callee && callee->getName() == kThread) {
                    repl = b.CreateAdd(b.CreateMul(sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x),
                                                   sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x)),
                                       sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
                } else if (callee && callee->getName() == kThreads) {
                    repl = b.CreateMul(sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x),
                                       sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x));
                } else if (auto* ii = llvm::dyn_cast<llvm::IntrinsicInst>(call); ii && ii->getType()->isFloatingPointTy()) {
                    llvm::Type* t = ii->getType();
                    const char* base = nullptr;
                    switch (ii->getIntrinsicID()) {
                    case llvm::Intrinsic::exp: base = "exp"; break;
                    case llvm::Intrinsic::log: base = "log"; break;
                    case llvm::Intrinsic::tanh: base = "tanh"; break;
                    case llvm::Intrinsic::cos: base = "cos"; break;
                    case llvm::Intrinsic::sin: base = "sin"; break;
                    case llvm::Intrinsic::maximum:
                    case llvm::Intrinsic::minimum: {
                        llvm::Value* x = ii->getArgOperand(0);
                        llvm::Value* y = ii->getArgOperand(1);
                        bool max = ii->getIntrinsicID() == llvm::Intrinsic::maximum;
                        llvm::Value* num = b.CreateBinaryIntrinsic(max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, x, y);
                        repl = b.CreateSelect(b.CreateFCmpUNO(x, y), b.CreateFAdd(x, y), num);
                        break;
                    }
                    default: break;
                    }
                    if (base && (t->isFloatTy() || t->isDoubleTy())) repl = b.CreateCall(libdevice_fn(base, t), {ii->getArgOperand(0)});
                }
            } else if (inst.getOpcode() == llvm::Instruction::FRem && (inst.getType()->isFloatTy() || inst.getType()->isDoubleTy())) {
                repl = b.CreateCall(libdevice_fn("fmod", inst.getType()), {inst.getOperand(0), inst.getOperand(1)});
            }
            if (repl) {
                inst.replaceAllUsesWith(repl);
                dead.push_back(&inst);
            }
        }
    }
    for (llvm::Instruction* inst : dead) inst->eraseFromParent();
    for (const char* q : {kThread, kThreads}) {
        if (llvm::Function* f = gpu->getFunction(q); f && f->use_empty()) f->eraseFromParent();
    }

    bool needs_libdevice = false;
    for (llvm::Function& f : *gpu) needs_libdevice |= f.isDeclaration() && f.getName().starts_with("__nv_");
    if (needs_libdevice) {
        const char* env = std::getenv("MESHC_LIBDEVICE");
        std::string path = env && *env ? env : MESHC_LIBDEVICE;
        if (path.empty()) throw GpuError("CUDA's libdevice (libdevice.10.bc) was not found when meshc was built; set MESHC_LIBDEVICE");
        auto buffer = llvm::MemoryBuffer::getFile(path);
        if (!buffer) throw GpuError(fmt::format("cannot read CUDA's libdevice `{}`: {}", path, buffer.getError().message()));
        auto lib = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), ctx);
        if (!lib) {
            std::string why = llvm::toString(lib.takeError());
            throw GpuError(fmt::format("`{}` is not LLVM bitcode (CUDA's libdevice): {}", path, why));
        }
        (*lib)->setTargetTriple(triple);
        (*lib)->setDataLayout(gpu->getDataLayout());
        if (llvm::Linker::linkModules(*gpu, std::move(*lib), llvm::Linker::Flags::LinkOnlyNeeded))
            throw GpuError(fmt::format("cannot link CUDA's libdevice `{}`", path));
    }
    for (llvm::Function& f : *gpu) {
        if (!f.isDeclaration() && f.getCallingConv() != llvm::CallingConv::PTX_Kernel)
            f.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
    for (llvm::GlobalVariable& g : gpu->globals()) {
        if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
    gpu->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", static_cast<uint32_t>(0));

    std::string problems;
    llvm::raw_string_ostream problem_stream(problems);
    if (llvm::verifyModule(*gpu, &problem_stream)) internal_error("invalid GPU module: " + problems, __FILE__, __LINE__);
    optimize(*gpu, *tm, std::max(opt_level, 2));
    std::string ptx = emit_file(*gpu, *tm, llvm::CodeGenFileType::AssemblyFile);
    std::string header = fmt::format("//\n// meshc: {} GPU kernel{} for {}\n", kernels.size(), kernels.size() == 1 ? "" : "s", arch);
    for (size_t i = 0; i < kernels.size(); ++i) header += fmt::format("//   meshk_{}: {}\n", i, kernels[i].what);
    return header + "//\n" + ptx;
}

}  // namespace meshc::codegen::gpu

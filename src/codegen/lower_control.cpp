// Calls, print, `for` and `if`, and the program's entry point and `main`.
#include "codegen/generator.h"

namespace meshc::codegen::lower {

void Generator::call_op(const Op& op) {
    const ir::Function& callee = gm_.functions[static_cast<size_t>(op.callee)];
    std::vector<llvm::Value*> args;
    for (ValueId v : op.operands) args.push_back(val_[v]);
    llvm::Value* argv = ptr_array(args, args.size());
    llvm::Value* res = entry_alloca(ptr_, callee.results.size());
    b_.CreateCall(fns_[static_cast<size_t>(op.callee)], {dev_, argv, res});
    for (size_t i = 0; i < op.results.size(); ++i) val_[op.results[i]] = slot(res, i);
}

void Generator::print(const Op& op) {
    auto* arg_ty = llvm::StructType::get(ctx_, {i32_, ptr_, ptr_});
    llvm::Value* args = entry_alloca(arg_ty, op.operands.size());
    int32_t mesh = -1;
    for (size_t i = 0; i < op.operands.size(); ++i) {
        ValueId v = op.operands[i];
        llvm::Value* slot = b_.CreateGEP(arg_ty, args, i64c(static_cast<int64_t>(i)));
        b_.CreateStore(i32c(static_cast<int>(dt(v))), b_.CreateStructGEP(arg_ty, slot, 0));
        b_.CreateStore(layout_of(gtype(v)), b_.CreateStructGEP(arg_ty, slot, 1));
        b_.CreateStore(val_[v], b_.CreateStructGEP(arg_ty, slot, 2));
        mesh = std::max(mesh, gtype(v).mesh);
    }
    call("meshrt_print", {dev_, cstring(op.text), i32c(static_cast<int64_t>(op.operands.size())), args});
}

void Generator::for_op(const Op& op) {
    const ir::Region& body = op.regions[0];
    llvm::Value* lo = scalar_i64(op.operands[0]);
    llvm::Value* hi = scalar_i64(op.operands[1]);
    size_t n = op.operands.size() - 2;
    // Loop-carried buffers live in stack slots; the loop owns them.
    std::vector<llvm::Value*> slots;
    llvm::IRBuilder<> entry_b(&llfn_->getEntryBlock(), llfn_->getEntryBlock().begin());
    for (size_t k = 0; k < n; ++k) {
        slots.push_back(entry_b.CreateAlloca(ptr_));
        b_.CreateStore(copy_of(op.operands[2 + k]), slots[k]);
    }
    ValueId iv = body.args[0];
    llvm::Value* count = b_.CreateIntrinsic(llvm::Intrinsic::smax, {i64_}, {b_.CreateSub(hi, lo), i64c(0)});
    llvm::Value* ibuf = call("meshrt_alloc", {dev_, i64c(8)});
    // A `for` at the top of `main` is the program's step loop: each iteration is a region
    // named "step" in the trace (--trace), with the run's kernels and collectives inside.
    const bool steps = fn_ && fn_->name == "main" && fn_->derived.empty() && loop_depth_ == 0;
    ++loop_depth_;
    loop(count, [&](llvm::Value* step) {
        if (steps) call("meshrt_trace_begin", {dev_, cstring("step")});
        b_.CreateStore(convert(b_.CreateAdd(lo, step), DType::I64, dt(iv)), b_.CreateGEP(storage(dt(iv)), ibuf, i64c(0)));
        val_[iv] = ibuf;
        std::vector<llvm::Value*> old;
        for (size_t k = 0; k < n; ++k) {
            old.push_back(b_.CreateLoad(ptr_, slots[k]));
            val_[body.args[1 + k]] = old.back();
        }
        block(body.ops, body.yields);
        std::set<ValueId> taken;
        std::set<ValueId> defined;
        for (const Op& o : body.ops) {
            for (ValueId r : o.results) defined.insert(r);
        }
        std::vector<llvm::Value*> next;
        for (size_t k = 0; k < n; ++k) {
            ValueId y = body.yields[k];
            bool own = defined.count(y) && !taken.count(y);
            taken.insert(y);
            next.push_back(own ? val_[y] : copy_of(y));
        }
        for (size_t k = 0; k < n; ++k) call("meshrt_free", {dev_, old[k]});
        for (size_t k = 0; k < n; ++k) b_.CreateStore(next[k], slots[k]);
        if (steps) call("meshrt_trace_end", {dev_});
    });
    --loop_depth_;
    call("meshrt_free", {dev_, ibuf});
    for (size_t k = 0; k < n; ++k) val_[op.results[k]] = b_.CreateLoad(ptr_, slots[k]);
}

void Generator::if_op(const Op& op) {
    llvm::Value* c = convert(load_elem(dt(op.operands[0]), val_[op.operands[0]], i64c(0)), dt(op.operands[0]), DType::Bool);
    std::vector<llvm::Value*> slots;
    llvm::IRBuilder<> entry_b(&llfn_->getEntryBlock(), llfn_->getEntryBlock().begin());
    for (size_t k = 0; k < op.results.size(); ++k) slots.push_back(entry_b.CreateAlloca(ptr_));
    auto* then_b = llvm::BasicBlock::Create(ctx_, "then", llfn_);
    auto* else_b = llvm::BasicBlock::Create(ctx_, "else", llfn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "endif", llfn_);
    b_.CreateCondBr(c, then_b, else_b);
    for (size_t r = 0; r < 2; ++r) {
        b_.SetInsertPoint(r == 0 ? then_b : else_b);
        if (r < op.regions.size()) {
            const ir::Region& region = op.regions[r];
            block(region.ops, region.yields);
            std::set<ValueId> defined, taken;
            for (const Op& o : region.ops) {
                for (ValueId v : o.results) defined.insert(v);
            }
            for (size_t k = 0; k < op.results.size() && k < region.yields.size(); ++k) {
                ValueId y = region.yields[k];
                bool own = defined.count(y) && !taken.count(y);
                taken.insert(y);
                b_.CreateStore(own ? val_[y] : copy_of(y), slots[k]);
            }
        }
        b_.CreateBr(join);
    }
    b_.SetInsertPoint(join);
    for (size_t k = 0; k < op.results.size(); ++k) val_[op.results[k]] = b_.CreateLoad(ptr_, slots[k]);
}

void Generator::entry_and_main(const std::string& program_name) {
    auto* entry_ty = llvm::FunctionType::get(void_, {ptr_}, false);
    auto* entry = llvm::Function::Create(entry_ty, llvm::Function::InternalLinkage, "mesh.entry", mod_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
    llvm::Value* none = llvm::ConstantPointerNull::get(ptr_);
    b_.CreateCall(fns_[static_cast<size_t>(lm_.entry)], {entry->getArg(0), none, none});
    b_.CreateRetVoid();

    auto* mesh_ty = llvm::StructType::get(ctx_, {ptr_, i32_, ptr_, ptr_});
    std::vector<llvm::Constant*> meshes;
    for (const ir::Mesh& m : gm_.meshes) {
        std::vector<llvm::Constant*> names;
        std::vector<int64_t> sizes;
        for (const auto& a : m.axes) {
            names.push_back(cstring(a.name));
            sizes.push_back(a.size);
        }
        auto* names_init = llvm::ConstantArray::get(llvm::ArrayType::get(ptr_, names.size()), names);
        auto* names_g = new llvm::GlobalVariable(mod_, names_init->getType(), true, llvm::GlobalValue::PrivateLinkage, names_init, "mesh.axes");
        meshes.push_back(llvm::ConstantStruct::get(mesh_ty, {cstring(m.name), i32c(static_cast<int64_t>(m.axes.size())), names_g, i64_array(sizes)}));
    }
    llvm::Constant* meshes_g = llvm::ConstantPointerNull::get(ptr_);
    if (!meshes.empty()) {
        auto* init = llvm::ConstantArray::get(llvm::ArrayType::get(mesh_ty, meshes.size()), meshes);
        meshes_g = new llvm::GlobalVariable(mod_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "mesh.meshes");
    }
    // The program's arguments (meshrt_arg_desc): name, kind, default.
    auto* arg_ty = llvm::StructType::get(ctx_, {ptr_, i32_, ptr_});
    std::vector<llvm::Constant*> args;
    for (const ir::ProgramArg& a : gm_.args) {
        args.push_back(llvm::ConstantStruct::get(arg_ty, {cstring(a.name), i32c(static_cast<int64_t>(a.kind)), cstring(a.default_text)}));
    }
    llvm::Constant* args_g = llvm::ConstantPointerNull::get(ptr_);
    if (!args.empty()) {
        auto* init = llvm::ConstantArray::get(llvm::ArrayType::get(arg_ty, args.size()), args);
        args_g = new llvm::GlobalVariable(mod_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "mesh.args");
    }
    auto* prog_ty = llvm::StructType::get(ctx_, {ptr_, i32_, ptr_, i64_, ptr_, i32_, ptr_});
    auto* prog_init = llvm::ConstantStruct::get(prog_ty, {cstring(program_name), i32c(static_cast<int64_t>(meshes.size())), meshes_g,
                                                          i64c(lm_.device_count), entry, i32c(static_cast<int64_t>(args.size())), args_g});
    auto* prog = new llvm::GlobalVariable(mod_, prog_ty, true, llvm::GlobalValue::PrivateLinkage, prog_init, "mesh.program");

    auto* main_ty = llvm::FunctionType::get(i32_, {i32_, ptr_}, false);
    auto* main = llvm::Function::Create(main_ty, llvm::Function::ExternalLinkage, "main", mod_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", main));
    b_.CreateRet(call("meshrt_main", {main->getArg(0), main->getArg(1), prog}));
}

}  // namespace meshc::codegen::lower

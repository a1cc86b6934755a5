// Collectives and make_partial: runtime calls on the value's piece, and a combined
// all_reduce packed into one buffer.
#include "codegen/generator.h"
#include "ir/op_rules.h"

namespace meshc::codegen::lower {

/// make_partial over axes A: the global value becomes the sum over A of the pieces.
/// For an axis that splits a dim of the operand (and not of the result), each device
/// puts its piece at its offset in zeros; for an axis the operand is replicated over,
/// only the devices at coordinate 0 keep the value.
/// Where make_partial puts a device's piece: per dim, the offset of the piece in the
/// result (for the split axes the op removes), and whether this device keeps its
/// value at all (coordinate 0 on the axes the operand is replicated over).
llvm::Value* Generator::partial_placement(const Op& op, std::vector<llvm::Value*>& offset) {
    ValueId x = op.operands[0], r = op.results[0];
    int32_t mesh = gtype(x).mesh;
    ir::AxisSet split_removed = 0;
    offset.assign(lshape(x).size(), nullptr);
    for (size_t d = 0; d < lshape(x).size(); ++d) {
        const ir::AxisList& in = gtype(x).layout.dims[d];
        const ir::AxisList& out = gtype(r).layout.dims[d];
        std::vector<int32_t> removed;
        for (size_t k = out.size(); k < in.size(); ++k) {
            removed.push_back(in[k]);
            split_removed |= ir::axis_bit(in[k]);
        }
        offset[d] = removed.empty() ? i64c(0) : b_.CreateMul(piece(mesh, removed), i64c(lshape(x)[d]));
    }
    llvm::Value* keep = b_.getTrue();
    for (int32_t a : spmd::group_axes(*fn_, op)) {
        if (split_removed & ir::axis_bit(static_cast<size_t>(a))) continue;
        keep = b_.CreateAnd(keep, b_.CreateICmpEQ(coord(mesh, a), i64c(0)));
    }
    return keep;
}

void Generator::make_partial(const Op& op) {
    ValueId x = op.operands[0], r = op.results[0];
    val_[r] = alloc(r);
    if (is_float(dt(r))) {
        negative_zero(r, val_[r]);
    } else {
        zero(r, val_[r]);
    }
    std::vector<llvm::Value*> offset;
    llvm::Value* keep = partial_placement(op, offset);
    auto* copy = llvm::BasicBlock::Create(ctx_, "keep", llfn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "partial", llfn_);
    b_.CreateCondBr(keep, copy, join);
    b_.SetInsertPoint(copy);
    auto in_strides = strides_of(lshape(x));
    auto out_strides = strides_of(lshape(r));
    DType t = dt(x);
    offload("make_partial", [&](bool, const Nest& nest) {
        nest(lshape(x), [&](const std::vector<llvm::Value*>& idx) {
            llvm::Value* ia = i64c(0);
            llvm::Value* oa = i64c(0);
            for (size_t d = 0; d < idx.size(); ++d) {
                ia = b_.CreateAdd(ia, b_.CreateMul(idx[d], i64c(in_strides[d])));
                oa = b_.CreateAdd(oa, b_.CreateMul(b_.CreateAdd(idx[d], offset[d]), i64c(out_strides[d])));
            }
            store_elem(t, val_[r], oa, load_elem(t, val_[x], ia));
        });
    });
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
}

void Generator::collective(const Op& op) {
    // Over axes of size 1 every group has one member: the local piece is the result.
    if (gm_.meshes[static_cast<size_t>(gtype(op.operands[0]).mesh)].group_size(op.axes) == 1) {
        for (size_t i = 0; i < op.operands.size(); ++i) val_[op.results[i]] = copy_of(op.operands[i]);
        return;
    }
    if (op.kind == OpKind::AllReduce && op.operands.size() > 1) return combined_all_reduce(op);
    ValueId x = op.operands[0], r = op.results[0];
    val_[r] = alloc(r);
    int32_t mesh = gtype(x).mesh;
    auto axes = spmd::group_axes(*fn_, op);
    std::vector<int32_t> ax(axes.begin(), axes.end());
    llvm::Value* axes_c = i32_array(ax);
    llvm::Value* n = i32c(static_cast<int64_t>(ax.size()));
    llvm::Value* type = i32c(static_cast<int>(dt(x)));
    llvm::Value* red = i32c(op.reduce == ir::ReduceKind::Max ? 1 : 0);
    llvm::Value* rank = i32c(static_cast<int64_t>(lshape(x).size()));
    on_members(mesh, [&] {
        comm_site(op);
        switch (ir::op_rule(op.kind).comm) {
        case ir::CommRule::AllReduce:
            call("meshrt_all_reduce", {dev_, i32c(mesh), n, axes_c, type, red, val_[x], val_[r], i64c(product(lshape(x)))});
            break;
        case ir::CommRule::AllGather:
            call("meshrt_all_gather", {dev_, i32c(mesh), n, axes_c, type, val_[x], val_[r], rank, i64_array(lshape(x)), i32c(op.dim)});
            break;
        case ir::CommRule::ReduceScatter:
            call("meshrt_reduce_scatter",
                 {dev_, i32c(mesh), n, axes_c, type, red, val_[x], val_[r], rank, i64_array(lshape(x)), i32c(op.dim)});
            break;
        case ir::CommRule::AllToAll:
            call("meshrt_all_to_all",
                 {dev_, i32c(mesh), n, axes_c, type, val_[x], val_[r], rank, i64_array(lshape(x)), i32c(op.dim), i32c(op.dim2)});
            break;
        case ir::CommRule::LocalSlice:
        case ir::CommRule::MakePartial:
        case ir::CommRule::None: MESHC_ASSERT(false, "a collective lowers to its runtime call");
        }
    }, [&] { zero(r, val_[r]); });
}

/// An all_reduce of several tensors of one element type (transform/combine_collectives):
/// packed into one buffer, reduced with one runtime call, unpacked.
void Generator::combined_all_reduce(const Op& op) {
    ValueId x0 = op.operands[0];
    int32_t mesh = gtype(x0).mesh;
    auto axes = spmd::group_axes(*fn_, op);
    std::vector<int32_t> ax(axes.begin(), axes.end());
    int64_t total = 0;
    for (ValueId x : op.operands) total += product(lshape(x));
    int64_t width = static_cast<int64_t>(ir::dtype_bytes(dt(x0)));
    llvm::Value* in = call("meshrt_alloc", {dev_, i64c(std::max<int64_t>(1, total) * width)});
    llvm::Value* out = call("meshrt_alloc", {dev_, i64c(std::max<int64_t>(1, total) * width)});
    int64_t offset = 0;
    for (ValueId x : op.operands) {
        int64_t bytes = product(lshape(x)) * width;
        b_.CreateMemCpy(b_.CreateGEP(b_.getInt8Ty(), in, i64c(offset)), llvm::MaybeAlign(1), val_[x], llvm::MaybeAlign(1), bytes);
        offset += bytes;
    }
    on_members(mesh, [&] {
        comm_site(op);
        call("meshrt_all_reduce", {dev_, i32c(mesh), i32c(static_cast<int64_t>(ax.size())), i32_array(ax),
                                   i32c(static_cast<int>(dt(x0))), i32c(0), in, out, i64c(total)});
    }, [&] { b_.CreateMemSet(out, b_.getInt8(0), std::max<int64_t>(1, total) * width, llvm::MaybeAlign(1)); });
    offset = 0;
    for (size_t i = 0; i < op.results.size(); ++i) {
        ValueId r = op.results[i];
        val_[r] = alloc(r);
        int64_t bytes = product(lshape(r)) * width;
        b_.CreateMemCpy(val_[r], llvm::MaybeAlign(1), b_.CreateGEP(b_.getInt8Ty(), out, i64c(offset)), llvm::MaybeAlign(1), bytes);
        offset += bytes;
    }
    call("meshrt_free", {dev_, in});
    call("meshrt_free", {dev_, out});
}

}  // namespace meshc::codegen::lower

// The dispatch from a local-IR op to its lowering, slices and creations.
#include "codegen/generator.h"

namespace meshc::codegen::lower {

void Generator::emit(const Op& op) {
    switch (op.kind) {
    case OpKind::Constant: {
        ValueId r = op.results[0];
        val_[r] = alloc(r);
        store_elem(dt(r), val_[r], i64c(0), const_of(dt(r), op.number));
        return;
    }
    case OpKind::Create: return create(op);
    case OpKind::Load: {
        ValueId r = op.results[0];
        val_[r] = alloc(r);
        on_members(gtype(r).mesh,
                   [&] {
                       if (!op.names.empty()) {  // a .safetensors file: the tensor names[0]
                           call("meshrt_load_tensor", {dev_, path_of(op), cstring(op.names[0]), i32c(static_cast<int>(dt(r))), layout_of(gtype(r)), val_[r]});
                       } else {
                           call("meshrt_load", {dev_, path_of(op), i32c(static_cast<int>(dt(r))), layout_of(gtype(r)), val_[r]});
                       }
                   },
                   [&] { zero(r, val_[r]); });
        return;
    }
    case OpKind::Arg: {
        ValueId r = op.results[0];
        val_[r] = alloc(r);
        call("meshrt_arg", {dev_, i32c(op.ints[0]), i32c(static_cast<int>(dt(r))), val_[r]});
        return;
    }
    case OpKind::Elementwise:
    case OpKind::Broadcast: return fused(op);
    case OpKind::Reduce:
        return traced(fmt::format("reduce {}", ir::reduce_name(op.reduce)), product(lshape(op.operands[0])), [&] { reduce(op); });
    case OpKind::Contract: return contract(op);
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllToAll: return collective(op);
    case OpKind::LocalSlice: {
        ValueId x = op.operands[0], r = op.results[0];
        val_[r] = alloc(r);
        auto axes = spmd::group_axes(*fn_, op);
        int64_t len = lshape(r)[static_cast<size_t>(op.dim)];
        llvm::Value* start = b_.CreateMul(piece(gtype(x).mesh, axes), i64c(len));
        slice(x, r, static_cast<size_t>(op.dim), start, len);
        return;
    }
    case OpKind::MakePartial: return make_partial(op);
    case OpKind::Place:
    case OpKind::Reshape: {
        ValueId x = op.operands[0], r = op.results[0];
        val_[r] = copy_of(x);
        int32_t from = gtype(x).mesh;
        if (op.kind == OpKind::Place && from >= 0 && gtype(r).mesh < 0 &&
            gm_.meshes[static_cast<size_t>(from)].device_count() < lm_.device_count) {
            call("meshrt_broadcast_all", {dev_, val_[r], i64c(nbytes(r))});
        }
        return;
    }
    case OpKind::Slice: {
        ValueId x = op.operands[0], r = op.results[0];
        auto d = static_cast<size_t>(op.dim);
        llvm::Value* start = i64c(op.ints[0]);
        if (op.operands.size() == 2) {
            // A run-time start: checked against the (unsplit) dim before anything is read.
            start = scalar_i64(op.operands[1]);
            call("meshrt_check_slice", {dev_, start, i64c(op.ints[1]), i64c(lshape(x)[d]), cstring(op.text)});
        }
        val_[r] = alloc(r);
        slice(x, r, d, start, op.ints[1]);
        return;
    }
    case OpKind::Pad: {
        // Zeros with the operand at `start` along the (unsplit) dim.
        ValueId g = op.operands[0], r = op.results[0];
        auto d = static_cast<size_t>(op.dim);
        llvm::Value* start = op.operands.size() == 2 ? scalar_i64(op.operands[1]) : i64c(op.ints[0]);
        val_[r] = alloc(r);
        zero(r, val_[r]);
        int64_t total = lshape(r)[d];
        offload("pad", [&](bool gpu, const Nest& nest) {
            if (!gpu) {
                call("meshrt_concat_part", {dev_, i32c(static_cast<int>(dt(g))), val_[g], i32c(static_cast<int64_t>(lshape(g).size())),
                                            i64_array(lshape(g)), i32c(op.dim), i64c(total), start, val_[r]});
                return;
            }
            nest(lshape(g), [&](const std::vector<llvm::Value*>& idx) {
                std::vector<llvm::Value*> at = idx;
                at[d] = b_.CreateAdd(idx[d], start);
                store_elem(dt(r), val_[r], linear(at, strides_of(lshape(r))), load_elem(dt(g), val_[g], linear(idx, strides_of(lshape(g)))));
            });
        });
        return;
    }
    case OpKind::Concat: {
        ValueId r = op.results[0];
        val_[r] = alloc(r);
        int64_t offset = 0;
        int64_t total = lshape(r)[static_cast<size_t>(op.dim)];
        auto d = static_cast<size_t>(op.dim);
        for (ValueId p : op.operands) {
            offload("concat", [&](bool gpu, const Nest& nest) {
                if (!gpu) {
                    call("meshrt_concat_part", {dev_, i32c(static_cast<int>(dt(p))), val_[p], i32c(static_cast<int64_t>(lshape(p).size())),
                                                i64_array(lshape(p)), i32c(op.dim), i64c(total), i64c(offset), val_[r]});
                    return;
                }
                nest(lshape(p), [&](const std::vector<llvm::Value*>& idx) {
                    std::vector<llvm::Value*> at = idx;
                    at[d] = b_.CreateAdd(idx[d], i64c(offset));
                    store_elem(dt(r), val_[r], linear(at, strides_of(lshape(r))), load_elem(dt(p), val_[p], linear(idx, strides_of(lshape(p)))));
                });
            });
            offset += lshape(p)[d];
        }
        return;
    }
    case OpKind::OneHot: {
        ValueId ids = op.operands[0], r = op.results[0];
        val_[r] = alloc(r);
        int64_t n = product(lshape(ids)), classes = op.ints[0];
        MESHC_ASSERT(product(lshape(r)) == n * classes, "one_hot's classes are not split");
        offload("one_hot", [&](bool gpu, const Nest& nest) {
            if (!gpu) {
                call("meshrt_one_hot", {dev_, i32c(static_cast<int>(dt(ids))), val_[ids], i64c(n), i64c(classes), val_[r]});
                return;
            }
            nest({n, classes}, [&](const std::vector<llvm::Value*>& idx) {
                llvm::Value* id = convert(load_elem(dt(ids), val_[ids], idx[0]), dt(ids), DType::I64);
                llvm::Value* hot = b_.CreateICmpEQ(id, idx[1]);
                store_elem(DType::F32, val_[r], b_.CreateAdd(b_.CreateMul(idx[0], i64c(classes)), idx[1]),
                           b_.CreateSelect(hot, llvm::ConstantFP::get(f32_, 1.0), llvm::ConstantFP::get(f32_, 0.0)));
            });
        });
        return;
    }
    case OpKind::Embedding: {
        ValueId table = op.operands[0], ids = op.operands[1], r = op.results[0];
        val_[r] = alloc(r);
        int64_t rows = lshape(table)[0];
        call("meshrt_embedding", {dev_, i32c(static_cast<int>(dt(table))), val_[table], i64c(rows), dim_offset(table, 0),
                                  i64c(gtype(table).shape[0]), i64c(lshape(table)[1]), i32c(static_cast<int>(dt(ids))), val_[ids],
                                  i64c(product(lshape(ids))), val_[r], gtype(ids).mesh >= 0 ? layout_of(gtype(ids)) : llvm::ConstantPointerNull::get(ptr_)});
        return;
    }
    case OpKind::Call: return call_op(op);
    case OpKind::Print: return print(op);
    case OpKind::Save: {
        if (!op.names.empty()) {  // a .safetensors file: one tensor per operand, then the file
            llvm::Value* path = path_of(op);
            for (size_t i = 0; i < op.operands.size(); ++i) {
                ValueId x = op.operands[i];
                call("meshrt_save_tensor", {dev_, path, cstring(op.names[i]), i32c(static_cast<int>(dt(x))), layout_of(gtype(x)), val_[x]});
            }
            call("meshrt_save_finish", {dev_, path});
            return;
        }
        ValueId x = op.operands[0];
        // Every device of the program calls save (devices outside the value's mesh
        // contribute nothing; the runtime ends it with a barrier over all devices).
        call("meshrt_save", {dev_, path_of(op), i32c(static_cast<int>(dt(x))), layout_of(gtype(x)), val_[x]});
        return;
    }
    case OpKind::For: return for_op(op);
    case OpKind::If: return if_op(op);
    case OpKind::Grad: MESHC_ASSERT(false, "autodiff (transform/) replaces every grad op");
    }
}

/// The file of a load or save: its literal, or the value of its path argument.
llvm::Value* Generator::path_of(const Op& op) {
    if (op.ints.empty()) return cstring(op.text);
    return call("meshrt_arg_path", {dev_, i32c(op.ints[0])});
}

/// r = x[..., start:start+len, ...] along dim d.
void Generator::slice(ValueId x, ValueId r, size_t d, llvm::Value* start, int64_t len) {
    offload("slice", [&](bool gpu, const Nest& nest) {
        if (!gpu) {
            call("meshrt_slice", {dev_, i32c(static_cast<int>(dt(x))), val_[x], i32c(static_cast<int64_t>(lshape(x).size())),
                                  i64_array(lshape(x)), i32c(static_cast<int64_t>(d)), start, i64c(len), val_[r]});
            return;
        }
        nest(lshape(r), [&](const std::vector<llvm::Value*>& idx) {
            std::vector<llvm::Value*> at = idx;
            at[d] = b_.CreateAdd(idx[d], start);
            store_elem(dt(r), val_[r], linear(idx, strides_of(lshape(r))), load_elem(dt(x), val_[x], linear(at, strides_of(lshape(x)))));
        });
    });
}

void Generator::create(const Op& op) {
    ValueId r = op.results[0];
    DType t = dt(r);
    val_[r] = alloc(r);
    llvm::Value* out = val_[r];
    switch (op.create) {
    case ir::CreateKind::Zeros: zero(r, out); return;
    case ir::CreateKind::Ones:
    case ir::CreateKind::Full: {
        llvm::Value* c = const_of(t, op.create == ir::CreateKind::Ones ? 1.0 : op.number);
        offload("fill", [&](bool, const Nest& nest) {
            nest({product(lshape(r))}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, out, i[0], c); });
        });
        return;
    }
    case ir::CreateKind::Iota: {
        auto d = static_cast<size_t>(op.dim);
        llvm::Value* offset = dim_offset(r, d);
        auto strides = strides_of(lshape(r));
        offload("iota", [&](bool, const Nest& nest) {
            nest(lshape(r), [&](const std::vector<llvm::Value*>& idx) {
                llvm::Value* at = i64c(0);
                for (size_t k = 0; k < idx.size(); ++k) at = b_.CreateAdd(at, b_.CreateMul(idx[k], i64c(strides[k])));
                store_elem(t, out, at, convert(b_.CreateAdd(idx[d], offset), DType::I64, t));
            });
        });
        return;
    }
    case ir::CreateKind::RandomNormal:
    case ir::CreateKind::RandomUniform:
        call("meshrt_random", {dev_, i32c(op.create == ir::CreateKind::RandomNormal ? 0 : 1),
                               op.operands.empty() ? i64c(op.seed) : scalar_i64(op.operands[0]),
                               i32c(static_cast<int>(t)), layout_of(gtype(r)), out});
        return;
    case ir::CreateKind::Permutation:
        call("meshrt_permutation", {dev_, op.operands.empty() ? i64c(op.seed) : scalar_i64(op.operands[0]), layout_of(gtype(r)), out});
        return;
    }
}

}  // namespace meshc::codegen::lower

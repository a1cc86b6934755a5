// FunctionBuilder basics: emitting ops, types and layouts from the AST, element types,
// placing values on meshes, collectives, and planning coercions between layouts.
#include "sema/check/context.h"

namespace meshc::sema::check {

// ==================================================================== FunctionBuilder

FunctionBuilder::FunctionBuilder(Inferer& inferer, ir::Function& f, const Item& item,
                                 size_t module_index, Binding binding)
    : in_(inferer), f_(f), item_(item), module_index_(module_index), binding_(std::move(binding)),
      ops_(&f.ops) {
    for (const Attribute& a : item.attrs) {
        if (a.name.name == "explicit_comm") explicit_comm_ = true;
        if (a.name.name == "checkpoint") f.checkpoint = true;
    }
    // This instance's `P: Params` types: its values of type P are opaque in the body
    // (only leaf-wise operations apply), whatever P is bound to.
    for (auto& [name, t] : binding_.types) {
        if (t->kind == AggType::Tensor) continue;
        auto tagged = std::make_shared<AggType>(*t);
        tagged->type_param = name;
        t = std::move(tagged);
    }
}

void FunctionBuilder::fail(DiagCode code, Span span, std::string message,
                           std::vector<std::pair<std::string, Span>> notes) {
    auto& d = in_.diags_->emit(code, span, std::move(message));
    for (auto& [text, at] : notes) d.note(std::move(text), at);
    throw Abandon{};
}

std::string FunctionBuilder::source_name(ValueId v) const {
    // The value's own name where it has one (a variable, a parameter's leaf `p.w1`); a
    // temporary has none, and a made-up name could be a real variable's.
    return v < f_.names.size() && !f_.names[v].empty() ? f_.names[v] : std::string("<the value>");
}

void FunctionBuilder::check_size(const TensorType& type, Span span) {
    // Every size, byte count and index of a tensor must fit 64 bits with room to spare.
    uint64_t bytes = ir::dtype_bytes(type.dtype);
    for (int64_t d : type.shape) {
        if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) || bytes >= (uint64_t{1} << 62)) {
            fail(DiagCode::E0312, span,
                 fmt::format("a tensor of shape {} and element type {} is too large (2^62 bytes or more)", shape_string(type.shape),
                             dtype_name(type.dtype)));
        }
    }
}

ValueId FunctionBuilder::emit(ir::Op op, TensorType type, std::vector<std::string_view> dim_names) {
    check_size(type, op.span);
    ValueId v = f_.add_value(std::move(type));
    op.results = {v};
    flexible_.push_back(false);
    weak_.push_back(false);
    producer_.push_back({ops_, ops_->size()});
    if (dim_names.size() != f_.types[v].rank()) dim_names.assign(f_.types[v].rank(), "");
    dim_names_.push_back(std::move(dim_names));
    ops_->push_back(std::move(op));
    return v;
}

std::string FunctionBuilder::type_str(const TensorType& t) const {
    return ir::type_to_string(in_.module_, t);
}

const Mesh* FunctionBuilder::mesh_of(const TensorType& t) const { return in_.module_.mesh(t.mesh); }

int32_t FunctionBuilder::mesh_index(const Ident& name) {
    if (auto it = binding_.meshes.find(name.name); it != binding_.meshes.end()) return it->second;
    for (const auto& [item, index] : in_.mesh_items_) {
        // Meshes of the function's own module first.
        const Module& m = *in_.program_.modules[module_index_];
        if (item->name.name == name.name &&
            std::find(m.items.begin(), m.items.end(), item) != m.items.end()) {
            return index;
        }
    }
    fail(DiagCode::E0310, name.span, fmt::format("mesh `{}` is not bound here", name.name));
}

int64_t FunctionBuilder::eval_dim(const Dim& d) {
    switch (d.kind) {
    case DimKind::Int: return d.value;
    case DimKind::Var: {
        auto it = binding_.sizes.find(d.name.name);
        if (it == binding_.sizes.end()) {
            // Whether a parameter's shape mentions the size (inside an expression the
            // arguments do not determine, then).
            std::function<bool(const Dim&)> mentions = [&](const Dim& x) {
                if (x.kind == DimKind::Var) return x.name.name == d.name.name;
                return x.kind == DimKind::Binary && (mentions(*x.lhs) || mentions(*x.rhs));
            };
            std::function<bool(const Type&)> in_type = [&](const Type& t) {
                for (const Dim* x : t.shape) {
                    if (x && mentions(*x)) return true;
                }
                for (const Type* e : t.elements) {
                    if (e && in_type(*e)) return true;
                }
                for (const Dim* x : t.args) {
                    if (x && mentions(*x)) return true;
                }
                return false;
            };
            bool mentioned = false;
            const Item& owner = callee_item_ ? *callee_item_ : item_;
            for (const auto& prm : owner.params) mentioned = mentioned || (prm.type && in_type(*prm.type));
            fail(DiagCode::E0310, d.span,
                 fmt::format("the size `{}` is not known here", d.name.name),
                 {{mentioned ? fmt::format("sizes are inferred from the arguments of each call: from a parameter's dim "
                                           "that is the size, or an expression that determines it (`{0} * 2`, `{0} + 1`); "
                                           "here `{0}` appears only where the arguments do not determine it", d.name.name)
                             : std::string("sizes are inferred from the arguments of each call; a size that no "
                                           "parameter shape mentions cannot be inferred"), {}}});
        }
        return it->second;
    }
    case DimKind::Axis: {
        int32_t m = mesh_index(d.name);
        const Mesh& mesh = in_.module_.meshes[m];
        auto axis = mesh.axis_index(d.axis.name);
        if (!axis) fail(DiagCode::E0401, d.axis.span, fmt::format("mesh `{}` has no axis `{}`", mesh.name, d.axis.name));
        return mesh.axes[*axis].size;
    }
    case DimKind::Binary: {
        int64_t a = eval_dim(*d.lhs);
        int64_t b = eval_dim(*d.rhs);
        int64_t r = 0;
        bool overflow = false;
        switch (d.op) {
        case DimOp::Add: overflow = __builtin_add_overflow(a, b, &r); break;
        case DimOp::Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
        case DimOp::Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
        case DimOp::Div:
        case DimOp::Mod:
            if (b == 0) fail(DiagCode::E0501, d.span, "division by zero in a size");
            if (d.op == DimOp::Div && a % b != 0) {
                fail(DiagCode::E0501, d.span,
                     fmt::format("`{}` is {} / {}, which is not exact", syntax::dim_to_string(d), a, b),
                     {{"`/` in a size must divide exactly", {}}});
            }
            r = d.op == DimOp::Div ? a / b : ((a % b) + b) % b;
            break;
        }
        if (overflow) fail(DiagCode::E0310, d.span, "size arithmetic overflows 64 bits");
        return r;
    }
    }
    return 0;
}

Layout FunctionBuilder::layout_from_ast(const Type& t, const TensorType& tt, const Mesh& mesh) {
    Layout layout = Layout::replicated(tt.rank());
    if (t.layout) {
        for (const LayoutEntry& e : t.layout->entries) {
            size_t d = 0;
            if (e.key_name) {
                for (size_t i = 0; i < t.shape.size(); ++i) {
                    if (t.shape[i]->kind == DimKind::Var && t.shape[i]->name.name == e.key_name->name) d = i;
                }
            } else {
                d = static_cast<size_t>(e.key_pos);
            }
            for (const Ident& axis : e.axes) {
                auto index = mesh.axis_index(axis.name);
                if (!index) fail(DiagCode::E0401, axis.span, fmt::format("mesh `{}` has no axis `{}`", mesh.name, axis.name));
                layout.dims[d].push_back(static_cast<uint8_t>(*index));
            }
            int64_t factor = layout.split_factor(mesh, d);
            if (tt.shape[d] % factor != 0 && call_site_) {
                std::string sizes = binding_.describe();
                fail(DiagCode::E0501, call_site_->span,
                     fmt::format("this call splits dim {} of size {} over ({}) into {} pieces, which does not divide it",
                                 d, tt.shape[d], mesh_axis_list(mesh, layout.dims[d]), factor),
                     {{fmt::format("with {}", sizes), {}}, {"the parameter's type asks for the split here", e.span}});
            }
            if (tt.shape[d] % factor != 0) {
                fail(DiagCode::E0501, e.span,
                     fmt::format("dim {} has size {}, which the split over ({}) into {} pieces does "
                                 "not divide", d, tt.shape[d], mesh_axis_list(mesh, layout.dims[d]), factor),
                     {{"splitting a dim of size n over axes of total size k requires n % k == 0", {}}});
            }
        }
    }
    if (t.partial) {
        for (const Ident& axis : *t.partial) {
            auto index = mesh.axis_index(axis.name);
            if (!index) fail(DiagCode::E0401, axis.span, fmt::format("mesh `{}` has no axis `{}`", mesh.name, axis.name));
            layout.partial |= sema::axis_bit(*index);
        }
    }
    return layout;
}

DType FunctionBuilder::bound_dtype(const Ident& name) {
    auto it = binding_.dtypes.find(name.name);
    if (it == binding_.dtypes.end()) {
        fail(DiagCode::E0310, name.span, fmt::format("the element type `{}` is not known here", name.name),
             {{"a `T: Float` parameter takes the element type of an argument declared `Tensor T [...]` or `T`; "
               "a literal fixes none (write `cast(0.5, f32)`)", {}}});
    }
    return it->second;
}

TensorType FunctionBuilder::type_from_ast(const Type& t, std::vector<std::string_view>* dim_names) {
    TensorType tt;
    switch (t.kind) {
    case TypeKind::Scalar: tt.dtype = t.dtype; return tt;
    case TypeKind::Tensor: break;
    case TypeKind::Tuple:
    case TypeKind::Named:
        fail(DiagCode::E0311, t.span,
             "tuple and struct types are not supported by the type checker yet",
             {{"`meshc check` (syntax and names) accepts them; `explain` and `--emit=gir` "
               "need the checker's support, which is in progress", {}}});
    }
    tt.dtype = t.dtype_var ? bound_dtype(*t.dtype_var) : t.dtype;
    for (const Dim* d : t.shape) {
        int64_t n = eval_dim(*d);
        if (n < 1) fail(DiagCode::E0307, d->span, fmt::format("a dim has size {}; sizes are at least 1", n));
        tt.shape.push_back(n);
        if (dim_names) dim_names->push_back(d->kind == DimKind::Var ? d->name.name : std::string_view());
    }
    if (t.mesh && t.any_layout) {
        // `with _`: the layout the argument brought to this instance (replicated where
        // no argument binds it: a result type, an annotation, a probe).
        tt.mesh = mesh_index(*t.mesh);
        tt.layout = Layout::replicated(tt.rank());
        auto it = binding_.layouts.find(&t);
        if (it != binding_.layouts.end() && it->second.dims.size() == tt.rank()) tt.layout = it->second;
    } else if (t.mesh) {
        tt.mesh = mesh_index(*t.mesh);
        tt.layout = layout_from_ast(t, tt, in_.module_.meshes[tt.mesh]);
    } else {
        tt.layout = Layout::replicated(tt.rank());
    }
    return tt;
}

// ---------------------------------------------------------------- layouts

void FunctionBuilder::check_fits(ValueId v, DType dtype) {
    auto [list, index] = producer_[v];
    if (!list || is_float(dtype) || dtype == DType::Bool) return;
    const ir::Op& op = (*list)[index];
    bool literal = op.kind == ir::OpKind::Constant;
    bool fill = op.kind == ir::OpKind::Create && op.create == ir::CreateKind::Full;
    if (!literal && !fill) return;
    if (literal && weak_[v] && is_float(f_.types[v].dtype)) {
        // `q + 0.5 * iota(..)` with an integer q: the chain becomes integer, the literal cannot.
        fail(DiagCode::E0308, op.span, fmt::format("a float literal meets a {} value", dtype_name(dtype)));
    }
    if (fill && op.number != std::floor(op.number)) {
        fail(DiagCode::E0308, op.span, fmt::format("`full` with the fill value {} makes a {} tensor", op.number, dtype_name(dtype)));
    }
    double lo = dtype == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dtype == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
    if (op.number < lo || op.number > hi) {
        fail(DiagCode::E0105, op.span, fmt::format("{} does not fit {}", static_cast<long long>(op.number), dtype_name(dtype)));
    }
}

void FunctionBuilder::settle_dtype(ValueId v, DType dtype) {
    auto [list, index] = producer_[v];
    check_fits(v, dtype);
    f_.types[v].dtype = dtype;
    weak_[v] = false;
    if (!list) return;
    const ir::Op& op = (*list)[index];
    if (op.kind != ir::OpKind::Elementwise || op.ew == ir::Ew::Cast) return;
    if (ir::ew_rule(op.ew).result == ir::EwResult::Bool) return;  // comparisons, logic, isfinite
    size_t first = op.ew == ir::Ew::Select ? 1 : 0;
    for (size_t i = first; i < op.operands.size(); ++i) {
        if (weak_[op.operands[i]]) settle_dtype(op.operands[i], dtype);
    }
}

void FunctionBuilder::fix_layout(ValueId v, int32_t mesh, const Layout& layout) {
    TensorType& t = f_.types[v];
    t.mesh = mesh;
    t.layout = layout;
    flexible_[v] = false;
    // Flexible results already made from v follow it: each takes v's splits on the dims
    // it shares with v (aligned from the right, as broadcasting aligns them).
    if (auto users = flexible_users_.find(v); users != flexible_users_.end()) {
        std::vector<ValueId> list = std::move(users->second);
        flexible_users_.erase(users);
        for (ValueId u : list) {
            if (!flexible_[u]) continue;
            const TensorType& ut = f_.types[u];
            Layout ul = Layout::replicated(ut.rank());
            if (ut.rank() >= t.rank()) {
                size_t offset = ut.rank() - t.rank();
                for (size_t d = 0; d < t.rank(); ++d) {
                    if (ut.shape[d + offset] == t.shape[d]) ul.dims[d + offset] = f_.types[v].layout.dims[d];
                }
            }
            fix_layout(u, mesh, ul);
        }
    }
    auto [list, index] = producer_[v];
    if (!list) return;
    ir::Op& op = (*list)[index];
    if (op.kind != ir::OpKind::Elementwise) return;
    for (ValueId o : op.operands) {
        if (!flexible_[o]) continue;
        const TensorType& ot = f_.types[o];
        Layout ol = Layout::replicated(ot.rank());
        size_t offset = t.rank() - ot.rank();
        for (size_t d = 0; d < ot.rank(); ++d) {
            if (ot.shape[d] == t.shape[d + offset]) ol.dims[d] = layout.dims[d + offset];
        }
        ol.partial = 0;
        fix_layout(o, mesh, ol);
    }
}

ValueId FunctionBuilder::place(ValueId v, int32_t mesh, Span span, bool scalars_too) {
    if (type(v).mesh == mesh || mesh < 0) return v;
    if (type(v).mesh >= 0) {
        fail(DiagCode::E0405, span,
             fmt::format("a value on mesh `{}` is used on mesh `{}`", in_.module_.meshes[type(v).mesh].name,
                         in_.module_.meshes[mesh].name),
             {{"values never move between meshes implicitly", {}}});
    }
    if (flexible_[v]) {
        fix_layout(v, mesh, Layout::replicated(type(v).rank()));
        return v;
    }
    // A mesh-free scalar goes with any mesh as it is.
    if (type(v).rank() == 0 && !scalars_too) return v;
    // An unplaced value is replicated everywhere: viewing it on a mesh is free.
    TensorType t = type(v);
    t.mesh = mesh;
    t.layout = Layout::replicated(t.rank());
    ir::Op op{ir::OpKind::Place};
    op.operands = {v};
    op.span = span;
    std::vector<std::string_view> names = dim_names_[v];
    return emit(std::move(op), std::move(t), std::move(names));
}

ValueId FunctionBuilder::collective(ir::OpKind kind, ValueId v, AxisSet axes, int32_t dim,
                                    int32_t dim2, Layout result, Span span,
                                    const std::string& reason, bool inserted) {
    if (dry_cost_) {
        // Costing a plan: add what this step would cost (docs/language.md, "Sharding rules" and "Cost model"), emit nothing.
        TensorType in = plan_type(v);
        in.layout = dry_layout_;
        TensorType out = in;
        out.layout = result;
        const Mesh* mesh = mesh_of(in);
        std::optional<CollectiveKind> ck = ir::collective_kind(kind);
        int64_t bytes = kind == ir::OpKind::AllGather ? out.local_bytes(mesh) : in.local_bytes(mesh);
        if (ck && mesh) *dry_cost_ += collective_cost(*ck, *mesh, axes, static_cast<double>(bytes)).seconds;
        dry_layout_ = std::move(result);
        return v;
    }
    ir::Op op{kind};
    op.operands = {v};
    op.axes = axes;
    op.dim = dim;
    op.dim2 = dim2;
    op.span = span;
    op.inserted = inserted;
    op.reason = reason;
    TensorType t = type(v);
    t.layout = std::move(result);
    bool communicates = kind != ir::OpKind::LocalSlice && kind != ir::OpKind::MakePartial;
    const Mesh* mesh = mesh_of(t);
    if (communicates && inserted && mesh && mesh->group_size(axes) > 1 && !plan_reported_ &&
        (in_.options_.strict_comm || explicit_comm_) && !permitted(*mesh, axes)) {
        const TensorType& in_type = type(v);
        int64_t bytes = kind == ir::OpKind::AllGather ? t.local_bytes(mesh) : in_type.local_bytes(mesh);
        auto& d = in_.diags_->emit(
            DiagCode::E0406, span,
            fmt::format("this needs {} {} over ({}) of {} per-device bytes",
                        kind == ir::OpKind::ReduceScatter ? "a" : "an", ir::op_name(kind),
                        mesh->axis_names(axes), bytes));
        d.note(fmt::format("why: {}", reason));
        d.note(fmt::format("{}; write the conversion yourself with `reshard({}, {})` (or the "
                           "explicit collective) to allow it",
                           in_.options_.strict_comm ? "--strict-comm forbids inserted communication"
                                                    : "this function is `@explicit_comm`",
                           source_name(v), layout_to_string(t.layout, *mesh)));
    }
    if (auto choice = choices_.find(v); choice != choices_.end() && mesh &&
        (kind == ir::OpKind::AllReduce || kind == ir::OpKind::ReduceScatter)) {
        CollectiveKind ck = kind == ir::OpKind::AllReduce ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
        choice->second.paid += collective_cost(ck, *mesh, axes, static_cast<double>(type(v).local_bytes(mesh))).seconds;
    }
    std::vector<std::string_view> names = dim_names_[v];
    return emit(std::move(op), std::move(t), std::move(names));
}

void FunctionBuilder::settle_choices() {
    bool retry = false;
    for (const auto& [v, c] : choices_) {
        if (c.paid > c.gather_cost && !in_.gather_hints_.count({ir::function_label(f_), c.where})) {
            in_.gather_hints_.insert({ir::function_label(f_), c.where});
            retry = true;
        }
    }
    if (retry) throw Retry{};
}

ValueId FunctionBuilder::completed_if_known(ValueId v) const {
    const TensorType& t = type(v);
    const Mesh* m = t.layout.partial ? in_.module_.mesh(t.mesh) : nullptr;
    if (!m || dry_cost_) return v;
    Layout whole = t.layout;
    whole.partial = 0;
    ValueId done = find_coerced(v, layout_to_string(whole, *m));
    return done == ir::kNoValue ? v : done;
}

ValueId FunctionBuilder::reduce_partial(ValueId v, AxisSet axes, Span span, const std::string& reason) {
    axes &= type(v).layout.partial;
    if (!axes) return v;
    Layout l = type(v).layout;
    l.partial &= ~axes;
    // A pending sum completed earlier in this block is used again, not summed twice.
    const Mesh* mesh = mesh_of(type(v));
    if (!mesh || dry_cost_) return collective(ir::OpKind::AllReduce, v, axes, -1, -1, l, span, reason, true);
    auto key = std::make_tuple(v, layout_to_string(l, *mesh), static_cast<const void*>(ops_));
    if (ValueId done = find_coerced(v, std::get<1>(key)); done != ir::kNoValue) return done;
    ValueId r = collective(ir::OpKind::AllReduce, v, axes, -1, -1, l, span, reason, true);
    coerced_[key] = r;
    return r;
}

ValueId FunctionBuilder::coerce(ValueId v, const TensorType& target, Span span,
                                const std::string& reason, bool inserted) {
    const TensorType& t = type(v);
    if (t.shape != target.shape) {
        fail(DiagCode::E0307, span,
             fmt::format("shape mismatch: expected {}, found {}", shape_string(target.shape), shape_string(t.shape)),
             {{fmt::format("the value has type {}; {} requires {}", type_str(t), reason, type_str(target)), {}}});
    }
    if (t.dtype != target.dtype) {
        if (weak_[v]) {
            settle_dtype(v, target.dtype);
        } else {
            fail(DiagCode::E0308, span,
                 fmt::format("element type mismatch: expected {}, found {}", dtype_name(target.dtype), dtype_name(t.dtype)),
                 {{fmt::format("{} requires {}", reason, type_str(target)), {}}});
        }
    }
    if (target.mesh < 0) {
        if (flexible_[v] || t.mesh < 0) {
            if (flexible_[v]) fix_layout(v, -1, Layout::replicated(t.rank()));
            return v;
        }
        // Off the mesh: replicate, then view as mesh-free.
        int32_t from = t.mesh;
        v = plan_coercion(v, from, Layout::replicated(t.rank()), span, reason, inserted);
        TensorType off = type(v);
        off.mesh = -1;
        ir::Op op{ir::OpKind::Place};
        op.operands = {v};
        op.span = span;
        std::vector<std::string_view> names = dim_names_[v];
        return emit(std::move(op), std::move(off), std::move(names));
    }
    if (t.mesh >= 0 && t.mesh != target.mesh) place(v, target.mesh, span);  // reports E0405
    if (flexible_[v]) {
        // A creation is made in the target's layout; a pending sum it must be is then one
        // make_partial (each device cannot hold the whole value as its share of a sum).
        Layout plain = target.layout;
        plain.partial = 0;
        fix_layout(v, target.mesh, plain);
        if (!target.layout.partial) return v;
        return plan_coercion(v, target.mesh, target.layout, span, reason, inserted);
    }
    v = place(v, target.mesh, span, /*scalars_too=*/true);
    return plan_coercion(v, target.mesh, target.layout, span, reason, inserted);
}

// Converts v's layout into `target` with the table of docs/language.md, "Sharding rules": pending sums
// first (reduce_scatter where the target splits a dim over the reduced axes, else one
// all_reduce over all of them), then free local slices over axes nothing uses, then
// all_to_all for an axis moving from one dim to another, then all_gathers, then the
// remaining local slices. Buffers shrink before anything is sent where possible.
// A coercion done earlier in the same block (the same value to the same layout) is used
// again rather than communicated twice.
ValueId FunctionBuilder::plan_coercion(ValueId v, int32_t mesh_index, const Layout& target, Span span,
                                       const std::string& reason, bool inserted) {
    if (dry_cost_ || plan_type(v).layout == target) return plan_coercion_once(v, mesh_index, target, span, reason, inserted);
    auto key = std::make_tuple(v, layout_to_string(target, in_.module_.meshes[mesh_index]), static_cast<const void*>(ops_));
    if (ValueId done = find_coerced(v, std::get<1>(key)); done != ir::kNoValue && type(done).mesh == mesh_index) return done;
    ValueId r = plan_coercion_once(v, mesh_index, target, span, reason, inserted);
    coerced_[key] = r;
    return r;
}

ValueId FunctionBuilder::plan_coercion_once(ValueId v, int32_t mesh_index, const Layout& target, Span span,
                                            const std::string& reason, bool inserted) {
    Layout cur = plan_type(v).layout;
    if (dry_cost_) dry_layout_ = cur;
    if (cur == target) return v;
    const ir::Mesh& mesh = in_.module_.meshes[static_cast<size_t>(mesh_index)];
    std::vector<ir::ReshardStep> steps = ir::plan_reshard(plan_type(v), target, mesh);
    bool forbidden = !dry_cost_ && inserted && (in_.options_.strict_comm || explicit_comm_);
    if (forbidden) {
        // One E0406 for the whole conversion, naming each collective of its plan.
        std::vector<std::string> parts;
        TensorType t = plan_type(v);
        for (const ir::ReshardStep& s : steps) {
            if (ir::communicates(s.kind) && mesh.group_size(s.axes) > 1 && !permitted(mesh, s.axes)) {
                parts.push_back(fmt::format("{} {} over ({}) of {} per-device bytes",
                                            s.kind == ir::OpKind::ReduceScatter ? "a" : "an", ir::op_name(s.kind),
                                            mesh.axis_names(s.axes), ir::step_bytes(s, t, mesh)));
            }
            t.layout = s.result;
        }
        if (!parts.empty()) {
            std::string what = parts[0];
            for (size_t i = 1; i < parts.size(); ++i) what += ", then " + parts[i];
            auto& d = in_.diags_->emit(DiagCode::E0406, span, fmt::format("this needs {}", what));
            d.note(fmt::format("why: {}", reason));
            d.note(fmt::format("{}; write the conversion yourself with `reshard({}, {})` (or the "
                               "explicit collective) to allow it",
                               in_.options_.strict_comm ? "--strict-comm forbids inserted communication"
                                                        : "this function is `@explicit_comm`",
                               source_name(v), layout_to_string(target, mesh)));
        }
    }
    bool saved = plan_reported_;
    plan_reported_ = plan_reported_ || forbidden;
    for (const ir::ReshardStep& s : steps) {
        v = collective(s.kind, v, s.axes, s.dim, s.dim2, s.result, span, reason, inserted);
    }
    plan_reported_ = saved;
    return v;
}

// The same for a value of type `from` that is not built yet (a candidate result).
double FunctionBuilder::coercion_cost_from(const TensorType& from, const Layout& target) {
    if (from.layout == target || from.mesh < 0) return 0;
    dry_type_ = &from;
    double cost = coercion_cost(ir::kNoValue, from.mesh, target);
    dry_type_ = nullptr;
    return cost;
}

// What converting v to `target` would cost, by the plan plan_coercion() would choose;
// infinity when there is no such plan.
double FunctionBuilder::coercion_cost(ValueId v, int32_t mesh, const Layout& target) {
    if (plan_type(v).layout == target) return 0;
    double cost = 0;
    double* saved = dry_cost_;
    Layout saved_layout = dry_layout_;
    dry_cost_ = &cost;
    try {
        plan_coercion(v, mesh, target, {}, {}, true);
    } catch (const InternalError&) {
        cost = std::numeric_limits<double>::infinity();
    }
    dry_cost_ = saved;
    dry_layout_ = std::move(saved_layout);
    return cost;
}

// ---------------------------------------------------------------- body

}  // namespace meshc::sema::check

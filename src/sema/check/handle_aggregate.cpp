// Tuples and structs: aggregate types, flattening to tensors, struct literals, and
// binding a function's generic sizes and meshes from its arguments.
#include "sema/check/context.h"

namespace meshc::sema::check {

// ---------------------------------------------------------------- aggregates

AggType FunctionBuilder::agg_type_from_ast(const Type& t) {
    AggType a;
    switch (t.kind) {
    case TypeKind::Scalar:
    case TypeKind::Tensor:
        a.kind = AggType::Tensor;
        a.tensor = type_from_ast(t, &a.dim_names);
        a.any_layout = t.any_layout && !binding_.layouts.count(&t);
        return a;
    case TypeKind::Tuple:
        a.kind = AggType::Tuple;
        for (const Type* e : t.elements) a.elems.push_back(agg_type_from_ast(*e));
        return a;
    case TypeKind::Named: break;
    }
    if (!t.module) {
        // A `P: Params` parameter: the type it is bound to in this instance.
        if (auto it = binding_.types.find(t.name.name); it != binding_.types.end()) return *it->second;
        // `T` alone (`T: Float`): a scalar of that element type.
        if (auto it = binding_.dtypes.find(t.name.name); it != binding_.dtypes.end() && t.args.empty()) {
            a.kind = AggType::Tensor;
            a.tensor.dtype = it->second;
            return a;
        }
    }
    const Item* item = find_struct(t);
    Binding inner;
    for (size_t i = 0; i < item->generics.size() && i < t.args.size(); ++i) {
        const GenericParam& g = item->generics[i];
        const Dim& arg = *t.args[i];
        if (g.kind && g.kind->name == "Float") {
            DType d = DType::F32;
            if (!dtype_from_name(arg.name.name, d)) d = bound_dtype(arg.name);
            inner.dtypes[g.name.name] = d;
        } else if (g.kind && g.kind->name == "Params") {
            auto it = binding_.types.find(arg.name.name);
            if (it == binding_.types.end()) {
                fail(DiagCode::E0310, arg.span,
                     fmt::format("the parameter type `{}` is not known here", arg.name.name));
            }
            inner.types[g.name.name] = it->second;
            inner.type_keys[g.name.name] = binding_.type_keys.at(arg.name.name);
            inner.type_names[g.name.name] = binding_.type_names.at(arg.name.name);
        } else if (g.kind && g.kind->name == "Mesh") {
            inner.meshes[g.name.name] = mesh_index(arg.name);
        } else {
            inner.sizes[g.name.name] = eval_dim(arg);
        }
    }
    return struct_type(*item, std::move(inner));
}

AggType FunctionBuilder::struct_type(const Item& item, Binding inner) {
    AggType a;
    a.kind = AggType::Struct;
    a.item = &item;
    a.binding = std::make_shared<Binding>(inner);
    // Field types are written in the struct's own generics and in its module's scope
    // (a field of another struct of that module, a mesh declared there).
    std::swap(binding_, inner);
    size_t saved_module = module_index_;
    if (auto it = in_.item_module_.find(&item); it != in_.item_module_.end()) module_index_ = it->second;
    try {
        for (const Param& field : item.fields) a.elems.push_back(agg_type_from_ast(*field.type));
    } catch (...) {
        std::swap(binding_, inner);
        module_index_ = saved_module;
        throw;
    }
    std::swap(binding_, inner);
    module_index_ = saved_module;
    return a;
}

const Item* FunctionBuilder::find_struct(const Type& t) {
    const Module* module = in_.program_.modules[module_index_].get();
    if (t.module) {
        for (const Item* item : module->items) {
            if (item->kind == ItemKind::Import && item->name.name == t.module->name) {
                module = in_.program_.modules[in_.program_.import_targets.at(item)].get();
            }
        }
    }
    for (const Item* item : module->items) {
        if (item->kind == ItemKind::Struct && item->name.name == t.name.name) return item;
    }
    fail(DiagCode::E0310, t.span, fmt::format("`{}` is not a struct here", t.name.name));
}

void FunctionBuilder::flatten(const Val& v, std::vector<ValueId>& out, Span span) {
    if (v.kind == Val::Poison) throw Abandon{};
    switch (v.kind) {
    case Val::Tensor: out.push_back(v.id); return;
    case Val::Tuple:
    case Val::Struct:
        for (const Val& e : v.elems) flatten(e, out, span);
        return;
    default: fail(DiagCode::E0309, span, "a function is not a value here");
    }
}

void FunctionBuilder::flatten_type(const AggType& t, std::vector<const AggType*>& out) {
    if (t.kind == AggType::Tensor) {
        out.push_back(&t);
        return;
    }
    for (const AggType& e : t.elems) flatten_type(e, out);
}

// Rebuilds a Val of type `t` from flat GIR values, consuming them from `next`.
Val FunctionBuilder::unflatten(const AggType& t, const std::vector<ValueId>& values, size_t& next) {
    if (t.kind == AggType::Tensor) return Val::tensor(values[next++]);
    Val v;
    v.kind = t.kind == AggType::Tuple ? Val::Tuple : Val::Struct;
    v.fn = t.item;
    v.binding = t.binding;
    v.opaque = t.type_param;
    for (const AggType& e : t.elems) v.elems.push_back(unflatten(e, values, next));
    return v;
}

std::string FunctionBuilder::agg_string(const AggType& t) const {
    switch (t.kind) {
    case AggType::Tensor: return type_str(t.tensor);
    case AggType::Tuple: {
        std::string s = "(";
        for (size_t i = 0; i < t.elems.size(); ++i) s += (i ? ", " : "") + agg_string(t.elems[i]);
        return s + (t.elems.size() == 1 ? ",)" : ")");
    }
    case AggType::Struct: return fmt::format("struct {}", t.item->name.name);
    }
    return "?";
}

Val FunctionBuilder::coerce_val(Val v, const AggType& t, Span span, const std::string& reason,
                                bool inserted) {
    if (v.kind == Val::Poison) throw Abandon{};
    if (t.kind == AggType::Tensor) {
        if (v.kind != Val::Tensor) fail(DiagCode::E0307, span, fmt::format("expected {} ({}), found a tuple or struct", type_str(t.tensor), reason));
        TensorType target = t.tensor;
        if (t.any_layout && v.id != ir::kNoValue && !flexible_[v.id] && type(v.id).mesh == target.mesh &&
            type(v.id).rank() == target.rank()) {
            target.layout = type(v.id).layout;  // `with _`: the value's layout, its sums completed
            target.layout.partial = 0;
        }
        ValueId r = coerce(v.id, target, span, reason, inserted);
        if (!t.dim_names.empty()) dim_names_[r] = t.dim_names;
        return Val::tensor(r);
    }
    Val::Kind want = t.kind == AggType::Tuple ? Val::Tuple : Val::Struct;
    if (v.kind != want || v.elems.size() != t.elems.size() || (want == Val::Struct && v.fn != t.item)) {
        fail(DiagCode::E0307, span, fmt::format("expected {} ({})", agg_string(t), reason));
    }
    for (size_t i = 0; i < t.elems.size(); ++i) {
        std::string field = want == Val::Struct ? fmt::format("field `{}` of ", t.item->fields[i].name.name) : "";
        v.elems[i] = coerce_val(std::move(v.elems[i]), t.elems[i], span, field + reason, inserted);
    }
    v.binding = t.binding;
    v.opaque = t.type_param;
    return v;
}

std::string FunctionBuilder::agg_key(const AggType& t) const {
    switch (t.kind) {
    case AggType::Tensor: return type_str(t.tensor);
    case AggType::Tuple:
    case AggType::Struct: {
        std::string s = t.kind == AggType::Tuple ? "(" : fmt::format("{}@{}{{", t.item->name.name, static_cast<const void*>(t.item));
        for (size_t i = 0; i < t.elems.size(); ++i) s += (i ? ", " : "") + agg_key(t.elems[i]);
        return s + (t.kind == AggType::Tuple ? ")" : "}");
    }
    }
    return "?";
}

// `P: Params` ranges over float tensors and tuples and structs of them, of any shape,
// mesh and layout. The first argument of type P fixes it (pending sums completed:
// a parameter type holds global values); later ones are converted to it.
void FunctionBuilder::bind_params_type(std::string_view name, const Val& arg, Binding& b, Span span) {
    if (arg.kind == Val::Poison) throw Abandon{};
    if (arg.kind != Val::Tensor && arg.kind != Val::Tuple && arg.kind != Val::Struct) {
        fail(DiagCode::E0307, span, fmt::format("`{}: Params` stands for a tensor, tuple or struct of float tensors; this is not a value", name));
    }
    AggType t = type_of_val(arg);
    std::vector<const AggType*> leaves;
    flatten_type(t, leaves);
    if (arg.kind != Val::Tensor && leaves.empty()) {
        fail(DiagCode::E0307, span, fmt::format("`{}: Params` stands for float tensors; this {} holds none", name, agg_string(t)));
    }
    std::function<void(AggType&)> strip = [&](AggType& a) {
        if (a.kind == AggType::Tensor) {
            a.tensor.layout.partial = 0;
            return;
        }
        for (AggType& e : a.elems) strip(e);
    };
    strip(t);
    for (const AggType* leaf : leaves) {
        if (!is_float(leaf->tensor.dtype)) {
            fail(DiagCode::E0307, span,
                 fmt::format("`{}: Params` stands for float tensors, and tuples and structs of them; this argument has a leaf of type {}",
                             name, type_str(leaf->tensor)));
        }
    }
    b.type_keys[name] = agg_key(t);
    b.type_names[name] = agg_string(t);
    b.types[name] = std::make_shared<const AggType>(std::move(t));
}

// Binds the generic sizes and meshes of `param` (a type in the callee's or struct's
// generics) from the value `arg`, the way unification would.
void FunctionBuilder::bind_generics(const Type& param, const Val& arg, Binding& b, Span span, const Item* owner) {
    switch (param.kind) {
    case TypeKind::Scalar: return;
    case TypeKind::Tensor: {
        if (arg.kind != Val::Tensor) return;
        const TensorType& at = type(arg.id);
        if (param.mesh && at.mesh >= 0 && !b.meshes.count(param.mesh->name)) {
            b.meshes[param.mesh->name] = at.mesh;
        }
        if (param.dtype_var && !weak_[arg.id] && !b.dtypes.count(param.dtype_var->name)) {
            if (!is_float(at.dtype)) {
                fail(DiagCode::E0308, span,
                     fmt::format("`{}` is a float element type (`{}: Float`); the argument is {}", param.dtype_var->name,
                                 param.dtype_var->name, type_str(at)));
            }
            b.dtypes[param.dtype_var->name] = at.dtype;
        }
        if (param.any_layout && at.mesh >= 0 && !flexible_[arg.id] && !b.layouts.count(&param)) {
            Layout l = at.layout;
            l.partial = 0;
            b.layouts[&param] = l;
        }
        if (at.rank() != param.shape.size()) {
            fail(DiagCode::E0307, span,
                 fmt::format("rank mismatch: expected a tensor of rank {}, found {}", param.shape.size(), type_str(at)),
                 {{fmt::format("the declared type is {}", syntax::type_to_string(param)), {}}});
        }
        for (size_t d = 0; d < param.shape.size(); ++d) {
            const Dim& dim = *param.shape[d];
            if (dim.kind == DimKind::Var && !b.sizes.count(dim.name.name)) b.sizes[dim.name.name] = at.shape[d];
        }
        // A size inside `B * 2`, `B + 1`, `2 * B - 1`... is solved from the argument's
        // size once the rest of the expression is known (the call's type check then
        // reports a size that does not fit).
        std::function<std::optional<int64_t>(const Dim&)> known = [&](const Dim& x) -> std::optional<int64_t> {
            switch (x.kind) {
            case DimKind::Int: return x.value;
            case DimKind::Var: {
                auto it = b.sizes.find(x.name.name);
                if (it == b.sizes.end()) return std::nullopt;
                return it->second;
            }
            case DimKind::Axis: return std::nullopt;
            case DimKind::Binary: {
                auto l = known(*x.lhs), r = known(*x.rhs);
                if (!l || !r) return std::nullopt;
                switch (x.op) {
                case DimOp::Add: return *l + *r;
                case DimOp::Sub: return *l - *r;
                case DimOp::Mul: return *l * *r;
                case DimOp::Div: return *r != 0 ? std::optional<int64_t>(*l / *r) : std::nullopt;
                case DimOp::Mod: return *r != 0 ? std::optional<int64_t>(*l % *r) : std::nullopt;
                }
                return std::nullopt;
            }
            }
            return std::nullopt;
        };
        std::function<void(const Dim&, int64_t)> solve = [&](const Dim& x, int64_t target) {
            if (x.kind == DimKind::Var) {
                if (!b.sizes.count(x.name.name) && target >= 0) b.sizes[x.name.name] = target;
                return;
            }
            if (x.kind != DimKind::Binary) return;
            auto l = known(*x.lhs), r = known(*x.rhs);
            if (l && r) return;
            if (!l && !r) return;
            int64_t k = l ? *l : *r;
            const Dim& unknown = l ? *x.rhs : *x.lhs;
            switch (x.op) {
            case DimOp::Add: solve(unknown, target - k); break;
            case DimOp::Sub: solve(unknown, l ? k - target : target + k); break;
            case DimOp::Mul:
                if (k != 0 && target % k == 0) solve(unknown, target / k);
                break;
            case DimOp::Div:
            case DimOp::Mod: break;
            }
        };
        for (size_t d = 0; d < param.shape.size(); ++d) {
            if (param.shape[d]->kind == DimKind::Binary) solve(*param.shape[d], at.shape[d]);
        }
        return;
    }
    case TypeKind::Tuple:
        if (arg.kind != Val::Tuple) return;
        for (size_t i = 0; i < param.elements.size() && i < arg.elems.size(); ++i) {
            bind_generics(*param.elements[i], arg.elems[i], b, span, owner);
        }
        return;
    case TypeKind::Named: {
        if (owner && !param.module && Inferer::is_params_param(*owner, param.name.name)) {
            if (!b.types.count(param.name.name)) bind_params_type(param.name.name, arg, b, span);
            return;
        }
        if (owner && !param.module && param.args.empty() && Inferer::is_dtype_param(*owner, param.name.name)) {
            // `s: T`: a scalar of the generic element type.
            if (arg.kind == Val::Tensor && arg.id != ir::kNoValue && !weak_[arg.id] && !b.dtypes.count(param.name.name)) {
                if (!is_float(type(arg.id).dtype)) {
                    fail(DiagCode::E0308, span,
                         fmt::format("`{}` is a float element type (`{}: Float`); the argument is {}", param.name.name,
                                     param.name.name, type_str(type(arg.id))));
                }
                b.dtypes[param.name.name] = type(arg.id).dtype;
            }
            return;
        }
        if (arg.kind != Val::Struct || !arg.binding) return;
        const Item& item = *arg.fn;
        for (size_t i = 0; i < item.generics.size() && i < param.args.size(); ++i) {
            const Dim& a = *param.args[i];
            if (a.kind != DimKind::Var) continue;
            const GenericParam& g = item.generics[i];
            if (g.kind && g.kind->name == "Float") {
                DType concrete;
                if (dtype_from_name(a.name.name, concrete) || b.dtypes.count(a.name.name)) continue;
                // The element type the struct's leaves have (a struct cast leaf by leaf,
                // `cast(p, bf16)`, keeps the binding it was built with): the first field
                // declared `Tensor T [...]` or `T` says it.
                std::optional<DType> found;
                for (size_t f = 0; f < item.fields.size() && f < arg.elems.size() && !found; ++f) {
                    const Type& ft = *item.fields[f].type;
                    bool uses = (ft.kind == TypeKind::Tensor && ft.dtype_var && ft.dtype_var->name == g.name.name) ||
                                (ft.kind == TypeKind::Named && !ft.module && ft.args.empty() && ft.name.name == g.name.name);
                    const Val& e = arg.elems[f];
                    if (uses && e.kind == Val::Tensor && e.id != ir::kNoValue) found = type(e.id).dtype;
                }
                if (!found) {
                    if (auto it = arg.binding->dtypes.find(g.name.name); it != arg.binding->dtypes.end()) found = it->second;
                }
                if (found) b.dtypes[a.name.name] = *found;
            } else if (g.kind && g.kind->name == "Params") {
                auto t = arg.binding->types.find(g.name.name);
                if (t != arg.binding->types.end() && !b.types.count(a.name.name)) {
                    b.types[a.name.name] = t->second;
                    b.type_keys[a.name.name] = arg.binding->type_keys.at(g.name.name);
                    b.type_names[a.name.name] = arg.binding->type_names.at(g.name.name);
                }
            } else if (g.kind && g.kind->name == "Mesh") {
                auto m = arg.binding->meshes.find(g.name.name);
                if (m != arg.binding->meshes.end() && !b.meshes.count(a.name.name)) b.meshes[a.name.name] = m->second;
            } else {
                auto n = arg.binding->sizes.find(g.name.name);
                if (n != arg.binding->sizes.end() && !b.sizes.count(a.name.name)) b.sizes[a.name.name] = n->second;
            }
        }
        return;
    }
    }
}

// A binding names only the item's generic meshes (a declared mesh is not a parameter).
void FunctionBuilder::keep_generic_meshes(const Item& item, Binding& b) {
    for (auto it = b.meshes.begin(); it != b.meshes.end();) {
        bool generic = std::any_of(item.generics.begin(), item.generics.end(), [&](const GenericParam& g) {
            return g.name.name == it->first && g.kind && g.kind->name == "Mesh";
        });
        it = generic ? std::next(it) : b.meshes.erase(it);
    }
}

// Whether a struct literal may stay open in a generic mesh: every field is a tensor on no
// mesh yet (and none is a `load`, whose type needs the mesh).
bool FunctionBuilder::open_mesh_ok(const Item& item, const std::vector<Val>& values,
                                   const std::vector<const Expr*>& loads) const {
    for (size_t i = 0; i < item.fields.size(); ++i) {
        if (loads[i] || values[i].kind != Val::Tensor || values[i].id == ir::kNoValue || type(values[i].id).mesh >= 0) {
            return false;
        }
    }
    return !item.fields.empty();
}

Val FunctionBuilder::struct_literal(const Expr& e) {
    const Module& module = *in_.program_.modules[module_index_];
    const Item* item = nullptr;
    for (const Item* it : module.items) {
        if (it->kind == ItemKind::Struct && it->name.name == e.name.name) item = it;
    }
    if (!item) fail(DiagCode::E0310, e.name.span, fmt::format("`{}` is not a struct here", e.name.name));
    std::vector<Val> values(item->fields.size());
    // A field given as `load(...)` takes its type from the field's declaration, once the
    // struct's generic parameters are known from the other fields or the wanted type.
    std::vector<const Expr*> loads(item->fields.size(), nullptr);
    for (const FieldInit& f : e.fields) {
        for (size_t i = 0; i < item->fields.size(); ++i) {
            if (item->fields[i].name.name != f.name.name) continue;
            if (is_load_call(*f.value)) {
                loads[i] = f.value;
            } else {
                values[i] = eval(*f.value);
            }
        }
    }
    Binding inner;
    for (size_t i = 0; i < item->fields.size(); ++i) {
        if (!loads[i]) bind_generics(*item->fields[i].type, values[i], inner, e.span, item);
    }
    keep_generic_meshes(*item, inner);
    bool open_mesh = false;
    const AggType* wanted = expected_agg_ && expected_agg_->item == item && expected_agg_->binding &&
                                    key_of(expected_agg_span_) == key_of(e.span)
                                ? expected_agg_
                                : nullptr;
    for (const GenericParam& g : item->generics) {
        bool is_mesh = g.kind && g.kind->name == "Mesh";
        if (g.kind && g.kind->name == "Float") {
            if (!inner.dtypes.count(g.name.name) && wanted) {
                if (auto it = wanted->binding->dtypes.find(g.name.name); it != wanted->binding->dtypes.end()) {
                    inner.dtypes[g.name.name] = it->second;
                }
            }
            // Fields that are all weakly typed (`random_normal(1, [8, 16]) * 0.3`) take f32,
            // as a weak value with no context does.
            if (!inner.dtypes.count(g.name.name)) inner.dtypes[g.name.name] = DType::F32;
            continue;
        }
        if (g.kind && g.kind->name == "Params") {
            if (!inner.types.count(g.name.name) && wanted) {
                if (auto it = wanted->binding->types.find(g.name.name); it != wanted->binding->types.end()) {
                    inner.types[g.name.name] = it->second;
                    inner.type_keys[g.name.name] = wanted->binding->type_keys.at(g.name.name);
                    inner.type_names[g.name.name] = wanted->binding->type_names.at(g.name.name);
                }
            }
            if (!inner.types.count(g.name.name)) {
                fail(DiagCode::E0310, e.span,
                     fmt::format("cannot infer the parameter type `{}` of `{}` from the fields", g.name.name, item->name.name));
            }
            continue;
        }
        if (is_mesh && !inner.meshes.count(g.name.name) && wanted) {
            // No field says where the struct lives: the type it is wanted as does.
            if (auto it = wanted->binding->meshes.find(g.name.name); it != wanted->binding->meshes.end()) inner.meshes[g.name.name] = it->second;
        }
        if (!is_mesh && !inner.sizes.count(g.name.name) && wanted) {
            if (auto it = wanted->binding->sizes.find(g.name.name); it != wanted->binding->sizes.end()) inner.sizes[g.name.name] = it->second;
        }
        if (is_mesh && !inner.meshes.count(g.name.name) && default_mesh() >= 0) {
            inner.meshes[g.name.name] = default_mesh();  // fields not placed yet
        }
        bool bound = is_mesh ? inner.meshes.count(g.name.name) > 0 : inner.sizes.count(g.name.name) > 0;
        if (!bound && is_mesh && open_mesh_ok(*item, values, loads)) {
            // No field is on a mesh yet: the struct stays open, its fields unplaced, and
            // its first use that needs a mesh (a call's parameter type, an annotation)
            // places them; nothing moves.
            open_mesh = true;
            continue;
        }
        if (!bound) {
            fail(DiagCode::E0310, e.span,
                 fmt::format("cannot infer the generic parameter `{}` of `{}` from the fields", g.name.name, item->name.name));
        }
    }
    if (open_mesh) {
        Val v;
        v.kind = Val::Struct;
        v.fn = item;
        v.elems = std::move(values);
        v.binding = std::make_shared<Binding>(inner);
        return v;
    }
    AggType t = struct_type(*item, inner);
    for (size_t i = 0; i < loads.size(); ++i) {
        if (loads[i]) values[i] = lower_load_val(*loads[i], t.elems[i]);  // a tensor, or a struct/tuple field from a .safetensors file
    }
    Val v;
    v.kind = Val::Struct;
    v.fn = item;
    v.elems = std::move(values);
    return coerce_val(std::move(v), t, e.span, fmt::format("the struct `{}`", item->name.name));
}

// ---------------------------------------------------------------- body

void FunctionBuilder::bind_pattern(const Pattern& p, Val v, Span span) {
    switch (p.kind) {
    case PatternKind::Wildcard: return;
    case PatternKind::Name: {
        // The value's unnamed leaves take the name's paths (`p.w1`, `pair.0`), as a
        // struct parameter's do: the GIR text, explain and hovers then name them.
        auto name_leaves = [&](auto& self, const Val& x, const std::string& path) -> void {
            if (x.kind == Val::Tensor) {
                if (x.id < f_.names.size() && f_.names[x.id].empty()) f_.names[x.id] = path;
                return;
            }
            if (x.kind != Val::Struct && x.kind != Val::Tuple) return;
            for (size_t i = 0; i < x.elems.size(); ++i) {
                bool named = x.kind == Val::Struct && x.fn && i < x.fn->fields.size();
                self(self, x.elems[i], path + "." + (named ? std::string(x.fn->fields[i].name.name) : std::to_string(i)));
            }
        };
        name_leaves(name_leaves, v, std::string(p.name.name));
        scopes_.back()[p.name.name] = Binding_{std::move(v), false};
        return;
    }
    case PatternKind::Tuple:
        if (!v.opaque.empty()) opaque_error(v, p.span, "a tuple pattern");
        if (v.kind != Val::Tuple || v.elems.size() != p.elements.size()) {
            fail(DiagCode::E0307, p.span,
                 fmt::format("a tuple pattern of {} elements does not match this value", p.elements.size()));
        }
        for (size_t i = 0; i < p.elements.size(); ++i) bind_pattern(*p.elements[i], std::move(v.elems[i]), span);
        return;
    }
}

}  // namespace meshc::sema::check

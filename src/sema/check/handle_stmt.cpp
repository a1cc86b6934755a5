// Statements: let/var bindings and patterns, assignment, returns (early and tail),
// the function body, names and constants.
#include "sema/check/context.h"

namespace meshc::sema::check {

void FunctionBuilder::lower_stmt(const Stmt& s) {
    switch (s.kind) {
    case StmtKind::Let: {
        if (s.type && is_load_call(*s.value)) {
            bind_pattern(*s.pattern, lower_load_val(*s.value, agg_type_from_ast(*s.type)), s.span);
            return;
        }
        std::optional<AggType> annotated;
        if (s.type) annotated = agg_type_from_ast(*s.type);
        if (annotated && annotated->kind == AggType::Tensor) {
            expected_ = &annotated->tensor;
            expected_span_ = s.value->span;
        }
        if (annotated && annotated->kind == AggType::Struct) {
            expected_agg_ = &*annotated;
            expected_agg_span_ = s.value->span;
        }
        Val v = eval(*s.value);
        expected_ = nullptr;
        expected_agg_ = nullptr;
        if (annotated) {
            v = coerce_val(std::move(v), *annotated, s.value->span, "the annotation");
            settle_leaves(v, s.value->span);  // `let s: f32 = 2.0;` is an f32, no longer weak
        }
        bind_pattern(*s.pattern, std::move(v), s.span);
        return;
    }
    case StmtKind::Var: {
        // An annotated struct type binds the generics a struct literal's fields do not.
        std::optional<AggType> annotated;
        if (s.type) annotated = agg_type_from_ast(*s.type);
        // `var p: Mlp = load("p.safetensors");`: the annotation is the context `load`
        // takes its type from, as for `let`.
        bool loaded = annotated && is_load_call(*s.value);
        if (annotated && annotated->kind == AggType::Struct) {
            expected_agg_ = &*annotated;
            expected_agg_span_ = s.value->span;
        }
        Val v = loaded ? lower_load_val(*s.value, *annotated) : eval(*s.value);
        expected_agg_ = nullptr;
        if (v.kind == Val::Path) fail(DiagCode::E0309, s.value->span, "a file name (a path argument) cannot be a `var`: bind it with `let`");
        if (annotated) {
            v = coerce_val(std::move(v), *annotated, s.value->span, "the annotation");
            settle_leaves(v, s.value->span);
        }
        // A literal scalar start (`var acc = 0.0;`) is mesh-free: like a creation, it takes
        // the mesh and layout of the first assignment on a mesh (a pending sum stays
        // pending across iterations, completed once where a use needs it).
        bool literal_start = !s.type && v.kind == Val::Tensor && v.id != ir::kNoValue && weak_[v.id] &&
                             type(v.id).rank() == 0 && type(v.id).mesh < 0 && !flexible_[v.id];
        bool flexible_start = !s.type && v.kind == Val::Tensor && (flexible_[v.id] || literal_start);
        auto hint = in_.var_hints_.find(key_of(s.name.span));
        if (literal_start && hint != in_.var_hints_.end()) {
            v.id = place(v.id, hint->second.first, s.span, /*scalars_too=*/true);
            TensorType t = type(v.id);
            t.layout = hint->second.second;
            if (t.layout.partial) {
                v.id = plan_coercion(v.id, hint->second.first, hint->second.second, s.span,
                                     "the layout of the variable's later values", true);
            }
        } else if (flexible_start && hint != in_.var_hints_.end()) {
            // A later assignment showed the layout this var keeps: create it that way.
            Layout plain = hint->second.second;
            plain.partial = 0;
            fix_layout(v.id, hint->second.first, plain);
            if (hint->second.second.partial) {
                v.id = plan_coercion(v.id, hint->second.first, hint->second.second, s.span,
                                     "the layout of the variable's later values", true);
            }
        }
        settle(v);
        Binding_ binding{std::move(v), true, flexible_start, s.name.span};
        scopes_.back()[s.name.name] = std::move(binding);
        return;
    }
    case StmtKind::Assign: {
        // A struct literal assigned to a struct variable is wanted as the variable's type.
        std::optional<AggType> target_type;
        if (s.target->kind == ExprKind::Name && s.value->kind == ExprKind::StructLit) {
            if (Binding_* b = find_binding(s.target->name.name); b && b->value.kind == Val::Struct && b->value.binding) {
                target_type = type_of_val(b->value);
                expected_agg_ = &*target_type;
                expected_agg_span_ = s.value->span;
            }
        }
        // `state = load("ckpt.safetensors")`: the variable's type (a struct whose type
        // cannot be written, an optimizer's state, say) is the type of the load.
        if (s.target->kind == ExprKind::Name && is_load_call(*s.value)) {
            if (Binding_* b = find_binding(s.target->name.name); b && b->is_var && b->value.kind != Val::Poison) {
                AggType t = type_of_val(b->value);
                assign(*s.target, lower_load_val(*s.value, t), s.span);
                return;
            }
        }
        Val value = eval(*s.value);
        expected_agg_ = nullptr;
        assign(*s.target, std::move(value), s.span);
        return;
    }
    case StmtKind::Expr:
        statement_call_ = s.value;
        if (s.value->kind == ExprKind::If) {
            lower_if(*s.value, /*as_value=*/false);
        } else {
            eval(*s.value);
        }
        statement_call_ = nullptr;
        return;
    case StmtKind::Empty: return;
    case StmtKind::Return:
        fail(DiagCode::E0311, s.span, "`return` before the end of a function is not supported by the type checker yet");
    case StmtKind::For: lower_for(s); return;
    }
}

// A var's layout is fixed where it is declared: a value still flexible there is made
// replicated, so later assignments know what to convert to.
void FunctionBuilder::settle(const Val& v) {
    std::vector<ValueId> leaves;
    flatten(v, leaves, {});
    for (ValueId id : leaves) {
        if (!flexible_[id]) continue;
        // Not placed yet: on the program's only mesh, if it has one (a var's later values
        // will be on it), else nowhere (replicated everywhere).
        int32_t mesh = type(id).mesh >= 0 ? type(id).mesh : default_mesh();
        fix_layout(id, mesh, Layout::replicated(type(id).rank()));
    }
}

int32_t FunctionBuilder::default_mesh() const {
    return in_.module_.meshes.size() == 1 ? 0 : -1;
}

FunctionBuilder::Binding_* FunctionBuilder::find_binding(std::string_view name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        if (auto found = it->find(name); found != it->end()) return &found->second;
    }
    return nullptr;
}

AggType FunctionBuilder::type_of_val(const Val& v) {
    AggType t;
    switch (v.kind) {
    case Val::Tensor:
        t.kind = AggType::Tensor;
        t.tensor = type(v.id);
        t.dim_names = dim_names_[v.id];
        return t;
    case Val::Tuple:
    case Val::Struct:
        t.kind = v.kind == Val::Tuple ? AggType::Tuple : AggType::Struct;
        t.item = v.fn;
        t.binding = v.binding;
        t.type_param = v.opaque;
        for (const Val& e : v.elems) t.elems.push_back(type_of_val(e));
        return t;
    default: return t;
    }
}

void FunctionBuilder::assign(const Expr& target, Val value, Span span) {
    // The root variable and the path of fields to the assigned part.
    std::vector<const Expr*> path;
    const Expr* root = &target;
    while (root->kind == ExprKind::Field) {
        path.push_back(root);
        root = root->lhs;
    }
    Binding_* var = find_binding(root->name.name);
    if (!var) fail(DiagCode::E0310, root->span, fmt::format("`{}` has no value here", root->name.name));
    std::reverse(path.begin(), path.end());
    Val* slot = &var->value;
    if (slot->kind == Val::Poison) throw Abandon{};
    for (const Expr* field : path) {
        if (slot->kind != Val::Struct) fail(DiagCode::E0309, field->span, "only a struct has fields");
        size_t i = field_index(*slot->fn, field->name);
        slot = &slot->elems[i];
    }
    // docs/language.md, "Types": a var's type comes from all its assignments. A var that began as a
    // freshly created value takes the layout of the first assignment that differs, and
    // the function is lowered again with that layout from the start.
    if (path.empty() && var->flexible_start && value.kind == Val::Tensor && slot->kind == Val::Tensor &&
        type(value.id).shape == type(slot->id).shape && type(value.id).mesh >= 0 &&
        !(type(value.id).layout == type(slot->id).layout && type(value.id).mesh == type(slot->id).mesh) &&
        !in_.var_hints_.count(key_of(var->decl))) {
        in_.var_hints_[key_of(var->decl)] = {type(value.id).mesh, type(value.id).layout};
        throw Retry{};
    }
    *slot = coerce_val(std::move(value), type_of_val(*slot), span,
                       fmt::format("the variable `{}` (a `var` keeps the layout of its values)", root->name.name));
}

size_t FunctionBuilder::field_index(const Item& item, const Ident& name) {
    for (size_t i = 0; i < item.fields.size(); ++i) {
        if (item.fields[i].name.name == name.name) return i;
    }
    fail(DiagCode::E0309, name.span, fmt::format("struct `{}` has no field `{}`", item.name.name, name.name));
}

namespace {
// The field path of each leaf of a parameter's type, in flatten_type's order: `p.w1`,
// `p.0` for a tuple element, `p.opt.m` for nested structs (names for explain and GIR).
void leaf_paths(const AggType& t, const std::string& prefix, std::vector<std::string>& out) {
    if (t.kind == AggType::Tensor) {
        out.push_back(prefix);
        return;
    }
    for (size_t i = 0; i < t.elems.size(); ++i) {
        bool named = t.kind == AggType::Struct && t.item && i < t.item->fields.size();
        leaf_paths(t.elems[i], prefix + "." + (named ? std::string(t.item->fields[i].name.name) : std::to_string(i)), out);
    }
}
}  // namespace

void FunctionBuilder::lower_body() {
    scopes_.emplace_back();
    for (const Param& p : item_.params) {
        AggType t = agg_type_from_ast(*p.type);
        std::vector<const AggType*> leaves;
        flatten_type(t, leaves);
        std::vector<std::string> paths;
        leaf_paths(t, std::string(p.name.name), paths);
        std::vector<ValueId> values;
        for (size_t li = 0; li < leaves.size(); ++li) {
            const AggType* leaf = leaves[li];
            check_size(leaf->tensor, p.type->span);
            ValueId v = f_.add_value(leaf->tensor, li < paths.size() ? paths[li] : std::string(p.name.name));
            flexible_.push_back(false);
            weak_.push_back(false);
            producer_.push_back({nullptr, 0});
            dim_names_.push_back(leaf->dim_names.size() == leaf->tensor.rank() ? leaf->dim_names
                                                                                 : std::vector<std::string_view>(leaf->tensor.rank()));
            f_.params.push_back(v);
            values.push_back(v);
        }
        size_t next = 0;
        scopes_.back()[p.name.name] = Binding_{unflatten(t, values, next), false};
    }
    const Block& body = *item_.body;
    std::optional<AggType> rt;
    if (item_.result) {
        rt = agg_type_from_ast(*item_.result);
        std::vector<const AggType*> leaves;
        flatten_type(*rt, leaves);
        for (const AggType* leaf : leaves) check_size(leaf->tensor, item_.result->span);
    }
    std::optional<Val> result = lower_returning(body.stmts, 0, body.tail, rt ? &*rt : nullptr);
    if (rt) {
        if (!result) {
            fail(DiagCode::E0309, item_.body->span,
                 fmt::format("function `{}` returns nothing, but its type says it returns a value", item_.name.name));
        }
        flatten(*result, f_.results, item_.body->span);
        result_type_ = std::make_shared<AggType>(std::move(*rt));
    }
    // Flexible values nobody constrained are replicated.
    for (ValueId v = 0; v < flexible_.size(); ++v) {
        if (flexible_[v]) fix_layout(v, f_.types[v].mesh, Layout::replicated(f_.types[v].rank()));
    }
    settle_choices();
}

namespace {
// `if c { ...; return e; }` with no `else`: an early return.
bool is_early_return(const Stmt& s) {
    if (s.kind != StmtKind::Expr || s.value->kind != ExprKind::If) return false;
    const Expr& e = *s.value;
    if (e.else_block || e.else_if || e.then_block->tail || e.then_block->stmts.empty()) return false;
    return e.then_block->stmts.back()->kind == StmtKind::Return;
}
}  // namespace

// Lowers the function body's statements from `i` on and returns the function's value,
// converted to the result type. An early return splits the rest into the `else` of an
// `if` whose two branches both yield the result.
std::optional<Val> FunctionBuilder::lower_returning(const std::vector<const Stmt*>& stmts, size_t i,
                                                    const Expr* tail, const AggType* rt) {
    auto finish = [&](const Expr* value, Span span) -> std::optional<Val> {
        if (!value) return std::nullopt;
        if (!rt && value->kind == ExprKind::If) {
            // A function without a result ending in `if`: a statement (no branch values).
            lower_if(*value, /*as_value=*/false);
            return std::nullopt;
        }
        if (rt && rt->kind == AggType::Tensor) {
            expected_ = &rt->tensor;
            expected_span_ = value->span;
        }
        if (rt && rt->kind == AggType::Struct) {
            expected_agg_ = rt;
            expected_agg_span_ = value->span;
        }
        Val v = eval(*value);
        expected_ = nullptr;
        expected_agg_ = nullptr;
        if (!rt) return v;
        return coerce_val(std::move(v), *rt, span, fmt::format("the result type of `{}`", item_.name.name));
    };
    for (; i < stmts.size(); ++i) {
        const Stmt& s = *stmts[i];
        if (s.kind == StmtKind::Return) {
            if (!rt && s.value) {
                fail(DiagCode::E0309, s.value->span,
                     fmt::format("`{}` has no result type, so its `return` takes no value", item_.name.name),
                     {{"declare the result type: `fn name(...) -> TYPE`", {}}});
            }
            if (i + 1 != stmts.size() || tail) {
                fail(DiagCode::E0311, s.span, "statements after `return` are not supported by the type checker yet");
            }
            return finish(s.value, s.value ? s.value->span : s.span);
        }
        if (is_early_return(s) && rt) {
            const Expr& e = *s.value;
            ValueId cond = scalar_condition(*e.cond, DType::Bool, "the condition of `if`");
            ir::Op op{ir::OpKind::If};
            op.operands = {cond};
            op.span = e.span;
            std::vector<ir::Op>* saved = ops_;
            // then: the block up to its `return`.
            {
                ir::Region r = open_region({});
                enter_list(&r.ops);
                scopes_.emplace_back();
                const auto& inner = e.then_block->stmts;
                std::optional<Val> v = lower_returning(inner, 0, nullptr, rt);
                scopes_.pop_back();
                flatten(*v, r.yields, e.span);
                close_region(r, saved);
                op.regions.push_back(std::move(r));
            }
            // else: the rest of the function.
            {
                ir::Region r = open_region({});
                enter_list(&r.ops);
                scopes_.emplace_back();
                std::optional<Val> v = lower_returning(stmts, i + 1, tail, rt);
                scopes_.pop_back();
                if (!v) fail(DiagCode::E0309, e.span, "the function's value is missing after this early return");
                flatten(*v, r.yields, e.span);
                close_region(r, saved);
                op.regions.push_back(std::move(r));
            }
            std::vector<ValueId> results;
            for (ValueId y : op.regions[0].yields) results.push_back(new_value(type(y)));
            op.results = results;
            ops_->push_back(std::move(op));
            size_t next = 0;
            return unflatten(*rt, results, next);
        }
        // A statement that fails has reported its error; its names become poison and
        // the next statement is checked, so independent errors are all reported.
        std::vector<ir::Op>* list = ops_;
        size_t depth = scopes_.size();
        size_t first_value = f_.types.size();
        try {
            lower_stmt(s);
        } catch (const Abandon&) {
            failed_ = true;
            ops_ = list;
            coerced_.clear();
            // Values the statement made may point into regions that no longer exist.
            for (size_t v = first_value; v < producer_.size(); ++v) {
                producer_[v] = {nullptr, 0};
                flexible_[v] = false;
            }
            scopes_.resize(depth);
            statement_call_ = nullptr;
            expected_ = nullptr;
            poison_names(s);
        }
    }
    if (failed_) throw Abandon{};
    return finish(tail, tail ? tail->span : Span{});
}

// The names a failed statement would have bound, bound to poison.
void FunctionBuilder::poison_names(const Stmt& s) {
    Val poison;
    poison.kind = Val::Poison;
    switch (s.kind) {
    case StmtKind::Let: {
        auto bind = [&](auto& self, const Pattern& p) -> void {
            if (p.kind == PatternKind::Name) scopes_.back()[p.name.name] = Binding_{poison, false};
            for (const Pattern* e : p.elements) self(self, *e);
        };
        bind(bind, *s.pattern);
        return;
    }
    case StmtKind::Var: scopes_.back()[s.name.name] = Binding_{poison, true}; return;
    case StmtKind::Assign: {
        const Expr* root = s.target;
        while (root->kind == ExprKind::Field) root = root->lhs;
        if (root->kind == ExprKind::Name) {
            if (Binding_* b = find_binding(root->name.name)) b->value = poison;
        }
        return;
    }
    default: {
        // An `if` or `for` statement: the vars it assigns are unknown now.
        Block wrapper;
        if (s.kind == StmtKind::For) wrapper = *s.body;
        if (s.kind == StmtKind::Expr && s.value) wrapper.tail = s.value;
        for (std::string_view n : assigned_vars(wrapper)) find_binding(n)->value = poison;
        return;
    }
    }
}

Val FunctionBuilder::lookup(const Ident& name) {
    if (Binding_* b = find_binding(name.name)) {
        // A pending value whose sum was completed earlier is read completed: the
        // completion is paid for, and reading it pending would sum it again.
        if (b->value.kind == Val::Tensor && b->value.id != ir::kNoValue) {
            // A `let` bound to a literal (`let beta = 0.9;`) is a weak literal at every use,
            // as a Python float is: `beta * h` (bf16) and `beta * s` (f32) each round 0.9
            // once, to their own element type.
            ValueId id = b->value.id;
            auto [list, index] = producer_[id];
            if (!b->is_var && weak_[id] && list && (*list)[index].kind == ir::OpKind::Constant && type(id).mesh < 0) {
                return Val::tensor(constant((*list)[index].number, type(id).dtype, true, name.span));
            }
            return Val::tensor(completed_if_known(id));
        }
        return b->value;
    }
    const Module& module = *in_.program_.modules[module_index_];
    for (const Item* item : module.items) {
        if (item->name.name != name.name) continue;
        if (item->kind == ItemKind::Fn) return Val{Val::Function, ir::kNoValue, item};
        if (item->kind == ItemKind::Import) {
            auto t = in_.program_.import_targets.find(item);
            if (t != in_.program_.import_targets.end()) return Val{Val::Module, ir::kNoValue, nullptr, Builtin::Count, t->second};
        }
    }
    Builtin b = find_builtin(name.name);
    if (b != Builtin::Count) return Val{Val::BuiltinFn, ir::kNoValue, nullptr, b};
    if (auto it = binding_.sizes.find(name.name); it != binding_.sizes.end()) {
        return Val::tensor(constant(static_cast<double>(it->second), DType::I64, true, name.span));
    }
    fail(DiagCode::E0310, name.span, fmt::format("`{}` has no value here", name.name));
}

void FunctionBuilder::settle_leaves(const Val& v, Span span) {
    std::vector<ValueId> leaves;
    flatten(v, leaves, span);
    for (ValueId id : leaves) {
        if (id != ir::kNoValue && weak_[id]) settle_dtype(id, type(id).dtype);
    }
}

ValueId FunctionBuilder::constant(double value, DType dtype, bool weak, Span span) {
    ir::Op op{ir::OpKind::Constant};
    op.number = value;
    op.span = span;
    TensorType t;
    t.dtype = dtype;
    ValueId v = emit(std::move(op), std::move(t));
    weak_[v] = weak;
    return v;
}

}  // namespace meshc::sema::check

// Control flow: regions, `if` (as a statement and as a value), `for` loops and the
// variables they carry.
#include "sema/check/context.h"

namespace meshc::sema::check {

// ---------------------------------------------------------------- control flow

namespace {
void collect_assigned(const Block& b, std::vector<std::string_view>& out);
void collect_assigned_expr(const Expr& e, std::vector<std::string_view>& out) {
    switch (e.kind) {
    case ExprKind::If:
        collect_assigned_expr(*e.cond, out);
        collect_assigned(*e.then_block, out);
        if (e.else_block) collect_assigned(*e.else_block, out);
        if (e.else_if) collect_assigned_expr(*e.else_if, out);
        return;
    case ExprKind::Unary:
    case ExprKind::Field: collect_assigned_expr(*e.lhs, out); return;
    case ExprKind::Binary:
        collect_assigned_expr(*e.lhs, out);
        collect_assigned_expr(*e.rhs, out);
        return;
    case ExprKind::Call:
        collect_assigned_expr(*e.lhs, out);
        for (const Arg& a : e.args) collect_assigned_expr(*a.value, out);
        return;
    case ExprKind::Tuple:
    case ExprKind::List:
        for (const Expr* x : e.elements) collect_assigned_expr(*x, out);
        return;
    case ExprKind::StructLit:
        for (const FieldInit& f : e.fields) collect_assigned_expr(*f.value, out);
        return;
    default: return;
    }
}
void collect_assigned(const Block& b, std::vector<std::string_view>& out) {
    for (const Stmt* s : b.stmts) {
        switch (s->kind) {
        case StmtKind::Assign: {
            const Expr* root = s->target;
            while (root->kind == ExprKind::Field) root = root->lhs;
            if (root->kind == ExprKind::Name &&
                std::find(out.begin(), out.end(), root->name.name) == out.end()) {
                out.push_back(root->name.name);
            }
            collect_assigned_expr(*s->value, out);
            break;
        }
        case StmtKind::For: collect_assigned(*s->body, out); break;
        case StmtKind::Let:
        case StmtKind::Var:
        case StmtKind::Return:
        case StmtKind::Expr:
            if (s->value) collect_assigned_expr(*s->value, out);
            break;
        case StmtKind::Empty: break;
        }
    }
    if (b.tail) collect_assigned_expr(*b.tail, out);
}
}  // namespace

// The outer `var`s that a block assigns (they become values carried by the loop or
// produced by the `if`).
std::vector<std::string_view> FunctionBuilder::assigned_vars(const Block& b) {
    std::vector<std::string_view> names, vars;
    collect_assigned(b, names);
    for (std::string_view n : names) {
        Binding_* binding = find_binding(n);
        if (binding && binding->is_var) vars.push_back(n);
    }
    return vars;
}

ir::Region FunctionBuilder::open_region(std::vector<ValueId> args) {
    ir::Region r;
    r.args = std::move(args);
    return r;
}

// Flexible values made inside the region are settled (replicated) before the region's
// ops move into their op, which invalidates the producers' addresses.
void FunctionBuilder::close_region(ir::Region& region, std::vector<ir::Op>* saved) {
    for (ValueId v = 0; v < flexible_.size(); ++v) {
        if (flexible_[v] && producer_[v].first == &region.ops) {
            fix_layout(v, f_.types[v].mesh, Layout::replicated(f_.types[v].rank()));
        }
    }
    for (ValueId v = 0; v < producer_.size(); ++v) {
        if (producer_[v].first == &region.ops) producer_[v] = {nullptr, 0};
    }
    for (auto it = coerced_.begin(); it != coerced_.end();) {
        it = std::get<2>(it->first) == &region.ops ? coerced_.erase(it) : std::next(it);
    }
    ops_ = saved;
}

// Lowers a block's statements in a new scope; returns its tail value (as_value) or none.
Val FunctionBuilder::lower_block_value(const Block& b, bool as_value) {
    scopes_.emplace_back();
    for (const Stmt* s : b.stmts) {
        if (s->kind == StmtKind::Return) {
            fail(DiagCode::E0311, s->span, "`return` inside a block is not supported by the type checker yet");
        }
        lower_stmt(*s);
    }
    Val v;
    v.id = ir::kNoValue;
    if (b.tail && !as_value && b.tail->kind == ExprKind::If) {
        // `if` closing a block whose value nobody uses (a loop body, a unit function) is
        // a statement: its branches need no value (Rust's rule).
        lower_if(*b.tail, /*as_value=*/false);
    } else if (b.tail) {
        statement_call_ = as_value ? nullptr : b.tail;
        v = eval(*b.tail);
        statement_call_ = nullptr;
    } else if (as_value) {
        fail(DiagCode::E0309, b.span, "this block has no value: end it with an expression (no `;`)");
    }
    scopes_.pop_back();
    return v;
}

// `t` is taken by value: it is often a type of this function, which add_value() may move.
ValueId FunctionBuilder::new_value(TensorType t) {
    size_t rank = t.rank();
    ValueId v = f_.add_value(std::move(t));
    flexible_.push_back(false);
    weak_.push_back(false);
    producer_.push_back({nullptr, 0});
    dim_names_.emplace_back(rank);
    return v;
}

ValueId FunctionBuilder::scalar_condition(const Expr& e, DType want, const char* what) {
    ValueId c = lower_expr(e);
    if (weak_[c] && want == DType::I64 && type(c).dtype == DType::I64) return c;
    if (type(c).rank() != 0 || type(c).dtype != want) {
        fail(DiagCode::E0308, e.span,
             fmt::format("{} must be a {} scalar, found {}", what, dtype_name(want), type_str(type(c))));
    }
    c = reduce_partial(c, type(c).layout.partial, e.span, fmt::format("{} needs the summed value", what));
    return c;
}

// Where two values meet (the branches of an `if`): the layout with more splits when the
// other is the same without them (slicing is free), else the first.
AggType FunctionBuilder::join_type(const AggType& a, const AggType& b) {
    if (a.kind != AggType::Tensor || b.kind != AggType::Tensor) {
        AggType out = a;
        for (size_t i = 0; i < out.elems.size() && i < b.elems.size(); ++i) out.elems[i] = join_type(a.elems[i], b.elems[i]);
        return out;
    }
    const TensorType& x = a.tensor;
    const TensorType& y = b.tensor;
    if (x.shape != y.shape || x.dtype != y.dtype || x.layout == y.layout || x.layout.partial || y.layout.partial) return a;
    auto refines = [](const Layout& more, const Layout& less) {
        // `less` is `more` with some trailing axes of some dims dropped.
        for (size_t d = 0; d < more.dims.size(); ++d) {
            const AxisList& m = more.dims[d];
            const AxisList& l = less.dims[d];
            if (l.size() > m.size() || !std::equal(l.begin(), l.end(), m.begin())) return false;
        }
        return true;
    };
    if (x.mesh >= 0 && y.mesh >= 0 && x.mesh != y.mesh) return a;
    if (refines(y.layout, x.layout)) {
        AggType out = a;
        out.tensor.layout = y.layout;
        out.tensor.mesh = y.mesh >= 0 ? y.mesh : x.mesh;
        return out;
    }
    return a;
}

Val FunctionBuilder::lower_if(const Expr& e, bool as_value) {
    ValueId cond = scalar_condition(*e.cond, DType::Bool, "the condition of `if`");
    bool has_else = e.else_block || e.else_if;
    if (as_value && !has_else) fail(DiagCode::E0309, e.span, "an `if` without `else` has no value");
    std::vector<std::string_view> vars = assigned_vars(*e.then_block);
    if (e.else_block) {
        for (std::string_view n : assigned_vars(*e.else_block)) {
            if (std::find(vars.begin(), vars.end(), n) == vars.end()) vars.push_back(n);
        }
    }
    if (e.else_if) {
        Block wrapper;
        wrapper.tail = e.else_if;
        for (std::string_view n : assigned_vars(wrapper)) {
            if (std::find(vars.begin(), vars.end(), n) == vars.end()) vars.push_back(n);
        }
    }
    std::vector<Val> entry;
    std::vector<AggType> entry_types;
    for (std::string_view n : vars) {
        Binding_* b = find_binding(n);
        settle(b->value);
        entry.push_back(b->value);
        entry_types.push_back(type_of_val(b->value));
    }
    ir::Op op{ir::OpKind::If};
    op.operands = {cond};
    op.span = e.span;
    std::vector<ir::Op>* saved = ops_;
    // Both branches are lowered first; then their values meet in one type (the join),
    // converted inside each branch; the regions close last.
    struct Branch {
        ir::Region region;
        Val value;
        std::vector<Val> vars;
    };
    Branch branches[2];
    auto run = [&](Branch& br, auto&& lower) {
        enter_list(&br.region.ops);
        br.value = lower();
        if (as_value) settle(br.value);
        for (size_t i = 0; i < vars.size(); ++i) {
            Binding_* b = find_binding(vars[i]);
            br.vars.push_back(b->value);
            b->value = entry[i];  // the other branch starts from the entry values
        }
        ops_ = saved;
    };
    run(branches[0], [&] { return lower_block_value(*e.then_block, as_value); });
    run(branches[1], [&] {
        if (e.else_block) return lower_block_value(*e.else_block, as_value);
        if (e.else_if) {
            statement_call_ = nullptr;
            return lower_if(*e.else_if, as_value);
        }
        return Val::tensor(ir::kNoValue);
    });
    std::optional<AggType> value_type;
    if (as_value) value_type = join_type(type_of_val(branches[0].value), type_of_val(branches[1].value));
    for (Branch& br : branches) {
        enter_list(&br.region.ops);
        if (as_value) {
            Val v = coerce_val(std::move(br.value), *value_type, e.span, "the value of the other branch of `if`");
            flatten(v, br.region.yields, e.span);
        }
        for (size_t i = 0; i < vars.size(); ++i) {
            Val now = coerce_val(br.vars[i], entry_types[i], e.span,
                                 fmt::format("the variable `{}` (a `var` keeps the layout of its first value)", vars[i]));
            flatten(now, br.region.yields, e.span);
        }
        close_region(br.region, saved);
        op.regions.push_back(std::move(br.region));
    }
    // Results: the value (if any), then the variables.
    std::vector<ValueId> results;
    for (ValueId y : op.regions[0].yields) results.push_back(new_value(type(y)));
    op.results = results;
    ops_->push_back(std::move(op));
    size_t next = 0;
    Val value = Val::tensor(ir::kNoValue);
    if (as_value) value = unflatten(*value_type, results, next);
    for (size_t i = 0; i < vars.size(); ++i) find_binding(vars[i])->value = unflatten(entry_types[i], results, next);
    return value;
}

void FunctionBuilder::lower_for(const Stmt& s) {
    ValueId lo = scalar_condition(*s.range_begin, DType::I64, "a `for` bound");
    ValueId hi = scalar_condition(*s.range_end, DType::I64, "a `for` bound");
    std::vector<std::string_view> vars = assigned_vars(*s.body);
    std::vector<AggType> entry_types;
    ir::Op op{ir::OpKind::For};
    op.operands = {lo, hi};
    op.span = s.span;
    for (std::string_view n : vars) {
        Binding_* b = find_binding(n);
        settle(b->value);
        entry_types.push_back(type_of_val(b->value));
        flatten(b->value, op.operands, s.span);
    }
    // Region arguments: the index, then a fresh value per carried leaf.
    TensorType index_type;
    index_type.dtype = DType::I64;
    std::vector<ValueId> args{new_value(index_type)};
    f_.names[args[0]] = std::string(s.name.name);
    for (size_t i = 2; i < op.operands.size(); ++i) {
        ValueId a = new_value(type(op.operands[i]));
        dim_names_[a] = dim_names_[op.operands[i]];
        args.push_back(a);
    }
    std::vector<ir::Op>* saved = ops_;
    ir::Region body = open_region(args);
    enter_list(&body.ops);
    size_t next = 1;
    std::vector<Val> saved_values;
    for (size_t i = 0; i < vars.size(); ++i) {
        Binding_* b = find_binding(vars[i]);
        saved_values.push_back(b->value);
        b->value = unflatten(entry_types[i], args, next);
    }
    scopes_.emplace_back();
    scopes_.back()[s.name.name] = Binding_{Val::tensor(args[0]), false};
    lower_block_value(*s.body, false);
    scopes_.pop_back();
    for (size_t i = 0; i < vars.size(); ++i) {
        Binding_* b = find_binding(vars[i]);
        Val now = coerce_val(b->value, entry_types[i], s.span,
                             fmt::format("the variable `{}` carried by the loop (a `var` keeps the layout of its first value)", vars[i]));
        flatten(now, body.yields, s.span);
    }
    close_region(body, saved);
    op.regions.push_back(std::move(body));
    std::vector<ValueId> results;
    for (size_t i = 2; i < op.operands.size(); ++i) results.push_back(new_value(type(op.operands[i])));
    op.results = results;
    ops_->push_back(std::move(op));
    next = 0;
    for (size_t i = 0; i < vars.size(); ++i) find_binding(vars[i])->value = unflatten(entry_types[i], results, next);
}

}  // namespace meshc::sema::check

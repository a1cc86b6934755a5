// Expressions: the dispatch from an AST expression to its handler.
#include "sema/check/context.h"

namespace meshc::sema::check {

ValueId FunctionBuilder::tensor_of(const Val& v, const Expr& e) {
    if (v.kind == Val::Tensor) return v.id;
    // The error messages of lower_expr, for a value evaluated already.
    if (!v.opaque.empty()) opaque_error(v, e.span, "this operation");
    if (v.kind == Val::Tuple || v.kind == Val::Struct) fail(DiagCode::E0309, e.span, "expected a tensor, found a tuple or struct");
    if (v.kind == Val::Path) {
        fail(DiagCode::E0309, e.span, "expected a tensor, found a file name (a path argument is the file of `load` or `save`)");
    }
    if (v.kind == Val::Poison) throw Abandon{};
    fail(DiagCode::E0309, e.span, "a function is not a value here; call it");
}

ValueId FunctionBuilder::lower_expr(const Expr& e) { return tensor_of(eval(e), e); }

[[noreturn]] void FunctionBuilder::opaque_error(const Val& v, Span span, std::string_view what) {
    fail(DiagCode::E0309, span,
         fmt::format("{} needs a known tensor or struct, but this value has the parameter type `{}`", what, v.opaque),
         {{fmt::format("`{}: Params` may be any tensor, tuple or struct of float tensors; only leaf-wise operations "
                       "apply to it: element-wise operators and built-ins, `zeros_like`, `ones_like`, `global_norm`, "
                       "and calls of functions that take a `Params` type",
                       v.opaque),
           {}}});
}

namespace {
}  // namespace

Val FunctionBuilder::leafwise(const std::vector<Val>& operands, Span span, std::string_view what,
                              const std::function<ValueId(const std::vector<ValueId>&)>& apply) {
    const Val* shape = nullptr;
    for (const Val& v : operands) {
        if (v.kind == Val::Poison) throw Abandon{};
        if (!shape && is_aggregate(v)) shape = &v;
    }
    if (!shape) {
        std::vector<ValueId> ids;
        for (const Val& v : operands) ids.push_back(v.id);
        return Val::tensor(apply(ids));
    }
    for (const Val& v : operands) {
        if (is_aggregate(v)) {
            bool same = v.kind == shape->kind && v.elems.size() == shape->elems.size() && v.fn == shape->fn;
            if (!same) {
                fail(DiagCode::E0307, span,
                     fmt::format("{} applies leaf by leaf to values of one structure; found {} and {}", what,
                                 agg_string(type_of_val(*shape)), agg_string(type_of_val(v))));
            }
        } else if (v.kind != Val::Tensor) {
            fail(DiagCode::E0309, span, fmt::format("{}: an operand is not a value", what));
        } else if (v.id == ir::kNoValue || type(v.id).rank() != 0) {
            fail(DiagCode::E0307, span,
                 fmt::format("{} of a {} and a tensor applies leaf by leaf only with a scalar; found {}", what,
                             agg_string(type_of_val(*shape)), v.id == ir::kNoValue ? "nothing" : type_str(type(v.id))),
                 {{"a scalar (rank 0) joins every leaf; a tensor of higher rank has no leaf to pair with", {}}});
        }
    }
    // A scalar joins every leaf, taking each float leaf's element type (a f32 learning
    // rate against bf16 leaves is a bf16 scalar there).
    std::vector<ValueId> added;
    for (const Val& v : operands) {
        if (!is_aggregate(v) && tree_scalars_.insert(v.id).second) added.push_back(v.id);
    }
    struct Restore {
        std::set<ValueId>& set;
        std::vector<ValueId>& ids;
        ~Restore() {
            for (ValueId id : ids) set.erase(id);
        }
    } restore{tree_scalars_, added};
    Val out;
    out.kind = shape->kind;
    out.fn = shape->fn;
    out.binding = shape->binding;
    out.opaque = shape->opaque;
    for (size_t i = 0; i < shape->elems.size(); ++i) {
        std::vector<Val> parts;
        for (const Val& v : operands) parts.push_back(is_aggregate(v) ? v.elems[i] : v);
        out.elems.push_back(leafwise(parts, span, what, apply));
    }
    return out;
}

Val FunctionBuilder::eval(const Expr& e) {
    if (auto it = operand_override_.find(&e); it != operand_override_.end()) return Val::tensor(it->second);
    switch (e.kind) {
    case ExprKind::IntLit: return Val::tensor(constant(static_cast<double>(e.int_value), DType::I64, true, e.span));
    case ExprKind::FloatLit: return Val::tensor(constant(e.float_value, DType::F32, true, e.span));
    case ExprKind::BoolLit: return Val::tensor(constant(e.bool_value ? 1 : 0, DType::Bool, false, e.span));
    case ExprKind::Name: {
        Val v = lookup(e.name);
        if (v.kind == Val::Poison) throw Abandon{};
        return v;
    }
    case ExprKind::Unary: {
        ir::Ew ew = e.unary_op == UnaryOp::Neg ? ir::Ew::Neg : ir::Ew::Not;
        Val x = eval(*e.lhs);
        if (is_aggregate(x)) {
            return leafwise({x}, e.span, e.unary_op == UnaryOp::Neg ? "`-`" : "`!`",
                            [&](const std::vector<ValueId>& ids) { return elementwise(ew, ids, e.span); });
        }
        return Val::tensor(elementwise(ew, {tensor_of(x, *e.lhs)}, e.span));
    }
    case ExprKind::Binary: {
        if (e.binary_op == BinaryOp::MatMul) {
            Val a = eval(*e.lhs);
            if (!a.opaque.empty()) opaque_error(a, e.lhs->span, "`@`");
            Val b = eval(*e.rhs);
            if (!b.opaque.empty()) opaque_error(b, e.rhs->span, "`@`");
            if (is_aggregate(a) || is_aggregate(b)) {
                fail(DiagCode::E0307, e.op_span, "`@` takes two tensors; it does not apply leaf by leaf to a tuple or struct");
            }
            return Val::tensor(matmul(tensor_of(a, *e.lhs), tensor_of(b, *e.rhs), e.span));
        }
        static const std::map<BinaryOp, ir::Ew> kOps = {
            {BinaryOp::Add, ir::Ew::Add}, {BinaryOp::Sub, ir::Ew::Sub}, {BinaryOp::Mul, ir::Ew::Mul},
            {BinaryOp::Div, ir::Ew::Div}, {BinaryOp::Mod, ir::Ew::Mod}, {BinaryOp::Eq, ir::Ew::Eq},
            {BinaryOp::Ne, ir::Ew::Ne}, {BinaryOp::Lt, ir::Ew::Lt}, {BinaryOp::Le, ir::Ew::Le},
            {BinaryOp::Gt, ir::Ew::Gt}, {BinaryOp::Ge, ir::Ew::Ge}, {BinaryOp::And, ir::Ew::And},
            {BinaryOp::Or, ir::Ew::Or}};
        Val a = eval(*e.lhs);
        Val b = eval(*e.rhs);
        ir::Ew ew = kOps.at(e.binary_op);
        if (is_aggregate(a) || is_aggregate(b)) {
            return leafwise({a, b}, e.span, fmt::format("`{}`", binary_op_spelling(e.binary_op)),
                            [&](const std::vector<ValueId>& ids) { return elementwise(ew, ids, e.span); });
        }
        return Val::tensor(elementwise(ew, {tensor_of(a, *e.lhs), tensor_of(b, *e.rhs)}, e.span));
    }
    case ExprKind::Call: {
        bool as_statement = statement_call_ == &e;
        Val v = lower_call(e);
        if (v.kind == Val::Tensor && v.id == ir::kNoValue && !as_statement) {
            fail(DiagCode::E0309, e.span, "this call returns nothing; its value cannot be used");
        }
        return v;
    }
    case ExprKind::Field: {
        if (e.lhs->kind == ExprKind::Name && !find_binding(e.lhs->name.name)) {
            // `M.data`: the size of a mesh axis, as an i64 value.
            const Module& module = *in_.program_.modules[module_index_];
            bool is_mesh = binding_.meshes.count(e.lhs->name.name) > 0;
            for (const Item* item : module.items) {
                if (item->kind == ItemKind::Mesh && item->name.name == e.lhs->name.name) is_mesh = true;
            }
            if (is_mesh) {
                Dim d{DimKind::Axis, e.span};
                d.name = e.lhs->name;
                d.axis = e.name;
                return Val::tensor(constant(static_cast<double>(eval_dim(d)), DType::I64, true, e.span));
            }
        }
        Val base = eval(*e.lhs);
        if (base.kind == Val::Module) {
            for (const Item* item : in_.program_.modules[base.module]->items) {
                if (item->kind == ItemKind::Fn && item->name.name == e.name.name) return Val{Val::Function, ir::kNoValue, item};
            }
            fail(DiagCode::E0309, e.span, fmt::format("`{}` is not a function of this module", e.name.name));
        }
        if (!base.opaque.empty()) opaque_error(base, e.span, fmt::format("`.{}`", e.name.name));
        if (base.kind != Val::Struct) fail(DiagCode::E0309, e.span, fmt::format("`.{}`: only a struct has fields", e.name.name));
        return base.elems[field_index(*base.fn, e.name)];
    }
    case ExprKind::Tuple: {
        Val t;
        t.kind = Val::Tuple;
        for (const Expr* x : e.elements) {
            t.elems.push_back(eval(*x));
            if (t.elems.back().kind == Val::Path) fail(DiagCode::E0309, x->span, "a file name (a path argument) is only the file of `load` or `save`");
        }
        return t;
    }
    case ExprKind::StructLit: return struct_literal(e);
    case ExprKind::If: return lower_if(e, /*as_value=*/true);
    case ExprKind::StringLit:
    case ExprKind::DTypeName:
    case ExprKind::List:
    case ExprKind::LayoutLit:
        fail(DiagCode::E0309, e.span, "this is only an argument of a built-in function");
    }
    return Val{};
}

}  // namespace meshc::sema::check

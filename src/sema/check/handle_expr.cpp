// Expressions: the dispatch from an AST expression to its handler.
#include "sema/check/context.h"

namespace meshc::sema::check {

ValueId FunctionBuilder::lower_expr(const Expr& e) {
    Val v = eval(e);
    if (v.kind == Val::Tensor) return v.id;
    if (v.kind == Val::Tuple || v.kind == Val::Struct) {
        fail(DiagCode::E0309, e.span, "expected a tensor, found a tuple or struct");
    }
    if (v.kind == Val::Path) {
        fail(DiagCode::E0309, e.span, "expected a tensor, found a file name (a path argument is the file of `load` or `save`)");
    }
    fail(DiagCode::E0309, e.span, "a function is not a value here; call it");
}

Val FunctionBuilder::eval(const Expr& e) {
    switch (e.kind) {
    case ExprKind::IntLit: return Val::tensor(constant(static_cast<double>(e.int_value), DType::I64, true, e.span));
    case ExprKind::FloatLit: return Val::tensor(constant(e.float_value, DType::F32, true, e.span));
    case ExprKind::BoolLit: return Val::tensor(constant(e.bool_value ? 1 : 0, DType::Bool, false, e.span));
    case ExprKind::Name: {
        Val v = lookup(e.name);
        if (v.kind == Val::Poison) throw Abandon{};
        return v;
    }
    case ExprKind::Unary:
        return Val::tensor(elementwise(e.unary_op == UnaryOp::Neg ? ir::Ew::Neg : ir::Ew::Not, {lower_expr(*e.lhs)}, e.span));
    case ExprKind::Binary: {
        if (e.binary_op == BinaryOp::MatMul) return Val::tensor(matmul(lower_expr(*e.lhs), lower_expr(*e.rhs), e.span));
        static const std::map<BinaryOp, ir::Ew> kOps = {
            {BinaryOp::Add, ir::Ew::Add}, {BinaryOp::Sub, ir::Ew::Sub}, {BinaryOp::Mul, ir::Ew::Mul},
            {BinaryOp::Div, ir::Ew::Div}, {BinaryOp::Mod, ir::Ew::Mod}, {BinaryOp::Eq, ir::Ew::Eq},
            {BinaryOp::Ne, ir::Ew::Ne}, {BinaryOp::Lt, ir::Ew::Lt}, {BinaryOp::Le, ir::Ew::Le},
            {BinaryOp::Gt, ir::Ew::Gt}, {BinaryOp::Ge, ir::Ew::Ge}, {BinaryOp::And, ir::Ew::And},
            {BinaryOp::Or, ir::Ew::Or}};
        ValueId a = lower_expr(*e.lhs);
        ValueId b = lower_expr(*e.rhs);
        return Val::tensor(elementwise(kOps.at(e.binary_op), {a, b}, e.span));
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

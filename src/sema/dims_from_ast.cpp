// Dim expressions from the AST; see dims_from_ast.h.
#include "sema/dims_from_ast.h"

#include <fmt/format.h>

#include "support/diagnostics.h"

namespace meshc::sema {

DimResult<DimExpr> from_ast(const ast::Dim& dim, SymbolTable& symbols,
                            const DimNameResolver& resolve) {
    struct Frame {
        const ast::Dim* node;
        bool expanded;
    };
    std::vector<Frame> stack{{&dim, false}};
    std::vector<DimExpr> values;
    auto fail = [](DimError e, Span span) {
        e.span = span;
        return e;
    };
    while (!stack.empty()) {
        Frame f = stack.back();
        stack.pop_back();
        const ast::Dim& d = *f.node;
        switch (d.kind) {
        case ast::DimKind::Int:
            values.push_back(DimExpr::constant(d.value));
            continue;
        case ast::DimKind::Var:
        case ast::DimKind::Axis: {
            DimBinding b = d.kind == ast::DimKind::Var ? resolve(d.name.name, std::nullopt)
                                                       : resolve(d.name.name, d.axis.name);
            if (b.kind == DimBinding::Kind::Unbound) {
                std::string what = d.kind == ast::DimKind::Var
                                       ? std::string(d.name.name)
                                       : fmt::format("{}.{}", d.name.name, d.axis.name);
                return DimError{DimErrorKind::Unbound, fmt::format("unknown size `{}`", what),
                                d.span};
            }
            values.push_back(b.kind == DimBinding::Kind::Symbol ? DimExpr::symbol(b.symbol)
                                                                : DimExpr::constant(b.value));
            continue;
        }
        case ast::DimKind::Binary:
            break;
        }
        MESHC_ASSERT(d.lhs && d.rhs, "binary dim without operands");
        if (!f.expanded) {
            stack.push_back({f.node, true});
            stack.push_back({d.rhs, false});
            stack.push_back({d.lhs, false});
            continue;
        }
        DimExpr rhs = std::move(values.back());
        values.pop_back();
        DimExpr lhs = std::move(values.back());
        values.pop_back();
        DimResult<DimExpr> r = DimExpr();
        switch (d.op) {
        case ast::DimOp::Add: r = add(lhs, rhs); break;
        case ast::DimOp::Sub: r = sub(lhs, rhs); break;
        case ast::DimOp::Mul: r = mul(lhs, rhs); break;
        case ast::DimOp::Div: r = floor_div(lhs, rhs, symbols); break;
        case ast::DimOp::Mod: r = mod(lhs, rhs, symbols); break;
        }
        if (!r) return fail(r.error(), d.span);
        values.push_back(std::move(r).value());
    }
    MESHC_ASSERT(values.size() == 1, "dim conversion left a bad stack");
    return std::move(values.back());
}

}  // namespace meshc::sema

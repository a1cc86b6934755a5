// Dim expressions from the AST: parsed `ast::Dim`s to the normal form of
// solver/dim_expr.h. The dim vocabulary is named here in sema's namespace.
#pragma once

#include "solver/dim_expr.h"
#include "syntax/ast.h"

namespace meshc::sema {

using namespace solver;

/// What a name in a dim expression denotes (answered by the type checker's scopes).
struct DimBinding {
    enum class Kind : uint8_t { Symbol, Constant, Unbound };
    Kind kind = Kind::Unbound;
    SymbolId symbol{};  // Symbol
    int64_t value = 0;  // Constant: e.g. an axis size of a concrete mesh

    static DimBinding of_symbol(SymbolId id) { return {Kind::Symbol, id, 0}; }
    static DimBinding of_constant(int64_t v) { return {Kind::Constant, {}, v}; }
    static DimBinding unbound() { return {}; }
};

/// Called with (name, nullopt) for a size variable and (mesh, axis) for `M.data`.
using DimNameResolver =
    std::function<DimBinding(std::string_view name, std::optional<std::string_view> axis)>;

/// Converts a parsed dim (iteratively: long `a + b + ...` chains are fine). `/` becomes
/// floor_div() and `%` mod(); errors carry the span of the node that failed.
DimResult<DimExpr> from_ast(const ast::Dim& dim, SymbolTable& symbols,
                            const DimNameResolver& resolve);

}  // namespace meshc::sema

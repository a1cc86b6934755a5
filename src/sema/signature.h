// Small questions about function signatures and `where` clauses, shared by refinement
// checking (refine.cpp) and inference (sema/check/).
#pragma once

#include <functional>

#include <cstdint>

#include "syntax/ast.h"

namespace meshc::sema {

/// Whether `fn` is generic: it has generic parameters, or a size variable occurs in its
/// parameter or result types (names of meshes declared in `module` are not sizes).
bool has_size_variables(const ast::Item& fn, const ast::Module& module);

/// Calls `on_dim` on every node of every dim expression (pre-order: a `B * 2` node, then
/// `B`, then `2`) and `on_type` on every type (tuple elements included) of fn's
/// parameters, in order, then of its result.
void for_each_signature_part(const ast::Item& fn, const std::function<void(const ast::Dim&)>& on_dim,
                             const std::function<void(const ast::Type&)>& on_type = {});

/// `a op b` on concrete sizes.
bool compare(ast::CmpOp op, int64_t a, int64_t b);

}  // namespace meshc::sema

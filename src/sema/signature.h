// Small questions about function signatures and `where` clauses, shared by refinement
// checking (refine.cpp) and inference (sema/check/).
#pragma once

#include <cstdint>

#include "syntax/ast.h"

namespace meshc::sema {

/// Whether `fn` is generic: it has generic parameters, or a size variable occurs in its
/// parameter or result types (names of meshes declared in `module` are not sizes).
bool has_size_variables(const ast::Item& fn, const ast::Module& module);

/// `a op b` on concrete sizes.
bool compare(ast::CmpOp op, int64_t a, int64_t b);

}  // namespace meshc::sema

// The parser: tokens -> AST. Hand-written recursive descent with precedence climbing.
// Input: a file in a SourceManager; output: an ast::Module (consumed by the AST printer
// and by name resolution). Syntax errors (E01) go to the DiagnosticEngine; after each
// error the parser resynchronises at a statement or item boundary and goes on, so one
// run reports every independent error once. The accepted language is exactly
// docs/grammar-spec.txt (checked against grammar/mesh.y by the conformance test).
#pragma once

#include <memory>

#include "support/diagnostics.h"
#include "syntax/ast.h"

namespace meshc::syntax {

/// Nesting limit for parentheses, brackets, blocks and types (hostile input -> E0107).
inline constexpr int kMaxNestingDepth = 256;
/// Limit on an expression tree's height (long operator chains) -> E0107.
inline constexpr uint32_t kMaxExprHeight = 1024;

std::unique_ptr<ast::Module> parse_file(const SourceManager& sources, FileId file,
                                        DiagnosticEngine& diags);

}  // namespace meshc::syntax

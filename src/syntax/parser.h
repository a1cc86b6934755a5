// The parser: tokens -> AST. Hand-written recursive descent with precedence climbing.
// Input: a file in a SourceManager; output: an ast::Module (consumed by the AST printer
// and by name resolution). Syntax errors (E01) go to the DiagnosticEngine; after each
// error the parser resynchronises at a statement or item boundary and goes on, so one
// run reports every independent error once. The accepted language is exactly
// docs/grammar-spec.txt (checked against grammar/mesh.y by the conformance test).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "support/diagnostics.h"
#include "syntax/ast.h"

namespace meshc::syntax {

/// Nesting limit for parentheses, brackets, blocks and types (hostile input -> E0107).
inline constexpr int kMaxNestingDepth = 256;
/// Limit on an expression tree's height (long operator chains) -> E0107.
inline constexpr uint32_t kMaxExprHeight = 1024;

/// Layouts to read in place of `with auto` (the layout solver's answer, src/autopar/):
/// by the byte offset of the `auto` token, a layout's text as the solver writes it: `_`,
/// `{}`, `{H: model}`, `{0: (data, model), D: data}`. The type reads as if it were
/// written there, every node spanning the `auto` token, so diagnostics and the editor
/// keep pointing into the text as written. The map must outlive the module (its names
/// point into it). A text not of that form leaves the site `auto` (read as `_`).
using AutoLayouts = std::map<uint32_t, std::string>;

std::unique_ptr<ast::Module> parse_file(const SourceManager& sources, FileId file,
                                        DiagnosticEngine& diags, const AutoLayouts* chosen = nullptr);

}  // namespace meshc::syntax

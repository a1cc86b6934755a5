// Textual form of the AST (`meshc check --emit=ast`): one node per line, indented by
// depth, each with its kind, its attributes and `@line:col` of its span's start.
// Types and dims print inline in source syntax. Consumed by lit tests.
#pragma once

#include <iosfwd>

#include "support/source_manager.h"
#include "syntax/ast.h"

namespace meshc::syntax {

void print_ast(std::ostream& out, const SourceManager& sources, const ast::Module& module);

std::string dim_to_string(const ast::Dim& dim);
std::string type_to_string(const ast::Type& type);

}  // namespace meshc::syntax

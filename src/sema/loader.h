// Loads a program: the root file and, transitively, every module it imports.
// Input: a root path; output: a Program of parsed modules (consumed by resolve.cpp and
// later type inference). Import paths `a.b.c` are looked up as `a/b/c.msh` beside the
// importing file, then in the standard library folder.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/diagnostics.h"
#include "syntax/ast.h"
#include "syntax/parser.h"

namespace meshc::sema {

struct LoadOptions {
    std::string stdlib_dir;  // folder holding std/nn.msh, ...
    /// Files to read from memory instead of disk, by canonical path (the language
    /// server's open documents, edited and not saved). May be null.
    const std::map<std::string, std::string>* overlays = nullptr;
    /// The layouts chosen for `with auto` sites, by canonical path (syntax::AutoLayouts;
    /// the layout solver's answer, read as if written in). May be null; must outlive the
    /// program.
    const std::map<std::string, syntax::AutoLayouts>* auto_layouts = nullptr;
};

struct Program {
    /// modules[0] is the root; each file appears once.
    std::vector<std::unique_ptr<ast::Module>> modules;
    /// For each import item that was found: the index of the imported module.
    std::map<const ast::Item*, size_t> import_targets;
};

/// Reads a file into the SourceManager. On failure reports E0701 (or E0111 for an
/// oversized file) at `requested_at` (may be invalid) and returns kNoFile.
FileId read_source_file(SourceManager& sources, DiagnosticEngine& diags, const std::string& path,
                        Span requested_at = {});

/// Parses `root` and every module it imports. Returns nullopt-like empty program (no
/// modules) when the root itself cannot be read.
Program load_program(SourceManager& sources, DiagnosticEngine& diags, const std::string& root,
                     const LoadOptions& options);

}  // namespace meshc::sema

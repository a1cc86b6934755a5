// Whole-program checks on the finished GIR (after autodiff), for what the cost model
// sees but no type rule forbids: the W codes of docs/diagnostics.md. W0001: a mesh axis
// that splits nothing in a function's contractions (every device of its groups repeats
// the same work); W0002: a parameter left replicated only because its type names no
// layout. Also the memory budget (`--memory`, E0709). `--deny` turns a warning into an
// error (DiagnosticEngine::deny).
#pragma once

#include <cstdint>

#include "ir/gir.h"
#include "sema/loader.h"
#include "support/diagnostics.h"

namespace meshc::sema {

struct LintOptions {
    /// Bytes per device that the program's peak may use (0: no budget).
    int64_t memory_budget = 0;
};

void lint_module(const SourceManager& sources, const Program& program, const ir::Module& module,
                 DiagnosticEngine& diags, const LintOptions& options);

}  // namespace meshc::sema

// Name resolution: every name in a loaded Program is checked against its scope.
// Input: a Program from loader.h; output: diagnostics (E02 names, plus the structural
// E03/E04 checks that need only names: recursion, mesh declarations, generic arity,
// struct-literal fields, layout keys and mesh axes of concrete meshes). Type inference
// (issue 3) runs only on programs that resolve cleanly.
#pragma once

#include "sema/loader.h"
#include "support/diagnostics.h"

namespace meshc::sema {

void resolve_program(const SourceManager& sources, const Program& program,
                     DiagnosticEngine& diags);

}  // namespace meshc::sema

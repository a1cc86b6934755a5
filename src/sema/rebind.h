// `meshc build --mesh NAME=axis:size,...`: rebinds a declared mesh's axis sizes before
// name resolution, so that refinements, shapes and plans are all checked against the new
// sizes (the same source builds for a 1x1 mesh and for 2x4). This is the one place where
// the AST changes after parsing. Errors are E0705.
#pragma once

#include <string>
#include <vector>

#include "sema/loader.h"
#include "support/diagnostics.h"

namespace meshc::sema {

/// Applies each rebinding (`Pod=data:4,model:2`; axes not named keep their size) to the
/// mesh declarations of every module of the program.
void rebind_meshes(Program& program, const std::vector<std::string>& specs, DiagnosticEngine& diags);

/// Applies each link rebinding (`Pod.data=latency:2e-5,bandwidth:2.5e10`; either key may
/// be left out and keeps its value) to the named axis's link. Errors are E0705.
void rebind_links(Program& program, const std::vector<std::string>& specs, DiagnosticEngine& diags);

}  // namespace meshc::sema

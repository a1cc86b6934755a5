// Name resolution: every name in a loaded Program is checked against its scope.
// Input: a Program from loader.h; output: diagnostics (E02 names, plus the structural
// E03/E04 checks that need only names: recursion, mesh declarations, generic arity,
// struct-literal fields, layout keys and mesh axes of concrete meshes). Type inference
// (issue 3) runs only on programs that resolve cleanly.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "sema/loader.h"
#include "sema/name_index.h"
#include "support/diagnostics.h"

namespace meshc::sema {

/// With `index`, also records every resolved name's use and declaration (the language
/// server's definitions and references).
void resolve_program(const SourceManager& sources, const Program& program,
                     DiagnosticEngine& diags, NameIndex* index = nullptr);

/// The candidate closest to `name` (edit distance, a swap of two letters counting as
/// one edit) when it is close enough to suggest as "did you mean", as name resolution
/// does for unknown names.
std::optional<std::string_view> closest_name(std::string_view name,
                                             const std::vector<std::string_view>& candidates);

}  // namespace meshc::sema

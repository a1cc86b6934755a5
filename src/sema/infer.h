// Type, shape and sharding inference: a resolved Program -> typed global IR (GIR).
// Input: a Program that name resolution accepted; output: an ir::Module with one
// Function per instantiation (entry points: `main`, and every function whose signature
// has no free size variables), shapes concrete, every value's layout inferred, and every
// coercion the checker needed inserted as an explicit collective (or free local slice)
// chosen by the cost model. Errors are E03 (types and shapes), E04 (sharding,
// `--strict-comm`). Consumed by `meshc check --emit=gir` and `meshc explain`.
#pragma once

#include <set>

#include "ir/gir.h"
#include "sema/mesh.h"
#include "sema/loader.h"
#include "support/diagnostics.h"

namespace meshc::sema {

struct InferOptions {
    /// Every communicating coercion the checker inserts is an E0406 error (also per
    /// function with `@explicit_comm`).
    bool strict_comm = false;
    /// Functions not to check (their name or refinement errors were reported): their
    /// calls are abandoned silently, and everything else is checked.
    const std::set<const ast::Item*>* skip = nullptr;
    /// Whole-function plan search: at most this many extra lowerings of each function
    /// instance, each trying another alternative at one decision point (0: off; see
    /// docs/architecture.md, "Whole-function plan search").
    int plan_search = 32;
    /// The device of every mesh position, for the compute side of the cost model (the
    /// plan search minimises compute plus communication); `--device-model`.
    ir::DeviceModel device;
};

ir::Module infer_program(const SourceManager& sources, const Program& program,
                         DiagnosticEngine& diags, const InferOptions& options);

}  // namespace meshc::sema

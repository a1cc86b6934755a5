// Refinements checked once per generic function (docs/language.md, "Instantiation and refinements"): each function's
// `where` clauses and the divisibility of every layout in its signature are facts for
// its body; every layout the body writes (annotations, `reshard`) and every call's
// instantiated obligations (the callee's `where` clauses and signature layouts) must
// follow from them, for all sizes. Decided by solver::RefinementSolver; a failure is
// E0502 at the annotation or call that needs it, with a counterexample.
// Input: a resolved Program; output: diagnostics. Runs before inference (infer.h), which
// checks the same obligations again with concrete sizes for each instantiation.
#pragma once

#include <set>

#include "sema/loader.h"
#include "support/diagnostics.h"

namespace meshc::sema {

struct RefineStats {
    size_t functions = 0;
    size_t obligations = 0;
};

/// `skip`: functions not to check (their earlier errors were reported).
/// `solver_budget_ms`: the Z3 time of undecided goals the whole run may spend
/// (solver::SolverOptions::run_budget_ms; `--solver-budget`).
RefineStats check_refinements(const SourceManager& sources, const Program& program,
                              DiagnosticEngine& diags, const std::set<const ast::Item*>* skip = nullptr,
                              unsigned solver_budget_ms = 1500);

}  // namespace meshc::sema

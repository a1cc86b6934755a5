// Reverse-mode automatic differentiation as a GIR -> GIR transform, before SPMD
// partitioning. Input: the checker's GIR (sema/check/), where `grad(f)(args)` and
// `value_and_grad(f)(args)` are `grad` ops. Output: the same module with every `grad` op
// replaced by a call of a new function (Function::derived "grad" / "value_and_grad") that
// runs f's forward pass and then its backward pass as ordinary GIR ops. Consumed by
// `meshc explain`, the GIR printer and the partitioner; no later phase sees a `grad` op.
//
// The backward values are typed like any others: each adjoint is written with GIR ops
// whose layouts follow from the forward op's (the same split of every index), and where
// a cotangent's layout must change (a parameter's gradient has the parameter's type; an
// op's adjoint needs its operand unsplit or whole) the coercion is planned by
// ir/reshard_plan.h, so backward collectives are explicit ops with a span (the forward
// construct) and a reason, shown by explain and checked by --strict-comm. Pending sums
// flow through linear adjoints and are completed only where a value needs it.
#pragma once

#include "ir/gir.h"
#include "support/diagnostics.h"
#include "support/source_manager.h"

namespace meshc::transform {

struct AutodiffOptions {
    /// Every communicating coercion of a backward pass is E0406 (like the checker's).
    bool strict_comm = false;
};

/// Replaces every `grad` op of `module` (innermost first, so a derivative of a derivative
/// works). Errors (a loop whose bounds are not constants, an unsupported contraction,
/// strict-comm violations) are diagnostics; the module is then not to be used further.
/// After an error the other `grad` ops are still derived, so that one run reports the
/// errors of every backward pass. Functions with `has_errors` (and every function that
/// calls one) are left alone: the driver runs this on a module whose forward pass has
/// errors elsewhere only to report the backward passes' errors too.
void autodiff(ir::Module& module, const SourceManager& sources, DiagnosticEngine& diags,
              const AutodiffOptions& options = {});

}  // namespace meshc::transform

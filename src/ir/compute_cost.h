// The compute and memory side of the cost model (docs/language.md, "Cost model"): what
// one device spends on each GIR op, from the flops it does and the bytes it touches
// (a roofline: the larger of the two times), at the rates of a device model. Consumed by
// `meshc explain` (compute per instance, per step, for the program), the plan search
// (which minimises compute plus communication) and the lints (sema/lint.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/device_model.h"
#include "ir/gir.h"

namespace meshc::ir {

/// What one op costs one device, per run of the op.
struct ComputeCost {
    double flops = 0;
    double bytes = 0;    // read and written
    double seconds = 0;  // max(flops / rate, bytes / bandwidth)
};

/// The compute cost of `op` of `function` on the module's device model. Collectives,
/// local slices, make_partial and place cost no compute (their cost is communication or
/// nothing); calls, loops and branches cost nothing themselves (their bodies are costed
/// where they are: the callee's instance, the region's ops); I/O is not modelled.
ComputeCost op_compute_cost(const Module& module, const Function& function, const Op& op);

}  // namespace meshc::ir

// Combining collectives: a GIR -> GIR pass after autodiff. In each function autodiff made
// (a training step's forward and backward), all_reduces whose results only leave the
// function are moved to its end, and runs of adjacent all_reduce sums over the same axes
// of one mesh and element type become one all_reduce of several tensors, sent as one
// buffer: one latency per step for the gradients and the loss instead of one each.
// Consumed by explain (one collective, its tensors listed) and the partitioner.
#pragma once

#include "ir/gir.h"

namespace meshc::transform {

/// Returns how many all_reduce ops were merged away.
size_t combine_collectives(ir::Module& module);

}  // namespace meshc::transform

// Element-wise reductions over several input buffers, for every dtype and reduce op:
// what all_reduce and reduce_scatter compute in any handler that reduces on the host.
// f16/bf16 are summed in float and rounded once (to nearest even); bool sum and max are
// logical or; float max propagates NaN.
#pragma once

#include <cstdint>

namespace meshrt::comm {

/// out[i] = op(inputs[0][i], ..., inputs[n-1][i]) for i < count; n >= 1; out may not
/// alias an input. dtype and op must be valid (the caller checked).
void reduce_into(int32_t dtype, int32_t op, void* out, const void* const* inputs, int64_t n,
                 int64_t count);

} // namespace meshrt::comm

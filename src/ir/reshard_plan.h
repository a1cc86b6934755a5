// Coercion planning as a pure function of two layouts: the steps (collectives, free local
// slices, make_partial) that turn a value's layout into a wanted one, by the table of
// docs/language.md, "Sharding rules", and what they cost. Consumed by the checker (sema/check/, which
// emits the steps as GIR ops) and by transforms that make values of their own
// (transform/autodiff.cpp).
#pragma once

#include <optional>
#include <vector>

#include "ir/cost_model.h"
#include "ir/gir.h"

namespace meshc::ir {

struct ReshardStep {
    OpKind kind;       // AllReduce, ReduceScatter, AllGather, AllToAll, LocalSlice, MakePartial
    AxisSet axes = 0;  // the group
    int32_t dim = -1;  // the dim gained or lost (all_to_all: the dim it leaves)
    int32_t dim2 = -1; // all_to_all: the dim it joins
    Layout result;     // the layout after this step
};

/// The steps from `from` to `to` (same rank): pending sums first (reduce_scatter where
/// the target splits a dim over the reduced axes, after free local slices over the axes
/// it splits that dim by first, else one all_reduce over all of them),
/// then free local slices over axes nothing uses, then all_to_all for an axis moving
/// from one dim to another, then all_gathers, then the remaining local slices. Buffers
/// shrink before anything is sent where possible. Empty when the layouts are equal.
/// Throws InternalError when no plan reaches `to` (a compiler bug in the caller).
std::vector<ReshardStep> plan_reshard(const Layout& from, const Layout& to);

/// The cheapest plan from `from` to `to` on `mesh` under the cost model: a shortest path
/// over layouts whose edges are single steps (reshard_search.cpp). Returns the fixed-order
/// plan above unless a strictly cheaper one exists. Throws InternalError when no plan
/// reaches `to`.
std::vector<ReshardStep> plan_reshard(const TensorType& from, const Layout& to, const Mesh& mesh);

/// Whether a step moves data between devices (local slices and make_partial do not).
bool communicates(OpKind kind);
/// The collective an op kind is, if it is one.
std::optional<CollectiveKind> collective_kind(OpKind kind);

/// Per-device buffer b of a step (docs/language.md, "The coercion table": the unsplit side) for a value of
/// type `before` (the step's input type).
int64_t step_bytes(const ReshardStep& step, const TensorType& before, const Mesh& mesh);

/// Cost in seconds of one step on `mesh` for an input of type `before` (0 for free steps).
double step_cost(const ReshardStep& step, const TensorType& before, const Mesh& mesh);

/// Cost in seconds of the cheapest plan from `from`'s layout to `to`; infinity when there
/// is no plan.
double reshard_cost(const TensorType& from, const Layout& to, const Mesh& mesh);
/// Cost in seconds of `steps` applied to a value of type `from`.
double plan_cost(const std::vector<ReshardStep>& steps, const TensorType& from, const Mesh& mesh);

}  // namespace meshc::ir

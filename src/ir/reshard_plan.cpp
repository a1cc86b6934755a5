// Coercion planning; see reshard_plan.h.
#include "ir/reshard_plan.h"

#include "ir/op_rules.h"

#include <fmt/format.h>

#include <limits>
#include <optional>

#include "support/diagnostics.h"

namespace meshc::ir {

std::vector<ReshardStep> plan_reshard(const Layout& from, const Layout& target) {
    std::vector<ReshardStep> steps;
    Layout cur = from;
    if (cur == target) return steps;
    MESHC_ASSERT(cur.dims.size() == target.dims.size(), "coercion between layouts of different ranks");
    size_t rank = cur.dims.size();
    auto step = [&](OpKind kind, AxisSet axes, int32_t dim, int32_t dim2, Layout next) {
        steps.push_back(ReshardStep{kind, axes, dim, dim2, next});
        cur = std::move(next);
    };

    // 1. Pending sums that the target does not keep.
    AxisSet remove = cur.partial & ~target.partial;
    if (remove) {
        for (size_t d = 0; d < rank && remove; ++d) {
            const auto c = cur.dims[d];
            const auto& t = target.dims[d];
            if (t.size() <= c.size() || !std::equal(c.begin(), c.end(), t.begin())) continue;
            // t = c ++ free ++ added: axes nothing uses yet are sliced first (free, and the
            // buffer reduced shrinks), then the pending axes are scattered.
            size_t f = c.size();
            AxisSet in_use = cur.split_axes() | cur.partial;
            while (f < t.size() && !(in_use & axis_bit(t[f]))) ++f;
            AxisSet added = 0;
            for (size_t i = f; i < t.size(); ++i) added |= axis_bit(t[i]);
            if (!added || (added & remove) != added) continue;
            if (cur.split_axes() & added) continue;
            for (size_t i = c.size(); i < f; ++i) {
                Layout sliced = cur;
                sliced.dims[d].push_back(t[i]);
                step(OpKind::LocalSlice, axis_bit(t[i]), static_cast<int32_t>(d), -1, sliced);
            }
            Layout next = cur;
            next.partial &= ~added;
            next.dims[d] = t;
            step(OpKind::ReduceScatter, added, static_cast<int32_t>(d), -1, next);
            remove &= ~added;
        }
        if (remove) {
            Layout next = cur;
            next.partial &= ~remove;
            step(OpKind::AllReduce, remove, -1, -1, next);
        }
    }
    // 2. Pending sums the target has and the value does not: free, where the axes leave
    //    each dim they split from its minor end. An axis that splits a dim ahead of
    //    others (`{0: (data, model)}` -> `partial {data}`) first takes the axes after it
    //    off that dim (an all_gather), so that the remaining split is a prefix.
    if (AxisSet add = target.partial & ~cur.partial) {
        for (size_t d = 0; d < rank; ++d) {
            const AxisList& axes = cur.dims[d];
            size_t p = 0;
            while (p < axes.size() && !(add & axis_bit(axes[p]))) ++p;
            bool suffix = true;
            for (size_t i = p; i < axes.size(); ++i) suffix = suffix && (add & axis_bit(axes[i]));
            if (p == axes.size() || suffix) continue;
            AxisSet group = 0;
            for (size_t i = p + 1; i < axes.size(); ++i) group |= axis_bit(axes[i]);
            Layout next = cur;
            next.dims[d].resize(p + 1);
            step(OpKind::AllGather, group, static_cast<int32_t>(d), -1, next);
        }
        // {d: a} -> partial {a}: the local slice placed in a zero tensor of the unsplit
        // size (free), so d loses a.
        Layout next = cur;
        for (auto& axes : next.dims) {
            AxisList kept;
            for (uint8_t a : axes) {
                if (!(add & axis_bit(a))) kept.push_back(a);
            }
            axes = kept;
        }
        next.partial |= add;
        step(OpKind::MakePartial, add, -1, -1, next);
    }
    auto prefix = [&](size_t d) {
        size_t p = 0;
        while (p < cur.dims[d].size() && p < target.dims[d].size() && cur.dims[d][p] == target.dims[d][p]) ++p;
        return p;
    };
    auto slice_free = [&] {
        for (size_t d = 0; d < rank; ++d) {
            size_t p = prefix(d);
            if (p != cur.dims[d].size()) continue;  // something to remove first
            while (cur.dims[d].size() < target.dims[d].size()) {
                uint8_t a = target.dims[d][cur.dims[d].size()];
                AxisSet bit = axis_bit(a);
                if ((cur.split_axes() | cur.partial) & bit) break;  // still in use: later
                Layout next = cur;
                next.dims[d].push_back(a);
                step(OpKind::LocalSlice, bit, static_cast<int32_t>(d), -1, next);
            }
        }
    };
    // 3. Free local slices first: they shrink every buffer sent after them.
    slice_free();
    // 4. all_to_all: axes that leave d1 (from its minor end) and are the next to add to
    //    d2. The whole suffix of d1 past the common prefix moves in one all_to_all over
    //    that group when d2 wants it in the same order (`{0: (a, b)}` -> `{1: (a, b)}`);
    //    otherwise its minor-most axis moves alone and the rest follow one by one
    //    (`{0: (a, b)}` -> `{1: (b, a)}`: two all_to_alls). An all_to_all keeps the
    //    buffer's size, so it goes before the gathers that grow it.
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t d1 = 0; d1 < rank && !moved; ++d1) {
            size_t p1 = prefix(d1);
            if (cur.dims[d1].size() <= p1) continue;
            AxisList suffix(cur.dims[d1].begin() + static_cast<std::ptrdiff_t>(p1), cur.dims[d1].end());
            for (size_t d2 = 0; d2 < rank && !moved; ++d2) {
                if (d2 == d1) continue;
                size_t p2 = prefix(d2);
                const AxisList& want = target.dims[d2];
                if (p2 != cur.dims[d2].size() || want.size() <= p2) continue;
                AxisList moving;
                if (want.size() >= p2 + suffix.size() &&
                    std::equal(suffix.begin(), suffix.end(), want.begin() + static_cast<std::ptrdiff_t>(p2))) {
                    moving = suffix;
                } else if (want[p2] == suffix.back()) {
                    moving = {suffix.back()};
                } else {
                    continue;
                }
                AxisSet group = 0;
                for (uint8_t a : moving) group |= axis_bit(a);
                Layout next = cur;
                next.dims[d1].resize(next.dims[d1].size() - moving.size());
                for (uint8_t a : moving) next.dims[d2].push_back(a);
                step(OpKind::AllToAll, group, static_cast<int32_t>(d1), static_cast<int32_t>(d2), next);
                moved = true;
            }
        }
    }
    // 5. all_gather what remains to remove (the suffix past the common prefix, one
    //    collective per dim over that group of axes).
    for (size_t d = 0; d < rank; ++d) {
        size_t p = prefix(d);
        if (cur.dims[d].size() == p) continue;
        AxisSet group = 0;
        for (size_t i = p; i < cur.dims[d].size(); ++i) group |= axis_bit(cur.dims[d][i]);
        Layout next = cur;
        next.dims[d].resize(p);
        step(OpKind::AllGather, group, static_cast<int32_t>(d), -1, next);
    }
    // 6. The remaining local slices.
    slice_free();
    MESHC_ASSERT(cur == target, "coercion plan did not reach the target layout");
    return steps;
}

bool communicates(OpKind kind) {
    return kind == OpKind::AllReduce || kind == OpKind::ReduceScatter || kind == OpKind::AllGather ||
           kind == OpKind::AllToAll;
}

int64_t step_bytes(const ReshardStep& step, const TensorType& before, const Mesh& mesh) {
    if (step.kind == OpKind::AllGather) {
        TensorType after = before;
        after.layout = step.result;
        return after.local_bytes(&mesh);
    }
    return before.local_bytes(&mesh);
}

std::optional<CollectiveKind> collective_kind(OpKind kind) {
    switch (op_rule(kind).comm) {
    case CommRule::AllReduce: return CollectiveKind::AllReduce;
    case CommRule::ReduceScatter: return CollectiveKind::ReduceScatter;
    case CommRule::AllGather: return CollectiveKind::AllGather;
    case CommRule::AllToAll: return CollectiveKind::AllToAll;
    case CommRule::LocalSlice:
    case CommRule::MakePartial:
    case CommRule::None: return std::nullopt;
    }
    return std::nullopt;
}

double step_cost(const ReshardStep& step, const TensorType& before, const Mesh& mesh) {
    std::optional<CollectiveKind> kind = collective_kind(step.kind);
    if (!kind) return 0;
    return collective_cost(*kind, mesh, step.axes, static_cast<double>(step_bytes(step, before, mesh))).seconds;
}

double reshard_cost(const TensorType& from, const Layout& to, const Mesh& mesh) {
    if (from.layout == to) return 0;
    std::vector<ReshardStep> steps;
    try {
        steps = plan_reshard(from, to, mesh);
    } catch (const InternalError&) {
        return std::numeric_limits<double>::infinity();
    }
    return plan_cost(steps, from, mesh);
}

double plan_cost(const std::vector<ReshardStep>& steps, const TensorType& from, const Mesh& mesh) {
    double cost = 0;
    TensorType t = from;
    for (const ReshardStep& s : steps) {
        cost += step_cost(s, t, mesh);
        t.layout = s.result;
    }
    return cost;
}

}  // namespace meshc::ir

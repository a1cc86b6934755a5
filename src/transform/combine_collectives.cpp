// Combining collectives; see combine_collectives.h.
#include "transform/combine_collectives.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace meshc::transform {
namespace {

using namespace ir;

bool single_sum_all_reduce(const Op& op) {
    return op.kind == OpKind::AllReduce && op.reduce == ReduceKind::Sum && op.operands.size() == 1 &&
           op.results.size() == 1;
}

/// For each value, the top-level ops that use it (a use inside a region counts at the op
/// that holds the region).
std::vector<std::vector<size_t>> users(const Function& f) {
    std::vector<std::vector<size_t>> out(f.types.size());
    for (size_t i = 0; i < f.ops.size(); ++i) {
        std::vector<Op> one{f.ops[i]};
        for_each_op(one, [&](const Op& o) {
            for (ValueId v : o.operands) out[v].push_back(i);
            for (const Region& r : o.regions) {
                for (ValueId y : r.yields) out[y].push_back(i);
            }
        });
    }
    return out;
}

/// Moves all_reduces whose result only leaves the function (directly or through one
/// `place`) to the end, keeping their order.
void sink(Function& f) {
    auto use = users(f);
    std::vector<bool> moved(f.ops.size(), false);
    for (size_t i = 0; i < f.ops.size(); ++i) {
        if (!single_sum_all_reduce(f.ops[i])) continue;
        const auto& u = use[f.ops[i].results[0]];
        if (u.empty()) {
            moved[i] = true;
        } else if (u.size() == 1 && f.ops[u[0]].kind == OpKind::Place && use[f.ops[u[0]].results[0]].empty()) {
            moved[i] = moved[u[0]] = true;
        }
    }
    // The all_reduces first, then the places that read them, so that the all_reduces are
    // adjacent.
    std::vector<Op> kept, tail, places;
    for (size_t i = 0; i < f.ops.size(); ++i) {
        if (!moved[i]) kept.push_back(std::move(f.ops[i]));
        else (f.ops[i].kind == OpKind::Place ? places : tail).push_back(std::move(f.ops[i]));
    }
    for (Op& op : tail) kept.push_back(std::move(op));
    for (Op& op : places) kept.push_back(std::move(op));
    f.ops = std::move(kept);
}

/// Merges runs of adjacent all_reduce sums over the same axes, mesh and element type.
size_t merge(Function& f) {
    size_t merged = 0;
    std::vector<Op> out;
    auto key = [&](const Op& op) {
        const TensorType& t = f.types[op.operands[0]];
        return std::make_tuple(t.mesh, op.axes, t.dtype);
    };
    for (Op& op : f.ops) {
        if (!out.empty() && single_sum_all_reduce(op) && out.back().kind == OpKind::AllReduce &&
            out.back().reduce == ReduceKind::Sum && key(out.back()) == key(op)) {
            Op& into = out.back();
            into.operands.push_back(op.operands[0]);
            into.results.push_back(op.results[0]);
            into.backward = into.backward || op.backward;
            into.inserted = into.inserted && op.inserted;
            if (!op.reason.empty() && into.reason.find(op.reason) == std::string::npos) {
                into.reason += (into.reason.empty() ? "" : "; ") + op.reason;
            }
            ++merged;
            continue;
        }
        out.push_back(std::move(op));
    }
    f.ops = std::move(out);
    return merged;
}

}  // namespace

size_t combine_collectives(Module& module) {
    size_t merged = 0;
    for (Function& f : module.functions) {
        if (f.derived.empty()) continue;
        sink(f);
        merged += merge(f);
    }
    return merged;
}

}  // namespace meshc::transform

// Combining collectives; see combine_collectives.h.
#include "transform/combine_collectives.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace meshc::transform {
namespace {

using namespace ir;

bool single_sum_all_reduce(const Op& op) {
    return op.kind == OpKind::AllReduce && op.reduce == ReduceKind::Sum && op.operands.size() == 1 &&
           op.results.size() == 1;
}

/// For each value, how many uses it has among the top-level ops (a use inside a region
/// counts at the op that holds the region) and the first of them.
struct Uses {
    std::vector<uint32_t> count;
    std::vector<size_t> first;
};

Uses users(const Function& f) {
    Uses out{std::vector<uint32_t>(f.types.size(), 0), std::vector<size_t>(f.types.size(), 0)};
    for (size_t i = 0; i < f.ops.size(); ++i) {
        auto note = [&](const Op& o) {
            auto one = [&](ValueId v) {
                if (out.count[v]++ == 0) out.first[v] = i;
            };
            for (ValueId v : o.operands) one(v);
            for (const Region& r : o.regions) {
                for (ValueId y : r.yields) one(y);
            }
        };
        note(f.ops[i]);
        for (const Region& r : f.ops[i].regions) for_each_op(r.ops, note);
    }
    return out;
}

/// Moves all_reduces whose result only leaves the function (directly or through one
/// `place`) to the end, keeping their order.
void sink(Function& f) {
    Uses use = users(f);
    std::vector<bool> moved(f.ops.size(), false);
    bool any = false;
    for (size_t i = 0; i < f.ops.size(); ++i) {
        if (!single_sum_all_reduce(f.ops[i])) continue;
        ValueId r = f.ops[i].results[0];
        if (use.count[r] == 0) {
            moved[i] = any = true;
        } else if (use.count[r] == 1) {
            size_t u = use.first[r];
            if (f.ops[u].kind == OpKind::Place && use.count[f.ops[u].results[0]] == 0) moved[i] = moved[u] = any = true;
        }
    }
    if (!any) return;
    // The all_reduces first, then the places that read them, so that the all_reduces are
    // adjacent.
    std::vector<Op> kept, tail, places;
    kept.reserve(f.ops.size());
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
    auto key = [&](const Op& op) {
        const TensorType& t = f.types[op.operands[0]];
        return std::make_tuple(t.mesh, op.axes, t.dtype);
    };
    // In place: ops[0, k) is the merged prefix.
    size_t k = 0;
    for (size_t i = 0; i < f.ops.size(); ++i) {
        Op& op = f.ops[i];
        if (k > 0 && single_sum_all_reduce(op) && f.ops[k - 1].kind == OpKind::AllReduce &&
            f.ops[k - 1].reduce == ReduceKind::Sum && key(f.ops[k - 1]) == key(op)) {
            Op& into = f.ops[k - 1];
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
        if (k != i) f.ops[k] = std::move(op);
        ++k;
    }
    f.ops.erase(f.ops.begin() + static_cast<std::ptrdiff_t>(k), f.ops.end());
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

// Plan optimality on small programs: random straight-line functions (element-wise ops,
// contractions, reductions, transposes) on meshes of 1-3 axes, inputs and result with
// annotated layouts. An exhaustive search written here, from the sharding rules of
// docs/language.md restated independently (which operand layouts an op computes locally,
// and the result layout it gives), finds the cheapest plan: a layout for every
// intermediate value and the coercions between them, each charged with the project's cost
// model (ir::reshard_cost, the plan of ir::plan_reshard). The checker's plan (the
// collectives in its GIR, costed like `meshc explain`) must cost no more.
//
// Short run: `meshc-unit-tests "[plan-optimality]"` (a fixed seed, a few hundred programs,
// fails when more are not minimal than the recorded ceiling). Long run:
//   MESHC_PLAN_PROGRAMS=5000 MESHC_PLAN_SEED=7 build/tests/meshc-unit-tests "[plan-optimality]"
// (no ceiling; MESHC_PLAN_SHOW=N prints N examples, MESHC_PLAN_OUT=DIR writes each
// not-minimal example's source, both plans and the cheaper plan as annotated source).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/reshard_plan.h"
#include "sema/explain.h"
#include "sema/infer.h"
#include "sema/resolve.h"
#include "syntax/parser.h"

using namespace meshc;
using ir::AxisList;
using ir::AxisSet;
using ir::Layout;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------
// Random numbers: mt19937_64 is specified exactly by the standard; the distributions are
// not, so the draws are made here.
struct Rng {
    std::mt19937_64 g;
    explicit Rng(uint64_t seed) : g(seed) {}
    size_t below(size_t n) { return static_cast<size_t>(g() % n); }
    bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
};

// ---------------------------------------------------------------------------------------
// Every layout of a given rank on a mesh of n axes: each axis unused, pending (partial) or
// splitting one dim, in every order within a dim.
uint64_t layout_key(const Layout& l) {
    uint64_t k = 0;
    for (const AxisList& d : l.dims) {
        uint64_t c = 0;
        for (uint8_t a : d) c = c * 4 + (a + 1u);
        k = k * 64 + c;
    }
    return k * 16 + l.partial;
}

/// Calls fn(lists) for every ordering of every group (the product of their permutations).
void for_each_ordering(std::vector<std::vector<uint8_t>> groups, const std::function<void(const std::vector<std::vector<uint8_t>>&)>& fn) {
    for (auto& g : groups) std::sort(g.begin(), g.end());
    std::function<void(size_t)> rec = [&](size_t i) {
        if (i == groups.size()) {
            fn(groups);
            return;
        }
        do {
            rec(i + 1);
        } while (std::next_permutation(groups[i].begin(), groups[i].end()));
    };
    rec(0);
}

/// Calls fn(roles) for every assignment of `n_axes` axes to roles 0..n_roles-1.
void for_each_role(size_t n_axes, size_t n_roles, const std::function<void(const std::vector<size_t>&)>& fn) {
    std::vector<size_t> roles(n_axes, 0);
    while (true) {
        fn(roles);
        size_t i = 0;
        while (i < n_axes && ++roles[i] == n_roles) roles[i++] = 0;
        if (i == n_axes) return;
    }
}

AxisList to_axis_list(const std::vector<uint8_t>& v) { return AxisList(v.data(), v.data() + v.size()); }

struct LayoutTable {
    std::vector<Layout> layouts;
    std::unordered_map<uint64_t, int> index;
    int id(const Layout& l) const {
        auto it = index.find(layout_key(l));
        return it == index.end() ? -1 : it->second;
    }
};

LayoutTable make_table(size_t rank, size_t n_axes) {
    LayoutTable t;
    // roles: 0 unused, 1 partial, 2 + d splits dim d
    for_each_role(n_axes, rank + 2, [&](const std::vector<size_t>& roles) {
        std::vector<std::vector<uint8_t>> groups(rank);
        AxisSet partial = 0;
        for (size_t a = 0; a < n_axes; ++a) {
            if (roles[a] == 1) partial |= ir::axis_bit(a);
            if (roles[a] >= 2) groups[roles[a] - 2].push_back(static_cast<uint8_t>(a));
        }
        for_each_ordering(groups, [&](const std::vector<std::vector<uint8_t>>& lists) {
            Layout l = Layout::replicated(rank);
            for (size_t d = 0; d < rank; ++d) l.dims[d] = to_axis_list(lists[d]);
            l.partial = partial;
            t.index.emplace(layout_key(l), static_cast<int>(t.layouts.size()));
            t.layouts.push_back(l);
        });
    });
    return t;
}

// ---------------------------------------------------------------------------------------
// Programs.
enum class Kind { Tanh, Scale, Shift, Add, Sub, Mul, Contract, Reduce, Transpose, Return };

struct Value {
    std::vector<int64_t> shape;
    int fixed = -1;  // inputs: the annotated layout (index into the rank's table)
    std::string name;
    int uses = 0;
};

struct OpSpec {
    Kind kind;
    std::vector<int> operands;
    int result = -1;
    std::string spec;          // Contract: einsum spec
    bool matmul = false;       // Contract: written `x @ y`
    std::vector<int> ints;     // Reduce: reduced dims (empty: all); Transpose: perm
    bool mean = false;         // Reduce
};

struct LinkChoice {
    const char* latency;
    const char* bandwidth;
};
const LinkChoice kLinks[] = {{nullptr, nullptr}, {"1e-6", "3e11"}, {"5e-6", "25e9"}, {"2e-5", "1e10"}};

struct Program {
    ir::Mesh mesh;
    std::vector<int> links;  // index into kLinks per axis
    std::vector<Value> values;
    size_t n_inputs = 0;
    std::vector<OpSpec> ops;  // the last is Return
    int output_layout = -1;
};

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string type_text(const Program& p, const std::vector<int64_t>& shape, const Layout& l) {
    return fmt::format("Tensor f32 {} on M with {}", shape_text(shape), ir::layout_to_string(l, p.mesh));
}

std::string mesh_text(const Program& p) {
    std::string s = "mesh M = [";
    for (size_t a = 0; a < p.mesh.axes.size(); ++a) {
        if (a) s += ", ";
        s += fmt::format("{}: {}", p.mesh.axes[a].name, p.mesh.axes[a].size);
        const LinkChoice& l = kLinks[p.links[a]];
        if (l.latency) s += fmt::format(" {{latency: {}, bandwidth: {}}}", l.latency, l.bandwidth);
    }
    return s + "];\n";
}

std::string expr_text(const OpSpec& op, const std::vector<std::string>& names) {
    const std::string& x = names[0];
    switch (op.kind) {
    case Kind::Tanh: return fmt::format("tanh({})", x);
    case Kind::Scale: return fmt::format("{} * 0.5", x);
    case Kind::Shift: return fmt::format("{} + 1.0", x);
    case Kind::Add: return fmt::format("{} + {}", x, names[1]);
    case Kind::Sub: return fmt::format("{} - {}", x, names[1]);
    case Kind::Mul: return fmt::format("{} * {}", x, names[1]);
    case Kind::Contract:
        if (op.matmul) return fmt::format("{} @ {}", x, names[1]);
        return fmt::format("einsum(\"{}\", {}, {})", op.spec, x, names[1]);
    case Kind::Reduce: {
        const char* f = op.mean ? "mean" : "sum";
        if (op.ints.empty()) return fmt::format("{}({})", f, x);
        return fmt::format("{}({}, axis: {})", f, x, op.ints[0]);
    }
    case Kind::Transpose: {
        std::string perm;
        for (size_t i = 0; i < op.ints.size(); ++i) perm += (i ? ", " : "") + std::to_string(op.ints[i]);
        return fmt::format("transpose({}, [{}])", x, perm);
    }
    case Kind::Return: return x;
    }
    return "?";
}

// ---------------------------------------------------------------------------------------
// Local rules: for an op, every tuple of operand layouts it computes without
// communication, and the result layout it then has (docs/language.md, restated).
struct Strategy {
    std::vector<int> operands;  // layout ids, per operand
    int result = -1;            // layout id of the result
};

struct Tables {
    std::vector<LayoutTable> by_rank;  // 0..3
};

AxisSet list_axes(const AxisList& l) {
    AxisSet s = 0;
    for (uint8_t a : l) s |= ir::axis_bit(a);
    return s;
}

std::vector<Strategy> strategies(const Program& p, const Tables& t, const OpSpec& op) {
    std::vector<Strategy> out;
    size_t n_axes = p.mesh.axes.size();
    const Value& x = p.values[op.operands[0]];
    const LayoutTable& tx = t.by_rank[x.shape.size()];
    switch (op.kind) {
    case Kind::Tanh:
    case Kind::Shift:
    case Kind::Scale:
        // Any layout; a pending sum not through a non-linear function (tanh).
        for (size_t i = 0; i < tx.layouts.size(); ++i) {
            // `x + 1.0` keeps a pending sum too: the constant is made pending (on
            // coordinate 0, zeros elsewhere) for free.
            if (op.kind == Kind::Tanh && tx.layouts[i].partial) continue;
            out.push_back({{static_cast<int>(i)}, static_cast<int>(i)});
        }
        break;
    case Kind::Add:
    case Kind::Sub:
        // The same splits; the same pending sums (a sum of sums over the same devices).
        for (size_t i = 0; i < tx.layouts.size(); ++i) out.push_back({{static_cast<int>(i), static_cast<int>(i)}, static_cast<int>(i)});
        break;
    case Kind::Mul: {
        // The same splits; pending sums over disjoint axes multiply out to a pending sum
        // over their union (x replicated over y's axes and vice versa).
        size_t rank = x.shape.size();
        for_each_role(n_axes, rank + 3, [&](const std::vector<size_t>& roles) {
            std::vector<std::vector<uint8_t>> groups(rank);
            AxisSet pa = 0, pb = 0;
            for (size_t a = 0; a < n_axes; ++a) {
                if (roles[a] == 1) pa |= ir::axis_bit(a);
                if (roles[a] == 2) pb |= ir::axis_bit(a);
                if (roles[a] >= 3) groups[roles[a] - 3].push_back(static_cast<uint8_t>(a));
            }
            for_each_ordering(groups, [&](const std::vector<std::vector<uint8_t>>& lists) {
                Layout l = Layout::replicated(rank);
                for (size_t d = 0; d < rank; ++d) l.dims[d] = to_axis_list(lists[d]);
                Layout la = l, lb = l, lr = l;
                la.partial = pa;
                lb.partial = pb;
                lr.partial = pa | pb;
                out.push_back({{tx.id(la), tx.id(lb)}, tx.id(lr)});
            });
        });
        break;
    }
    case Kind::Contract: {
        // Each axis: unused, splitting one index (the same axes, in the same order, in
        // every operand that has the index), or pending in exactly one operand. A split
        // index that is summed gives a pending sum over its axes; operand pending sums
        // carry over (the contraction is linear in each operand).
        std::string lhs = op.spec.substr(0, op.spec.find("->"));
        std::string rhs = op.spec.substr(op.spec.find("->") + 2);
        std::string in0 = lhs.substr(0, lhs.find(','));
        std::string in1 = lhs.substr(lhs.find(',') + 1);
        std::string letters;
        for (char c : in0 + in1) {
            if (letters.find(c) == std::string::npos) letters += c;
        }
        size_t n_idx = letters.size();
        const LayoutTable& t1 = t.by_rank[in1.size()];
        const LayoutTable& tr = t.by_rank[rhs.size()];
        for_each_role(n_axes, n_idx + 3, [&](const std::vector<size_t>& roles) {
            std::vector<std::vector<uint8_t>> groups(n_idx);
            AxisSet p0 = 0, p1 = 0;
            for (size_t a = 0; a < n_axes; ++a) {
                if (roles[a] == 1) p0 |= ir::axis_bit(a);
                if (roles[a] == 2) p1 |= ir::axis_bit(a);
                if (roles[a] >= 3) groups[roles[a] - 3].push_back(static_cast<uint8_t>(a));
            }
            for_each_ordering(groups, [&](const std::vector<std::vector<uint8_t>>& lists) {
                auto layout_of = [&](const std::string& idx, AxisSet partial) {
                    Layout l = Layout::replicated(idx.size());
                    for (size_t d = 0; d < idx.size(); ++d) l.dims[d] = to_axis_list(lists[letters.find(idx[d])]);
                    l.partial = partial;
                    return l;
                };
                AxisSet summed = 0;
                for (size_t i = 0; i < n_idx; ++i) {
                    if (rhs.find(letters[i]) != std::string::npos) continue;
                    for (uint8_t a : lists[i]) summed |= ir::axis_bit(a);
                }
                out.push_back({{tx.id(layout_of(in0, p0)), t1.id(layout_of(in1, p1))},
                               tr.id(layout_of(rhs, p0 | p1 | summed))});
            });
        });
        break;
    }
    case Kind::Reduce: {
        // Each device reduces its piece: the reduced dims' axes become pending (mean
        // divides by the global count, so it is linear too); the rest keep their splits.
        size_t rank = x.shape.size();
        std::vector<bool> reduced(rank, op.ints.empty());
        for (int d : op.ints) reduced[d] = true;
        size_t out_rank = static_cast<size_t>(std::count(reduced.begin(), reduced.end(), false));
        const LayoutTable& tr = t.by_rank[out_rank];
        for (size_t i = 0; i < tx.layouts.size(); ++i) {
            const Layout& l = tx.layouts[i];
            Layout r = Layout::replicated(out_rank);
            r.partial = l.partial;
            size_t k = 0;
            for (size_t d = 0; d < rank; ++d) {
                if (reduced[d]) r.partial |= list_axes(l.dims[d]);
                else r.dims[k++] = l.dims[d];
            }
            out.push_back({{static_cast<int>(i)}, tr.id(r)});
        }
        break;
    }
    case Kind::Transpose: {
        for (size_t i = 0; i < tx.layouts.size(); ++i) {
            const Layout& l = tx.layouts[i];
            Layout r = l;
            for (size_t d = 0; d < op.ints.size(); ++d) r.dims[d] = l.dims[op.ints[d]];
            out.push_back({{static_cast<int>(i)}, tx.id(r)});
        }
        break;
    }
    case Kind::Return: out.push_back({{p.output_layout}, -1}); break;
    }
    for (const Strategy& s : out) {
        bool bad = s.result < 0 && op.kind != Kind::Return;
        for (int id : s.operands) bad = bad || id < 0;
        if (bad) throw std::logic_error("a strategy's layout is not in the table");
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// The exhaustive search: a dynamic program over the ops in order. A state is, for each
// value still to be used, the layout it was made in and the layouts it has already been
// converted to (the checker converts a value to a layout once; a second use of the same
// conversion is free). Minimal cost per state; back pointers for the plan.
struct Coercion {
    int value;
    int from, to;  // layout ids
    double cost;
};

struct PlanStep {
    std::vector<int> operand_layouts;
    int result_layout = -1;
    std::vector<Coercion> coercions;  // paid at this op
};

struct Reference {
    bool ok = false;        // false: the search was too big
    size_t max_states = 0;
    double cost = kInf;
    std::vector<PlanStep> steps;  // per op
};

struct CostCache {
    const Program* p;
    const Tables* t;
    bool new_pending = true;  // false: no conversion may add pending axes (make_partial)
    std::vector<std::unordered_map<uint64_t, double>> memo;
    double operator()(int value, int from, int to) {
        auto& m = memo[value];
        uint64_t key = (static_cast<uint64_t>(from) << 32) | static_cast<uint32_t>(to);
        auto it = m.find(key);
        if (it != m.end()) return it->second;
        const Value& v = p->values[value];
        const LayoutTable& tab = t->by_rank[v.shape.size()];
        ir::TensorType type;
        type.shape = v.shape;
        type.mesh = 0;
        type.layout = tab.layouts[from];
        double c = ir::reshard_cost(type, tab.layouts[to], p->mesh);
        if (!new_pending && (tab.layouts[to].partial & ~tab.layouts[from].partial)) c = kInf;
        m.emplace(key, c);
        return c;
    }
};

struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const {
        uint64_t h = 1469598103934665603ull;
        for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
        return static_cast<size_t>(h);
    }
};

// State encoding: for each live value in increasing id: value, layout, count, paid...
struct LiveValue {
    int value;
    int layout;
    std::vector<int32_t> paid;
};

std::vector<LiveValue> decode(const std::vector<int32_t>& key) {
    std::vector<LiveValue> out;
    for (size_t i = 0; i < key.size();) {
        LiveValue v{key[i], key[i + 1], {}};
        int32_t n = key[i + 2];
        v.paid.assign(key.begin() + static_cast<long>(i) + 3, key.begin() + static_cast<long>(i) + 3 + n);
        out.push_back(std::move(v));
        i += 3 + static_cast<size_t>(n);
    }
    return out;
}

std::vector<int32_t> encode(const std::vector<LiveValue>& live) {
    std::vector<int32_t> key;
    for (const LiveValue& v : live) {
        key.push_back(v.value);
        key.push_back(v.layout);
        key.push_back(static_cast<int32_t>(v.paid.size()));
        key.insert(key.end(), v.paid.begin(), v.paid.end());
    }
    return key;
}

Reference search(const Program& p, const Tables& t, size_t transition_limit, bool new_pending = true,
                 const std::vector<int>* fixed_results = nullptr) {
    Reference ref;
    size_t transitions = 0;
    CostCache cost{&p, &t, new_pending, std::vector<std::unordered_map<uint64_t, double>>(p.values.size())};
    struct Entry {
        std::vector<int32_t> key;
        double cost;
        int parent;
        int strategy;
    };
    std::vector<std::vector<Entry>> layers(p.ops.size() + 1);
    // Remaining uses of each value after op j: computed on the fly from the op list.
    std::vector<std::vector<int>> remaining(p.ops.size() + 1, std::vector<int>(p.values.size(), 0));
    for (size_t v = 0; v < p.values.size(); ++v) remaining[0][v] = p.values[v].uses;
    for (size_t j = 0; j < p.ops.size(); ++j) {
        remaining[j + 1] = remaining[j];
        for (int o : p.ops[j].operands) --remaining[j + 1][o];
    }
    std::vector<LiveValue> init;
    for (size_t v = 0; v < p.n_inputs; ++v) {
        if (p.values[v].uses > 0) init.push_back({static_cast<int>(v), p.values[v].fixed, {}});
    }
    layers[0].push_back({encode(init), 0.0, -1, -1});
    std::vector<std::vector<Strategy>> strats(p.ops.size());
    for (size_t j = 0; j < p.ops.size(); ++j) {
        const OpSpec& op = p.ops[j];
        strats[j] = strategies(p, t, op);
        std::unordered_map<std::vector<int32_t>, int, VecHash> seen;
        std::vector<Entry>& next = layers[j + 1];
        for (size_t e = 0; e < layers[j].size(); ++e) {
            transitions += strats[j].size();
            if (transitions > transition_limit) return ref;
            std::vector<LiveValue> live = decode(layers[j][e].key);
            double base = layers[j][e].cost;
            for (size_t s = 0; s < strats[j].size(); ++s) {
                const Strategy& st = strats[j][s];
                if (fixed_results && op.result >= 0 && (*fixed_results)[j] >= 0 && st.result != (*fixed_results)[j]) continue;
                std::vector<LiveValue> n = live;
                double c = base;
                for (size_t i = 0; i < op.operands.size() && c < kInf; ++i) {
                    int v = op.operands[i];
                    auto it = std::find_if(n.begin(), n.end(), [&](const LiveValue& l) { return l.value == v; });
                    if (it == n.end()) throw std::logic_error("an operand is not live");
                    int to = st.operands[i];
                    if (to == it->layout || std::find(it->paid.begin(), it->paid.end(), to) != it->paid.end()) continue;
                    // From the layout it was made in or from one it was already
                    // converted to (the checker converts a converted value further).
                    double best = cost(v, it->layout, to);
                    for (int from : it->paid) best = std::min(best, cost(v, from, to));
                    c += best;
                    it->paid.insert(std::lower_bound(it->paid.begin(), it->paid.end(), to), to);
                }
                if (!(c < kInf)) continue;
                // Drop values with no use left; add the result.
                std::vector<LiveValue> m;
                for (LiveValue& l : n) {
                    if (remaining[j + 1][l.value] > 0) m.push_back(std::move(l));
                }
                if (op.result >= 0 && remaining[j + 1][op.result] > 0) m.push_back({op.result, st.result, {}});
                std::vector<int32_t> key = encode(m);
                auto [it, fresh] = seen.emplace(key, static_cast<int>(next.size()));
                if (fresh) {
                    next.push_back({std::move(key), c, static_cast<int>(e), static_cast<int>(s)});
                } else if (c < next[it->second].cost) {
                    next[it->second].cost = c;
                    next[it->second].parent = static_cast<int>(e);
                    next[it->second].strategy = static_cast<int>(s);
                }
            }
        }
        ref.max_states = std::max(ref.max_states, next.size());
    }
    // The last layer has one state (nothing live).
    const std::vector<Entry>& last = layers.back();
    int best = -1;
    for (size_t e = 0; e < last.size(); ++e) {
        if (best < 0 || last[e].cost < last[static_cast<size_t>(best)].cost) best = static_cast<int>(e);
    }
    if (best < 0) return ref;
    ref.ok = true;
    ref.cost = last[static_cast<size_t>(best)].cost;
    // Walk back for the strategy of each op, then replay to list the coercions.
    std::vector<int> chosen(p.ops.size());
    for (size_t j = p.ops.size(), e = static_cast<size_t>(best); j > 0; --j) {
        chosen[j - 1] = layers[j][e].strategy;
        e = static_cast<size_t>(layers[j][e].parent);
    }
    std::vector<int> made(p.values.size(), -1);
    std::vector<std::vector<int>> paid(p.values.size());
    for (size_t v = 0; v < p.n_inputs; ++v) made[v] = p.values[v].fixed;
    for (size_t j = 0; j < p.ops.size(); ++j) {
        const Strategy& st = strats[j][static_cast<size_t>(chosen[j])];
        PlanStep step{st.operands, st.result, {}};
        for (size_t i = 0; i < p.ops[j].operands.size(); ++i) {
            int v = p.ops[j].operands[i];
            int to = st.operands[i];
            if (to == made[v] || std::find(paid[v].begin(), paid[v].end(), to) != paid[v].end()) continue;
            int from = made[v];
            for (int f : paid[v]) {
                if (cost(v, f, to) < cost(v, from, to)) from = f;
            }
            paid[v].push_back(to);
            step.coercions.push_back({v, from, to, cost(v, from, to)});
        }
        if (p.ops[j].result >= 0) made[p.ops[j].result] = st.result;
        ref.steps.push_back(std::move(step));
    }
    return ref;
}

// ---------------------------------------------------------------------------------------
// Generation.
const char* const kTemplates2[] = {"ij,jk->ik", "ij,kj->ik", "ji,jk->ik", "ij,jk->ki", "ij,ij->i", "ij,ik->jk", "ij,j->i"};
const char* const kTemplates3[] = {"bij,bjk->bik", "ijk,kl->ijl", "bij,bj->bi"};
const char* const kTemplates1[] = {"i,ij->j", "i,i->"};

int random_layout(Rng& rng, const LayoutTable& t, int partial_percent) {
    for (int tries = 0;; ++tries) {
        int id = static_cast<int>(rng.below(t.layouts.size()));
        if (!t.layouts[static_cast<size_t>(id)].partial || tries >= 8 || rng.chance(partial_percent)) return id;
    }
}

Program generate(Rng& rng, const Tables*& tables_out, std::map<size_t, Tables>& tables_by_axes) {
    Program p;
    size_t n_axes = 1 + rng.below(3);
    int64_t product = 1;
    const char* names[] = {"a", "b", "c"};
    for (size_t a = 0; a < n_axes; ++a) {
        ir::MeshAxis axis;
        axis.name = names[a];
        axis.size = 2 + static_cast<int64_t>(rng.below(2));
        int link = static_cast<int>(rng.below(4));
        if (kLinks[link].latency) {
            axis.latency = std::strtod(kLinks[link].latency, nullptr);
            axis.bandwidth = std::strtod(kLinks[link].bandwidth, nullptr);
        }
        product *= axis.size;
        p.mesh.axes.push_back(axis);
        p.links.push_back(link);
    }
    p.mesh.name = "M";
    auto [it, fresh] = tables_by_axes.try_emplace(n_axes);
    if (fresh) {
        for (size_t r = 0; r <= 3; ++r) it->second.by_rank.push_back(make_table(r, n_axes));
    }
    const Tables& t = it->second;
    tables_out = &t;
    const int64_t scales[] = {1, 2, 4, 16, 64};
    int64_t scale_cap = 5;
    auto size = [&] { return product * scales[rng.below(static_cast<size_t>(scale_cap))]; };

    std::vector<int> inputs_pending;
    auto new_input = [&](std::vector<int64_t> shape) {
        Value v;
        v.shape = std::move(shape);
        v.fixed = random_layout(rng, t.by_rank[v.shape.size()], 25);
        p.values.push_back(v);
        return static_cast<int>(p.values.size() - 1);
    };
    // Inputs are created as needed; to keep them first in the parameter list, values are
    // renumbered at the end.
    std::vector<bool> is_input;
    auto add_input = [&](std::vector<int64_t> shape) {
        int id = new_input(std::move(shape));
        is_input.push_back(true);
        return id;
    };
    {
        size_t rank = 1 + rng.below(3);
        std::vector<int64_t> shape;
        for (size_t d = 0; d < rank; ++d) shape.push_back(size());
        add_input(shape);
    }
    size_t n_ops = 1 + rng.below(6);
    for (size_t j = 0; j < n_ops; ++j) {
        // The main operand: the latest value most of the time.
        int x = rng.chance(65) ? static_cast<int>(p.values.size() - 1) : static_cast<int>(rng.below(p.values.size()));
        const std::vector<int64_t> xs = p.values[static_cast<size_t>(x)].shape;
        size_t rank = xs.size();
        auto partner = [&](const std::vector<int64_t>& shape) {
            std::vector<int> same;
            for (size_t v = 0; v < p.values.size(); ++v) {
                if (p.values[v].shape == shape) same.push_back(static_cast<int>(v));
            }
            if (!same.empty() && rng.chance(50)) return same[rng.below(same.size())];
            return add_input(shape);
        };
        OpSpec op;
        op.operands = {x};
        size_t pick = rng.below(100);
        if (rank == 0) pick = pick < 50 ? 0 : 95;  // scalars: element-wise only
        if (pick < 12) {
            op.kind = rng.chance(40) ? Kind::Tanh : rng.chance(50) ? Kind::Scale : Kind::Shift;
        } else if (pick < 40 || rank == 0) {
            op.kind = rng.chance(40) ? Kind::Add : rng.chance(50) ? Kind::Mul : Kind::Sub;
            op.operands.push_back(partner(xs));
        } else if (pick < 75) {
            op.kind = Kind::Contract;
            std::vector<const char*> choices;
            if (rank == 1) choices.assign(std::begin(kTemplates1), std::end(kTemplates1));
            if (rank == 2) choices.assign(std::begin(kTemplates2), std::end(kTemplates2));
            if (rank == 3) choices.assign(std::begin(kTemplates3), std::end(kTemplates3));
            op.spec = choices[rng.below(choices.size())];
            std::string in0 = op.spec.substr(0, op.spec.find(','));
            std::string in1 = op.spec.substr(op.spec.find(',') + 1, op.spec.find("->") - op.spec.find(',') - 1);
            std::map<char, int64_t> sizes;
            for (size_t d = 0; d < in0.size(); ++d) sizes[in0[d]] = xs[d];
            std::vector<int64_t> ys;
            for (char c : in1) {
                if (!sizes.count(c)) sizes[c] = size();
                ys.push_back(sizes[c]);
            }
            op.matmul = op.spec == std::string("ij,jk->ik") && rng.chance(50);
            op.operands.push_back(partner(ys));
        } else if (pick < 90) {
            op.kind = Kind::Reduce;
            op.mean = rng.chance(30);
            if (rank == 1 || rng.chance(20)) {
                // all dims
            } else {
                op.ints = {static_cast<int>(rng.below(rank))};
            }
        } else {
            if (rank < 2) {
                op.kind = Kind::Scale;
            } else {
                op.kind = Kind::Transpose;
                std::vector<int> perm(rank);
                for (size_t d = 0; d < rank; ++d) perm[d] = static_cast<int>(d);
                do {
                    std::shuffle(perm.begin(), perm.end(), rng.g);
                } while (std::is_sorted(perm.begin(), perm.end()));
                op.ints = perm;
            }
        }
        // The result's shape.
        std::vector<int64_t> rs;
        if (op.kind == Kind::Contract) {
            std::string lhs = op.spec.substr(0, op.spec.find("->"));
            std::string out = op.spec.substr(op.spec.find("->") + 2);
            std::string in0 = lhs.substr(0, lhs.find(','));
            std::string in1 = lhs.substr(lhs.find(',') + 1);
            const auto& ys = p.values[static_cast<size_t>(op.operands[1])].shape;
            for (char c : out) {
                size_t i = in0.find(c);
                rs.push_back(i != std::string::npos ? xs[i] : ys[in1.find(c)]);
            }
        } else if (op.kind == Kind::Reduce) {
            for (size_t d = 0; d < rank; ++d) {
                if (!op.ints.empty() && static_cast<int>(d) != op.ints[0]) rs.push_back(xs[d]);
            }
        } else if (op.kind == Kind::Transpose) {
            for (int d : op.ints) rs.push_back(xs[static_cast<size_t>(d)]);
        } else {
            rs = xs;
        }
        Value r;
        r.shape = rs;
        p.values.push_back(r);
        is_input.push_back(false);
        op.result = static_cast<int>(p.values.size() - 1);
        p.ops.push_back(op);
    }
    // Renumber: inputs first.
    std::vector<int> order, renum(p.values.size());
    for (size_t v = 0; v < p.values.size(); ++v) {
        if (is_input[v]) order.push_back(static_cast<int>(v));
    }
    p.n_inputs = order.size();
    for (size_t v = 0; v < p.values.size(); ++v) {
        if (!is_input[v]) order.push_back(static_cast<int>(v));
    }
    std::vector<Value> values;
    for (size_t i = 0; i < order.size(); ++i) {
        renum[static_cast<size_t>(order[i])] = static_cast<int>(i);
        values.push_back(p.values[static_cast<size_t>(order[i])]);
    }
    p.values = values;
    for (OpSpec& op : p.ops) {
        for (int& o : op.operands) o = renum[static_cast<size_t>(o)];
        op.result = renum[static_cast<size_t>(op.result)];
    }
    for (size_t v = 0; v < p.values.size(); ++v) {
        p.values[v].name = v < p.n_inputs ? fmt::format("p{}", v) : fmt::format("t{}", v - p.n_inputs + 1);
    }
    int out = p.ops.back().result;
    p.output_layout = random_layout(rng, t.by_rank[p.values[static_cast<size_t>(out)].shape.size()], 20);
    OpSpec ret;
    ret.kind = Kind::Return;
    ret.operands = {out};
    p.ops.push_back(ret);
    for (const OpSpec& op : p.ops) {
        for (int o : op.operands) ++p.values[static_cast<size_t>(o)].uses;
    }
    return p;
}

const Layout& layout_of(const Tables& t, const Program& p, int value, int id) {
    return t.by_rank[p.values[static_cast<size_t>(value)].shape.size()].layouts[static_cast<size_t>(id)];
}

std::string source(const Program& p, const Tables& t) {
    std::string s = mesh_text(p);
    s += "fn f(";
    for (size_t v = 0; v < p.n_inputs; ++v) {
        if (v) s += ", ";
        s += fmt::format("{}: {}", p.values[v].name, type_text(p, p.values[v].shape, layout_of(t, p, static_cast<int>(v), p.values[v].fixed)));
    }
    int out = p.ops.back().operands[0];
    s += fmt::format(") -> {} {{\n", type_text(p, p.values[static_cast<size_t>(out)].shape, layout_of(t, p, out, p.output_layout)));
    for (size_t j = 0; j + 1 < p.ops.size(); ++j) {
        std::vector<std::string> names;
        for (int o : p.ops[j].operands) names.push_back(p.values[static_cast<size_t>(o)].name);
        s += fmt::format("    let {} = {};\n", p.values[static_cast<size_t>(p.ops[j].result)].name, expr_text(p.ops[j], names));
    }
    s += fmt::format("    {}\n}}\n", p.values[static_cast<size_t>(out)].name);
    return s;
}

/// The cheaper plan written as Mesh source: every coercion an annotated `let`, every
/// result annotated with the layout the plan gives it.
std::string plan_source(const Program& p, const Tables& t, const Reference& ref) {
    std::string s = mesh_text(p);
    s += "fn f(";
    for (size_t v = 0; v < p.n_inputs; ++v) {
        if (v) s += ", ";
        s += fmt::format("{}: {}", p.values[v].name, type_text(p, p.values[v].shape, layout_of(t, p, static_cast<int>(v), p.values[v].fixed)));
    }
    int out = p.ops.back().operands[0];
    s += fmt::format(") -> {} {{\n", type_text(p, p.values[static_cast<size_t>(out)].shape, layout_of(t, p, out, p.output_layout)));
    std::map<std::pair<int, int>, std::string> converted;
    std::vector<int> made(p.values.size(), -1);
    for (size_t v = 0; v < p.n_inputs; ++v) made[v] = p.values[v].fixed;
    int counter = 0;
    auto name_of = [&](int v, int layout) {
        const Value& val = p.values[static_cast<size_t>(v)];
        return layout == made[static_cast<size_t>(v)] ? val.name : converted.at({v, layout});
    };
    for (size_t j = 0; j < p.ops.size(); ++j) {
        const OpSpec& op = p.ops[j];
        const PlanStep& step = ref.steps[j];
        // The conversions, each from the copy the plan converts (a value already
        // converted may be converted further).
        for (const Coercion& c : step.coercions) {
            const Value& val = p.values[static_cast<size_t>(c.value)];
            if (op.kind == Kind::Return && c.from == made[static_cast<size_t>(c.value)]) continue;  // the result type's
            std::string n = fmt::format("{}_c{}", val.name, ++counter);
            s += fmt::format("    let {}: {} = {};\n", n, type_text(p, val.shape, layout_of(t, p, c.value, c.to)), name_of(c.value, c.from));
            converted[{c.value, c.to}] = n;
        }
        if (op.kind == Kind::Return) {
            int v = op.operands[0];
            int to = step.operand_layouts[0];
            s += fmt::format("    {}\n}}\n", converted.count({v, to}) ? converted.at({v, to}) : p.values[static_cast<size_t>(v)].name);
            break;
        }
        std::vector<std::string> names;
        for (size_t i = 0; i < op.operands.size(); ++i) names.push_back(name_of(op.operands[i], step.operand_layouts[i]));
        const Value& r = p.values[static_cast<size_t>(op.result)];
        made[static_cast<size_t>(op.result)] = step.result_layout;
        s += fmt::format("    let {}: {} = {};\n", r.name, type_text(p, r.shape, layout_of(t, p, op.result, step.result_layout)), expr_text(op, names));
    }
    return s;
}

std::string plan_text(const Program& p, const Tables& t, const Reference& ref) {
    std::string s;
    for (size_t j = 0; j < p.ops.size(); ++j) {
        const OpSpec& op = p.ops[j];
        const PlanStep& step = ref.steps[j];
        for (const Coercion& c : step.coercions) {
            const Value& v = p.values[static_cast<size_t>(c.value)];
            Layout from = layout_of(t, p, c.value, c.from), to = layout_of(t, p, c.value, c.to);
            std::string how;
            for (const ir::ReshardStep& st : ir::plan_reshard(from, to)) {
                if (!ir::communicates(st.kind)) continue;
                how += fmt::format("{}{}({})", how.empty() ? "" : " + ", ir::op_name(st.kind), p.mesh.axis_names(st.axes));
            }
            s += fmt::format("  {} {} -> {}: {} = {:.6g} s\n", v.name, ir::layout_to_string(from, p.mesh),
                             ir::layout_to_string(to, p.mesh), how.empty() ? "free" : how, c.cost);
        }
        if (op.kind != Kind::Return) {
            s += fmt::format("  {} made {}\n", p.values[static_cast<size_t>(op.result)].name,
                             ir::layout_to_string(layout_of(t, p, op.result, step.result_layout), p.mesh));
        }
    }
    return s;
}

// ---------------------------------------------------------------------------------------
// The checker.
struct CheckerPlan {
    bool ok = false;
    std::string errors;
    double cost = 0;
    std::string text;  // its collectives
    std::map<std::string, Layout> layouts;  // of the values `let` names
};

CheckerPlan run_checker(const std::string& text) {
    CheckerPlan out;
    SourceManager sm;
    DiagnosticEngine diags;
    FileId file = sm.add_file("t.msh", text);
    sema::Program program;
    program.modules.push_back(syntax::parse_file(sm, file, diags));
    sema::resolve_program(sm, program, diags);
    ir::Module gir;
    // MESHC_PLAN_SEARCH=N: the checker's --plan-search (0: the local plans, for the
    // figures before the whole-function search).
    sema::InferOptions options;
    if (const char* v = std::getenv("MESHC_PLAN_SEARCH"); v && *v) options.plan_search = std::atoi(v);
    // The exhaustive search here costs communication only, so the checker's plan search
    // is given a device whose compute costs nothing: both then minimise the same thing.
    // (Compute costs are tested against hand counts in tests/lit/explain/compute_cost.msh.)
    for (double* rate : {&options.device.matmul_f64, &options.device.matmul_f32, &options.device.matmul_f16,
                         &options.device.matmul_int, &options.device.vector_flops, &options.device.memory_bandwidth}) {
        *rate = std::numeric_limits<double>::infinity();
    }
    if (!diags.has_errors()) gir = sema::infer_program(sm, program, diags, options);
    for (const Diagnostic& d : diags.diagnostics()) {
        out.errors += fmt::format("{} {}\n", diag_code_info(d.code).name, d.message);
    }
    if (diags.has_errors()) return out;
    for (const ir::Function& f : gir.functions) {
        if (f.name != "f") continue;
        out.ok = true;
        for (size_t v = 0; v < f.names.size(); ++v) {
            if (!f.names[v].empty()) out.layouts[f.names[v]] = f.types[v].layout;
        }
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            auto info = sema::collective_info(gir, f, op);
            if (!info) return;
            out.cost += info->cost.seconds;
            const ir::TensorType& in = f.types[op.operands[0]];
            const ir::TensorType& res = f.types[op.results[0]];
            const ir::Mesh& mesh = gir.meshes[static_cast<size_t>(in.mesh)];
            std::string name = f.names[op.operands[0]].empty() ? fmt::format("%{}", op.operands[0]) : f.names[op.operands[0]];
            out.text += fmt::format("  line {}: {}({}) of {} {} -> {} = {:.6g} s{}\n",
                                    sm.line_col(op.span.file, op.span.begin).line, ir::op_name(op.kind),
                                    mesh.axis_names(op.axes), name, ir::layout_to_string(in.layout, mesh),
                                    ir::layout_to_string(res.layout, mesh), info->cost.seconds,
                                    op.reason.empty() ? "" : " (" + op.reason + ")");
        });
    }
    return out;
}

size_t env_size(const char* name, size_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : fallback;
}

struct Example {
    size_t index;
    std::string cls;
    size_t ops;
    std::string text;
    double checker;
    double best;
    std::string checker_plan;
    std::string best_plan;
    std::string best_source;
    double best_source_cost;
};

}  // namespace

TEST_CASE("the checker's plan is the cheapest on small straight-line programs", "[plan-optimality]") {
    // The default run and its ceiling: not minimal on at most this many of its programs
    // (the planner's known gaps; lower it when the planner improves).
    constexpr size_t kDefaultPrograms = 150;
    constexpr uint64_t kDefaultSeed = 1;
    constexpr size_t kCeilingNotMinimal = 59;  // of 142 checked (seed 1): 100 before stop 10, 99 after it, 97 after multi-axis all_to_all moves and gathering both contraction operands, 82 with shortest-path coercions, 59 with the whole-function plan search
    const bool custom = std::getenv("MESHC_PLAN_PROGRAMS") || std::getenv("MESHC_PLAN_SEED");
    size_t programs = env_size("MESHC_PLAN_PROGRAMS", kDefaultPrograms);
    uint64_t seed = env_size("MESHC_PLAN_SEED", kDefaultSeed);
    size_t show = env_size("MESHC_PLAN_SHOW", 1);
    const char* out_dir = std::getenv("MESHC_PLAN_OUT");
    const bool verbose = std::getenv("MESHC_PLAN_VERBOSE") != nullptr;
    // Programs whose search would take more op-strategy steps than this are skipped
    // (counted as too big): a few with many values live at once.
    const size_t transition_limit = env_size("MESHC_PLAN_LIMIT", 2000000);

    Rng rng(seed);
    std::map<size_t, Tables> tables;
    size_t free_but_paid = 0, checked = 0, skipped = 0, rejected = 0, not_minimal = 0, cheaper_than_search = 0, plan_confirmed = 0;
    double worst_ratio = 1;
    std::string worst_text, first_rejected, first_cheaper;
    std::vector<Example> examples;
    std::map<std::string, size_t> classes;
    for (size_t i = 0; i < programs; ++i) {
        const Tables* t = nullptr;
        Program p = generate(rng, t, tables);
        std::string text = source(p, *t);
        auto started = std::chrono::steady_clock::now();
        Reference ref = search(p, *t, transition_limit);
        if (verbose) {
            fmt::print("program {}: {} ops, {} axes, {:.3f} s, max states {}\n", i, p.ops.size() - 1, p.mesh.axes.size(),
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), ref.max_states);
        }
        if (!ref.ok) {
            ++skipped;
            continue;
        }
        CheckerPlan chk = run_checker(text);
        if (!chk.ok) {
            ++rejected;
            if (first_rejected.empty()) first_rejected = text + chk.errors;
            continue;
        }
        ++checked;
        double tol = 1e-9 * std::max(ref.cost, chk.cost) + 1e-15;
        if (chk.cost < ref.cost - tol) {
            ++cheaper_than_search;
            if (first_cheaper.empty()) {
                first_cheaper = fmt::format("{}checker {:.6g} s:\n{}search {:.6g} s:\n{}", text, chk.cost, chk.text, ref.cost,
                                            plan_text(p, *t, ref));
            }
            continue;
        }
        if (chk.cost <= ref.cost + tol) continue;
        ++not_minimal;
        double ratio = ref.cost > 0 ? chk.cost / ref.cost : kInf;
        if (ref.cost <= 0) ++free_but_paid;
        if (ratio > worst_ratio && ratio < kInf) {
            worst_ratio = ratio;
            worst_text = text;
        }
        // Class: is the checker minimal when no value may be made pending to save a
        // gather (the pending-sum detour)?
        Reference strict = search(p, *t, transition_limit, false);
        std::string cls = "layout-choice";
        if (strict.ok && chk.cost <= strict.cost + tol) {
            cls = "pending-detour";
        } else {
            // Every value in the layout the checker made it in: do its conversions alone
            // cost less?
            std::vector<int> fixed(p.ops.size(), -1);
            for (size_t j = 0; j + 1 < p.ops.size(); ++j) {
                const Value& r = p.values[static_cast<size_t>(p.ops[j].result)];
                auto it = chk.layouts.find(r.name);
                if (it != chk.layouts.end()) fixed[j] = t->by_rank[r.shape.size()].id(it->second);
            }
            Reference same = search(p, *t, transition_limit, true, &fixed);
            if (same.ok && same.cost < chk.cost - tol) cls = "conversions";
            // (A class "coercion-path", a conversion cheaper through a third layout, is
            // gone: coercions are shortest paths, which the next test checks.)
        }
        ++classes[cls];
        std::string best_source = plan_source(p, *t, ref);
        CheckerPlan confirm = run_checker(best_source);
        double confirm_cost = confirm.ok ? confirm.cost : kInf;
        if (confirm.ok && std::abs(confirm.cost - ref.cost) <= tol) ++plan_confirmed;
        examples.push_back({i, cls, p.ops.size() - 1, text, chk.cost, ref.cost, chk.text, plan_text(p, *t, ref), best_source,
                            confirm_cost});
    }
    std::sort(examples.begin(), examples.end(), [](const Example& a, const Example& b) {
        return std::make_pair(a.ops, a.text.size()) < std::make_pair(b.ops, b.text.size());
    });
    std::string summary = fmt::format(
        "plan optimality, seed {}: {} programs generated, {} checked, {} not minimal ({:.1f}%), worst ratio {:.4g} "
        "(and {} where a plan with no communication exists); "
        "{} rejected by the checker, {} too big to search, {} where the checker beat the search; "
        "{} of the cheaper plans, written as annotated source, check at the searched cost\n",
        seed, programs, checked, not_minimal, checked ? 100.0 * static_cast<double>(not_minimal) / static_cast<double>(checked) : 0.0,
        worst_ratio, free_but_paid, rejected, skipped, cheaper_than_search, plan_confirmed);
    for (const auto& [cls, n] : classes) summary += fmt::format("  class {}: {} programs\n", cls, n);
    std::string report = summary;
    for (size_t e = 0; e < examples.size() && e < show; ++e) {
        const Example& x = examples[e];
        report += fmt::format(
            "--- program {} ({}, {} ops): checker {:.6g} s, cheapest {:.6g} s (ratio {:.4g})\n{}checker's collectives:\n{}"
            "cheapest plan:\n{}cheapest plan as source (checks at {:.6g} s):\n{}",
            x.index, x.cls, x.ops, x.checker, x.best, x.best > 0 ? x.checker / x.best : kInf, x.text, x.checker_plan, x.best_plan,
            x.best_source_cost, x.best_source);
    }
    if (!first_rejected.empty()) report += "--- first program the checker rejected:\n" + first_rejected;
    if (!first_cheaper.empty()) report += "--- first program where the checker beat the search:\n" + first_cheaper;
    WARN(report);
    if (out_dir) {
        std::filesystem::create_directories(out_dir);
        std::ofstream(std::filesystem::path(out_dir) / "summary.txt") << report;
        for (const Example& x : examples) {
            std::ofstream f(std::filesystem::path(out_dir) / fmt::format("{}-{:05}.msh", x.cls, x.index));
            f << fmt::format("// class {}, {} ops\n// checker {:.6g} s, cheapest {:.6g} s\n// checker's collectives:\n", x.cls, x.ops, x.checker, x.best);
            std::istringstream cp(x.checker_plan + "cheapest plan:\n" + x.best_plan);
            for (std::string line; std::getline(cp, line);) f << "//" << line << "\n";
            f << x.text << fmt::format("\n// the cheapest plan, annotated (the checker charges it {:.6g} s):\n", x.best_source_cost);
            std::istringstream bs(x.best_source);
            for (std::string line; std::getline(bs, line);) f << "// " << line << "\n";
        }
    }
    // The search is exhaustive over the rules above: the checker beating it means a rule
    // missing here or a plan the checker should not have made.
    CHECK(cheaper_than_search == 0);
    CHECK(rejected == 0);
    if (!custom) {
        CHECK(checked + skipped + rejected == programs);
        CHECK(not_minimal <= kCeilingNotMinimal);
    }
}

// The coercion planner alone: ir::plan_reshard's plan between two layouts against every
// two-step path through a third layout (each step planned by plan_reshard), on a rank-2
// value of a 2-axis and a 3-axis mesh with links of different speeds. Plans are shortest
// paths over single steps (ir/reshard_search.cpp), so no two-step path may be cheaper
// (there were 115 + 5,901 such pairs with the fixed-order plan alone). Completions in
// place (same splits, fewer pending axes) are left out: they stay one all_reduce.
TEST_CASE("coercion plans against two-step paths through a third layout", "[plan-optimality]") {
    struct Case {
        std::vector<ir::MeshAxis> axes;
        std::vector<int64_t> shape;
    };
    std::vector<Case> cases = {
        {{{"a", 2, 5e-6, 1e11}, {"b", 3, 5e-6, 1e11}}, {96, 24}},
        {{{"a", 2, 1e-6, 3e11}, {"b", 3, 2e-5, 1e10}, {"c", 2, 5e-6, 25e9}}, {192, 48}},
    };
    size_t pairs = 0, cheaper = 0;
    std::string report;
    for (const Case& c : cases) {
        ir::Mesh mesh;
        mesh.name = "M";
        mesh.axes = c.axes;
        LayoutTable t = make_table(c.shape.size(), c.axes.size());
        size_t n = t.layouts.size();
        std::vector<double> cost(n * n);
        for (size_t i = 0; i < n; ++i) {
            ir::TensorType type;
            type.shape = c.shape;
            type.mesh = 0;
            type.layout = t.layouts[i];
            for (size_t j = 0; j < n; ++j) cost[i * n + j] = ir::reshard_cost(type, t.layouts[j], mesh);
        }
        size_t here = 0;
        double best_gain = 0;
        std::string best;
        for (size_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < n; ++j) {
                if (i == j) continue;
                // A pending sum completed in place is one all_reduce over the group on
                // purpose (so that the combining pass can merge it): not a shortest path.
                const Layout& li = t.layouts[i];
                const Layout& lj = t.layouts[j];
                if (li.dims == lj.dims && (lj.partial & ~li.partial) == 0) continue;
                ++pairs;
                double direct = cost[i * n + j];
                size_t mid = n;
                double two = direct;
                for (size_t k = 0; k < n; ++k) {
                    double via = cost[i * n + k] + cost[k * n + j];
                    if (via < two - 1e-9 * direct) {
                        two = via;
                        mid = k;
                    }
                }
                if (mid == n) continue;
                ++here;
                double gain = direct / two;
                if (gain > best_gain) {
                    best_gain = gain;
                    best = fmt::format("  {} -> {}: direct {:.6g} s, via {} {:.6g} s ({:.3g}x)\n",
                                       ir::layout_to_string(t.layouts[i], mesh), ir::layout_to_string(t.layouts[j], mesh), direct,
                                       ir::layout_to_string(t.layouts[mid], mesh), two, gain);
                }
            }
        }
        cheaper += here;
        report += fmt::format("mesh of {} axes, shape {}: {} of {} layout pairs have a cheaper two-step path; largest gain:\n{}",
                              c.axes.size(), shape_text(c.shape), here, n * (n - 1), best);
    }
    INFO(report);
    CHECK(pairs > 0);
    CHECK(cheaper == 0);
}

// The checker costs candidate layouts that may not be layouts at all (an axis both
// splitting a dim and pending, from a contraction candidate): the planner must answer
// as the fixed-order plan does (a plan or InternalError), never read past its encoding.
// (A random program crashed meshc with SIGFPE and SIGBUS here before the check.)
TEST_CASE("the coercion planner survives malformed layouts", "[plan-optimality]") {
    ir::Mesh mesh;
    mesh.name = "Box";
    mesh.axes = {{"a", 2, 5e-6, 1e11}, {"b", 3, 5e-6, 1e11}, {"c", 2, 5e-6, 1e11}};
    ir::TensorType type;
    type.shape = {4, 2, 6};
    type.mesh = 0;
    type.layout = Layout::replicated(3);
    type.layout.dims[0] = AxisList{2, 0};  // (c, a)
    type.layout.partial = ir::axis_bit(2); // and c pending too
    Layout to = Layout::replicated(3);
    to.dims[0] = AxisList{2};
    to.partial = ir::axis_bit(0);
    double cost = 0;
    CHECK_NOTHROW(cost = ir::reshard_cost(type, to, mesh));
    CHECK(cost >= 0);
    // An axis index past the mesh.
    type.layout = Layout::replicated(3);
    type.layout.dims[1] = AxisList{7};
    CHECK_NOTHROW(cost = ir::reshard_cost(type, to, mesh));
}

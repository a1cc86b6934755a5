// The cheapest coercion plan under the cost model; see reshard_plan.h.
//
// A shortest path (Dijkstra) over the layouts a value of this shape may take on its mesh.
// An edge is one step the partitioner implements: an all_reduce over some pending axes; a
// reduce_scatter of some pending axes onto the minor end of a dim; an all_gather of a
// dim's minor-most axes; an all_to_all moving a dim's minor-most axes, in their order, to
// the minor end of another; a free local slice by an unused axis; a free make_partial of
// an unused axis or of a dim's minor-most axes (float values only). A make_partial of an
// unused axis is only taken when the target keeps that pending sum (otherwise it would
// have to be reduced again, where the axis could simply stay unused); every other step
// is tried anywhere, since with links of different speeds detours pay (slicing by a fast
// axis so that an all_reduce over a slow one sends less, then gathering). Each edge costs what
// `meshc explain` charges for it (step_cost); ties go to fewer collectives, then fewer
// steps. The fixed-order plan of reshard_plan.cpp is the upper bound: the search returns
// it unless it finds a strictly cheaper one, so plans only change where they improve.
// Paths are memoised per (mesh, dtype, shape, from, to).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>

#include "ir/reshard_plan.h"
#include "support/diagnostics.h"

namespace meshc::ir {

namespace {

/// Beyond this many layouts the search gives up and the fixed-order plan is used (a mesh
/// of 3 axes and a rank-3 value have a few hundred).
constexpr size_t kMaxStates = 20000;
/// Axes and ranks the compact encoding holds: 7 bits per axis in a 64-bit key.
constexpr size_t kMaxSearchAxes = 9;
constexpr size_t kMaxSearchRank = 14;

// A layout as one integer: per axis 7 bits, (role << 3) | position, where role 0 is
// unused, 1 pending and 2 + d splitting dim d at `position` (major first).
using Key = uint64_t;

struct Node {
    Key key = 0;
    double cost = 0;
    int comm = 0;   // collectives on the path
    int steps = 0;  // steps on the path
    int parent = -1;
    OpKind kind = OpKind::AllGather;  // the step from the parent
    AxisSet axes = 0;
    int32_t dim = -1, dim2 = -1;
    bool done = false;
};

bool better(double c1, int m1, int s1, double c2, int m2, int s2) {
    if (c1 != c2) return c1 < c2;
    if (m1 != m2) return m1 < m2;
    return s1 < s2;
}

class Search {
public:
    Search(const TensorType& from, const Mesh& mesh) : type_(from), mesh_(mesh), n_(mesh.axes.size()) {
        float_ = from.dtype == DType::F32 || from.dtype == DType::F16 || from.dtype == DType::BF16 ||
                 from.dtype == DType::F64;
        elem_bytes_ = static_cast<double>(dtype_bytes(from.dtype));
    }

    static bool fits(const TensorType& t, const Mesh& mesh) {
        return mesh.axes.size() <= kMaxSearchAxes && t.rank() <= kMaxSearchRank;
    }

    /// The cheapest path to `target` costing less than `bound`, if there is one.
    std::optional<std::vector<ReshardStep>> run(const Layout& target, double bound) {
        target_partial_ = target.partial;
        Key goal = encode(target);
        target_ = decode(goal);
        add(encode(type_.layout), -1, OpKind::AllGather, 0, -1, -1, 0, 0, 0);
        using Entry = std::tuple<double, int, int, int>;  // cost, comm, steps, node
        std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
        queue.emplace(lower_bound(decode(nodes_[0].key)), 0, 0, 0);
        while (!queue.empty()) {
            auto [estimate, comm, steps, i] = queue.top();
            queue.pop();
            if (nodes_[i].done) continue;
            if (estimate >= bound) return std::nullopt;
            nodes_[i].done = true;
            if (nodes_[i].key == goal) return path(i);
            if (nodes_.size() > kMaxStates) return std::nullopt;
            expand(i, bound, queue);
        }
        return std::nullopt;
    }

private:
    struct State {
        uint8_t role[kMaxSearchAxes] = {};  // 0 unused, 1 pending, 2 + d
        uint8_t pos[kMaxSearchAxes] = {};
        uint8_t len[kMaxSearchRank] = {};   // axes per dim
        int64_t factor[kMaxSearchRank] = {};
    };

    Key encode(const Layout& l) const {
        Key k = 0;
        for (size_t d = 0; d < l.dims.size(); ++d)
            for (size_t p = 0; p < l.dims[d].size(); ++p)
                k |= Key((d + 2) << 3 | p) << (7 * l.dims[d][p]);
        for (size_t a = 0; a < n_; ++a)
            if (l.partial & axis_bit(a)) k |= Key(1 << 3) << (7 * a);
        return k;
    }
    Key encode(const State& s) const {
        Key k = 0;
        for (size_t a = 0; a < n_; ++a) k |= Key(s.role[a] << 3 | s.pos[a]) << (7 * a);
        return k;
    }
    State decode(Key k) const {
        State s;
        for (size_t d = 0; d < type_.rank(); ++d) s.factor[d] = 1;
        for (size_t a = 0; a < n_; ++a) {
            unsigned c = static_cast<unsigned>((k >> (7 * a)) & 0x7f);
            s.role[a] = static_cast<uint8_t>(c >> 3);
            s.pos[a] = static_cast<uint8_t>(c & 7);
            if (s.role[a] >= 2) {
                size_t d = s.role[a] - 2u;
                ++s.len[d];
                s.factor[d] *= mesh_.axes[a].size;
            }
        }
        return s;
    }
    Layout layout(Key k) const {
        State s = decode(k);
        Layout l = Layout::replicated(type_.rank());
        for (size_t d = 0; d < type_.rank(); ++d) {
            uint8_t axes[kMaxSearchAxes];
            int len = dim_axes(s, d, axes);
            l.dims[d] = AxisList(axes, axes + len);
        }
        for (size_t a = 0; a < n_; ++a)
            if (s.role[a] == 1) l.partial |= axis_bit(a);
        return l;
    }
    // A lower bound on the cost from `s` to the target (A*; admissible, and consistent
    // since one step changes it by at most its own cost): an axis that must take part
    // in a collective (pending where the target is not, or split where the target does
    // not keep it in the same place) costs at least (size - 1) latencies of its link,
    // as every collective over a group holding it takes at least that many ring steps.
    double lower_bound(const State& s) const {
        double h = 0;
        for (size_t a = 0; a < n_; ++a) {
            bool needs = false;
            if (s.role[a] == 1) {
                needs = target_.role[a] != 1;
            } else if (s.role[a] >= 2) {
                if (target_.role[a] == 1 || target_.role[a] == 0) {
                    needs = target_.role[a] == 0;
                } else if (target_.role[a] != s.role[a] || target_.pos[a] != s.pos[a]) {
                    needs = true;
                } else {
                    // Same dim and position: in place when the axes before it agree.
                    for (size_t b = 0; b < n_ && !needs; ++b)
                        if (b != a && s.role[b] == s.role[a] && s.pos[b] < s.pos[a])
                            needs = target_.role[b] != s.role[b] || target_.pos[b] != s.pos[b];
                }
            }
            if (needs) h = std::max(h, static_cast<double>(mesh_.axes[a].size - 1) * mesh_.axes[a].latency);
        }
        return h;
    }

    // Per-device bytes of a state (every split applied); false when a split does not divide.
    bool bytes(const State& s, double& out) const {
        double b = elem_bytes_;
        for (size_t d = 0; d < type_.rank(); ++d) {
            if (s.factor[d] > 1 && type_.shape[d] % s.factor[d] != 0) return false;
            b *= static_cast<double>(type_.shape[d] / s.factor[d]);
        }
        out = b;
        return true;
    }
    // The axes of dim d, major first.
    int dim_axes(const State& s, size_t d, uint8_t* out) const {
        int len = s.len[d];
        for (size_t a = 0; a < n_; ++a)
            if (s.role[a] == d + 2) out[s.pos[a]] = static_cast<uint8_t>(a);
        return len;
    }

    int add(Key key, int parent, OpKind kind, AxisSet axes, int32_t dim, int32_t dim2, double cost, int comm, int steps) {
        Node node{key, cost, comm, steps, parent, kind, axes, dim, dim2, false};
        auto [it, fresh] = index_.emplace(key, static_cast<int>(nodes_.size()));
        if (fresh) {
            nodes_.push_back(node);
            return it->second;
        }
        Node& n = nodes_[it->second];
        if (n.done || !better(cost, comm, steps, n.cost, n.comm, n.steps)) return -1;
        n = node;
        return it->second;
    }

    std::vector<ReshardStep> path(int i) {
        std::vector<ReshardStep> out;
        for (; nodes_[i].parent >= 0; i = nodes_[i].parent) {
            const Node& n = nodes_[i];
            out.push_back(ReshardStep{n.kind, n.axes, n.dim, n.dim2, layout(n.key)});
        }
        std::reverse(out.begin(), out.end());
        // Consecutive make_partial steps are one op (a run of minor-end removals is one).
        std::vector<ReshardStep> merged;
        for (ReshardStep& s : out) {
            if (!merged.empty() && s.kind == OpKind::MakePartial && merged.back().kind == OpKind::MakePartial) {
                merged.back().axes |= s.axes;
                merged.back().result = s.result;
            } else {
                merged.push_back(std::move(s));
            }
        }
        return merged;
    }

    template <class Queue>
    void expand(int i, double bound, Queue& queue) {
        const State cur = decode(nodes_[i].key);
        double cur_bytes = 0;
        bytes(cur, cur_bytes);
        const double base = nodes_[i].cost;
        const int base_comm = nodes_[i].comm, base_steps = nodes_[i].steps;
        size_t rank = type_.rank();

        auto emit = [&](const State& next, OpKind kind, AxisSet axes, int32_t dim, int32_t dim2) {
            double next_bytes = 0;
            if (!bytes(next, next_bytes)) return;
            double c = base;
            std::optional<CollectiveKind> ck = collective_kind(kind);
            if (ck) c += collective_cost(*ck, mesh_, axes, kind == OpKind::AllGather ? next_bytes : cur_bytes).seconds;
            double h = lower_bound(next);
            if (c + h >= bound) return;
            int m = base_comm + (ck ? 1 : 0), st = base_steps + 1;
            int j = add(encode(next), i, kind, axes, dim, dim2, c, m, st);
            if (j >= 0) queue.emplace(c + h, m, st, j);
        };
        auto with_factor = [&](State& s, size_t a, int dir) {
            size_t d = s.role[a] - 2u;
            if (dir > 0) s.factor[d] *= mesh_.axes[a].size;
            else s.factor[d] /= mesh_.axes[a].size;
        };

        AxisSet pending = 0;
        for (size_t a = 0; a < n_; ++a)
            if (cur.role[a] == 1) pending |= axis_bit(a);
        // all_reduce over a non-empty subset of the pending axes.
        for (AxisSet sub = pending; sub; sub = (sub - 1) & pending) {
            State next = cur;
            for (size_t a = 0; a < n_; ++a)
                if (sub & axis_bit(a)) next.role[a] = 0;
            emit(next, OpKind::AllReduce, sub, -1, -1);
        }
        // reduce_scatter: an ordered non-empty subset of the pending axes onto a dim.
        if (pending) {
            uint8_t seq[kMaxSearchAxes];
            size_t depth = 0;
            std::function<void(AxisSet)> orders = [&](AxisSet taken) {
                if (depth > 0) {
                    for (size_t d = 0; d < rank; ++d) {
                        State next = cur;
                        for (size_t k = 0; k < depth; ++k) {
                            next.role[seq[k]] = static_cast<uint8_t>(d + 2);
                            next.pos[seq[k]] = static_cast<uint8_t>(cur.len[d] + k);
                            with_factor(next, seq[k], +1);
                        }
                        next.len[d] = static_cast<uint8_t>(cur.len[d] + depth);
                        if (next.len[d] > 7) continue;
                        emit(next, OpKind::ReduceScatter, taken, static_cast<int32_t>(d), -1);
                    }
                }
                for (size_t a = 0; a < n_; ++a) {
                    if (!(pending & axis_bit(a)) || (taken & axis_bit(a))) continue;
                    seq[depth++] = static_cast<uint8_t>(a);
                    orders(taken | axis_bit(a));
                    --depth;
                }
            };
            orders(0);
        }
        for (size_t d = 0; d < rank; ++d) {
            uint8_t axes[kMaxSearchAxes];
            int len = dim_axes(cur, d, axes);
            for (int k = 1; k <= len; ++k) {
                AxisSet group = 0;
                for (int p = len - k; p < len; ++p) group |= axis_bit(axes[p]);
                // all_gather of the k minor-most axes.
                State gathered = cur;
                for (int p = len - k; p < len; ++p) {
                    with_factor(gathered, axes[p], -1);
                    gathered.role[axes[p]] = 0;
                    gathered.pos[axes[p]] = 0;
                }
                gathered.len[d] = static_cast<uint8_t>(len - k);
                emit(gathered, OpKind::AllGather, group, static_cast<int32_t>(d), -1);
                // all_to_all of them, in their order, to the minor end of another dim.
                for (size_t d2 = 0; d2 < rank; ++d2) {
                    if (d2 == d || gathered.len[d2] + k > 7) continue;
                    State next = gathered;
                    for (int p = len - k; p < len; ++p) {
                        uint8_t a = axes[p];
                        next.role[a] = static_cast<uint8_t>(d2 + 2);
                        next.pos[a] = static_cast<uint8_t>(gathered.len[d2] + (p - (len - k)));
                        with_factor(next, a, +1);
                    }
                    next.len[d2] = static_cast<uint8_t>(gathered.len[d2] + k);
                    emit(next, OpKind::AllToAll, group, static_cast<int32_t>(d), static_cast<int32_t>(d2));
                }
                // make_partial of them (their pieces placed in zeros).
                if (float_) {
                    State next = gathered;
                    for (int p = len - k; p < len; ++p) next.role[axes[p]] = 1;
                    emit(next, OpKind::MakePartial, group, -1, -1);
                }
            }
        }
        for (size_t a = 0; a < n_; ++a) {
            if (cur.role[a] != 0) continue;
            // A free local slice by an unused axis.
            for (size_t d = 0; d < rank; ++d) {
                if (cur.len[d] >= 7) continue;
                State next = cur;
                next.role[a] = static_cast<uint8_t>(d + 2);
                next.pos[a] = cur.len[d];
                next.len[d] = static_cast<uint8_t>(cur.len[d] + 1);
                with_factor(next, a, +1);
                emit(next, OpKind::LocalSlice, axis_bit(a), static_cast<int32_t>(d), -1);
            }
            // make_partial of an unused axis, only towards a target that keeps it pending.
            if (float_ && (target_partial_ & axis_bit(a))) {
                State next = cur;
                next.role[a] = 1;
                emit(next, OpKind::MakePartial, axis_bit(a), -1, -1);
            }
        }
    }

    const TensorType& type_;
    const Mesh& mesh_;
    size_t n_;
    bool float_ = true;
    double elem_bytes_ = 4;
    AxisSet target_partial_ = 0;
    State target_;
    std::vector<Node> nodes_;
    std::unordered_map<Key, int> index_;
};

std::string layout_key(const Layout& l) {
    std::string k;
    for (const AxisList& d : l.dims) {
        for (uint8_t a : d) k.push_back(static_cast<char>('a' + a));
        k.push_back('|');
    }
    k += std::to_string(l.partial);
    return k;
}

std::string memo_key(const TensorType& from, const Layout& to, const Mesh& mesh) {
    std::string k = fmt::format("{}:", static_cast<int>(from.dtype));
    for (int64_t s : from.shape) k += fmt::format("{},", s);
    k += ';';
    for (const MeshAxis& a : mesh.axes) k += fmt::format("{}/{}/{},", a.size, a.latency, a.bandwidth);
    k += ';' + layout_key(from.layout) + ';' + layout_key(to);
    return k;
}

}  // namespace

std::vector<ReshardStep> plan_reshard(const TensorType& from, const Layout& to, const Mesh& mesh) {
    if (from.layout == to) return {};
    static std::mutex memo_mutex;
    static std::unordered_map<std::string, std::vector<ReshardStep>> memo;
    std::string key = memo_key(from, to, mesh);
    {
        std::lock_guard lock(memo_mutex);
        if (auto it = memo.find(key); it != memo.end()) return it->second;
    }
    std::vector<ReshardStep> fixed;
    double bound = std::numeric_limits<double>::infinity();
    bool have_fixed = true;
    try {
        fixed = plan_reshard(from.layout, to);
        bound = plan_cost(fixed, from, mesh);
    } catch (const InternalError&) {
        have_fixed = false;
    }
    std::vector<ReshardStep> best = fixed;
    // A pending sum completed in place (same splits, fewer pending axes) stays one
    // all_reduce over the group: transform/combine_collectives.cpp merges the all_reduces
    // of a step into one buffer, which per-axis or reduce_scatter/all_gather forms would
    // prevent (the GPT step: 95 collectives and 1.38 ms modelled with it, 113 and 1.52 ms
    // without).
    bool completion = from.layout.dims == to.dims && (to.partial & ~from.layout.partial) == 0;
    // Costing a candidate can ask about a layout that is not one (an axis used twice): the
    // fixed-order plan answers (or throws), the search needs each axis used at most once.
    auto well_formed = [&](const Layout& l) {
        AxisSet seen = l.partial;
        if (l.dims.size() != from.rank() || (mesh.axes.size() < 64 && (l.partial >> mesh.axes.size()) != 0)) return false;
        for (const AxisList& d : l.dims) {
            for (uint8_t a : d) {
                if (a >= mesh.axes.size() || (seen & axis_bit(a))) return false;
                seen |= axis_bit(a);
            }
        }
        return true;
    };
    bool fits = !completion && Search::fits(from, mesh) && well_formed(from.layout) && well_formed(to);
    for (const AxisList& d : from.layout.dims) fits = fits && d.size() <= 7;
    for (const AxisList& d : to.dims) fits = fits && d.size() <= 7;
    if (bound > 0 && fits) {
        // Strictly cheaper only (a relative margin against rounding in the sums).
        double margin = have_fixed ? bound * (1 - 1e-9) : bound;
        if (auto found = Search(from, mesh).run(to, margin)) {
            best = std::move(*found);
        } else if (!have_fixed) {
            internal_error(fmt::format("no coercion plan reaches the target layout"), __FILE__, __LINE__);
        }
    } else if (!have_fixed) {
        internal_error("no coercion plan reaches the target layout", __FILE__, __LINE__);
    }
    std::lock_guard lock(memo_mutex);
    if (memo.size() > 100000) memo.clear();
    memo.emplace(std::move(key), best);
    return best;
}

}  // namespace meshc::ir

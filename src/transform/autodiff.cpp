// Reverse-mode autodiff on GIR; see autodiff.h.
//
// One derived function per (function, grad | value_and_grad):
//  1. Forward: the differentiated function's body, with every call inlined and every
//     `for` over a constant range unrolled (GIR has no recursion), so each forward value
//     is an SSA value the backward pass reads directly: no tape. `if` stays structured.
//  2. Activity: the float values that depend on a differentiated parameter.
//  3. Backward: the ops in reverse; each adjoint adds its contributions to the operands'
//     cotangents. A cotangent is any GIR value of the operand's global shape, in any
//     layout: coercions (all collectives, local slices, make_partial, place) are global
//     identities, so their adjoint passes the cotangent on unchanged, and the layout is
//     converted only where an adjoint or the gradient's type asks for it.
//  4. The gradient of each parameter leaf is its cotangent coerced to the parameter's
//     type; then dead ops are removed.
#include "transform/autodiff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/einsum.h"
#include "ir/op_rules.h"
#include "ir/reshard_plan.h"

namespace meshc::transform {
namespace {

using namespace ir;

/// A diagnostic was emitted: stop differentiating this function.
struct Failed {};

/// Operations one derived function may unroll to (loops times bodies, inlined calls).
constexpr size_t kMaxOps = 200000;

AxisSet axes_of(const AxisList& list) {
    AxisSet s = 0;
    for (uint8_t a : list) s |= axis_bit(a);
    return s;
}

/// A layout is valid when no axis splits two dims or splits a dim and holds a pending sum.
bool valid_layout(const Layout& l) {
    AxisSet used = l.partial;
    for (const AxisList& d : l.dims) {
        for (uint8_t a : d) {
            if (used & axis_bit(a)) return false;
            used |= axis_bit(a);
        }
    }
    return true;
}

bool side_effects(const std::vector<Op>& ops) {
    for (const Op& op : ops) {
        if (op.kind == OpKind::Print || op.kind == OpKind::Save || op.kind == OpKind::Call) return true;
        for (const Region& r : op.regions) {
            if (side_effects(r.ops)) return true;
        }
    }
    return false;
}

/// Removes ops whose results nobody uses and that have no effect (and then the ops only
/// they used): one sweep from the end, since an op's users all come after it.
void remove_dead_ops(Function& f) {
    std::vector<uint32_t> uses(f.types.size(), 0);
    std::function<void(const std::vector<Op>&)> count = [&](const std::vector<Op>& ops) {
        for (const Op& op : ops) {
            for (ValueId v : op.operands) ++uses[v];
            for (const Region& r : op.regions) {
                count(r.ops);
                for (ValueId y : r.yields) ++uses[y];
            }
        }
    };
    count(f.ops);
    for (ValueId r : f.results) ++uses[r];
    std::function<void(const Op&)> release = [&](const Op& op) {
        for (ValueId v : op.operands) --uses[v];
        for (const Region& r : op.regions) {
            for (ValueId y : r.yields) --uses[y];
            for (const Op& o : r.ops) release(o);
        }
    };
    auto removable = [&](const Op& op) {
        if (op.kind == OpKind::Print || op.kind == OpKind::Save || op.kind == OpKind::Call) return false;
        if (op.results.empty()) return false;
        for (const Region& r : op.regions) {
            if (side_effects(r.ops)) return false;
        }
        return std::all_of(op.results.begin(), op.results.end(), [&](ValueId v) { return uses[v] == 0; });
    };
    std::function<void(std::vector<Op>&)> sweep = [&](std::vector<Op>& ops) {
        std::vector<bool> dead(ops.size(), false);
        bool any = false;
        for (size_t i = ops.size(); i-- > 0;) {
            if (removable(ops[i])) {
                dead[i] = any = true;
                release(ops[i]);
                continue;
            }
            for (Region& r : ops[i].regions) sweep(r.ops);
        }
        if (!any) return;
        size_t k = 0;
        for (size_t i = 0; i < ops.size(); ++i) {
            if (dead[i]) continue;
            if (k != i) ops[k] = std::move(ops[i]);
            ++k;
        }
        ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(k), ops.end());
    };
    sweep(f.ops);
}

class Differentiator {
public:
    Differentiator(const Module& module, const SourceManager& sources, DiagnosticEngine& diags,
                   const AutodiffOptions& options)
        : m_(module), sources_(sources), diags_(diags), options_(options) {}

    /// The derived function of `callee` (its first `wrt` parameters differentiated).
    Function derive(size_t callee, bool with_value, size_t wrt, Span call_span) {
        const Function& c = m_.functions[callee];
        call_span_ = call_span;
        g_.name = c.name;
        g_.instance = c.instance;
        g_.mesh_instance = c.mesh_instance;
        g_.dtype_instance = c.dtype_instance;
        g_.span = c.span;
        g_.derived = with_value ? "value_and_grad" : "grad";
        Map map;
        for (ValueId p : c.params) {
            ValueId q = g_.add_value(c.types[p], c.names[p]);
            g_.params.push_back(q);
            map[p] = q;
        }
        // 1. Forward, flattened.
        std::vector<Op> forward;
        top_ = &forward;
        flatten(c, c.ops, map, forward);
        MESHC_ASSERT(c.results.size() == 1, "a differentiated function returns one scalar");
        ValueId loss = lookup(map, c.results[0]);
        // 2. Activity.
        for (size_t i = 0; i < wrt && i < g_.params.size(); ++i) {
            if (dtype_is_float(type(g_.params[i]).dtype)) active_.insert(g_.params[i]);
        }
        mark_active(forward);
        // 3. Backward.
        // The backward ops go to g_.ops, after which the forward is put in front of them
        // (nothing reads g_.ops meanwhile: ops are only appended).
        g_.ops.clear();
        cur_ = &g_.ops;
        span_ = call_span;
        reason_ = "the seed of the backward pass";
        if (active_.count(loss)) {
            add_ct(loss, constant(1.0, type(loss).dtype));
            backward_top(forward);
        }
        // 4. Gradients in their parameters' types.
        std::vector<ValueId> results;
        if (with_value) results.push_back(loss);
        span_ = call_span;
        for (size_t i = 0; i < wrt && i < g_.params.size(); ++i) {
            ValueId p = g_.params[i];
            const TensorType want = type(p);
            reason_ = "a gradient has its parameter's type";
            auto it = ct_.find(p);
            results.push_back(it == ct_.end() ? zeros(want) : coerce(it->second, want));
        }
        g_.results = std::move(results);
        forward.reserve(forward.size() + g_.ops.size());
        std::move(g_.ops.begin(), g_.ops.end(), std::back_inserter(forward));
        g_.ops = std::move(forward);
        top_ = nullptr;
        cur_ = nullptr;
        remove_dead_ops(g_);
        return std::move(g_);
    }

private:
    using Map = std::unordered_map<ValueId, ValueId>;

    [[noreturn]] void fail(Span span, std::string message, std::string note = {}) {
        auto& d = diags_.emit(DiagCode::E0602, span, std::move(message));
        if (!note.empty()) d.note(std::move(note));
        d.note("differentiated here", call_span_);
        throw Failed{};
    }

    TensorType& type(ValueId v) { return g_.types[v]; }

    ValueId lookup(const Map& map, ValueId v) const {
        auto it = map.find(v);
        MESHC_ASSERT(it != map.end(), fmt::format("value %{} is used before it is defined in the differentiated function", v));
        return it->second;
    }

    // ------------------------------------------------------------ forward

    ValueId copy_value(const Function& src, ValueId v) { return g_.add_value(src.types[v], src.names[v]); }

    void count_op(Span span) {
        if (++op_count_ > kMaxOps) {
            fail(span, fmt::format("differentiating this function unrolls it to more than {} operations", kMaxOps),
                 "loops inside a differentiated function are unrolled; move a long loop outside the differentiated "
                 "function, or differentiate its body");
        }
    }

    /// Appends `ops` of `src` to `out` with calls inlined and loops unrolled; `map` takes
    /// src values to values of the derived function.
    void flatten(const Function& src, const std::vector<Op>& ops, Map& map, std::vector<Op>& out) {
        for (const Op& op : ops) {
            count_op(op.span);
            switch (op.kind) {
            case OpKind::Call: {
                const Function& callee = m_.functions[static_cast<size_t>(op.callee)];
                Map inner;
                for (size_t i = 0; i < callee.params.size(); ++i) inner[callee.params[i]] = lookup(map, op.operands[i]);
                // A @checkpoint callee at the top level is a segment the backward pass runs
                // again (the outermost one where they nest).
                bool segment = callee.checkpoint && &out == top_ && !in_segment_;
                size_t begin = out.size();
                if (segment) in_segment_ = true;
                call_stack_.push_back(op.span);
                auto outer_call = std::make_pair(inlined_callee_, inlined_call_);
                inlined_callee_ = op.callee;
                inlined_call_ = ++inlined_calls_;
                flatten(callee, callee.ops, inner, out);
                std::tie(inlined_callee_, inlined_call_) = outer_call;
                call_stack_.pop_back();
                if (segment) {
                    in_segment_ = false;
                    if (out.size() > begin) segments_[out.size() - 1] = begin;
                }
                for (size_t i = 0; i < callee.results.size(); ++i) map[op.results[i]] = lookup(inner, callee.results[i]);
                break;
            }
            case OpKind::For: {
                auto lo = constant_of(lookup(map, op.operands[0]));
                auto hi = constant_of(lookup(map, op.operands[1]));
                if (!lo || !hi) {
                    fail(op.span, "cannot differentiate through a loop whose bounds are not known when compiling",
                         "the loop is unrolled in the backward pass; its bounds must be known when compiling: literals, size "
                         "variables, or integer arithmetic of those");
                }
                const Region& body = op.regions[0];
                std::vector<ValueId> carried;
                for (size_t k = 2; k < op.operands.size(); ++k) carried.push_back(lookup(map, op.operands[k]));
                for (int64_t i = static_cast<int64_t>(*lo); i < static_cast<int64_t>(*hi); ++i) {
                    map[body.args[0]] = constant_into(out, static_cast<double>(i), src.types[body.args[0]].dtype, op.span);
                    for (size_t k = 0; k < carried.size(); ++k) map[body.args[1 + k]] = carried[k];
                    flatten(src, body.ops, map, out);
                    for (size_t k = 0; k < carried.size(); ++k) carried[k] = lookup(map, body.yields[k]);
                }
                for (size_t k = 0; k < op.results.size(); ++k) map[op.results[k]] = carried[k];
                break;
            }
            case OpKind::If: {
                Op n = op;
                if (!call_stack_.empty()) n.call_path.insert(n.call_path.begin(), call_stack_.begin(), call_stack_.end());
                if (inlined_call_ != 0) std::tie(n.inlined_callee, n.inlined_call) = std::make_pair(inlined_callee_, inlined_call_);
                n.operands = {lookup(map, op.operands[0])};
                n.regions.clear();
                for (const Region& r : op.regions) {
                    Region nr;
                    flatten(src, r.ops, map, nr.ops);
                    for (ValueId y : r.yields) nr.yields.push_back(lookup(map, y));
                    n.regions.push_back(std::move(nr));
                }
                n.results.clear();
                for (ValueId r : op.results) {
                    ValueId v = copy_value(src, r);
                    map[r] = v;
                    n.results.push_back(v);
                }
                out.push_back(std::move(n));
                break;
            }
            case OpKind::Grad: MESHC_ASSERT(false, "an inner grad is expanded before the function holding it");
            case OpKind::Constant:
            case OpKind::Create:
            case OpKind::Load:
            case OpKind::Arg:
            case OpKind::Elementwise:
            case OpKind::Reduce:
            case OpKind::Contract:
            case OpKind::AllReduce:
            case OpKind::ReduceScatter:
            case OpKind::AllGather:
            case OpKind::AllToAll:
            case OpKind::LocalSlice:
            case OpKind::MakePartial:
            case OpKind::Place:
            case OpKind::Reshape:
            case OpKind::Broadcast:
            case OpKind::Slice:
            case OpKind::Pad:
            case OpKind::Concat:
            case OpKind::OneHot:
            case OpKind::Embedding:
            case OpKind::Print:
            case OpKind::Save: {
                Op n = op;
                if (!call_stack_.empty()) n.call_path.insert(n.call_path.begin(), call_stack_.begin(), call_stack_.end());
                if (inlined_call_ != 0) std::tie(n.inlined_callee, n.inlined_call) = std::make_pair(inlined_callee_, inlined_call_);
                for (ValueId& v : n.operands) v = lookup(map, v);
                for (size_t i = 0; i < op.results.size(); ++i) {
                    ValueId v = copy_value(src, op.results[i]);
                    map[op.results[i]] = v;
                    n.results[i] = v;
                }
                if (op.kind == OpKind::Constant) constants_[n.results[0]] = op.number;
                // Integer arithmetic of constants (a loop bound `0..(N + B - 1)` of size
                // variables, which each instance knows) is a constant too.
                if (op.kind == OpKind::Elementwise && n.results.size() == 1) {
                    if (auto c = fold_integer(op.ew, n.operands, src.types[op.results[0]])) constants_[n.results[0]] = *c;
                }
                if (op.kind == OpKind::AllReduce && op.reduce == ReduceKind::Max) max_done_[n.operands[0]] = n.results[0];
                out.push_back(std::move(n));
                break;
            }
            }
        }
    }

    // The value of an integer scalar op of constant operands (+ - * / % max min neg, as
    // the language defines them: `/` floors, `%` takes the divisor's sign); nullopt where
    // it is not one, or divides by zero.
    std::optional<double> fold_integer(Ew ew, const std::vector<ValueId>& operands, const TensorType& result) const {
        if (result.rank() != 0 || (result.dtype != DType::I64 && result.dtype != DType::I32)) return std::nullopt;
        std::vector<int64_t> x;
        for (ValueId v : operands) {
            auto c = constant_of(v);
            if (!c || *c != std::floor(*c) || std::abs(*c) > 9.0e15) return std::nullopt;
            x.push_back(static_cast<int64_t>(*c));
        }
        auto floor_div = [](int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); };
        int64_t r = 0;
        if (x.size() == 1 && ew == Ew::Neg) {
            r = -x[0];
        } else if (x.size() != 2) {
            return std::nullopt;
        } else {
            switch (ew) {
            case Ew::Add: r = x[0] + x[1]; break;
            case Ew::Sub: r = x[0] - x[1]; break;
            case Ew::Mul:
                if (std::abs(static_cast<double>(x[0]) * static_cast<double>(x[1])) > 9.0e15) return std::nullopt;
                r = x[0] * x[1];
                break;
            case Ew::Div:
                if (x[1] == 0) return std::nullopt;
                r = floor_div(x[0], x[1]);
                break;
            case Ew::Mod:
                if (x[1] == 0) return std::nullopt;
                r = x[0] - floor_div(x[0], x[1]) * x[1];
                break;
            case Ew::Max: r = std::max(x[0], x[1]); break;
            case Ew::Min: r = std::min(x[0], x[1]); break;
            default: return std::nullopt;
            }
        }
        return static_cast<double>(r);
    }

    std::optional<double> constant_of(ValueId v) const {
        auto it = constants_.find(v);
        if (it == constants_.end()) return std::nullopt;
        return it->second;
    }

    ValueId constant_into(std::vector<Op>& out, double value, DType dtype, Span span) {
        Op op{OpKind::Constant};
        op.number = value;
        op.span = span;
        TensorType t;
        t.dtype = dtype;
        ValueId v = g_.add_value(t);
        op.results = {v};
        constants_[v] = value;
        out.push_back(std::move(op));
        return v;
    }

    // ------------------------------------------------------------ activity

    bool active(ValueId v) const { return active_.count(v) > 0; }

    void mark_active(const std::vector<Op>& ops) {
        for (const Op& op : ops) {
            bool any = false;
            if (op.kind == OpKind::If) {
                for (const Region& r : op.regions) {
                    mark_active(r.ops);
                    for (ValueId y : r.yields) any = any || active(y);
                }
            } else {
                for (ValueId v : op.operands) any = any || active(v);
            }
            if (op.kind == OpKind::OneHot || op.kind == OpKind::Create || op.kind == OpKind::Load) any = false;
            if (!any) continue;
            for (ValueId r : op.results) {
                if (dtype_is_float(type(r).dtype)) active_.insert(r);
            }
        }
    }

    // ------------------------------------------------------------ emitting

    ValueId emit(Op op, TensorType t) {
        ValueId v = g_.add_value(std::move(t));
        op.results = {v};
        op.span = span_;
        op.call_path = call_path_;
        op.inlined_callee = inlined_.first;
        op.inlined_call = inlined_.second;
        op.backward = true;
        cur_->push_back(std::move(op));
        return v;
    }

    ValueId constant(double value, DType dtype) {
        Op op{OpKind::Constant};
        op.number = value;
        TensorType t;
        t.dtype = dtype;
        return emit(std::move(op), t);
    }

    ValueId zeros(const TensorType& t) {
        Op op{OpKind::Create};
        op.create = CreateKind::Zeros;
        return emit(std::move(op), t);
    }

    /// The result type of `op` over its operands, by the op's rule (ir/op_rules.h);
    /// `hint` settles what the operands leave open (a broadcast's new dims).
    TensorType rule_type(const Op& op, const TensorType* hint = nullptr) {
        std::vector<const TensorType*> operands;
        for (ValueId x : op.operands) operands.push_back(&type(x));
        return infer_result(m_, op, operands, hint);
    }

    /// An element-wise op (a cast: to `dtype`); its type is the rule's.
    ValueId ew(Ew e, std::vector<ValueId> xs, std::optional<DType> dtype = std::nullopt) {
        Op op{OpKind::Elementwise};
        op.ew = e;
        if (dtype) op.dtype = *dtype;
        op.operands = std::move(xs);
        TensorType r = rule_type(op);
        return emit(std::move(op), std::move(r));
    }
    ValueId mul(ValueId a, ValueId b) { return ew(Ew::Mul, {a, b}); }
    ValueId cast(ValueId x, DType to) {
        if (type(x).dtype == to) return x;
        return ew(Ew::Cast, {x}, to);
    }
    /// 1.0 where `cond` holds, else 0.0, in `dtype`.
    ValueId indicator(ValueId cond, DType dtype) { return ew(Ew::Cast, {cond}, dtype); }

    /// sum over `dims`, dropped or kept with size 1.
    ValueId reduce_sum(ValueId x, const std::vector<int64_t>& dims, bool keep) {
        Op op{OpKind::Reduce};
        op.reduce = ReduceKind::Sum;
        op.ints = dims;
        op.keep_dims = keep;
        op.operands = {x};
        TensorType r = rule_type(op);
        return emit(std::move(op), std::move(r));
    }

    /// x reshaped to `shape` and laid out as `layout`: the reshape keeps what its rule
    /// keeps of x's splits (x converted first where the rule needs it), then converts.
    ValueId reshape(ValueId x, std::vector<int64_t> shape, Layout layout) {
        if (type(x).shape == shape && type(x).layout == layout) return x;
        if (type(x).mesh >= 0) {
            ReshapeLayouts l = reshape_layouts(type(x).shape, type(x).layout, shape, &m_.meshes[static_cast<size_t>(type(x).mesh)]);
            x = reshard(x, l.need);
        }
        Op op{OpKind::Reshape};
        op.ints = std::move(shape);
        op.operands = {x};
        TensorType r = rule_type(op);
        ValueId y = emit(std::move(op), std::move(r));
        return type(y).mesh >= 0 ? reshard(y, layout) : y;
    }

    ValueId broadcast(ValueId x, std::vector<int64_t> shape, Layout layout) {
        if (type(x).shape == shape && type(x).layout == layout) return x;
        TensorType hint = type(x);
        hint.shape = shape;
        hint.layout = std::move(layout);
        Op op{OpKind::Broadcast};
        op.ints = std::move(shape);
        op.operands = {x};
        TensorType r = rule_type(op, &hint);
        ValueId y = emit(std::move(op), std::move(r));
        return type(y).mesh >= 0 ? reshard(y, hint.layout) : y;
    }

    /// Sums a contribution of a broadcast result back to an operand's shape.
    ValueId unbroadcast(ValueId c, const std::vector<int64_t>& shape) {
        if (type(c).shape == shape) return c;
        size_t lead = type(c).rank() - shape.size();
        if (lead > 0) {
            std::vector<int64_t> dims;
            for (size_t d = 0; d < lead; ++d) dims.push_back(static_cast<int64_t>(d));
            c = reduce_sum(c, dims, false);
        }
        std::vector<int64_t> dims;
        for (size_t d = 0; d < shape.size(); ++d) {
            if (shape[d] == 1 && type(c).shape[d] != 1) dims.push_back(static_cast<int64_t>(d));
        }
        if (!dims.empty()) c = reduce_sum(c, dims, true);
        return c;
    }

    // ------------------------------------------------------------ layouts of cotangents

    /// Converts v to type `want` (mesh, layout, element type; same shape), planning the
    /// collectives with ir/reshard_plan.h. Each conversion of one value to one type is
    /// made once per block.
    ValueId coerce(ValueId v, const TensorType& want) {
        MESHC_ASSERT(type(v).shape == want.shape, "a cotangent has its value's shape");
        if (type(v).dtype != want.dtype) v = cast(v, want.dtype);
        const TensorType& t = type(v);
        if (t.mesh == want.mesh && t.layout == want.layout) return v;
        auto key = std::make_tuple(v, want.mesh, layout_key(want), static_cast<const void*>(cur_));
        if (auto it = coerced_.find(key); it != coerced_.end()) return it->second;
        ValueId r = v;
        if (type(r).mesh >= 0 && type(r).mesh != want.mesh) {
            r = reshard(r, Layout::replicated(type(r).rank()));
            r = place(r, -1);
        }
        if (type(r).mesh < 0 && want.mesh >= 0) r = place(r, want.mesh);
        if (want.mesh >= 0) r = reshard(r, want.layout);
        coerced_[key] = r;
        return r;
    }

    std::string layout_key(const TensorType& t) const {
        if (t.mesh < 0) return "{}";
        return layout_to_string(t.layout, m_.meshes[static_cast<size_t>(t.mesh)]);
    }

    ValueId place(ValueId v, int32_t mesh) {
        TensorType t = type(v);
        t.mesh = mesh;
        t.layout = Layout::replicated(t.rank());
        Op op{OpKind::Place};
        op.operands = {v};
        return emit(std::move(op), std::move(t));
    }

    ValueId reshard(ValueId v, const Layout& target) {
        if (type(v).layout == target) return v;
        const Mesh& mesh = m_.meshes[static_cast<size_t>(type(v).mesh)];
        for (const ReshardStep& s : plan_reshard(type(v), target, mesh)) {
            TensorType t = type(v);
            if (communicates(s.kind) && mesh.group_size(s.axes) > 1 && options_.strict_comm) {
                auto& d = diags_.emit(DiagCode::E0406, span_,
                                      fmt::format("the backward pass needs {} {} over ({}) of {} per-device bytes",
                                                  s.kind == OpKind::ReduceScatter ? "a" : "an", op_name(s.kind),
                                                  mesh.axis_names(s.axes), step_bytes(s, t, mesh)));
                d.note(fmt::format("why: {}", reason_));
                d.note("--strict-comm forbids inserted communication, in the backward pass of this call too",
                       call_span_);
            }
            t.layout = s.result;
            Op op{s.kind};
            op.axes = s.axes;
            op.dim = s.dim;
            op.dim2 = s.dim2;
            op.operands = {v};
            op.inserted = true;
            op.reason = reason_;
            v = emit(std::move(op), std::move(t));
        }
        return v;
    }

    /// g as a cotangent shaped like `like`: like's splits, keeping g's pending sums over
    /// the axes like does not split and `forbid` does not name (the others are completed).
    ValueId as_layout(ValueId g, const TensorType& like, AxisSet forbid) {
        TensorType want = like;
        if (like.mesh < 0) {
            want.layout = Layout::replicated(like.rank());
        } else {
            AxisSet pending = type(g).mesh == like.mesh ? type(g).layout.partial : 0;
            want.layout.partial = pending & ~(like.layout.split_axes() | forbid);
        }
        return coerce(g, want);
    }

    /// Adds contribution c (x's shape) to x's cotangent; two contributions meet in the
    /// cheapest common layout (a pending sum kept where that is free).
    void add_ct(ValueId x, ValueId c) {
        MESHC_ASSERT(type(c).shape == type(x).shape, "a cotangent contribution has its value's shape");
        if (type(c).dtype != type(x).dtype) c = cast(c, type(x).dtype);
        auto it = ct_.find(x);
        if (it == ct_.end()) {
            ct_[x] = c;
            return;
        }
        ValueId a = it->second;
        if (type(a).mesh != type(c).mesh) {
            // Meet on the placed one's mesh (a mesh-free value is replicated everywhere).
            int32_t mesh = type(a).mesh >= 0 ? type(a).mesh : type(c).mesh;
            TensorType want = type(x);
            want.mesh = mesh;
            want.layout = Layout::replicated(want.rank());
            if (type(a).mesh != mesh) a = coerce(a, want);
            if (type(c).mesh != mesh) c = coerce(c, want);
        }
        if (!(type(a).layout == type(c).layout) && type(a).mesh >= 0) {
            const Mesh& mesh = m_.meshes[static_cast<size_t>(type(a).mesh)];
            AxisSet both = type(a).layout.partial | type(c).layout.partial;
            std::vector<Layout> candidates;
            for (const Layout* dims : {&type(a).layout, &type(c).layout}) {
                Layout merged{dims->dims, both};
                if (valid_layout(merged)) candidates.push_back(merged);
            }
            candidates.push_back(type(a).layout);
            candidates.push_back(type(c).layout);
            const Layout* best = nullptr;
            double best_cost = 0;
            for (const Layout& l : candidates) {
                double cost = reshard_cost(type(a), l, mesh) + reshard_cost(type(c), l, mesh);
                if (!best || cost < best_cost) {
                    best = &l;
                    best_cost = cost;
                }
            }
            TensorType want = type(a);
            want.layout = *best;
            a = coerce(a, want);
            c = coerce(c, want);
        }
        ct_[x] = ew(Ew::Add, {a, c});
    }

    ValueId ct_of(ValueId v) const {
        auto it = ct_.find(v);
        return it == ct_.end() ? kNoValue : it->second;
    }

    // ------------------------------------------------------------ backward

    std::string describe(const Op& op) const {
        std::string text;
        if (op.span.valid() && op.span.file < sources_.file_count()) {
            std::string_view s = sources_.text(op.span);
            for (char ch : s) {
                if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
                if (ch == ' ' && !text.empty() && text.back() == ' ') continue;
                text += ch;
            }
            if (text.size() > 48) text = text.substr(0, 45) + "...";
            auto lc = sources_.line_col(op.span.file, op.span.begin);
            return fmt::format("backward of {}:{} {}", lc.line, lc.col, text);
        }
        return fmt::format("backward of {}", op_name(op.kind));
    }

    /// The top-level ops in reverse; a @checkpoint segment is recomputed first, and its
    /// adjoints read the recomputed values (so the forward pass's ones die early).
    void backward_top(const std::vector<Op>& ops) {
        for (size_t k = ops.size(); k-- > 0;) {
            auto seg = segments_.find(k);
            if (seg == segments_.end()) {
                span_ = ops[k].span;
                call_path_ = ops[k].call_path;
                inlined_ = {ops[k].inlined_callee, ops[k].inlined_call};
                reason_ = describe(ops[k]);
                adjoint(ops[k]);
                continue;
            }
            size_t begin = seg->second;
            std::vector<Op> part(ops.begin() + static_cast<std::ptrdiff_t>(begin), ops.begin() + static_cast<std::ptrdiff_t>(k + 1));
            k = begin;
            bool seeded = false;
            for (const Op& op : part) {
                for (ValueId r : op.results) seeded = seeded || ct_.count(r);
            }
            if (!seeded) continue;
            Map map;
            std::vector<Op> again = recompute(part, map);
            for (Op& op : again) {
                op.backward = true;
                if (op.inserted) op.reason += " (recomputed: @checkpoint)";
                cur_->push_back(op);
            }
            for (const auto& [orig, fresh] : map) {
                auto c = ct_.find(orig);
                if (c == ct_.end()) continue;
                ValueId g = c->second;
                ct_.erase(c);
                add_ct(fresh, g);
            }
            backward(again);
        }
    }

    void backward(const std::vector<Op>& ops) {
        for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
            span_ = it->span;
            call_path_ = it->call_path;
            inlined_ = {it->inlined_callee, it->inlined_call};
            reason_ = describe(*it);
            adjoint(*it);
        }
    }

    void adjoint(const Op& op) {
        bool wanted = false;
        for (ValueId v : op.operands) wanted = wanted || active(v);
        if (op.kind == OpKind::If) wanted = true;
        if (!wanted) return;
        bool seeded = false;
        for (ValueId r : op.results) seeded = seeded || ct_of(r) != kNoValue;
        if (!seeded) return;
        // Dispatch on the op's adjoint family (ir/op_rules.def).
        switch (op_rule(op.kind).adjoint) {
        case AdjointRule::None: return;
        case AdjointRule::Elementwise: return adjoint_elementwise(op);
        case AdjointRule::Reduce: return op.reduce == ReduceKind::Max ? adjoint_max(op) : adjoint_sum(op);
        case AdjointRule::Contract: return adjoint_contract(op);
        case AdjointRule::Identity:
            // Global identities: the cotangent passes on in whatever layout it has.
            for (size_t i = 0; i < op.operands.size() && i < op.results.size(); ++i) {
                if (active(op.operands[i]) && ct_of(op.results[i]) != kNoValue) add_ct(op.operands[i], ct_of(op.results[i]));
            }
            return;
        case AdjointRule::Reshape: {
            ValueId x = op.operands[0], y = op.results[0];
            ValueId g = as_layout(ct_of(y), type(y), 0);
            Layout l = type(x).layout;
            l.partial = type(g).mesh >= 0 ? type(g).layout.partial : 0;
            if (type(g).mesh < 0) l = Layout::replicated(type(x).rank());
            add_ct(x, reshape(g, type(x).shape, l));
            return;
        }
        case AdjointRule::Broadcast: {
            ValueId x = op.operands[0], y = op.results[0];
            ValueId g = as_layout(ct_of(y), type(y), 0);
            add_ct(x, unbroadcast(g, type(x).shape));
            return;
        }
        case AdjointRule::Slice: return adjoint_slice(op);
        case AdjointRule::Concat: return adjoint_concat(op);
        case AdjointRule::Embedding: return adjoint_embedding(op);
        case AdjointRule::Branch: return adjoint_if(op);
        case AdjointRule::Flattened:
        case AdjointRule::Expanded: MESHC_ASSERT(false, "calls, loops and grads are flattened before the backward pass");
        }
    }

    void adjoint_elementwise(const Op& op) {
        ValueId y = op.results[0];
        const TensorType yt = type(y);
        if (!dtype_is_float(yt.dtype)) return;
        ValueId g0 = ct_of(y);
        const auto& xs = op.operands;
        DType dt = yt.dtype;
        auto g = [&](AxisSet forbid) { return as_layout(g0, yt, forbid); };
        auto act = [&](size_t i) { return i < xs.size() && active(xs[i]); };
        auto contribute = [&](size_t i, ValueId c) { add_ct(xs[i], unbroadcast(c, type(xs[i]).shape)); };
        auto c = [&](double v) { return constant(v, dt); };
        auto partial = [&](size_t i) { return type(xs[i]).layout.partial; };
        switch (op.ew) {
        case Ew::Add:
            for (size_t i = 0; i < 2; ++i) {
                if (act(i)) contribute(i, g(0));
            }
            return;
        case Ew::Sub:
            if (act(0)) contribute(0, g(0));
            if (act(1)) contribute(1, ew(Ew::Neg, {g(0)}));
            return;
        case Ew::Neg: contribute(0, ew(Ew::Neg, {g(0)})); return;
        case Ew::Cast: contribute(0, cast(g(0), type(xs[0]).dtype)); return;
        // A product's operands may not both be pending sums (even over different axes):
        // the cotangent is completed when the other factor is pending.
        case Ew::Mul:
            if (act(0)) contribute(0, mul(g(partial(1) ? ~AxisSet{0} : 0), xs[1]));
            if (act(1)) contribute(1, mul(g(partial(0) ? ~AxisSet{0} : 0), xs[0]));
            return;
        case Ew::Div:
            if (act(0)) contribute(0, ew(Ew::Div, {g(0), xs[1]}));
            if (act(1)) contribute(1, ew(Ew::Neg, {ew(Ew::Div, {mul(g(partial(0) ? ~AxisSet{0} : 0), y), xs[1]})}));
            return;
        case Ew::Mod:
            // d(a mod b)/db = -floor(a / b) = -(a - y) / b.
            if (act(0)) contribute(0, g(0));
            if (act(1)) contribute(1, ew(Ew::Neg, {mul(g(0), ew(Ew::Div, {ew(Ew::Sub, {xs[0], y}), xs[1]}))}));
            return;
        case Ew::Max:
        case Ew::Min: {
            // Ties go to the first operand.
            Ew first = op.ew == Ew::Max ? Ew::Ge : Ew::Le;
            Ew second = op.ew == Ew::Max ? Ew::Lt : Ew::Gt;
            if (act(0)) contribute(0, mul(g(0), indicator(ew(first, {xs[0], xs[1]}), dt)));
            if (act(1)) contribute(1, mul(g(0), indicator(ew(second, {xs[0], xs[1]}), dt)));
            return;
        }
        case Ew::Select:
            if (act(1)) contribute(1, mul(g(0), indicator(xs[0], dt)));
            if (act(2)) contribute(2, mul(g(0), indicator(ew(Ew::Not, {xs[0]}), dt)));
            return;
        case Ew::Exp: contribute(0, mul(g(0), y)); return;
        case Ew::Log: contribute(0, ew(Ew::Div, {g(0), xs[0]})); return;
        case Ew::Sqrt: contribute(0, ew(Ew::Div, {mul(g(0), c(0.5)), y})); return;
        case Ew::Rsqrt: contribute(0, mul(g(0), ew(Ew::Div, {mul(y, c(-0.5)), xs[0]}))); return;
        case Ew::Tanh: contribute(0, mul(g(0), ew(Ew::Sub, {c(1), mul(y, y)}))); return;
        case Ew::Cos: contribute(0, mul(g(0), ew(Ew::Neg, {ew(Ew::Sin, {xs[0]})}))); return;
        case Ew::Sin: contribute(0, mul(g(0), ew(Ew::Cos, {xs[0]}))); return;
        case Ew::Sigmoid: contribute(0, mul(g(0), mul(y, ew(Ew::Sub, {c(1), y})))); return;
        case Ew::Softplus: contribute(0, mul(g(0), ew(Ew::Sigmoid, {xs[0]}))); return;
        case Ew::Relu: contribute(0, mul(g(0), indicator(ew(Ew::Gt, {xs[0], c(0)}), dt))); return;
        case Ew::Abs:
            contribute(0, mul(g(0), ew(Ew::Sub, {indicator(ew(Ew::Gt, {xs[0], c(0)}), dt),
                                                 indicator(ew(Ew::Lt, {xs[0], c(0)}), dt)})));
            return;
        case Ew::Gelu: {
            // gelu(x) = 0.5 x (1 + t), t = tanh(k (x + 0.044715 x^3)):
            // gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2).
            ValueId x = xs[0];
            ValueId x2 = mul(x, x);
            ValueId inner = mul(c(0.7978845608028654), ew(Ew::Add, {x, mul(c(0.044715), mul(x2, x))}));
            ValueId t = ew(Ew::Tanh, {inner});
            ValueId dinner = mul(c(0.7978845608028654), ew(Ew::Add, {c(1), mul(c(3 * 0.044715), x2)}));
            ValueId left = mul(c(0.5), ew(Ew::Add, {c(1), t}));
            ValueId right = mul(mul(c(0.5), x), mul(ew(Ew::Sub, {c(1), mul(t, t)}), dinner));
            contribute(0, mul(g(0), ew(Ew::Add, {left, right})));
            return;
        }
        case Ew::Eq:
        case Ew::Ne:
        case Ew::Lt:
        case Ew::Le:
        case Ew::Gt:
        case Ew::Ge:
        case Ew::And:
        case Ew::Or:
        case Ew::IsFinite:
        case Ew::Not: return;
        }
    }

    /// The dims reduced by `op` (none listed: all) and whether they are kept (size 1).
    std::pair<std::vector<bool>, bool> reduced_dims(const Op& op) {
        const TensorType& x = type(op.operands[0]);
        std::vector<bool> reduced(x.rank(), op.ints.empty());
        for (int64_t d : op.ints) reduced[static_cast<size_t>(d)] = true;
        bool keep = type(op.results[0]).rank() == x.rank() && x.rank() > 0;
        return {reduced, keep};
    }

    /// y (shaped like the reduce's result) brought back to x's shape: size-1 dims
    /// inserted where they were dropped, then broadcast with `layout`.
    ValueId expand(ValueId v, const Op& op, const Layout& layout) {
        const TensorType& x = type(op.operands[0]);
        auto [reduced, keep] = reduced_dims(op);
        std::vector<int64_t> kept_shape = x.shape;
        Layout kept = Layout::replicated(x.rank());
        kept.partial = type(v).mesh >= 0 ? type(v).layout.partial : 0;
        size_t j = 0;
        for (size_t d = 0; d < x.rank(); ++d) {
            if (reduced[d]) {
                kept_shape[d] = 1;
                if (keep) ++j;
            } else {
                if (type(v).mesh >= 0) kept.dims[d] = type(v).layout.dims[j];
                ++j;
            }
        }
        if (type(v).mesh < 0) kept = Layout::replicated(x.rank());
        ValueId r = reshape(v, kept_shape, kept);
        Layout out = layout;
        if (type(r).mesh < 0) out = Layout::replicated(x.rank());
        return broadcast(r, x.shape, out);
    }

    void adjoint_sum(const Op& op) {
        ValueId x = op.operands[0], y = op.results[0];
        if (!active(x)) return;
        const TensorType xt = type(x);
        ValueId g = as_layout(ct_of(y), type(y), 0);
        auto [reduced, keep] = reduced_dims(op);
        // x's layout, less the axes g still holds a pending sum over (they stay pending).
        AxisSet pending = type(g).mesh >= 0 ? type(g).layout.partial : 0;
        Layout l = xt.layout;
        for (size_t d = 0; d < xt.rank(); ++d) {
            AxisList kept;
            for (uint8_t a : l.dims[d]) {
                if (!(pending & axis_bit(a))) kept.push_back(a);
            }
            l.dims[d] = kept;
        }
        l.partial = pending;
        ValueId dx = expand(g, op, l);
        if (op.reduce == ReduceKind::Mean) {
            double count = 1;
            for (size_t d = 0; d < xt.rank(); ++d) {
                if (reduced[d]) count *= static_cast<double>(xt.shape[d]);
            }
            dx = mul(dx, constant(1.0 / count, xt.dtype));
        }
        add_ct(x, dx);
    }

    void adjoint_max(const Op& op) {
        ValueId x = op.operands[0], y = op.results[0];
        if (!active(x)) return;
        const TensorType xt = type(x);
        // The completed maximum: the forward all_reduce(max) of a pending one.
        ValueId full = y;
        if (type(y).layout.partial) {
            auto it = max_done_.find(y);
            if (it != max_done_.end()) {
                full = it->second;
            } else {
                TensorType t = type(y);
                t.layout.partial = 0;
                Op ar{OpKind::AllReduce};
                ar.reduce = ReduceKind::Max;
                ar.axes = type(y).layout.partial;
                ar.operands = {y};
                full = emit(std::move(ar), std::move(t));
            }
        }
        ValueId g = as_layout(ct_of(y), type(full), xt.layout.split_axes());
        Layout l = xt.layout;
        l.partial = type(g).mesh >= 0 ? type(g).layout.partial : 0;
        Layout plain = xt.layout;
        plain.partial = 0;
        ValueId gx = expand(g, op, l);
        ValueId mx = expand(full, op, plain);
        add_ct(x, mul(gx, indicator(ew(Ew::Eq, {x, mx}), xt.dtype)));
    }

    void adjoint_contract(const Op& op) {
        auto spec = parse_einsum(op.text);
        MESHC_ASSERT(spec && spec->inputs.size() == op.operands.size(), "a contraction's spec names its operands");
        ValueId y = op.results[0];
        const TensorType yt = type(y);
        std::map<char, AxisList> split;
        std::map<char, int64_t> size;
        AxisSet letter_axes = 0;
        auto visit = [&](const std::string& letters, const TensorType& t) {
            for (size_t i = 0; i < letters.size(); ++i) {
                size[letters[i]] = t.shape[i];
                if (t.mesh >= 0) {
                    split[letters[i]] = t.layout.dims[i];
                    letter_axes |= axes_of(t.layout.dims[i]);
                }
            }
        };
        for (size_t k = 0; k < op.operands.size(); ++k) visit(spec->inputs[k], type(op.operands[k]));
        visit(spec->output, yt);
        for (size_t k = 0; k < op.operands.size(); ++k) {
            ValueId xk = op.operands[k];
            if (!active(xk)) continue;
            const std::string& sk = spec->inputs[k];
            for (size_t i = 0; i < sk.size(); ++i) {
                if (sk.find(sk[i], i + 1) != std::string::npos) {
                    fail(op.span, fmt::format("cannot differentiate the contraction \"{}\": index '{}' repeats in one operand",
                                              op.text, sk[i]));
                }
            }
            AxisSet forbid = letter_axes;
            std::vector<ValueId> others;
            Einsum adj;
            adj.inputs.push_back(spec->output);
            std::string avail = spec->output;
            for (size_t j = 0; j < op.operands.size(); ++j) {
                if (j == k) continue;
                forbid |= type(op.operands[j]).layout.partial;
                others.push_back(op.operands[j]);
                adj.inputs.push_back(spec->inputs[j]);
                avail += spec->inputs[j];
            }
            ValueId g = as_layout(ct_of(y), yt, forbid);
            bool placed = type(g).mesh >= 0;
            std::string present;
            for (char ch : sk) {
                if (avail.find(ch) != std::string::npos) present += ch;
            }
            adj.output = present;
            TensorType r = type(xk);
            r.dtype = yt.dtype;
            r.shape.clear();
            r.layout = Layout::replicated(0);
            for (char ch : present) {
                r.shape.push_back(size[ch]);
                r.layout.dims.push_back(placed ? split[ch] : AxisList{});
            }
            AxisSet pending = placed ? type(g).layout.partial : 0;
            for (ValueId o : others) pending |= type(o).layout.partial;
            std::set<char> seen;
            for (char ch : avail) {
                if (sk.find(ch) == std::string::npos && seen.insert(ch).second && placed) pending |= axes_of(split[ch]);
            }
            r.layout.partial = pending;
            r.mesh = type(g).mesh;
            std::vector<ValueId> operands{g};
            operands.insert(operands.end(), others.begin(), others.end());
            Op c{OpKind::Contract};
            c.text = adj.text();
            c.operands = std::move(operands);
            ValueId dx = emit(std::move(c), r);
            if (present.size() < sk.size()) {
                // Indices only xk had were summed in the forward: broadcast them back.
                std::vector<int64_t> shape;
                Layout mid = Layout::replicated(sk.size());
                Layout full = Layout::replicated(sk.size());
                mid.partial = full.partial = pending;
                size_t j = 0;
                for (size_t i = 0; i < sk.size(); ++i) {
                    bool here = present.find(sk[i]) != std::string::npos;
                    shape.push_back(here ? size[sk[i]] : 1);
                    if (placed) {
                        full.dims[i] = split[sk[i]];
                        if (here) mid.dims[i] = r.layout.dims[j];
                    }
                    if (here) ++j;
                }
                dx = broadcast(reshape(dx, shape, mid), type(xk).shape, full);
            }
            add_ct(xk, dx);
        }
    }

    void adjoint_slice(const Op& op) {
        ValueId x = op.operands[0], y = op.results[0];
        if (!active(x)) return;
        ValueId g = as_layout(ct_of(y), type(y), 0);
        auto d = static_cast<size_t>(op.dim);
        if (op.kind == OpKind::Pad) {
            // The adjoint of a pad is the slice at the same start (a run-time one too).
            TensorType t = type(g);
            t.shape = type(x).shape;
            Op s{OpKind::Slice};
            s.dim = op.dim;
            s.ints = {op.ints[0], type(x).shape[d]};
            s.operands = {g};
            if (op.operands.size() == 2) s.operands.push_back(op.operands[1]);
            s.text = "pad";
            add_ct(x, emit(std::move(s), std::move(t)));
            return;
        }
        if (op.operands.size() == 2) {
            // A run-time start: the cotangent padded with zeros at the same start.
            TensorType r = type(g);
            r.shape = type(x).shape;
            Op p{OpKind::Pad};
            p.dim = op.dim;
            p.ints = {0, type(x).shape[d]};
            p.operands = {g, op.operands[1]};
            add_ct(x, emit(std::move(p), std::move(r)));
            return;
        }
        int64_t start = op.ints[0], n = op.ints[1], total = type(x).shape[d];
        std::vector<ValueId> parts;
        auto pad = [&](int64_t len) {
            TensorType t = type(g);
            t.shape[d] = len;
            parts.push_back(zeros(t));
        };
        if (start > 0) pad(start);
        parts.push_back(g);
        if (total - start - n > 0) pad(total - start - n);
        if (parts.size() == 1) return add_ct(x, g);
        TensorType r = type(g);
        r.shape = type(x).shape;
        Op c{OpKind::Concat};
        c.dim = op.dim;
        c.operands = std::move(parts);
        add_ct(x, emit(std::move(c), std::move(r)));
    }

    void adjoint_concat(const Op& op) {
        ValueId y = op.results[0];
        ValueId g = as_layout(ct_of(y), type(y), 0);
        auto d = static_cast<size_t>(op.dim);
        int64_t offset = 0;
        for (ValueId p : op.operands) {
            int64_t len = type(p).shape[d];
            if (active(p)) {
                TensorType t = type(g);
                t.shape = type(p).shape;
                Op s{OpKind::Slice};
                s.dim = op.dim;
                s.ints = {offset, len};
                s.operands = {g};
                add_ct(p, emit(std::move(s), std::move(t)));
            }
            offset += len;
        }
    }

    void adjoint_embedding(const Op& op) {
        // y[n..., :] = table[ids[n...], :]; the table's cotangent is one_hot(ids)^T @ g,
        // whatever the table's split (its pending sum is completed where its type asks).
        ValueId table = op.operands[0], ids = op.operands[1], y = op.results[0];
        if (!active(table)) return;
        const TensorType tt = type(table), it = type(ids), yt = type(y);
        std::string letters;
        for (size_t i = 0; i < it.rank(); ++i) letters += static_cast<char>('a' + i);
        AxisSet forbid = yt.layout.split_axes();
        ValueId g = as_layout(ct_of(y), yt, forbid);
        bool placed = type(g).mesh >= 0;
        TensorType oh = it;
        oh.dtype = DType::F32;
        oh.shape.push_back(tt.shape[0]);
        oh.layout.dims.push_back(AxisList{});
        oh.layout.partial = 0;
        if (oh.mesh < 0 && placed) {
            ids = place(ids, type(g).mesh);
            oh.mesh = type(g).mesh;
            oh.layout = Layout::replicated(oh.rank());
        }
        Op one{OpKind::OneHot};
        one.ints = {tt.shape[0]};
        one.operands = {ids};
        ValueId hot = cast(emit(std::move(one), oh), yt.dtype);
        TensorType r = tt;
        r.dtype = yt.dtype;
        r.mesh = type(g).mesh;
        r.layout = Layout::replicated(2);
        if (placed) {
            r.layout.dims[1] = type(g).layout.dims[it.rank()];
            r.layout.partial = type(g).layout.partial;
            for (size_t i = 0; i < it.rank(); ++i) r.layout.partial |= axes_of(type(g).layout.dims[i]);
        }
        Op c{OpKind::Contract};
        c.text = letters + "y," + letters + "z->yz";
        c.operands = {hot, g};
        add_ct(table, emit(std::move(c), std::move(r)));
    }

    /// The values used inside `op`'s regions but defined outside them.
    std::vector<ValueId> captured(const Op& op) {
        std::unordered_set<ValueId> inner;
        std::set<ValueId> used;
        std::function<void(const std::vector<Op>&)> walk = [&](const std::vector<Op>& ops) {
            for (const Op& o : ops) {
                for (ValueId v : o.operands) used.insert(v);
                for (const Region& r : o.regions) {
                    inner.insert(r.args.begin(), r.args.end());
                    walk(r.ops);
                    used.insert(r.yields.begin(), r.yields.end());
                }
                inner.insert(o.results.begin(), o.results.end());
            }
        };
        for (const Region& r : op.regions) {
            walk(r.ops);
            used.insert(r.yields.begin(), r.yields.end());
        }
        std::vector<ValueId> out;
        for (ValueId v : used) {
            if (!inner.count(v) && active(v)) out.push_back(v);
        }
        return out;
    }

    /// A copy of `ops` with fresh result values (operands through `map`, else as they are).
    std::vector<Op> recompute(const std::vector<Op>& ops, Map& map) {
        std::vector<Op> out;
        auto get = [&](ValueId v) {
            auto it = map.find(v);
            return it == map.end() ? v : it->second;
        };
        for (const Op& op : ops) {
            if (op.kind == OpKind::Print || op.kind == OpKind::Save) continue;
            Op n = op;
            for (ValueId& v : n.operands) v = get(v);
            for (Region& r : n.regions) {
                r.ops = recompute(r.ops, map);
                for (ValueId& v : r.yields) v = get(v);
            }
            for (ValueId& r : n.results) {
                ValueId fresh = g_.add_value(type(r), g_.names[r]);
                if (active(r)) active_.insert(fresh);
                map[r] = fresh;
                r = fresh;
            }
            if (n.kind == OpKind::AllReduce && n.reduce == ReduceKind::Max) max_done_[n.operands[0]] = n.results[0];
            if (n.kind == OpKind::Constant) constants_[n.results[0]] = n.number;
            out.push_back(std::move(n));
        }
        return out;
    }

    /// `if`: a backward `if` on the same condition; each branch recomputes its forward
    /// ops, runs their adjoints, and yields the cotangents of the values it captured
    /// (zeros where it did not use one), whole (no pending sum) so both branches agree.
    void adjoint_if(const Op& op) {
        std::vector<ValueId> caps = captured(op);
        if (caps.empty()) return;
        std::vector<TensorType> want;
        for (ValueId c : caps) {
            TensorType t = type(c);
            t.layout.partial = 0;
            want.push_back(t);
        }
        Op back{OpKind::If};
        back.operands = op.operands;
        back.span = op.span;
        back.call_path = op.call_path;
        back.inlined_callee = op.inlined_callee;
        back.inlined_call = op.inlined_call;
        back.backward = true;
        std::vector<Op>* saved_cur = cur_;
        Span saved_span = span_;
        std::vector<Span> saved_path = call_path_;
        auto saved_inlined = inlined_;
        std::string saved_reason = reason_;
        for (const Region& region : op.regions) {
            Region nr;
            auto outer = std::move(ct_);
            ct_.clear();
            Map map;
            std::vector<Op> ops = recompute(region.ops, map);
            nr.ops = ops;
            cur_ = &nr.ops;
            for (size_t k = 0; k < op.results.size(); ++k) {
                auto it = outer.find(op.results[k]);
                if (it == outer.end()) continue;
                ValueId yk = region.yields[k];
                auto m = map.find(yk);
                ValueId y = m == map.end() ? yk : m->second;
                if (active(y)) add_ct(y, it->second);
            }
            backward(ops);
            span_ = saved_span;
            call_path_ = saved_path;
            inlined_ = saved_inlined;
            reason_ = saved_reason;
            for (size_t i = 0; i < caps.size(); ++i) {
                auto it = ct_.find(caps[i]);
                nr.yields.push_back(it == ct_.end() ? zeros(want[i]) : coerce(it->second, want[i]));
            }
            ct_ = std::move(outer);
            cur_ = saved_cur;
            // Conversions made in this branch are not visible after it.
            for (auto c = coerced_.begin(); c != coerced_.end();) {
                c = std::get<3>(c->first) == static_cast<const void*>(&nr.ops) ? coerced_.erase(c) : std::next(c);
            }
            back.regions.push_back(std::move(nr));
        }
        for (const TensorType& t : want) back.results.push_back(g_.add_value(t));
        std::vector<ValueId> results = back.results;
        cur_->push_back(std::move(back));
        for (size_t i = 0; i < caps.size(); ++i) add_ct(caps[i], results[i]);
    }

    const Module& m_;
    const SourceManager& sources_;
    DiagnosticEngine& diags_;
    const AutodiffOptions& options_;
    Function g_;
    Span call_span_;
    Span span_;
    std::pair<int32_t, uint32_t> inlined_{-1, 0};  // the forward op's inlined_callee and inlined_call
    int32_t inlined_callee_ = -1;  // flatten: the innermost call being inlined (-1: none)
    uint32_t inlined_call_ = 0;
    uint32_t inlined_calls_ = 0;   // calls inlined so far
    std::vector<Span> call_path_;   // the forward op's call_path, for the ops differentiating it
    std::vector<Span> call_stack_;  // the calls being inlined by flatten(), outermost first
    std::string reason_;
    std::vector<Op>* cur_ = nullptr;
    const std::vector<Op>* top_ = nullptr;         // the flattened forward pass
    bool in_segment_ = false;
    std::map<size_t, size_t> segments_;             // @checkpoint: last op -> first op
    size_t op_count_ = 0;
    std::unordered_map<ValueId, double> constants_;
    std::unordered_map<ValueId, ValueId> max_done_;  // pending max -> its all_reduce(max)
    std::unordered_set<ValueId> active_;
    std::map<ValueId, ValueId> ct_;
    std::map<std::tuple<ValueId, int32_t, std::string, const void*>, ValueId> coerced_;
};

bool holds_grad(const std::vector<Op>& ops) {
    for (const Op& op : ops) {
        if (op.kind == OpKind::Grad) return true;
        for (const Region& r : op.regions) {
            if (holds_grad(r.ops)) return true;
        }
    }
    return false;
}

}  // namespace

void autodiff(ir::Module& module, const SourceManager& sources, DiagnosticEngine& diags,
              const AutodiffOptions& options) {
    // (callee, with value, leaves) -> the derived function; -1 when deriving it failed.
    std::map<std::tuple<int32_t, bool, size_t>, int32_t> derived;
    // Functions whose GIR the checker left incomplete, and their callers: not touched.
    std::vector<int> broken(module.functions.size(), -1);
    std::function<bool(size_t)> is_broken = [&](size_t f) -> bool {
        if (f >= broken.size()) return false;  // made here
        if (broken[f] >= 0) return broken[f] == 1;
        broken[f] = module.functions[f].has_errors ? 1 : 0;
        if (broken[f] == 0) {
            bool b = false;
            ir::for_each_op(module.functions[f].ops, [&](const Op& op) {
                if (op.kind == OpKind::Call || op.kind == OpKind::Grad) b = b || op.callee < 0 || is_broken(static_cast<size_t>(op.callee));
            });
            broken[f] = b ? 1 : 0;
        }
        return broken[f] == 1;
    };
    for (;;) {
        // A function reaches a grad if it holds one or calls one that does.
        size_t n = module.functions.size();
        std::vector<int> reaches(n, -1);
        std::function<bool(size_t)> reach = [&](size_t f) -> bool {
            if (f >= n) return true;  // made in this round: not in the module yet, wait a round
            if (reaches[f] >= 0) return reaches[f] == 1;
            reaches[f] = 0;
            bool r = holds_grad(module.functions[f].ops);
            ir::for_each_op(module.functions[f].ops, [&](const Op& op) {
                if (op.kind == OpKind::Call && reach(static_cast<size_t>(op.callee))) r = true;
            });
            reaches[f] = r ? 1 : 0;
            return r;
        };
        std::vector<Function> made;
        bool any = false;
        bool progressed = false;
        for (size_t f = 0; f < n; ++f) {
            if (is_broken(f)) continue;
            std::function<void(std::vector<Op>&)> walk = [&](std::vector<Op>& ops) {
                for (Op& op : ops) {
                    for (Region& r : op.regions) walk(r.ops);
                    if (op.kind != OpKind::Grad) continue;
                    bool with_value = op.dim == 1;
                    size_t wrt = op.results.size() - (with_value ? 1 : 0);
                    auto key = std::make_tuple(op.callee, with_value, wrt);
                    auto it = derived.find(key);
                    if (it != derived.end() && it->second < 0) continue;  // failed: reported
                    any = true;
                    if (reach(static_cast<size_t>(op.callee))) continue;  // its inner grads first
                    if (it == derived.end()) {
                        Differentiator d(module, sources, diags, options);
                        try {
                            made.push_back(d.derive(static_cast<size_t>(op.callee), with_value, wrt, op.span));
                        } catch (const Failed&) {
                            // Reported; the other grads are still derived for their errors.
                            derived.emplace(key, -1);
                            progressed = true;
                            continue;
                        }
                        it = derived.emplace(key, static_cast<int32_t>(n + made.size() - 1)).first;
                    }
                    op.kind = OpKind::Call;
                    op.callee = it->second;
                    op.dim = -1;
                    progressed = true;
                }
            };
            walk(module.functions[f].ops);
        }
        MESHC_ASSERT(!any || progressed || diags.has_errors(), "every grad waits on another (recursion?)");
        broken.resize(n + made.size(), 0);
        for (Function& f : made) module.functions.push_back(std::move(f));
        if (!any || !progressed) return;
    }
}

}  // namespace meshc::transform

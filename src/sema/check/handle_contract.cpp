// Contractions (matmul, einsum) and reductions: the result layout from the operands'
// splits, pending sums over contracted axes, and the choice between gathering and
// completing a sum.
#include "sema/check/context.h"

namespace meshc::sema::check {

// ---------------------------------------------------------------- contractions

ValueId FunctionBuilder::matmul(ValueId a, ValueId b, Span span) {
    size_t ra = type(a).rank(), rb = type(b).rank();
    // The contracted dims, in the words of `@` (the einsum letters below are internal).
    if (ra >= 1 && rb >= 1) {
        int64_t ka = type(a).shape[ra - 1], kb = type(b).shape[rb == 1 ? 0 : rb - 2];
        if (ka != kb) {
            fail(DiagCode::E0307, span,
                 fmt::format("`@` of shapes {} and {}: the left operand's last dim is {}, the right operand's {} dim is {}",
                             shape_string(type(a).shape), shape_string(type(b).shape), ka, rb == 1 ? "only" : "second-to-last",
                             kb),
                 {{"help: `a @ b` contracts the last dim of `a` with the rows of `b`; transpose an operand "
                   "(`transpose(b, [1, 0])`) or use `einsum` to contract other dims",
                   {}}});
        }
    }
    std::string batch = "abcdefgh";
    std::string spec;
    if (ra == 1 && rb == 1) spec = "k,k->";
    else if (ra == 1 && rb == 2) spec = "k,kn->n";
    else if (ra == 2 && rb == 1) spec = "mk,k->m";
    else if (ra == 1 && rb > 2 && rb - 2 <= batch.size()) {
        // NumPy: the vector is a [1, k] matrix against each matrix of the batch; the 1 is dropped.
        std::string bb = batch.substr(0, rb - 2);
        spec = "k," + bb + "kn->" + bb + "n";
    } else if (ra > 2 && rb == 1 && ra - 2 <= batch.size()) {
        std::string ba = batch.substr(0, ra - 2);
        spec = ba + "mk,k->" + ba + "m";
    } else if (ra >= 2 && rb >= 2 && std::max(ra, rb) - 2 <= batch.size()) {
        // NumPy batching: batch dims align from the right; a missing dim or one of size 1
        // broadcasts (that operand drops the dim: a reshape, never communication).
        size_t nb = std::max(ra, rb) - 2;
        std::string bo = batch.substr(0, nb), ba, bb;
        std::vector<int64_t> sa, sb;
        for (size_t i = 0; i < nb; ++i) {
            size_t da = ra - 2 >= nb - i ? i - (nb - (ra - 2)) : SIZE_MAX;  // dim of a aligned with batch i
            size_t db = rb - 2 >= nb - i ? i - (nb - (rb - 2)) : SIZE_MAX;
            bool in_a = i >= nb - (ra - 2), in_b = i >= nb - (rb - 2);
            int64_t na = in_a ? type(a).shape[da] : 1, nbv = in_b ? type(b).shape[db] : 1;
            if (na != nbv && na != 1 && nbv != 1) {
                fail(DiagCode::E0307, span,
                     fmt::format("`@` of shapes {} and {}: batch dims {} and {} do not broadcast", shape_string(type(a).shape),
                                 shape_string(type(b).shape), na, nbv));
            }
            bool a_keeps = in_a && (na != 1 || nbv == 1);
            bool b_keeps = in_b && (nbv != 1 || na == 1);
            if (a_keeps) {
                ba.push_back(bo[i]);
                sa.push_back(na);
            }
            if (b_keeps) {
                bb.push_back(bo[i]);
                sb.push_back(nbv);
            }
        }
        // An operand that drops a size-1 batch dim is reshaped without it.
        auto drop = [&](ValueId v, size_t r, std::vector<int64_t> kept) {
            if (kept.size() == r - 2) return v;
            kept.push_back(type(v).shape[r - 2]);
            kept.push_back(type(v).shape[r - 1]);
            return reshape(v, kept, span);
        };
        a = drop(a, ra, sa);
        b = drop(b, rb, sb);
        spec = ba + "mk," + bb + "kn->" + bo + "mn";
    } else {
        fail(DiagCode::E0307, span,
             fmt::format("`@` of shapes {} and {} is not supported", shape_string(type(a).shape), shape_string(type(b).shape)),
             {{"`@` takes vectors, matrices and batches of matrices (NumPy's matmul); "
               "use `einsum` for other contractions", {}}});
    }
    return contract(spec, a, b, span);
}

ValueId FunctionBuilder::contract(std::string spec, ValueId a, ValueId b, Span span) {
    auto arrow = spec.find("->");
    auto comma = spec.find(',');
    if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) {
        fail(DiagCode::E0309, span, fmt::format("einsum spec \"{}\" must look like \"ij,jk->ik\"", spec));
    }
    std::string ia = spec.substr(0, comma), ib = spec.substr(comma + 1, arrow - comma - 1), io = spec.substr(arrow + 2);
    for (const std::string* s : {&ia, &ib, &io}) {
        for (char c : *s) {
            if (c < 'a' || c > 'z') fail(DiagCode::E0309, span, fmt::format("einsum spec \"{}\": indices are lowercase letters", spec));
        }
    }
    for (ValueId x : {a, b}) {
        if (type(x).dtype == DType::Bool && !weak_[x]) {
            fail(DiagCode::E0308, span, fmt::format("a contraction of {}: `@` and `einsum` multiply numbers; cast the bool tensor first",
                                                    type_str(type(x))));
        }
    }
    if (ia.size() != type(a).rank() || ib.size() != type(b).rank()) {
        fail(DiagCode::E0307, span,
             fmt::format("einsum \"{}\" needs operands of rank {} and {}; found {} and {}", spec, ia.size(), ib.size(),
                         shape_string(type(a).shape), shape_string(type(b).shape)));
    }
    if (!weak_[a] && !weak_[b] && type(a).dtype != type(b).dtype) {
        fail(DiagCode::E0308, span, fmt::format("element type mismatch: {} and {}", dtype_name(type(a).dtype), dtype_name(type(b).dtype)));
    }
    std::map<char, int64_t> size;
    std::map<char, std::string_view> dname;
    auto note_sizes = [&](const std::string& idx, ValueId v) {
        for (size_t d = 0; d < idx.size(); ++d) {
            int64_t n = type(v).shape[d];
            auto [it, inserted] = size.emplace(idx[d], n);
            if (!inserted && it->second != n) {
                fail(DiagCode::E0307, span,
                     fmt::format("shape mismatch in contraction: index `{}` is {} in one operand and {} in the other "
                                 "({} and {})", idx[d], it->second, n, shape_string(type(a).shape), shape_string(type(b).shape)));
            }
            if (!dim_names_[v][d].empty()) dname[idx[d]] = dim_names_[v][d];
        }
    };
    note_sizes(ia, a);
    note_sizes(ib, b);
    for (char c : io) {
        if (!size.count(c)) fail(DiagCode::E0309, span, fmt::format("einsum output index `{}` is not an input index", c));
    }
    int32_t mesh = type(a).mesh >= 0 ? type(a).mesh : type(b).mesh;
    if (type(a).mesh >= 0 && type(b).mesh >= 0 && type(a).mesh != type(b).mesh) place(b, type(a).mesh, span);
    // Flexible operands: replicated (a later free slice gives consumers their pieces).
    for (ValueId o : {a, b}) {
        if (flexible_[o]) fix_layout(o, mesh, Layout::replicated(type(o).rank()));
    }
    a = place(a, mesh, span, true);
    b = place(b, mesh, span, true);
    if (mesh >= 0) {
        // Both partial: reduce the second first (the product is linear in each operand).
        if (type(a).layout.partial && type(b).layout.partial) {
            b = reduce_partial(b, type(b).layout.partial, span, "a contraction of two pending sums");
        }
        const Mesh& m = in_.module_.meshes[mesh];
        auto axes_of = [&](ValueId v, const std::string& idx, char c) -> sema::AxisList {
            auto p = idx.find(c);
            return p == std::string::npos ? sema::AxisList{} : type(v).layout.dims[p];
        };
        // Agree on each index's split: a replicated side is sliced for free; two different
        // splits: one operand follows the other; an axis splitting two indices of the
        // result: one of them is gathered. The candidate plans are costed (docs/language.md "Cost model"),
        // with the conversion of the result to the type it is wanted in, and the
        // cheapest wins (ties: the first operand leads, the later index is gathered).
        struct Plan {
            Layout want_a, want_b;
            AxisSet used = 0;
            bool pending_choice = false;
            double pending_gather = 0;
            bool conflict = false;  // a choice was made (two splits, or an axis twice)
        };
        // gather_both: a contracted index split differently on the two sides is gathered
        // on both (no pending sum), instead of one side following the other.
        auto make_plan = [&](bool a_leads, bool gather_later, bool gather_both, bool gather_contracted = false) {
            Plan pl{type(a).layout, type(b).layout};
            for (auto [c, n] : size) {
                auto sa = axes_of(a, ia, c), sb = axes_of(b, ib, c);
                bool in_a = ia.find(c) != std::string::npos, in_b = ib.find(c) != std::string::npos;
                if (gather_contracted && io.find(c) == std::string::npos && (!sa.empty() || !sb.empty())) {
                    // Every contracted split gathered on both sides: no pending sum at all.
                    if (in_a) pl.want_a.dims[ia.find(c)].clear();
                    if (in_b) pl.want_b.dims[ib.find(c)].clear();
                    pl.conflict = true;
                    continue;
                }
                if (!in_a || !in_b || sa == sb) continue;
                bool contracted = io.find(c) == std::string::npos;
                if (contracted && (sa.empty() || sb.empty())) {
                    // Split on one side only: slice the other (free) and leave a pending
                    // sum, or gather the split side now. Slicing is free and the sum may
                    // never need completing, so slice, remember what a gather would cost,
                    // and lower the function again with the gather if completing the sum
                    // turns out dearer (see settle_choices()).
                    bool a_split = !sa.empty();
                    ValueId split = a_split ? a : b;
                    const AxisList& axes = a_split ? sa : sb;
                    AxisSet group = 0;
                    for (uint8_t x : axes) group |= sema::axis_bit(x);
                    double gathered = static_cast<double>(type(split).local_bytes(&m)) * static_cast<double>(m.group_size(group));
                    if (in_.gather_hints_.count({ir::function_label(f_), key_of(span)})) {
                        (a_split ? pl.want_a.dims[ia.find(c)] : pl.want_b.dims[ib.find(c)]).clear();
                        continue;
                    }
                    pl.pending_gather += collective_cost(CollectiveKind::AllGather, m, group, gathered).seconds;
                    pl.pending_choice = true;
                }
                if (gather_both && contracted && !sa.empty() && !sb.empty()) {
                    pl.want_a.dims[ia.find(c)].clear();
                    pl.want_b.dims[ib.find(c)].clear();
                    pl.conflict = true;
                } else if (sb.empty()) {
                    pl.want_b.dims[ib.find(c)] = sa;
                } else if (sa.empty()) {
                    pl.want_a.dims[ia.find(c)] = sb;
                } else if (a_leads) {
                    pl.want_b.dims[ib.find(c)] = sa;
                    pl.conflict = true;
                } else {
                    pl.want_a.dims[ia.find(c)] = sb;
                    pl.conflict = true;
                }
            }
            // An axis may split only one index of the result (and not be pending as well).
            std::map<uint8_t, char> owner;
            auto axes_at = [&](char c) -> AxisList {
                auto p = ia.find(c);
                return p != std::string::npos ? pl.want_a.dims[p] : pl.want_b.dims[ib.find(c)];
            };
            auto clear_index = [&](char c) {
                if (auto p = ia.find(c); p != std::string::npos) pl.want_a.dims[p].clear();
                if (auto p = ib.find(c); p != std::string::npos) pl.want_b.dims[p].clear();
            };
            // Each conflict unsplits one index (the later one, or the one holding the axis
            // first); then the ownership is checked again from the start, so an index that
            // takes an axis over never collides with a third one.
            for (bool again = true; again;) {
                again = false;
                owner.clear();
                for (auto [c, n] : size) {
                    for (uint8_t x : axes_at(c)) {
                        auto it = owner.find(x);
                        if (it == owner.end() || it->second == c) {
                            owner[x] = c;
                            continue;
                        }
                        pl.conflict = true;
                        clear_index(gather_later ? c : it->second);
                        again = true;
                        break;
                    }
                    if (again) break;
                }
            }
            for (auto [x, c] : owner) pl.used |= sema::axis_bit(x);
            return pl;
        };
        auto plan_cost = [&](const Plan& pl) {
            double cost = coercion_cost(a, mesh, pl.want_a) + coercion_cost(b, mesh, pl.want_b);
            if (expected_ && expected_->mesh == mesh && key_of(expected_span_) == key_of(span)) {
                TensorType r;
                r.dtype = type(a).dtype;
                r.mesh = mesh;
                r.layout = Layout::replicated(io.size());
                for (size_t d = 0; d < io.size(); ++d) {
                    char c = io[d];
                    r.shape.push_back(size[c]);
                    auto p = ia.find(c);
                    r.layout.dims[d] = p != std::string::npos ? pl.want_a.dims[p] : pl.want_b.dims[ib.find(c)];
                }
                r.layout.partial = pl.want_a.partial | pl.want_b.partial;
                for (auto [c, n] : size) {
                    if (io.find(c) != std::string::npos) continue;
                    auto p = ia.find(c);
                    const AxisList& axes = p != std::string::npos ? pl.want_a.dims[p] : pl.want_b.dims[ib.find(c)];
                    for (uint8_t x : axes) r.layout.partial |= sema::axis_bit(x);
                }
                if (r.shape == expected_->shape) cost += coercion_cost_from(r, expected_->layout);
            }
            return cost;
        };
        // Alternative 0 is the locally cheapest of the plans above; the whole-function
        // search (choose()) may take another, or the plan that gathers every contracted
        // split (a pending sum completed on the result can cost more than the gathers).
        std::vector<Plan> plans{make_plan(true, true, false)};
        if (plans[0].conflict) {
            double best = plan_cost(plans[0]);
            size_t best_at = 0;
            for (auto [a_leads, later, both] : {std::tuple{true, false, false}, std::tuple{false, true, false},
                                               std::tuple{false, false, false}, std::tuple{true, true, true}}) {
                plans.push_back(make_plan(a_leads, later, both));
                double cost = plan_cost(plans.back());
                if (cost < best) {
                    best = cost;
                    best_at = plans.size() - 1;
                }
            }
            std::swap(plans[0], plans[best_at]);
        }
        plans.push_back(make_plan(true, true, false, true));
        // One operand gathered whole and sliced (free) like the other on the indices they
        // share: the other keeps its splits, and its pending sum, which no axis of the
        // gathered one then meets.
        for (int side = 0; side < 2; ++side) {
            Plan pl{type(a).layout, type(b).layout};
            Layout& whole = side == 0 ? pl.want_a : pl.want_b;
            const Layout& kept = side == 0 ? pl.want_b : pl.want_a;
            const std::string& iw = side == 0 ? ia : ib;
            const std::string& ik = side == 0 ? ib : ia;
            for (size_t d = 0; d < whole.dims.size(); ++d) {
                auto p = ik.find(iw[d]);
                whole.dims[d] = p == std::string::npos ? AxisList{} : kept.dims[p];
            }
            pl.used = kept.split_axes();
            pl.conflict = true;
            plans.push_back(std::move(pl));
        }
        std::vector<Plan> distinct;
        for (Plan& pl : plans) {
            bool dup = false;
            for (const Plan& d : distinct) dup |= d.want_a == pl.want_a && d.want_b == pl.want_b;
            if (!dup) distinct.push_back(std::move(pl));
        }
        Plan chosen = std::move(distinct[static_cast<size_t>(choose(span, 1, static_cast<int>(distinct.size())))]);
        if (chosen.pending_choice) {
            pending_gather_cost_ += chosen.pending_gather;
            choice_pending_ = true;
        }
        Layout want_a = std::move(chosen.want_a);
        Layout want_b = std::move(chosen.want_b);
        AxisSet used = chosen.used;
        want_a.partial = type(a).layout.partial;
        want_b.partial = type(b).layout.partial;
        if ((want_a.partial | want_b.partial) & used) {
            a = reduce_partial(a, type(a).layout.partial & used, span, "a pending sum over an axis that splits the contraction");
            b = reduce_partial(b, type(b).layout.partial & used, span, "a pending sum over an axis that splits the contraction");
            want_a.partial = type(a).layout.partial;
            want_b.partial = type(b).layout.partial;
        }
        a = plan_coercion(a, mesh, want_a, span, "operands of a contraction must agree on their splits", true);
        b = plan_coercion(b, mesh, want_b, span, "operands of a contraction must agree on their splits", true);
    }
    if (weak_[a] && !weak_[b] && type(a).dtype != type(b).dtype) settle_dtype(a, type(b).dtype);
    if (weak_[b] && !weak_[a] && type(b).dtype != type(a).dtype) settle_dtype(b, type(a).dtype);
    TensorType t;
    t.dtype = type(a).dtype;
    t.mesh = mesh;
    t.layout = Layout::replicated(io.size());
    std::vector<std::string_view> names;
    for (size_t d = 0; d < io.size(); ++d) {
        char c = io[d];
        t.shape.push_back(size[c]);
        names.push_back(dname.count(c) ? dname[c] : "");
        if (mesh >= 0) {
            auto p = ia.find(c);
            t.layout.dims[d] = p != std::string::npos ? type(a).layout.dims[p] : type(b).layout.dims[ib.find(c)];
        }
    }
    if (mesh >= 0) {
        t.layout.partial = type(a).layout.partial | type(b).layout.partial;
        for (auto [c, n] : size) {
            if (io.find(c) != std::string::npos) continue;
            auto p = ia.find(c);
            const auto& axes = p != std::string::npos ? type(a).layout.dims[p] : type(b).layout.dims[ib.find(c)];
            for (uint8_t x : axes) t.layout.partial |= sema::axis_bit(x);
        }
    }
    ir::Op op{ir::OpKind::Contract};
    op.text = spec;
    op.operands = {a, b};
    op.span = span;
    ValueId v = emit(std::move(op), std::move(t), std::move(names));
    if (choice_pending_) {
        choices_[v] = Choice{key_of(span), pending_gather_cost_, 0};
        choice_pending_ = false;
        pending_gather_cost_ = 0;
    }
    return v;
}

// ---------------------------------------------------------------- reductions

ValueId FunctionBuilder::reduce(ir::ReduceKind kind, ValueId x, std::vector<int64_t> dims, bool keep, Span span) {
    const TensorType& t = type(x);
    if (flexible_[x]) fix_layout(x, t.mesh, Layout::replicated(t.rank()));
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    if (kind == ir::ReduceKind::Max && type(x).layout.partial) {
        x = reduce_partial(x, type(x).layout.partial, span, "`max_over` needs the summed value");
    }
    // Reduced dims that are split: reduce the pieces and leave a pending sum (alternative
    // 0), or gather those dims first (the whole-function search's alternative 1: a small
    // operand gathered can cost less than completing the result, or its sum twice).
    if (const Mesh* m = in_.module_.mesh(type(x).mesh); m && !dry_cost_) {
        Layout gathered = type(x).layout;
        AxisSet moved = 0;
        for (int64_t d : dims) {
            if (d < 0 || static_cast<size_t>(d) >= gathered.dims.size()) continue;
            for (uint8_t a : gathered.dims[static_cast<size_t>(d)]) moved |= sema::axis_bit(a);
            gathered.dims[static_cast<size_t>(d)].clear();
        }
        if (m->group_size(moved) > 1 && choose(span, 2, 2) == 1) {
            x = plan_coercion(x, type(x).mesh, gathered, span, "the reduced dims are gathered first", true);
        }
    }
    const TensorType& xt = type(x);
    std::vector<std::string_view> names;
    AxisSet reduced_axes = 0;
    for (size_t d = 0; d < xt.rank(); ++d) {
        bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
        if (reduced) {
            for (uint8_t a : xt.layout.dims[d]) reduced_axes |= sema::axis_bit(a);
            if (keep) names.emplace_back();
            continue;
        }
        names.push_back(dim_names_[x][d]);
    }
    // Reduced split dims leave a pending sum (sum, mean), or a pending max that the
    // all_reduce(max) below completes at once (the reduce's rule: ir/op_rules.h).
    ir::Op op{ir::OpKind::Reduce};
    op.reduce = kind;
    op.ints = dims;
    op.keep_dims = keep;
    op.operands = {x};
    op.span = span;
    TensorType r = ir::infer_result(in_.module_, op, {&xt});
    ValueId v = emit(std::move(op), r, names);
    if (kind == ir::ReduceKind::Max && reduced_axes) {
        // A max over a split dim is completed at once: all_reduce(max), never partial.
        Layout l = type(v).layout;
        l.partial &= ~reduced_axes;
        v = collective(ir::OpKind::AllReduce, v, reduced_axes, -1, -1, l, span,
                       "a max over a split dim is completed at once", true);
        ops_->back().reduce = ir::ReduceKind::Max;
    }
    return v;
}

}  // namespace meshc::sema::check

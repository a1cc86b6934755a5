// Element-wise operators: broadcasting, element types, and the sharding rule that
// joins the operands' layouts (pending sums through linear ops).
#include "sema/check/context.h"

namespace meshc::sema::check {

// ---------------------------------------------------------------- element-wise

namespace {
// The element-wise table (ir/ew.def): `+`, `-` and negation pass pending sums on.
bool is_linear(ir::Ew ew) { return ir::ew_rule(ew).pending == ir::EwPending::Sum; }
bool is_comparison(ir::Ew ew) { return ir::ew_rule(ew).result == ir::EwResult::Bool; }
}  // namespace

ValueId FunctionBuilder::elementwise(ir::Ew ew, std::vector<ValueId> operands, Span span) {
    // Arithmetic of float literals alone (`1.0 - beta2` with `let beta2 = 0.999;`) is
    // folded exactly, as Python folds it before JAX sees a weak float: the result is one
    // weak literal, rounded once to the type its context gives it (in bf16, 1 - 0.999
    // computed per op would be 1 - 1 = 0).
    if (ew == ir::Ew::Add || ew == ir::Ew::Sub || ew == ir::Ew::Mul || ew == ir::Ew::Div || ew == ir::Ew::Neg) {
        std::vector<double> numbers;
        for (ValueId o : operands) {
            auto [list, index] = producer_[o];
            if (!weak_[o] || !list || (*list)[index].kind != ir::OpKind::Constant || !is_float(type(o).dtype) ||
                type(o).mesh >= 0 || type(o).rank() != 0) {
                break;
            }
            numbers.push_back((*list)[index].number);
        }
        if (numbers.size() == operands.size()) {
            double r = 0;
            switch (ew) {
            case ir::Ew::Add: r = numbers[0] + numbers[1]; break;
            case ir::Ew::Sub: r = numbers[0] - numbers[1]; break;
            case ir::Ew::Mul: r = numbers[0] * numbers[1]; break;
            case ir::Ew::Div: r = numbers[0] / numbers[1]; break;
            default: r = -numbers[0]; break;  // Neg
            }
            return constant(r, type(operands[0]).dtype, true, span);
        }
    }
    // Element types: weak literals take the type of the typed operands. A float scalar
    // (rank 0) meeting a float tensor of rank 1 or more takes the tensor's element type
    // (PyTorch's rule for zero-dim tensors: `lr * g` with an f32 `lr` and bf16 `g` is
    // bf16), and so does a scalar broadcast over a tree's leaves, leaf by leaf.
    std::optional<DType> dtype;
    size_t first_data = ew == ir::Ew::Select ? 1 : 0;
    auto yields = [&](size_t i) {
        ValueId o = operands[i];
        if (weak_[o] || !is_float(type(o).dtype) || type(o).rank() != 0) return false;
        if (tree_scalars_.count(o)) return true;
        for (size_t j = first_data; j < operands.size(); ++j) {
            ValueId p = operands[j];
            if (j != i && !weak_[p] && is_float(type(p).dtype) && type(p).rank() > 0) return true;
        }
        return false;
    };
    std::vector<size_t> yielding;
    for (size_t i = first_data; i < operands.size(); ++i) {
        if (weak_[operands[i]]) continue;
        if (yields(i)) {
            yielding.push_back(i);
            continue;
        }
        DType t = type(operands[i]).dtype;
        if (dtype && *dtype != t) {
            fail(DiagCode::E0308, span,
                 fmt::format("element type mismatch: {} and {}", dtype_name(*dtype), dtype_name(t)),
                 {{"convert one side with `cast(x, dtype)`", {}}});
        }
        dtype = t;
    }
    for (size_t i : yielding) {
        DType t = type(operands[i]).dtype;
        if (!dtype) {
            dtype = t;
        } else if (*dtype != t) {
            if (!is_float(*dtype)) {
                fail(DiagCode::E0308, span,
                     fmt::format("element type mismatch: {} and {}", dtype_name(*dtype), dtype_name(t)),
                     {{"convert one side with `cast(x, dtype)`", {}}});
            }
            operands[i] = convert(operands[i], *dtype, span);
        }
    }
    for (size_t i = first_data; i < operands.size(); ++i) {
        if (weak_[operands[i]] && dtype) {
            DType lit = type(operands[i]).dtype;
            bool literal = !producer_[operands[i]].first ||
                           (*producer_[operands[i]].first)[producer_[operands[i]].second].kind == ir::OpKind::Constant;
            // A float literal cannot become an integer (`n + 0.5`); a creation can
            // (`n + iota([8], axis: 0)`: its element type comes from context).
            if (literal && lit == DType::F32 && !is_float(*dtype)) {
                fail(DiagCode::E0308, span, fmt::format("a float literal meets a {} value", dtype_name(*dtype)));
            }
            if (!literal) {
                settle_dtype(operands[i], *dtype);  // a creation (or a chain of them): typed from here on
            } else {
                check_fits(operands[i], *dtype);
                f_.types[operands[i]].dtype = *dtype;
            }
        }
    }
    if (!dtype) dtype = type(operands[first_data]).dtype;
    // A pending operand whose sum this block has completed already is read completed
    // (keeping it pending would sum it again later).
    for (ValueId& o : operands) o = completed_if_known(o);
    if (ew == ir::Ew::Select && type(operands[0]).dtype != DType::Bool) {
        fail(DiagCode::E0308, span, "the condition of `select` must be bool");
    }
    if ((ew == ir::Ew::And || ew == ir::Ew::Or || ew == ir::Ew::Not) && *dtype != DType::Bool) {
        fail(DiagCode::E0308, span, fmt::format("logical operators take bool, found {}", dtype_name(*dtype)));
    }
    // Shapes: NumPy broadcasting (trailing alignment).
    size_t rank = 0;
    for (ValueId o : operands) rank = std::max(rank, type(o).rank());
    std::vector<int64_t> shape(rank, 1);
    std::vector<std::string_view> names(rank);
    for (ValueId o : operands) {
        const TensorType& t = type(o);
        size_t off = rank - t.rank();
        for (size_t d = 0; d < t.rank(); ++d) {
            int64_t n = t.shape[d];
            if (shape[off + d] == 1) {
                shape[off + d] = n;
            } else if (n != 1 && n != shape[off + d]) {
                std::vector<std::string> shapes;
                for (ValueId x : operands) shapes.push_back(shape_string(type(x).shape));
                fail(DiagCode::E0307, span,
                     fmt::format("shape mismatch: {} cannot broadcast (dim {} from the end: {} vs {})",
                                 fmt::join(shapes, " and "), t.rank() - d, shape[off + d], n),
                     {{"element-wise operations broadcast like NumPy: aligned from the last dim, "
                       "each pair equal or one of them 1", {}}});
            }
            if (!dim_names_[o][d].empty() && n == shape[off + d]) names[off + d] = dim_names_[o][d];
        }
    }
    // Meshes.
    int32_t mesh = -1;
    for (ValueId o : operands) {
        int32_t m = type(o).mesh;
        if (m < 0) continue;
        if (mesh >= 0 && m != mesh) {
            fail(DiagCode::E0405, span,
                 fmt::format("mesh mismatch: operands on `{}` and `{}`", in_.module_.meshes[mesh].name,
                             in_.module_.meshes[m].name));
        }
        mesh = m;
    }
    // Layouts. Flexible operands adopt the layout of the fixed ones.
    bool all_flexible = true;
    ValueId leader = ir::kNoValue;
    for (ValueId o : operands) {
        if (flexible_[o]) continue;
        // An unplaced scalar (a literal, a size) is replicated everywhere: it goes with
        // any layout, so it leaves flexible operands flexible.
        if (type(o).rank() == 0 && type(o).mesh < 0) continue;
        all_flexible = false;
        if (leader == ir::kNoValue || type(o).rank() > type(leader).rank() ||
            (type(o).rank() == type(leader).rank() && !type(o).layout.is_replicated() && type(leader).layout.is_replicated())) {
            leader = o;
        }
    }
    for (ValueId& o : operands) {
        if (!flexible_[o]) o = place(o, mesh, span);  // flexible ones take the result's layout below
    }
    Layout result = Layout::replicated(rank);
    if (!all_flexible && leader != ir::kNoValue && mesh >= 0) {
        // Pending sums: linear ops keep them (operands made partial for free); `*` and
        // `/` by a value that is not partial keep them; everything else reduces first.
        AxisSet partial = 0;
        for (ValueId o : operands) partial |= type(o).layout.partial;
        if (partial) {
            bool keep = false;
            if (is_linear(ew)) {
                keep = true;
                // The pending sum can stay (the other operands made partial, free) or be
                // completed now. When this result is wanted whole right away (its consumer's
                // type), compare completing the pending operands now with completing the
                // result: a small pending bias added to a large tensor is summed first.
                if (expected_ && expected_->mesh == mesh && key_of(expected_span_) == key_of(span) && expected_->shape == shape &&
                    !(expected_->layout.partial & partial)) {
                    double now = 0;
                    for (ValueId o : operands) {
                        if (!type(o).layout.partial) continue;
                        Layout whole = type(o).layout;
                        whole.partial = 0;
                        now += coercion_cost(o, mesh, whole);
                    }
                    // The result kept pending: laid out as wanted, except over the pending axes.
                    TensorType pending = *expected_;
                    for (AxisList& d : pending.layout.dims) {
                        AxisList kept_axes;
                        for (auto a : d) {
                            if (!(partial & sema::axis_bit(a))) kept_axes.push_back(a);
                        }
                        d = kept_axes;
                    }
                    pending.layout.partial |= partial;
                    if (now < coercion_cost_from(pending, expected_->layout)) keep = false;
                }
                // The whole-function search may take the other way (choose()).
                if (choose(span, 4, 2) == 1) keep = !keep;
            } else if ((ew == ir::Ew::Mul || (ew == ir::Ew::Div && dtype && is_float(*dtype))) && operands.size() == 2) {
                // (Integer `/` floors: it does not distribute over the pending sum.)
                // `a * s` (and `a / s`) keeps a's pending sum when s is not pending: of the
                // operands that could keep theirs (either factor; the dividend), keep the one
                // whose partner is cheaper to complete.
                double best = std::numeric_limits<double>::infinity();
                int kept = -1;
                for (int k = 0; k < 2; ++k) {
                    if (!type(operands[k]).layout.partial || (ew == ir::Ew::Div && k == 1)) continue;
                    ValueId other = operands[1 - k];
                    double cost = 0;
                    if (type(other).layout.partial) {
                        Layout whole = type(other).layout;
                        whole.partial = 0;
                        cost = coercion_cost(other, mesh, whole);
                    }
                    if (cost < best) {
                        best = cost;
                        kept = k;
                    }
                }
                if (kept >= 0 && operands[0] == operands[1]) {
                    // `p * p`: both factors are the one pending value; completing it once
                    // gives both (keeping one pending would sum it a second time later).
                    kept = -1;
                }
                if (kept >= 0) {
                    ValueId& other = operands[1 - kept];
                    other = reduce_partial(other, type(other).layout.partial, span,
                                           fmt::format("`{}` keeps the other operand's pending sum", ir::ew_name(ew)));
                    partial = type(operands[kept]).layout.partial;
                    keep = true;
                }
            }
            if (!keep) {
                // Completing one pending operand of the result's shape: an all_reduce
                // (alternative 0), or a reduce_scatter into the layout the result is wanted
                // in, or onto one of its dims (the whole-function search's alternatives: the
                // op then works on pieces, as a later slice would have made them).
                std::vector<Layout> targets;
                int pending_operands = 0;
                for (ValueId o : operands) pending_operands += type(o).layout.partial ? 1 : 0;
                const Mesh* m = in_.module_.mesh(mesh);
                for (ValueId o : operands) {
                    const TensorType& ot = type(o);
                    if (!ot.layout.partial || pending_operands != 1 || ot.shape != shape || !m || dry_cost_) continue;
                    auto add_target = [&](Layout l) {
                        l.partial = 0;
                        for (size_t d = 0; d < l.dims.size(); ++d) {
                            if (l.dims[d].empty()) continue;
                            AxisSet g = 0;
                            for (uint8_t a : l.dims[d]) g |= sema::axis_bit(a);
                            if (shape[d] % m->group_size(g) != 0) return;
                        }
                        Layout whole = ot.layout;
                        whole.partial = 0;
                        if (l == whole || std::find(targets.begin(), targets.end(), l) != targets.end()) return;
                        targets.push_back(std::move(l));
                    };
                    if (expected_ && expected_->mesh == mesh && key_of(expected_span_) == key_of(span) &&
                        expected_->shape == shape && !expected_->layout.partial) {
                        add_target(expected_->layout);
                    }
                    for (size_t d = 0; d < ot.rank(); ++d) {
                        Layout l = ot.layout;
                        for (uint8_t a = 0; a < 64; ++a) {
                            if (ot.layout.partial & sema::axis_bit(a)) l.dims[d].push_back(a);
                        }
                        add_target(std::move(l));
                    }
                }
                int pick = targets.empty() ? 0 : choose(span, 6, 1 + static_cast<int>(targets.size()));
                for (ValueId& o : operands) {
                    std::string why = fmt::format("`{}` needs the summed value", ir::ew_name(ew));
                    if (pick > 0 && type(o).layout.partial) {
                        o = plan_coercion(o, mesh, targets[static_cast<size_t>(pick - 1)], span, why, true);
                    } else {
                        o = reduce_partial(o, type(o).layout.partial, span, why);
                    }
                }
                partial = 0;
            }
        }
        // Among operands with a layout, the one whose layout the others reach most
        // cheaply leads (ties: the first rule above).
        auto aligned = [&](ValueId from, ValueId to) {
            const TensorType& ft = type(from);
            const TensorType& tt = type(to);
            Layout want = Layout::replicated(tt.rank());
            size_t foff = rank - ft.rank(), toff = rank - tt.rank();
            for (size_t d = 0; d < tt.rank(); ++d) {
                size_t rd = toff + d;
                if (rd < foff || tt.shape[d] != shape[rd]) continue;
                if (ft.shape[rd - foff] == shape[rd]) want.dims[d] = ft.layout.dims[rd - foff];
            }
            want.partial = tt.layout.partial;
            return want;
        };
        double best = std::numeric_limits<double>::infinity();
        ValueId best_leader = leader;
        for (ValueId cand : operands) {
            if (flexible_[cand] || type(cand).mesh < 0 || type(cand).rank() == 0) continue;
            double cost = 0;
            for (ValueId o : operands) {
                if (o == cand || flexible_[o] || type(o).mesh < 0 || type(o).rank() == 0) continue;
                cost += coercion_cost(o, mesh, aligned(cand, o));
            }
            // The value's consumer: converting the result to what it expects counts too.
            if (expected_ && expected_->mesh == mesh && key_of(expected_span_) == key_of(span) &&
                expected_->shape == shape && type(cand).rank() == rank) {
                cost += coercion_cost(cand, mesh, expected_->layout);
            }
            // Equal costs: the plan that moves the first mesh axis (mesh-axis order)
            // wins; then the first rule's leader.
            auto moved = [&](ValueId c) {
                AxisSet m = 0;
                for (ValueId o : operands) {
                    if (o == c || flexible_[o] || type(o).mesh < 0 || type(o).rank() == 0) continue;
                    Layout want = aligned(c, o);
                    for (size_t d = 0; d < type(o).rank(); ++d) {
                        for (auto a : type(o).layout.dims[d]) {
                            if (std::find(want.dims[d].begin(), want.dims[d].end(), a) == want.dims[d].end()) m |= sema::axis_bit(a);
                        }
                    }
                }
                return m;
            };
            bool tie_wins = false;
            if (cost == best && cand != best_leader) {
                AxisSet mc = moved(cand), mb = moved(best_leader);
                AxisSet lowest_c = mc & (~mc + 1), lowest_b = mb & (~mb + 1);
                tie_wins = mc != mb && mc && (!mb || lowest_c < lowest_b);
                if (mc == mb) tie_wins = cand == leader;
            }
            if (cost < best || tie_wins) {
                best = cost;
                best_leader = cand;
            }
        }
        // The whole-function search may take another operand as the leader (choose()).
        std::vector<ValueId> leaders{best_leader};
        for (ValueId cand : operands) {
            if (flexible_[cand] || type(cand).mesh < 0 || type(cand).rank() == 0) continue;
            bool dup = false;
            for (ValueId l : leaders) dup |= type(l).layout == type(cand).layout && type(l).rank() == type(cand).rank();
            if (!dup) leaders.push_back(cand);
        }
        leader = leaders[static_cast<size_t>(choose(span, 3, static_cast<int>(leaders.size())))];
        // The leader's splits, aligned to the result; others are sliced (free) or coerced.
        const TensorType& lt = type(leader);
        size_t loff = rank - lt.rank();
        for (size_t d = 0; d < lt.rank(); ++d) {
            if (lt.shape[d] == shape[loff + d]) result.dims[loff + d] = lt.layout.dims[d];
        }
        // Splits of the others on dims the leader leaves whole, over axes nothing else
        // uses, join the result: the leader is sliced there for free.
        for (ValueId o : operands) {
            if (o == leader || flexible_[o] || type(o).mesh < 0) continue;
            const TensorType& ot = type(o);
            size_t off = rank - ot.rank();
            for (size_t d = 0; d < ot.rank(); ++d) {
                const AxisList& axes = ot.layout.dims[d];
                if (axes.empty() || ot.shape[d] != shape[off + d] || !result.dims[off + d].empty()) continue;
                AxisSet bits = 0;
                for (uint8_t a : axes) bits |= sema::axis_bit(a);
                if ((result.split_axes() | partial) & bits) continue;
                result.dims[off + d] = axes;
            }
        }
        // An axis cannot both split the result and be pending on it: complete that sum,
        // or (for `+`/`-`) make the split operand pending too (free) and keep the sum,
        // whichever is cheaper with the conversion to the expected type.
        if (AxisSet conflict = partial & result.split_axes()) {
            bool keep_pending = false;
            if (is_linear(ew) && expected_ && expected_->mesh == mesh && key_of(expected_span_) == key_of(span) &&
                expected_->shape == shape) {
                const Mesh& m = in_.module_.meshes[static_cast<size_t>(mesh)];
                double reduce_now = 0;
                for (ValueId o : operands) {
                    if (type(o).layout.partial & conflict) {
                        reduce_now += collective_cost(CollectiveKind::AllReduce, m, type(o).layout.partial & conflict,
                                                      static_cast<double>(type(o).local_bytes(&m))).seconds;
                    }
                }
                TensorType reduced;
                reduced.dtype = *dtype;
                reduced.shape = shape;
                reduced.mesh = mesh;
                reduced.layout = result;
                reduced.layout.partial = partial & ~conflict;
                reduce_now += coercion_cost_from(reduced, expected_->layout);
                TensorType pending = reduced;
                for (auto& axes : pending.layout.dims) {
                    AxisList kept;
                    for (uint8_t a : axes) {
                        if (!(conflict & sema::axis_bit(a))) kept.push_back(a);
                    }
                    axes = kept;
                }
                pending.layout.partial = partial;
                keep_pending = coercion_cost_from(pending, expected_->layout) < reduce_now;
            }
            // For `+`/`-` the whole-function search may take the other way (choose()).
            if (is_linear(ew) && choose(span, 5, 2) == 1) keep_pending = !keep_pending;
            if (keep_pending) {
                // The split operands' axes in `conflict` become pending too (free).
                for (auto& axes : result.dims) {
                    AxisList kept;
                    for (uint8_t a : axes) {
                        if (!(conflict & sema::axis_bit(a))) kept.push_back(a);
                    }
                    axes = kept;
                }
            }
            if (!keep_pending) {
                for (ValueId& o : operands) {
                    o = reduce_partial(o, conflict, span, "the pending sum is over an axis that splits the result");
                }
                partial &= ~conflict;
            }
        }
        result.partial = partial;
        for (ValueId& o : operands) {
            const TensorType& ot = type(o);
            size_t off = rank - ot.rank();
            Layout want = Layout::replicated(ot.rank());
            for (size_t d = 0; d < ot.rank(); ++d) {
                if (ot.shape[d] == shape[off + d]) want.dims[d] = result.dims[off + d];
            }
            want.partial = ot.layout.partial ? partial : (is_linear(ew) ? partial : 0);
            if (flexible_[o]) {
                want.partial = 0;
                fix_layout(o, mesh, want);
                if (is_linear(ew) && partial) o = plan_coercion(o, mesh, Layout{want.dims, partial}, span, "a sum with a pending sum", true);
                continue;
            }
            if (ot.rank() == 0 && ot.mesh < 0) {
                // An unplaced scalar is replicated everywhere; added to a pending sum it is
                // kept on one device of each group (free).
                if (!(is_linear(ew) && partial)) continue;
                o = place(o, mesh, span, true);
                o = plan_coercion(o, mesh, Layout{{}, partial}, span, "a sum with a pending sum", true);
                continue;
            }
            o = place(o, mesh, span);
            if (is_linear(ew) && ot.layout.partial != partial) want.partial = partial;
            o = plan_coercion(o, mesh, want, span,
                              fmt::format("operands of `{}` must agree on their layout", ir::ew_name(ew)), true);
        }
    }
    ir::Op op{ir::OpKind::Elementwise};
    op.ew = ew;
    op.dtype = *dtype;  // a cast's target: the cast built-in sets it
    op.operands = operands;
    op.span = span;
    // The result type is the op's rule's (ir/op_rules.h) over the operands as placed above.
    std::vector<const TensorType*> placed;
    for (ValueId o : operands) placed.push_back(&type(o));
    TensorType t = ir::infer_result(in_.module_, op, placed);
    MESHC_ASSERT(t.shape == shape, "the element-wise rule agrees with the checker's shape");
    ValueId v = emit(std::move(op), std::move(t), std::move(names));
    flexible_[v] = all_flexible && std::any_of(operands.begin(), operands.end(), [&](ValueId o) { return flexible_[o]; });
    if (flexible_[v]) {
        // Fixing a flexible operand's layout later fixes this result too (fix_layout).
        for (ValueId o : operands)
            if (flexible_[o]) flexible_users_[o].push_back(v);
    }
    // A result of weakly typed operands is weak too (context may still choose its element
    // type), except a comparison's: it is bool whatever its operands are.
    bool all_weak = std::all_of(operands.begin(), operands.end(), [&](ValueId o) { return weak_[o]; });
    weak_[v] = all_weak && !is_comparison(ew);
    return v;
}

ValueId FunctionBuilder::convert(ValueId x, DType to, Span span) {
    ValueId v = elementwise(ir::Ew::Cast, {x}, span);
    f_.types[v].dtype = to;
    if (!ops_->empty() && ops_->back().kind == ir::OpKind::Elementwise && ops_->back().ew == ir::Ew::Cast) ops_->back().dtype = to;
    return v;
}

}  // namespace meshc::sema::check

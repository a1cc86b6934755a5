// The built-ins: creation, shape ops, reductions, collectives, I/O; each case checks
// its arguments and emits its GIR op with the result layout of its sharding rule.
#include "sema/check/context.h"

namespace meshc::sema::check {

ValueId FunctionBuilder::lower_builtin(Builtin b, const Expr& call) {
    std::vector<const Expr*> pos;
    std::map<std::string_view, const Expr*> named;
    for (const Arg& a : call.args) {
        if (a.label) named[a.label->name] = a.value;
        else pos.push_back(a.value);
    }
    auto want = [&](size_t lo, size_t hi) {
        if (pos.size() < lo || pos.size() > hi) {
            fail(DiagCode::E0309, call.span,
                 fmt::format("`{}` takes {} positional argument{}, found {}", builtin_info(b).name,
                             lo == hi ? std::to_string(lo) : fmt::format("{} to {}", lo, hi), hi == 1 ? "" : "s", pos.size()));
        }
    };
    auto named_arg = [&](std::string_view label) -> const Expr* {
        auto it = named.find(label);
        return it == named.end() ? nullptr : it->second;
    };
    for (const auto& [label, value] : named) {
        static const std::set<std::string_view> kLabels = {"axis", "over", "dim", "from", "to", "start", "size", "dtype"};
        if (!kLabels.count(label)) fail(DiagCode::E0309, value->span, fmt::format("`{}` has no argument `{}`", builtin_info(b).name, label));
    }
    // Element type: the dtype argument, else from context (weak, like a literal), else f32.
    auto create = [&](ir::CreateKind kind, std::vector<int64_t> shape, std::optional<DType> dtype, int64_t seed, double number) {
        ir::Op op{ir::OpKind::Create};
        op.create = kind;
        op.seed = seed;
        op.number = number;
        op.span = call.span;
        TensorType t;
        t.dtype = dtype.value_or(DType::F32);
        t.shape = std::move(shape);
        t.layout = Layout::replicated(t.rank());
        ValueId v = emit(std::move(op), std::move(t));
        flexible_[v] = true;
        weak_[v] = !dtype;
        return v;
    };
    // A unary element-wise built-in is the function of ir/ew.def with its name (`cast`,
    // which takes its target type too, is lowered below).
    if (builtin_info(b).group == "elementwise") {
        if (auto ew = ir::ew_named(builtin_info(b).name);
            ew && ir::ew_rule(*ew).operands == 1 && ir::ew_rule(*ew).result != ir::EwResult::Target) {
            want(1, 1);
            ValueId x = lower_expr(*pos[0]);
            if (ir::ew_rule(*ew).domain == ir::EwDomain::Float && !is_float(type(x).dtype) && !weak_[x]) {
                fail(DiagCode::E0308, pos[0]->span,
                     fmt::format("`{}` takes a float tensor, found {}", builtin_info(b).name, dtype_name(type(x).dtype)));
            }
            return elementwise(*ew, {x}, call.span);
        }
    }
    switch (b) {
    case Builtin::zeros:
    case Builtin::ones: {
        want(1, 2);
        std::optional<DType> dt;
        if (pos.size() == 2) dt = dtype_arg(*pos[1]);
        else if (named_arg("dtype")) dt = dtype_arg(*named_arg("dtype"));
        return create(b == Builtin::zeros ? ir::CreateKind::Zeros : ir::CreateKind::Ones, shape_arg(*pos[0]), dt, 0, 0);
    }
    case Builtin::full: {
        want(2, 2);
        // A literal fill (signed) makes a weakly typed creation; any other scalar is
        // broadcast: ones(shape) * v, typed and laid out like an element-wise op.
        const Expr* v = pos[1];
        double sign = 1;
        if (v->kind == ExprKind::Unary && v->unary_op == UnaryOp::Neg &&
            (v->lhs->kind == ExprKind::FloatLit || v->lhs->kind == ExprKind::IntLit)) {
            sign = -1;
            v = v->lhs;
        }
        if (v->kind == ExprKind::FloatLit) return create(ir::CreateKind::Full, shape_arg(*pos[0]), std::nullopt, 0, sign * v->float_value);
        if (v->kind == ExprKind::IntLit) {
            return create(ir::CreateKind::Full, shape_arg(*pos[0]), std::nullopt, 0, sign * static_cast<double>(v->int_value));
        }
        auto shape = shape_arg(*pos[0]);
        ValueId fill = lower_expr(*pos[1]);
        if (type(fill).rank() != 0) {
            fail(DiagCode::E0307, pos[1]->span, fmt::format("`full` takes a scalar fill value, found {}", type_str(type(fill))));
        }
        return elementwise(ir::Ew::Mul, {create(ir::CreateKind::Ones, shape, std::nullopt, 0, 0), fill}, call.span);
    }
    case Builtin::iota: {
        want(1, 2);
        auto shape = shape_arg(*pos[0]);
        std::optional<DType> dt;
        if (pos.size() == 2) dt = dtype_arg(*pos[1]);
        else if (named_arg("dtype")) dt = dtype_arg(*named_arg("dtype"));
        ValueId v = create(ir::CreateKind::Iota, shape, dt, 0, 0);
        const Expr* axis = named_arg("axis");
        int64_t k = axis ? axis_arg(*axis, v) : 0;
        ops_->back().dim = static_cast<int32_t>(k);
        return v;
    }
    case Builtin::random_normal:
    case Builtin::random_uniform: {
        want(2, 2);
        // The seed: a constant, or an integer scalar computed at run time (an operand).
        std::optional<int64_t> seed = const_int(*pos[0]);
        ValueId seed_value = ir::kNoValue;
        if (!seed) seed_value = run_time_int(*pos[0], fmt::format("the seed of `{}`", builtin_info(b).name));
        ValueId v = create(b == Builtin::random_normal ? ir::CreateKind::RandomNormal : ir::CreateKind::RandomUniform,
                           shape_arg(*pos[1]), std::nullopt, seed.value_or(0), 0);
        if (!seed) ops_->back().operands = {seed_value};
        return v;
    }
    case Builtin::permutation: {
        // `permutation(seed, n)`: an i64 [n] permutation of 0..n, a function of the seed
        // alone (the same on every mesh and device count); the seed may be a run-time value.
        want(2, 2);
        std::optional<int64_t> seed = const_int(*pos[0]);
        ValueId seed_value = ir::kNoValue;
        if (!seed) seed_value = run_time_int(*pos[0], "the seed of `permutation`");
        int64_t n = int_arg(*pos[1]);
        if (n < 0) fail(DiagCode::E0307, pos[1]->span, fmt::format("`permutation` takes a size n >= 0, found {}", n));
        ValueId v = create(ir::CreateKind::Permutation, {n}, DType::I64, seed.value_or(0), 0);
        if (!seed) ops_->back().operands = {seed_value};
        return v;
    }
    case Builtin::max:
    case Builtin::min:
        want(2, 2);
        return elementwise(b == Builtin::max ? ir::Ew::Max : ir::Ew::Min, {lower_expr(*pos[0]), lower_expr(*pos[1])}, call.span);
    case Builtin::select:
        want(3, 3);
        return elementwise(ir::Ew::Select, {lower_expr(*pos[0]), lower_expr(*pos[1]), lower_expr(*pos[2])}, call.span);
    case Builtin::cast: {
        want(2, 2);
        ValueId x = lower_expr(*pos[0]);
        DType to = dtype_arg(*pos[1]);
        if (weak_[x]) {
            // A literal or a creation written in place takes the target type (no cast op
            // remains); a named one (`let r = random_normal(..)`, used elsewhere too)
            // keeps its default element type and is converted.
            // (A float value is converted to an integer, never reinterpreted as one:
            // `cast(-2.5, i32)` is a cast of the f32 value.)
            bool float_to_int = is_float(type(x).dtype) && !is_float(to) && to != DType::Bool;
            if (pos[0]->kind != ExprKind::Name && !float_to_int) {
                settle_dtype(x, to);
                return x;
            }
            settle_dtype(x, type(x).dtype);
        }
        if (type(x).dtype == to) return x;  // already of that type: no op
        return convert(x, to, call.span);
    }
    case Builtin::sum:
    case Builtin::mean:
    case Builtin::max_over: {
        want(1, 1);
        ValueId x = lower_expr(*pos[0]);
        std::vector<int64_t> dims;
        if (const Expr* axis = named_arg("axis")) {
            dims.push_back(axis_arg(*axis, x));
        } else {
            for (size_t d = 0; d < type(x).rank(); ++d) dims.push_back(static_cast<int64_t>(d));
        }
        ir::ReduceKind kind = b == Builtin::sum ? ir::ReduceKind::Sum : b == Builtin::mean ? ir::ReduceKind::Mean : ir::ReduceKind::Max;
        DType xt = type(x).dtype;
        if (b == Builtin::mean && (xt == DType::I32 || xt == DType::I64) && !weak_[x]) {
            // An integer mean is the sum floor-divided by the count (as `/` divides
            // integers): the sum is completed first, so every mesh gives the same value.
            int64_t count = 1;
            for (int64_t d : dims) count *= type(x).shape[static_cast<size_t>(d)];
            ValueId total = reduce(ir::ReduceKind::Sum, x, dims, false, call.span);
            return elementwise(ir::Ew::Div, {total, constant(static_cast<double>(count), xt, true, call.span)}, call.span);
        }
        return reduce(kind, x, dims, false, call.span);
    }
    case Builtin::softmax:
    case Builtin::log_softmax: {
        want(1, 1);
        ValueId x = lower_expr(*pos[0]);
        const Expr* axis = named_arg("axis");
        int64_t d = axis ? axis_arg(*axis, x) : static_cast<int64_t>(type(x).rank()) - 1;
        // The max needs x summed: sum it once here, so that x - max and exp use the
        // summed value too (else x - max would stay pending and be summed again).
        if (type(x).layout.partial) {
            x = reduce_partial(x, type(x).layout.partial, call.span,
                               fmt::format("`{}` needs the summed value", builtin_info(b).name));
        }
        ValueId m = reduce(ir::ReduceKind::Max, x, {d}, true, call.span);
        ValueId shifted = elementwise(ir::Ew::Sub, {x, m}, call.span);
        ValueId e = elementwise(ir::Ew::Exp, {shifted}, call.span);
        ValueId s = reduce(ir::ReduceKind::Sum, e, {d}, true, call.span);
        if (b == Builtin::softmax) return elementwise(ir::Ew::Div, {e, s}, call.span);
        ValueId ls = elementwise(ir::Ew::Log, {s}, call.span);
        return elementwise(ir::Ew::Sub, {shifted, ls}, call.span);
    }
    case Builtin::einsum: {
        want(2, 3);
        if (pos[0]->kind != ExprKind::StringLit) fail(DiagCode::E0309, pos[0]->span, "the first argument of `einsum` is its spec, a string like \"ij,jk->ik\"");
        ValueId a = lower_expr(*pos[1]);
        if (pos.size() == 3) {
            ValueId c = lower_expr(*pos[2]);
            return contract(pos[0]->string_value, a, c, call.span);
        }
        // One operand ("ij->ji", "ij->i"): a sum over the indices the output drops, then
        // a permutation (NumPy's einsum on one array, without diagonals).
        std::string spec(pos[0]->string_value);
        auto arrow = spec.find("->");
        if (arrow == std::string::npos || spec.find(',') != std::string::npos) {
            fail(DiagCode::E0309, pos[0]->span, fmt::format("einsum spec \"{}\" with one operand must look like \"ij->ji\"", spec));
        }
        std::string in = spec.substr(0, arrow), out = spec.substr(arrow + 2);
        for (const std::string* part : {&in, &out}) {
            for (size_t i = 0; i < part->size(); ++i) {
                char ch = (*part)[i];
                if (ch < 'a' || ch > 'z') fail(DiagCode::E0309, pos[0]->span, fmt::format("einsum spec \"{}\": indices are lowercase letters", spec));
                if (part->find(ch) != i) fail(DiagCode::E0309, pos[0]->span, fmt::format("einsum spec \"{}\": index `{}` repeats (diagonals are not supported)", spec, ch));
            }
        }
        if (in.size() != type(a).rank()) {
            fail(DiagCode::E0307, call.span, fmt::format("einsum \"{}\" needs an operand of rank {}; found {}", spec, in.size(), shape_string(type(a).shape)));
        }
        std::vector<int64_t> dropped;
        std::string kept;
        for (size_t d = 0; d < in.size(); ++d) {
            if (out.find(in[d]) == std::string::npos) dropped.push_back(static_cast<int64_t>(d));
            else kept.push_back(in[d]);
        }
        for (char ch : out) {
            if (in.find(ch) == std::string::npos) fail(DiagCode::E0309, pos[0]->span, fmt::format("einsum output index `{}` is not an input index", ch));
        }
        ValueId x = dropped.empty() ? a : reduce(ir::ReduceKind::Sum, a, dropped, false, call.span);
        if (kept == out) return x;
        const TensorType& xt = type(x);
        TensorType r = xt;
        std::vector<std::string_view> names;
        for (size_t d = 0; d < out.size(); ++d) {
            auto k = kept.find(out[d]);
            r.shape[d] = xt.shape[k];
            r.layout.dims[d] = xt.layout.dims[k];
            names.push_back(dim_names_[x][k]);
        }
        ir::Op op{ir::OpKind::Contract};
        op.text = kept + "->" + out;
        op.operands = {x};
        op.span = call.span;
        return emit(std::move(op), std::move(r), std::move(names));
    }
    case Builtin::print:
    case Builtin::save: {
        std::string text;
        std::vector<ValueId> operands;
        std::vector<int64_t> save_arg;  // a path argument {k}
        size_t first = 0;
        if (b == Builtin::save) {
            want(2, 2);
            ir::Op path;
            path_arg(*pos[0], path, "`save` takes a file name (a string or a path argument) first");
            text = path.text;
            save_arg = path.ints;
            first = 1;
            if (is_safetensors_path(text)) {
                // A checkpoint: every leaf of a tensor, tuple or struct, named by its
                // field path, in one .safetensors file.
                Val v = eval(*pos[1]);
                std::vector<std::pair<std::string, ValueId>> leaves;
                safetensors_leaves(v, "", leaves, pos[1]->span);
                if (leaves.empty()) fail(DiagCode::E0309, pos[1]->span, "`save` of a value without tensors: the checkpoint would be empty");
                ir::Op op{ir::OpKind::Save};
                for (auto& [name, id] : leaves) {
                    ValueId x = id;
                    if (flexible_[x]) fix_layout(x, type(x).mesh, Layout::replicated(type(x).rank()));
                    x = reduce_partial(x, type(x).layout.partial, pos[1]->span, "`save` needs the global value");
                    op.operands.push_back(x);
                    op.names.push_back(name.empty() ? "value" : name);
                }
                op.text = text;
                op.ints = save_arg;
                op.span = call.span;
                ops_->push_back(std::move(op));
                return ir::kNoValue;
            }
            if (pos[1]->kind != ExprKind::StringLit) {
                Val v = eval(*pos[1]);
                if (v.kind == Val::Tuple || v.kind == Val::Struct) {
                    fail(DiagCode::E0322, pos[1]->span,
                         fmt::format("a tuple or struct is saved in a .safetensors file, not in `{}`", text),
                         {{"for example `save(\"ckpt.safetensors\", state)`", {}}});
                }
                if (v.kind == Val::Poison) throw Abandon{};
                if (v.kind != Val::Tensor) lower_expr(*pos[1]);  // its diagnostic
                ValueId x = v.id;
                if (flexible_[x]) fix_layout(x, type(x).mesh, Layout::replicated(type(x).rank()));
                x = reduce_partial(x, type(x).layout.partial, pos[1]->span, "`save` needs the global value");
                ir::Op op{ir::OpKind::Save};
                op.text = text;
                op.ints = save_arg;
                op.operands = {x};
                op.span = call.span;
                ops_->push_back(std::move(op));
                return ir::kNoValue;
            }
        }
        for (size_t i = first; i < pos.size(); ++i) {
            if (pos[i]->kind == ExprKind::StringLit) {
                text += text.empty() ? "" : " ";
                // A string prints as it is: its braces are doubled in print's format,
                // where `{}` stands for a value (runtime/include/meshrt.h).
                for (char c : pos[i]->string_value) text += b == Builtin::print && (c == '{' || c == '}') ? std::string(2, c) : std::string(1, c);
                continue;
            }
            ValueId v = lower_expr(*pos[i]);
            if (flexible_[v]) fix_layout(v, type(v).mesh, Layout::replicated(type(v).rank()));
            v = reduce_partial(v, type(v).layout.partial, pos[i]->span,
                               fmt::format("`{}` needs the global value", builtin_info(b).name));
            operands.push_back(v);
            if (b == Builtin::print) text += (text.empty() ? "" : " ") + std::string("{}");
        }
        ir::Op op{b == Builtin::print ? ir::OpKind::Print : ir::OpKind::Save};
        op.text = text;
        op.ints = save_arg;
        op.operands = operands;
        op.span = call.span;
        ops_->push_back(std::move(op));
        return ir::kNoValue;
    }
    case Builtin::reshape: {
        want(2, 2);
        ValueId x = lower_expr(*pos[0]);
        std::vector<int64_t> shape = shape_arg(*pos[1]);
        return reshape(x, shape, call.span);
    }
    case Builtin::broadcast: {
        want(2, 2);
        ValueId x = lower_expr(*pos[0]);
        std::vector<int64_t> shape = shape_arg(*pos[1]);
        const TensorType& t = type(x);
        if (shape.size() < t.rank()) {
            fail(DiagCode::E0307, call.span, fmt::format("cannot broadcast {} to the smaller rank of {}", shape_string(t.shape), shape_string(shape)));
        }
        size_t off = shape.size() - t.rank();
        for (size_t d = 0; d < t.rank(); ++d) {
            if (t.shape[d] != 1 && t.shape[d] != shape[off + d]) {
                fail(DiagCode::E0307, call.span,
                     fmt::format("cannot broadcast {} to {}: dim {} is {}, not 1 or {}", shape_string(t.shape), shape_string(shape), d, t.shape[d], shape[off + d]));
            }
        }
        if (flexible_[x]) fix_layout(x, t.mesh, Layout::replicated(t.rank()));
        const TensorType& xt = type(x);
        TensorType r = xt;
        r.shape = shape;
        r.layout = Layout::replicated(shape.size());
        r.layout.partial = xt.layout.partial;
        std::vector<std::string_view> names(shape.size());
        for (size_t d = 0; d < xt.rank(); ++d) {
            if (xt.shape[d] == shape[off + d]) {
                r.layout.dims[off + d] = xt.layout.dims[d];
                names[off + d] = dim_names_[x][d];
            }
        }
        ir::Op op{ir::OpKind::Broadcast};
        op.operands = {x};
        op.ints = shape;
        op.span = call.span;
        return emit(std::move(op), std::move(r), std::move(names));
    }
    case Builtin::slice: {
        want(1, 1);
        ValueId x = lower_expr(*pos[0]);
        const Expr* axis = named_arg("axis");
        const Expr* start = named_arg("start");
        const Expr* size = named_arg("size");
        if (!axis || !start || !size) fail(DiagCode::E0309, call.span, "`slice` needs `axis:`, `start:` and `size:`");
        auto d = static_cast<size_t>(axis_arg(*axis, x));
        // The size is static (a type); the start may be computed at run time, then it is
        // checked when the program runs (meshrt_check_slice names this line).
        std::optional<int64_t> b = const_int(*start);
        int64_t n = int_arg(*size);
        ValueId start_value = ir::kNoValue;
        if (!b) start_value = run_time_int(*start, "the start of `slice`");
        const TensorType& t = type(x);
        if (b && (*b < 0 || n < 1 || *b + n > t.shape[d])) {
            fail(DiagCode::E0307, call.span, fmt::format("slice [{}, {}) is outside dim {} of size {}", *b, *b + n, d, t.shape[d]));
        }
        if (!b && (n < 1 || n > t.shape[d])) {
            fail(DiagCode::E0307, call.span, fmt::format("a slice of size {} does not fit in dim {} of size {}", n, d, t.shape[d]));
        }
        if (flexible_[x]) fix_layout(x, t.mesh, Layout::replicated(t.rank()));
        if (t.mesh >= 0 && !type(x).layout.dims[d].empty()) {
            Layout want_layout = type(x).layout;
            want_layout.dims[d].clear();
            x = plan_coercion(x, t.mesh, want_layout, call.span, "`slice` needs the sliced dim unsplit", true);
        }
        TensorType r = type(x);
        r.shape[d] = n;
        ir::Op op{ir::OpKind::Slice};
        op.operands = {x};
        op.dim = static_cast<int32_t>(d);
        op.ints = {b.value_or(0), n};
        op.span = call.span;
        if (!b) {
            op.operands.push_back(start_value);
            op.text = location(call.span);
        }
        std::vector<std::string_view> names = dim_names_[x];
        names[d] = "";
        return emit(std::move(op), std::move(r), std::move(names));
    }
    case Builtin::concat: {
        want(1, 1);
        if (pos[0]->kind != ExprKind::List || pos[0]->elements.empty()) {
            fail(DiagCode::E0309, pos[0]->span, "`concat` takes a list of tensors: `concat([a, b], axis: 0)`");
        }
        std::vector<ValueId> parts;
        for (const Expr* x : pos[0]->elements) parts.push_back(lower_expr(*x));
        const Expr* axis = named_arg("axis");
        auto d = static_cast<size_t>(axis ? axis_arg(*axis, parts[0]) : 0);
        const TensorType first = type(parts[0]);
        int64_t total = 0;
        for (ValueId p : parts) {
            const TensorType& t = type(p);
            bool same = t.rank() == first.rank() && t.dtype == first.dtype;
            for (size_t i = 0; same && i < t.rank(); ++i) same = i == d || t.shape[i] == first.shape[i];
            if (!same) {
                fail(DiagCode::E0307, call.span,
                     fmt::format("`concat` along dim {} of {} and {}: the other dims and the element types must agree", d, type_str(first), type_str(t)));
            }
            total += t.shape[d];
        }
        // The parts meet in one layout with dim d unsplit: the cheapest of the parts' own
        // layouts and the layout the result is wanted in (each with dim d cleared), counting
        // every part's coercion and the result's conversion to what its consumer wants
        // (ties: the earlier candidate, the first part's first). Pending sums are reduced.
        int32_t mesh = -1;
        for (ValueId p : parts) mesh = std::max(mesh, type(p).mesh);
        std::vector<int64_t> rshape = first.shape;
        rshape[d] = total;
        bool wanted = expected_ && expected_->mesh == mesh && mesh >= 0 && key_of(expected_span_) == key_of(call.span) &&
                      expected_->shape == rshape;
        std::vector<Layout> candidates;
        for (ValueId p : parts) {
            if (!flexible_[p] && type(p).mesh >= 0) candidates.push_back(type(p).layout);
        }
        if (wanted) candidates.push_back(expected_->layout);
        if (candidates.empty()) candidates.push_back(Layout::replicated(first.rank()));
        Layout lead = candidates[0];
        double best = std::numeric_limits<double>::infinity();
        for (Layout c : candidates) {
            c.dims[d].clear();
            c.partial = 0;
            double cost = 0;
            for (ValueId p : parts) {
                if (flexible_[p] || type(p).mesh < 0) continue;
                Layout want = c;
                want.partial = type(p).layout.partial;
                cost += coercion_cost(p, mesh, want);
            }
            if (wanted) {
                TensorType result = first;
                result.shape = rshape;
                result.mesh = mesh;
                result.layout = c;
                cost += coercion_cost_from(result, expected_->layout);
            }
            if (cost < best) {
                best = cost;
                lead = c;
            }
        }
        lead.dims[d].clear();
        // Concatenation is linear: parts pending over the same axes stay pending.
        AxisSet common = type(parts[0]).layout.partial;
        for (ValueId p : parts) {
            if (type(p).layout.partial != common) common = 0;
        }
        lead.partial = common;
        for (ValueId& p : parts) {
            p = place(p, mesh, call.span, true);
            if (flexible_[p]) {
                Layout plain = lead;
                plain.partial = 0;
                fix_layout(p, mesh, plain);
                if (lead.partial) p = plan_coercion(p, mesh, lead, call.span, "`concat` of pending sums", true);
            } else if (mesh >= 0) {
                p = plan_coercion(p, mesh, lead, call.span, "`concat` needs its parts laid out alike, the joined dim unsplit", true);
            }
        }
        TensorType r = type(parts[0]);
        r.shape[d] = total;
        ir::Op op{ir::OpKind::Concat};
        op.operands = parts;
        op.dim = static_cast<int32_t>(d);
        op.span = call.span;
        return emit(std::move(op), std::move(r));
    }
    case Builtin::one_hot: {
        want(2, 2);
        ValueId ids = lower_expr(*pos[0]);
        int64_t n = int_arg(*pos[1]);
        if (n < 1) fail(DiagCode::E0307, pos[1]->span, fmt::format("`one_hot` into {} classes; sizes are at least 1", n));
        if (weak_[ids]) settle_dtype(ids, DType::I64);
        if (type(ids).dtype != DType::I32 && type(ids).dtype != DType::I64) {
            fail(DiagCode::E0308, pos[0]->span, fmt::format("`one_hot` takes integer ids, found {}", type_str(type(ids))));
        }
        if (flexible_[ids]) fix_layout(ids, type(ids).mesh, Layout::replicated(type(ids).rank()));
        ids = reduce_partial(ids, type(ids).layout.partial, call.span, "`one_hot` needs the summed ids");
        TensorType r = type(ids);
        r.dtype = DType::F32;
        r.shape.push_back(n);
        r.layout.dims.emplace_back();
        std::vector<std::string_view> names = dim_names_[ids];
        names.emplace_back();
        ir::Op op{ir::OpKind::OneHot};
        op.operands = {ids};
        op.ints = {n};
        op.span = call.span;
        return emit(std::move(op), std::move(r), std::move(names));
    }
    case Builtin::embedding: {
        want(2, 2);
        ValueId table = lower_expr(*pos[0]);
        ValueId ids = lower_expr(*pos[1]);
        if (weak_[ids]) settle_dtype(ids, DType::I64);
        if (type(table).rank() != 2) fail(DiagCode::E0307, pos[0]->span, fmt::format("`embedding` takes a [V, D] table, found {}", type_str(type(table))));
        if (type(ids).dtype != DType::I32 && type(ids).dtype != DType::I64) {
            fail(DiagCode::E0308, pos[1]->span, fmt::format("`embedding` takes integer ids, found {}", type_str(type(ids))));
        }
        int32_t mesh = std::max(type(table).mesh, type(ids).mesh);
        if (flexible_[table]) fix_layout(table, mesh, Layout::replicated(2));
        if (flexible_[ids]) fix_layout(ids, mesh, Layout::replicated(type(ids).rank()));
        table = place(table, mesh, call.span, true);
        ids = place(ids, mesh, call.span, true);
        ids = reduce_partial(ids, type(ids).layout.partial, call.span, "`embedding` needs the summed ids");
        table = reduce_partial(table, type(table).layout.partial, call.span, "`embedding` needs the summed table");
        if (mesh >= 0) {
            // An axis may split the ids or the table, not both.
            AxisSet id_axes = type(ids).layout.split_axes();
            Layout tl = type(table).layout;
            bool conflict = false;
            for (auto& axes : tl.dims) {
                for (uint8_t a : axes) conflict |= (id_axes & sema::axis_bit(a)) != 0;
            }
            if (conflict) {
                tl = Layout::replicated(2);
                table = plan_coercion(table, mesh, tl, call.span, "the table's axes split the ids too", true);
            }
        }
        TensorType r = type(ids);
        r.dtype = type(table).dtype;
        r.shape.push_back(type(table).shape[1]);
        r.layout.dims.push_back(type(table).layout.dims.empty() ? sema::AxisList{} : type(table).layout.dims[1]);
        // A table split over its vocabulary: each device looks up its rows, zeros elsewhere.
        for (uint8_t a : type(table).layout.dims[0]) r.layout.partial |= sema::axis_bit(a);
        std::vector<std::string_view> names = dim_names_[ids];
        names.push_back(dim_names_[table][1]);
        ir::Op op{ir::OpKind::Embedding};
        op.operands = {table, ids};
        op.span = call.span;
        return emit(std::move(op), std::move(r), std::move(names));
    }
    case Builtin::load:
        fail(DiagCode::E0310, call.span, "the type of `load` comes from its context: write it as the value of an annotated `let`",
             {{"for example `let w: Tensor f32 [16, 32] on Pod with {1: model} = load(\"w.npy\");`", {}}});
    case Builtin::transpose: {
        want(2, 2);
        ValueId x = lower_expr(*pos[0]);
        if (pos[1]->kind != ExprKind::List) fail(DiagCode::E0309, pos[1]->span, "`transpose` takes a permutation like `[1, 0]`");
        const TensorType& t = type(x);
        std::vector<int64_t> perm;
        std::vector<bool> seen(t.rank());
        for (const Expr* p : pos[1]->elements) {
            int64_t k = int_arg(*p);
            if (k < 0 || k >= static_cast<int64_t>(t.rank()) || seen[static_cast<size_t>(k)]) {
                fail(DiagCode::E0309, pos[1]->span, fmt::format("not a permutation of the {} dims of {}", t.rank(), type_str(t)));
            }
            seen[static_cast<size_t>(k)] = true;
            perm.push_back(k);
        }
        if (perm.size() != t.rank()) fail(DiagCode::E0309, pos[1]->span, fmt::format("not a permutation of the {} dims of {}", t.rank(), type_str(t)));
        if (flexible_[x]) fix_layout(x, t.mesh, Layout::replicated(t.rank()));
        const TensorType& xt = type(x);
        TensorType r = xt;
        std::vector<std::string_view> names;
        for (size_t d = 0; d < perm.size(); ++d) {
            auto k = static_cast<size_t>(perm[d]);
            r.shape[d] = xt.shape[k];
            r.layout.dims[d] = xt.layout.dims[k];
            names.push_back(dim_names_[x][k]);
        }
        ir::Op op{ir::OpKind::Contract};
        std::string in, out;
        for (size_t d = 0; d < perm.size(); ++d) in.push_back(static_cast<char>('a' + d));
        for (int64_t k : perm) out.push_back(static_cast<char>('a' + k));
        op.text = in + "->" + out;
        op.operands = {x};
        op.span = call.span;
        return emit(std::move(op), std::move(r), std::move(names));
    }
    case Builtin::all_reduce:
    case Builtin::all_gather:
    case Builtin::reduce_scatter:
    case Builtin::all_to_all:
    case Builtin::reshard: {
        if (b == Builtin::reshard) {
            want(2, 2);
            ValueId x = lower_expr(*pos[0]);
            if (pos[1]->kind != ExprKind::LayoutLit) fail(DiagCode::E0309, pos[1]->span, "`reshard` takes a layout like `{B: data}`");
            // A value on no mesh yet (a mesh-free parameter, a creation) goes on the
            // program's mesh when there is one (it is replicated: viewing it is free).
            if (type(x).mesh < 0 && !pos[1]->layout->entries.empty() && type(x).rank() > 0 && default_mesh() >= 0) {
                x = place(x, default_mesh(), call.span);
            }
            const Mesh* mesh = mesh_of(type(x));
            if (!mesh) {
                if (!pos[1]->layout->entries.empty()) {
                    fail(DiagCode::E0407, call.span, "`reshard` of a value that is on no mesh",
                         {{"the program declares more than one mesh: give the value a type with `on MESH` first", {}}});
                }
                return x;
            }
            Layout target = Layout::replicated(type(x).rank());
            for (const LayoutEntry& en : pos[1]->layout->entries) {
                int64_t d = 0;
                if (en.key_name) {
                    Expr key{ExprKind::Name, en.key_span};
                    key.name = *en.key_name;
                    d = axis_arg(key, x);
                } else {
                    d = en.key_pos;
                    if (d >= static_cast<int64_t>(type(x).rank())) fail(DiagCode::E0403, en.key_span, "layout key out of range");
                }
                for (const Ident& a : en.axes) {
                    auto idx = mesh->axis_index(a.name);
                    if (!idx) fail(DiagCode::E0401, a.span, fmt::format("mesh `{}` has no axis `{}`", mesh->name, a.name));
                    if (target.split_axes() & sema::axis_bit(*idx)) {
                        fail(DiagCode::E0402, a.span, fmt::format("mesh axis `{}` is used twice in this layout", a.name),
                             {{"a mesh axis can split one dim, once", {}}});
                    }
                    target.dims[static_cast<size_t>(d)].push_back(static_cast<uint8_t>(*idx));
                }
                if (type(x).shape[static_cast<size_t>(d)] % target.split_factor(*mesh, static_cast<size_t>(d)) != 0) {
                    fail(DiagCode::E0501, en.span, fmt::format("dim {} has size {}, which the split into {} pieces does not divide",
                                                               d, type(x).shape[static_cast<size_t>(d)], target.split_factor(*mesh, static_cast<size_t>(d))));
                }
            }
            TensorType tt = type(x);
            tt.layout = target;
            return coerce(x, tt, call.span, "`reshard`", false);
        }
        want(1, 1);
        ValueId x = lower_expr(*pos[0]);
        const Expr* over = named_arg("over");
        if (!over) fail(DiagCode::E0309, call.span, fmt::format("`{}` needs `over:` the mesh axes", builtin_info(b).name));
        if (flexible_[x]) fix_layout(x, type(x).mesh, Layout::replicated(type(x).rank()));
        AxisSet axes = over_arg(*over, x);
        const TensorType& t = type(x);
        const Mesh& mesh = *mesh_of(t);
        Layout l = t.layout;
        if (b == Builtin::all_reduce) {
            if ((t.layout.partial & axes) != axes) {
                fail(DiagCode::E0407, call.span,
                     fmt::format("`all_reduce` over ({}) of a value that is not partial over it: {}", mesh.axis_names(axes), type_str(t)),
                     {{"all_reduce completes a pending sum (`partial {axis}`)", {}}});
            }
            l.partial &= ~axes;
            ValueId v = collective(ir::OpKind::AllReduce, x, axes, -1, -1, l, call.span, "written by the user", false);
            return v;
        }
        const Expr* dim_e = named_arg(b == Builtin::all_to_all ? "from" : "dim");
        if (!dim_e) fail(DiagCode::E0309, call.span, fmt::format("`{}` needs `{}:`", builtin_info(b).name, b == Builtin::all_to_all ? "from" : "dim"));
        auto d = static_cast<size_t>(axis_arg(*dim_e, x));
        std::vector<uint8_t> group;
        for (size_t i = 0; i < mesh.axes.size(); ++i) {
            if (axes & sema::axis_bit(i)) group.push_back(static_cast<uint8_t>(i));
        }
        auto ends_with_group = [&](const sema::AxisList& axes_of_dim) {
            if (axes_of_dim.size() < group.size()) return false;
            AxisSet tail = 0;
            for (size_t i = axes_of_dim.size() - group.size(); i < axes_of_dim.size(); ++i) tail |= sema::axis_bit(axes_of_dim[i]);
            return tail == axes;
        };
        if (b == Builtin::reduce_scatter) {
            if ((t.layout.partial & axes) != axes) fail(DiagCode::E0407, call.span, fmt::format("`reduce_scatter` over ({}) of a value that is not partial over it: {}", mesh.axis_names(axes), type_str(t)));
            l.partial &= ~axes;
            // The dim gains the axes in the order `over:` names them (major first).
            std::vector<const Expr*> written;
            if (over->kind == ExprKind::Tuple) {
                for (const Expr* a : over->elements) written.push_back(a);
            } else {
                written.push_back(over);
            }
            for (const Expr* a : written) l.dims[d].push_back(static_cast<uint8_t>(*mesh.axis_index(a->name.name)));
            if (t.shape[d] % l.split_factor(mesh, d) != 0) fail(DiagCode::E0501, call.span, fmt::format("dim {} of size {} cannot be split into {} pieces", d, t.shape[d], l.split_factor(mesh, d)));
            ValueId v = collective(ir::OpKind::ReduceScatter, x, axes, static_cast<int32_t>(d), -1, l, call.span, "written by the user", false);
            return v;
        }
        if (!ends_with_group(t.layout.dims[d])) {
            fail(DiagCode::E0407, call.span,
                 fmt::format("`{}` over ({}) needs dim {} split over ({}) as its minor-most axes: {}", builtin_info(b).name,
                             mesh.axis_names(axes), d, mesh.axis_names(axes), type_str(t)));
        }
        // The axes leave dim d in the order they split it (and join the to-dim so).
        std::vector<uint8_t> moving(t.layout.dims[d].end() - static_cast<std::ptrdiff_t>(group.size()), t.layout.dims[d].end());
        l.dims[d].resize(l.dims[d].size() - group.size());
        if (b == Builtin::all_gather) {
            return collective(ir::OpKind::AllGather, x, axes, static_cast<int32_t>(d), -1, l, call.span, "written by the user", false);
        }
        const Expr* to_e = named_arg("to");
        if (!to_e) fail(DiagCode::E0309, call.span, "`all_to_all` needs `to:`");
        auto d2 = static_cast<size_t>(axis_arg(*to_e, x));
        if (d2 == d) fail(DiagCode::E0407, to_e->span, "`all_to_all` moves axes from one dim to another: `from:` and `to:` are the same dim");
        for (uint8_t a : moving) l.dims[d2].push_back(a);
        if (t.shape[d2] % l.split_factor(mesh, d2) != 0) fail(DiagCode::E0501, call.span, fmt::format("dim {} of size {} cannot be split into {} pieces", d2, t.shape[d2], l.split_factor(mesh, d2)));
        return collective(ir::OpKind::AllToAll, x, axes, static_cast<int32_t>(d), static_cast<int32_t>(d2), l, call.span, "written by the user", false);
    }
    default: break;
    }
    fail(DiagCode::E0311, call.span,
         fmt::format("the built-in `{}` is not supported by the type checker yet", builtin_info(b).name),
         {{"`meshc check` accepts it; `explain` and `--emit=gir` need the checker", {}}});
}

}  // namespace meshc::sema::check

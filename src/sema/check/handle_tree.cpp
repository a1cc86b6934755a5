// Built-ins over whole parameter trees (tensors, tuples and structs of them, the values
// a `P: Params` parameter stands for): the element-wise built-ins applied leaf by leaf,
// `zeros_like`, `ones_like` and `global_norm`.
#include "sema/check/context.h"

namespace meshc::sema::check {

namespace {


// Operands given to the element-wise handlers for the duration of one application.
class OperandScope {
public:
    explicit OperandScope(std::map<const Expr*, ValueId>& overrides) : overrides_(overrides) {}
    ~OperandScope() {
        for (const Expr* e : set_) overrides_.erase(e);
    }
    OperandScope(const OperandScope&) = delete;
    OperandScope& operator=(const OperandScope&) = delete;
    void set(const Expr* e, ValueId v) {
        overrides_[e] = v;
        set_.push_back(e);
    }

private:
    std::map<const Expr*, ValueId>& overrides_;
    std::vector<const Expr*> set_;
};

}  // namespace

// `sqrt(s)`, `max(a, 0.0)`, `select(c, a, b)`, `cast(p, bf16)` with a tuple or struct
// operand: the built-in applied to each leaf, with the built-in's own checks and
// sharding rule per leaf (a scalar operand joins every leaf).
Val FunctionBuilder::lower_elementwise_builtin(Builtin b, const Expr& call) {
    std::vector<const Expr*> pos;
    for (const Arg& a : call.args) {
        if (!a.label) pos.push_back(a.value);
    }
    size_t operands = 1;
    if (b == Builtin::max || b == Builtin::min) operands = 2;
    if (b == Builtin::select) operands = 3;
    if (pos.size() < operands) return Val::tensor(lower_builtin(b, call));  // its arity error
    std::vector<Val> vals;
    bool any_aggregate = false;
    for (size_t i = 0; i < operands; ++i) {
        vals.push_back(eval(*pos[i]));
        any_aggregate |= is_aggregate(vals.back());
    }
    if (!any_aggregate) {
        OperandScope scope(operand_override_);
        for (size_t i = 0; i < operands; ++i) scope.set(pos[i], tensor_of(vals[i], *pos[i]));
        return Val::tensor(lower_builtin(b, call));
    }
    return leafwise(vals, call.span, fmt::format("`{}`", builtin_info(b).name), [&](const std::vector<ValueId>& ids) {
        OperandScope scope(operand_override_);
        for (size_t i = 0; i < operands; ++i) scope.set(pos[i], ids[i]);
        return lower_builtin(b, call);
    });
}

Val FunctionBuilder::lower_tree_builtin(Builtin b, const Expr& call) {
    std::string_view name = builtin_info(b).name;
    if (call.args.size() != 1 || call.args[0].label) {
        fail(DiagCode::E0309, call.span, fmt::format("`{}` takes one argument: a tensor, or a tuple or struct of tensors", name));
    }
    const Expr& arg = *call.args[0].value;
    Val x = eval(arg);
    if (x.kind == Val::Poison) throw Abandon{};
    if (x.kind != Val::Tensor && !is_aggregate(x)) tensor_of(x, arg);  // its error
    std::vector<ValueId> leaves;
    flatten(x, leaves, arg.span);
    if (b == Builtin::zeros_like || b == Builtin::ones_like) {
        // Each leaf's global shape, element type, mesh and layout (a pending sum is a
        // global value like any other: its counterpart is complete), made in place: each
        // device creates its own piece and nothing moves.
        std::vector<ValueId> made;
        for (ValueId v : leaves) {
            const TensorType& t = type(v);
            ir::Op op{ir::OpKind::Create};
            op.create = b == Builtin::zeros_like ? ir::CreateKind::Zeros : ir::CreateKind::Ones;
            op.span = call.span;
            TensorType r;
            r.dtype = t.dtype;
            r.shape = t.shape;
            r.layout = Layout::replicated(t.rank());
            ValueId z = emit(std::move(op), std::move(r), dim_names_[v]);
            flexible_[z] = true;
            weak_[z] = weak_[v];
            if (!flexible_[v]) {
                Layout l = type(v).layout;
                l.partial = 0;
                fix_layout(z, type(v).mesh, l);
            }
            made.push_back(z);
        }
        if (x.kind == Val::Tensor) return Val::tensor(made[0]);
        size_t next = 0;
        Val out = unflatten(type_of_val(x), made, next);
        out.opaque = x.opaque;
        return out;
    }
    // global_norm: sqrt of the sum of every leaf's squares. Each leaf's sum of squares is
    // a scalar, pending over the axes that split the leaf; all of them join one pending
    // sum over the union of those axes (a complete scalar joins it for free, kept on one
    // device of each group), so one scalar all_reduce completes the norm.
    if (leaves.empty()) fail(DiagCode::E0307, arg.span, "`global_norm` of a value that holds no tensor");
    std::vector<ValueId> squares;
    int32_t mesh = -1;
    AxisSet axes = 0;
    for (ValueId v : leaves) {
        if (!is_float(type(v).dtype) && !weak_[v]) {
            fail(DiagCode::E0308, arg.span, fmt::format("`global_norm` takes float tensors; a leaf is {}", type_str(type(v))));
        }
        // The norm is an f32 scalar for every float tree: f16 and bf16 leaves are squared
        // in f32 (an f16 square overflows past 255), f64 leaves summed in f64 and their
        // sums rounded to f32 once.
        DType leaf = type(v).dtype;
        ValueId x = !weak_[v] && (leaf == DType::F16 || leaf == DType::BF16) ? convert(v, DType::F32, call.span) : v;
        ValueId sq = elementwise(ir::Ew::Mul, {x, x}, call.span);
        std::vector<int64_t> dims(type(sq).rank());
        std::iota(dims.begin(), dims.end(), 0);
        ValueId s = dims.empty() ? sq : reduce(ir::ReduceKind::Sum, sq, dims, false, call.span);
        if (!weak_[s] && type(s).dtype == DType::F64) s = convert(s, DType::F32, call.span);
        if (type(s).mesh >= 0) {
            if (mesh >= 0 && type(s).mesh != mesh) {
                fail(DiagCode::E0405, arg.span, "`global_norm` of leaves on two meshes",
                     {{"values never move between meshes implicitly", {}}});
            }
            mesh = type(s).mesh;
            axes |= type(s).layout.partial;
        }
        squares.push_back(s);
    }
    ValueId total = ir::kNoValue;
    for (ValueId s : squares) {
        if (axes != 0 && type(s).layout.partial != axes) {
            TensorType t = type(s);
            if (t.mesh < 0) s = place(s, mesh, call.span, /*scalars_too=*/true);
            t = type(s);
            t.layout.partial = axes;
            s = coerce(s, t, call.span, "`global_norm`: one pending sum over every leaf");
        }
        total = total == ir::kNoValue ? s : elementwise(ir::Ew::Add, {total, s}, call.span);
    }
    if (axes != 0) {
        TensorType t = type(total);
        t.layout.partial = 0;
        total = coerce(total, t, call.span, "`global_norm`");
    }
    return Val::tensor(elementwise(ir::Ew::Sqrt, {total}, call.span));
}

}  // namespace meshc::sema::check

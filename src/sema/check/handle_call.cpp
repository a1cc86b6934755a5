// Calls: loads, reshapes, argument parsing for built-ins, calls of user functions (with
// generic binding and instantiation) and of grad / value_and_grad.
#include "sema/check/context.h"

namespace meshc::sema::check {

bool FunctionBuilder::is_load_call(const Expr& e) {
    if (e.kind != ExprKind::Call || e.lhs->kind != ExprKind::Name) return false;
    if (find_binding(e.lhs->name.name)) return false;
    return find_builtin(e.lhs->name.name) == Builtin::load;
}

// `load("x.npy")` takes its type, layout included, from the annotation; each device
// reads its own piece. The file's dtype and shape are checked when the program runs.
ValueId FunctionBuilder::lower_load(const Expr& call, const AggType& t) {
    if (call.args.size() != 1 || call.args[0].label) {
        fail(DiagCode::E0309, call.span, "`load` takes one file name: `load(\"x.npy\")`");
    }
    if (t.kind != AggType::Tensor) fail(DiagCode::E0309, call.span, "`load` of a tuple or struct is written as the value of an annotated `let`");
    ir::Op op{ir::OpKind::Load};
    path_arg(*call.args[0].value, op, "`load` takes one file name: `load(\"x.npy\")` or a path argument");
    if (is_safetensors_path(op.text)) op.names = {""};  // the file's only tensor
    op.span = call.span;
    return emit_load(std::move(op), t.tensor, t.dim_names);
}

ValueId FunctionBuilder::emit_load(ir::Op op, const TensorType& t, std::vector<std::string_view> dim_names) {
    if (!t.layout.partial) return emit(std::move(op), t, std::move(dim_names));
    TensorType whole = t;
    whole.layout.partial = 0;
    Span span = op.span;
    ValueId v = emit(std::move(op), std::move(whole), std::move(dim_names));
    return coerce(v, t, span, "a pending sum loaded from a file (the file holds the whole value)");
}

bool FunctionBuilder::is_safetensors_path(std::string_view path) {
    constexpr std::string_view ext = ".safetensors";
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
}

// The leaves of a value saved as a checkpoint, in flatten's order, named by their field
// path: struct fields by name, tuple elements by index, joined by '.' (`opt.m.w1`,
// `state.1.w`); a lone tensor has the empty name.
void FunctionBuilder::safetensors_leaves(const Val& v, const std::string& prefix,
                                         std::vector<std::pair<std::string, ValueId>>& out, Span span) {
    if (v.kind == Val::Poison) throw Abandon{};
    auto join = [&](const std::string& s) { return prefix.empty() ? s : prefix + "." + s; };
    switch (v.kind) {
    case Val::Tensor: out.emplace_back(prefix, v.id); return;
    case Val::Tuple:
        for (size_t i = 0; i < v.elems.size(); ++i) safetensors_leaves(v.elems[i], join(std::to_string(i)), out, span);
        return;
    case Val::Struct:
        for (size_t i = 0; i < v.elems.size(); ++i) safetensors_leaves(v.elems[i], join(std::string(v.fn->fields[i].name.name)), out, span);
        return;
    case Val::Path: fail(DiagCode::E0309, span, "expected a tensor, tuple or struct, found a file name");
    default: fail(DiagCode::E0309, span, "a function is not a value here; call it");
    }
}

// `let s: State = load("ckpt.safetensors")`: every leaf of the annotated tensor, tuple or
// struct is the tensor of that name in the file (safetensors_leaves' names); a .npy file
// holds one tensor.
Val FunctionBuilder::lower_load_val(const Expr& call, const AggType& t) {
    if (t.kind == AggType::Tensor) {
        return Val::tensor(lower_load(call, t));
    }
    if (call.args.size() != 1 || call.args[0].label) {
        fail(DiagCode::E0309, call.span, "`load` takes one file name: `load(\"ckpt.safetensors\")`");
    }
    ir::Op path;
    path_arg(*call.args[0].value, path, "`load` takes one file name: `load(\"ckpt.safetensors\")` or a path argument");
    if (!is_safetensors_path(path.text)) {
        fail(DiagCode::E0322, call.span,
             fmt::format("a tuple or struct is loaded from a .safetensors file, not from `{}`", path.text),
             {{fmt::format("the annotation wants {}", agg_string(t)), {}}});
    }
    std::function<Val(const AggType&, const std::string&)> go = [&](const AggType& a, const std::string& prefix) -> Val {
        auto join = [&](const std::string& s) { return prefix.empty() ? s : prefix + "." + s; };
        if (a.kind == AggType::Tensor) {
            ir::Op op{ir::OpKind::Load};
            op.text = path.text;
            op.ints = path.ints;
            op.names = {prefix};
            op.span = call.span;
            return Val::tensor(emit_load(std::move(op), a.tensor, a.dim_names));
        }
        Val v;
        v.kind = a.kind == AggType::Tuple ? Val::Tuple : Val::Struct;
        v.fn = a.item;
        v.binding = a.binding;
        for (size_t i = 0; i < a.elems.size(); ++i) {
            v.elems.push_back(go(a.elems[i], join(a.kind == AggType::Tuple ? std::to_string(i) : std::string(a.item->fields[i].name.name))));
        }
        return v;
    };
    return go(t, "");
}

// ---------------------------------------------------------------- reshape

// docs/language.md, "Sharding rules", rule 4 (ir::reshape_layouts): a split dim factored into n1..nk keeps its axes on n1 if they
// divide it; merged dims keep the outer dim's axes if the inner ones are unsplit;
// anything else is gathered first.
ValueId FunctionBuilder::reshape(ValueId x, const std::vector<int64_t>& shape, Span span) {
    const TensorType& t = type(x);
    int64_t in_total = 1, out_total = 1;
    for (int64_t n : t.shape) in_total *= n;
    for (int64_t n : shape) out_total *= n;
    if (in_total != out_total) {
        fail(DiagCode::E0307, span,
             fmt::format("cannot reshape {} ({} elements) to {} ({} elements)", shape_string(t.shape), in_total, shape_string(shape), out_total));
    }
    if (flexible_[x]) fix_layout(x, t.mesh, Layout::replicated(t.rank()));
    // What the reshape keeps of the splits is its rule's (ir::reshape_layouts); the rest
    // is gathered first.
    const Mesh* mesh = mesh_of(type(x));
    ir::ReshapeLayouts l = ir::reshape_layouts(type(x).shape, type(x).layout, shape, mesh);
    if (mesh && !(l.need == type(x).layout)) x = plan_coercion(x, type(x).mesh, l.need, span, "`reshape` cannot keep these splits", true);
    ir::Op op{ir::OpKind::Reshape};
    op.operands = {x};
    op.ints = shape;
    op.span = span;
    TensorType r = ir::infer_result(in_.module_, op, {&type(x)});
    return emit(std::move(op), std::move(r));
}

// ---------------------------------------------------------------- calls

std::optional<int64_t> FunctionBuilder::const_int(const Expr& e) {
    switch (e.kind) {
    case ExprKind::IntLit: return e.int_value;
    case ExprKind::Unary:
        if (e.unary_op == UnaryOp::Neg) {
            if (auto v = const_int(*e.lhs)) return -*v;
        }
        break;
    case ExprKind::Name:
        if (auto it = binding_.sizes.find(e.name.name); it != binding_.sizes.end()) return it->second;
        break;
    case ExprKind::Field:
        // `M.axis`; a field of a local (a struct) is a run-time value.
        if (e.lhs->kind == ExprKind::Name && !find_binding(e.lhs->name.name)) {
            Dim d{DimKind::Axis, e.span};
            d.name = e.lhs->name;
            d.axis = e.name;
            return eval_dim(d);
        }
        break;
    case ExprKind::Binary: {
        auto a = const_int(*e.lhs);
        auto b = a ? const_int(*e.rhs) : std::nullopt;
        if (!a || !b) break;
        switch (e.binary_op) {
        case BinaryOp::Add: return *a + *b;
        case BinaryOp::Sub: return *a - *b;
        case BinaryOp::Mul: return *a * *b;
        case BinaryOp::Div:
            if (*b != 0 && *a % *b == 0) return *a / *b;
            break;
        default: break;
        }
        break;
    }
    default: break;
    }
    return std::nullopt;
}

int64_t FunctionBuilder::int_arg(const Expr& e) {
    if (auto v = const_int(e)) return *v;
    fail(DiagCode::E0309, e.span, "expected a size known at compile time (an integer, a size variable or `M.axis`)");
}

ValueId FunctionBuilder::run_time_int(const Expr& e, const std::string& what) {
    ValueId v = lower_expr(e);
    const TensorType& t = type(v);
    if (t.rank() != 0 || (t.dtype != DType::I64 && t.dtype != DType::I32)) {
        fail(DiagCode::E0308, e.span, fmt::format("{} must be an integer scalar, found {}", what, type_str(t)));
    }
    if (flexible_[v]) fix_layout(v, t.mesh, Layout::replicated(0));
    return reduce_partial(v, type(v).layout.partial, e.span, fmt::format("{} needs the summed value", what));
}

std::string FunctionBuilder::location(Span span) const {
    if (!span.valid()) return "slice";
    LineCol lc = in_.sources_.line_col(span.file, span.begin);
    return fmt::format("{}:{}:{}", in_.sources_.path(span.file), lc.line, lc.col);
}

void FunctionBuilder::path_arg(const Expr& e, ir::Op& op, const char* what) {
    if (e.kind == ExprKind::StringLit) {
        op.text = e.string_value;
        return;
    }
    Val v = eval(e);
    if (v.kind != Val::Path) fail(DiagCode::E0309, e.span, what);
    op.ints = {static_cast<int64_t>(v.id)};
    op.text = in_.module_.args[v.id].default_text;
}

// `arg("steps", 100)`: the literal default gives the type (an integer: i64, a float: f32,
// a bool, a string: a file name). One argument per name in the whole program: the same
// name with another default is E0321.
Val FunctionBuilder::lower_arg(const Expr& call) {
    std::vector<const Expr*> pos;
    for (const Arg& a : call.args) {
        if (a.label) fail(DiagCode::E0320, a.value->span, "`arg` takes a name and a default: `arg(\"steps\", 100)`");
        pos.push_back(a.value);
    }
    if (pos.size() != 2) {
        fail(DiagCode::E0320, call.span,
             fmt::format("`arg` takes a name and a default, `arg(\"steps\", 100)`; found {} argument{}", pos.size(), pos.size() == 1 ? "" : "s"));
    }
    if (pos[0]->kind != ExprKind::StringLit) {
        fail(DiagCode::E0320, pos[0]->span, "the name of a program argument must be a string literal, as in `arg(\"steps\", 100)`");
    }
    const std::string& name = pos[0]->string_value;
    bool valid = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0]));
    for (char c : name) valid &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    if (!valid) {
        fail(DiagCode::E0320, pos[0]->span,
             fmt::format("\"{}\" cannot be an option name: a program argument's name is a letter followed by letters, digits, `_` or `-`", name));
    }
    static const std::set<std::string_view> kReserved = {"comm", "device", "mesh-threads", "trace", "help", "h"};
    if (kReserved.count(name)) {
        fail(DiagCode::E0320, pos[0]->span, fmt::format("`--{}` is an option of the runtime; choose another name for this argument", name));
    }
    ir::ProgramArg a;
    a.name = name;
    a.span = call.span;
    const Expr* d = pos[1];
    double sign = 1;
    if (d->kind == ExprKind::Unary && d->unary_op == UnaryOp::Neg &&
        (d->lhs->kind == ExprKind::IntLit || d->lhs->kind == ExprKind::FloatLit)) {
        sign = -1;
        d = d->lhs;
    }
    switch (d->kind) {
    case ExprKind::IntLit:
        a.kind = ir::ProgramArg::Int;
        a.number = sign * static_cast<double>(d->int_value);
        a.default_text = std::to_string(sign < 0 ? -d->int_value : d->int_value);
        break;
    case ExprKind::FloatLit:
        a.kind = ir::ProgramArg::Float;
        a.number = sign * d->float_value;
        a.default_text = fmt::format("{}", a.number);
        if (a.default_text.find_first_of(".en") == std::string::npos) a.default_text += ".0";  // `1.0`, not `1`
        break;
    case ExprKind::BoolLit:
        a.kind = ir::ProgramArg::Bool;
        a.number = d->bool_value ? 1 : 0;
        a.default_text = d->bool_value ? "true" : "false";
        break;
    case ExprKind::StringLit:
        if (d->string_value.empty()) fail(DiagCode::E0320, d->span, "the default file name of a path argument is empty");
        a.kind = ir::ProgramArg::Path;
        a.default_text = d->string_value;
        break;
    default:
        fail(DiagCode::E0320, pos[1]->span,
             "the default of a program argument must be a literal (an integer, a float, `true`/`false` or a file name): it gives the argument's type");
    }
    std::vector<ir::ProgramArg>& args = in_.module_.args;
    size_t index = args.size();
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].name != name) continue;
        if (args[i].kind != a.kind || args[i].default_text != a.default_text) {
            static constexpr const char* kKinds[] = {"an i64", "an f32", "a bool", "a file name"};
            fail(DiagCode::E0321, call.span,
                 fmt::format("program argument \"{}\" is declared again as {} with default {}; it was declared as {} with default {}",
                             name, kKinds[a.kind], a.default_text, kKinds[args[i].kind], args[i].default_text),
                 {{"first declared here", args[i].span}});
        }
        index = i;
    }
    if (index == args.size()) args.push_back(a);
    if (a.kind == ir::ProgramArg::Path) {
        Val v;
        v.kind = Val::Path;
        v.id = static_cast<ValueId>(index);
        return v;
    }
    static constexpr DType kTypes[] = {DType::I64, DType::F32, DType::Bool};
    TensorType t;
    t.dtype = kTypes[a.kind];
    t.layout = Layout::replicated(0);
    ir::Op op{ir::OpKind::Arg};
    op.ints = {static_cast<int64_t>(index)};
    op.span = call.span;
    return Val::tensor(emit(std::move(op), std::move(t)));
}

std::vector<int64_t> FunctionBuilder::shape_arg(const Expr& e) {
    if (e.kind != ExprKind::List) fail(DiagCode::E0309, e.span, "expected a shape, a list of sizes like `[8, D]`");
    std::vector<int64_t> shape;
    for (const Expr* x : e.elements) {
        int64_t n = int_arg(*x);
        if (n < 1) fail(DiagCode::E0307, x->span, fmt::format("a dim of size {}; sizes are at least 1", n));
        shape.push_back(n);
    }
    return shape;
}

DType FunctionBuilder::dtype_arg(const Expr& e) {
    if (e.kind == ExprKind::Name && binding_.dtypes.count(e.name.name)) return binding_.dtypes.at(e.name.name);  // `T: Float`
    if (e.kind != ExprKind::DTypeName) fail(DiagCode::E0309, e.span, "expected an element type such as `f32`");
    return e.dtype;
}

int64_t FunctionBuilder::axis_arg(const Expr& e, ValueId operand) {
    const TensorType& t = type(operand);
    auto rank = static_cast<int64_t>(t.rank());
    if (e.kind == ExprKind::Name) {
        std::vector<int64_t> hits;
        for (size_t d = 0; d < t.rank(); ++d) {
            if (dim_names_[operand][d] == e.name.name) hits.push_back(static_cast<int64_t>(d));
        }
        if (hits.size() == 1) return hits[0];
        auto it = binding_.sizes.find(e.name.name);
        if (hits.empty() && it != binding_.sizes.end()) {
            for (size_t d = 0; d < t.rank(); ++d) {
                if (t.shape[d] == it->second) hits.push_back(static_cast<int64_t>(d));
            }
            if (hits.size() == 1) return hits[0];
        }
        fail(DiagCode::E0309, e.span,
             fmt::format("`{}` names {} dims of the operand {}", e.name.name, hits.size(), type_str(t)),
             {{"name a dim by its size variable when it occurs once, else by position (`axis: 1`)", {}}});
    }
    int64_t k = int_arg(e);
    if (k < -rank || k >= rank) {
        fail(DiagCode::E0309, e.span, fmt::format("axis {} is out of range for an operand of rank {}", k, rank));
    }
    return k < 0 ? k + rank : k;
}

AxisSet FunctionBuilder::over_arg(const Expr& e, ValueId operand) {
    const Mesh* mesh = mesh_of(type(operand));
    if (!mesh) fail(DiagCode::E0407, e.span, "a collective needs an operand on a mesh");
    AxisSet axes = 0;
    auto one = [&](const Expr& x) {
        if (x.kind != ExprKind::Name) fail(DiagCode::E0309, x.span, "expected a mesh axis");
        auto index = mesh->axis_index(x.name.name);
        if (!index) fail(DiagCode::E0401, x.span, fmt::format("mesh `{}` has no axis `{}`", mesh->name, x.name.name));
        if (axes & sema::axis_bit(*index)) {
            fail(DiagCode::E0402, x.span, fmt::format("mesh axis `{}` is named twice in `over:`", x.name.name));
        }
        axes |= sema::axis_bit(*index);
    };
    if (e.kind == ExprKind::Tuple) {
        for (const Expr* x : e.elements) one(*x);
    } else {
        one(e);
    }
    return axes;
}

Val FunctionBuilder::lower_call(const Expr& e) {
    const Expr& callee = *e.lhs;
    if (callee.kind == ExprKind::Call && callee.lhs->kind == ExprKind::Name) {
        Val g = lookup(callee.lhs->name);
        if (g.kind == Val::BuiltinFn && (g.builtin == Builtin::grad || g.builtin == Builtin::value_and_grad)) {
            return call_grad(callee, e);
        }
    }
    if (callee.kind == ExprKind::Name) {
        Val v = lookup(callee.name);
        if (v.kind == Val::BuiltinFn) {
            if (v.builtin == Builtin::grad || v.builtin == Builtin::value_and_grad) {
                fail(DiagCode::E0309, e.span,
                     fmt::format("`{}(f)` is a function: call it with f's arguments, `{}(f)(x, ...)`",
                                 builtin_info(v.builtin).name, builtin_info(v.builtin).name));
            }
            if (v.builtin == Builtin::arg) return lower_arg(e);
            std::string_view group = builtin_info(v.builtin).group;
            if (group == "tree") return lower_tree_builtin(v.builtin, e);
            if (group == "elementwise") return lower_elementwise_builtin(v.builtin, e);
            return Val::tensor(lower_builtin(v.builtin, e));
        }
        if (v.kind == Val::Function) return call_user(*v.fn, in_.item_module_.at(v.fn), e);
    }
    if (callee.kind == ExprKind::Field && callee.lhs->kind == ExprKind::Name) {
        Val m = lookup(callee.lhs->name);
        if (m.kind == Val::Module) {
            for (const Item* item : in_.program_.modules[m.module]->items) {
                if (item->kind == ItemKind::Fn && item->name.name == callee.name.name) {
                    return call_user(*item, m.module, e);
                }
            }
        }
    }
    fail(DiagCode::E0309, e.span, "this is not a function");
}

Val FunctionBuilder::call_user(const Item& fn, size_t module_index, const Expr& call,
                               std::vector<AggType>* param_types_out) {
    if (call.args.size() != fn.params.size()) {
        fail(DiagCode::E0309, call.span,
             fmt::format("`{}` takes {} argument{}, found {}", fn.name.name, fn.params.size(),
                         fn.params.size() == 1 ? "" : "s", call.args.size()),
             {{"declared here", fn.name.span}});
    }
    std::vector<Val> args;
    for (const Arg& a : call.args) {
        args.push_back(eval(*a.value));
        if (args.back().kind == Val::Path) {
            fail(DiagCode::E0309, a.value->span, "a file name (a path argument) is only the file of `load` or `save`; it cannot be passed to a function");
        }
    }
    Binding b;
    for (size_t i = 0; i < fn.params.size(); ++i) bind_generics(*fn.params[i].type, args[i], b, call.args[i].span, &fn);
    for (const GenericParam& g : fn.generics) {
        // A `T: Float` no typed argument fixes (only literals at its places, or none) is
        // f32, as a weak literal with no context is.
        if (g.kind && g.kind->name == "Float" && !b.dtypes.count(g.name.name)) b.dtypes[g.name.name] = DType::F32;
        if (g.kind && g.kind->name == "Params" && !b.types.count(g.name.name)) {
            fail(DiagCode::E0310, call.span,
                 fmt::format("cannot infer the parameter type `{}` of `{}` from the arguments", g.name.name, fn.name.name),
                 {{"declared here", g.name.span}});
        }
    }
    keep_generic_meshes(fn, b);
    // A mesh parameter no argument fixes (the arguments are not placed yet) is the
    // program's mesh when it has one: unplaced values go with any mesh.
    for (const GenericParam& g : fn.generics) {
        if (g.kind && g.kind->name == "Mesh" && !b.meshes.count(g.name.name) && default_mesh() >= 0) {
            b.meshes[g.name.name] = default_mesh();
        }
    }
    Binding callee_binding = b;
    // Parameter types, computed in the callee's module under its binding; errors in them
    // (a split that does not divide) are this call's.
    std::swap(binding_, b);
    call_site_ = &call;
    callee_item_ = &fn;
    size_t saved_module = module_index_;
    module_index_ = module_index;
    std::vector<AggType> param_types;
    std::optional<AggType> result_type;
    try {
        // The callee's `where` clauses, with this call's sizes (ground: no solver needed).
        // Every clause that fails is reported, then the call is abandoned.
        bool failed = false;
        for (const ast::Constraint& w : fn.where) {
            int64_t a = eval_dim(*w.lhs), c = eval_dim(*w.rhs);
            bool holds = compare(w.op, a, c);
            if (!holds) {
                std::string sizes = binding_.describe();
                auto& d = in_.diags_->emit(DiagCode::E0502, call.span,
                                           fmt::format("this call of `{}` needs `{} {} {}`, which is false here ({} {} {})", fn.name.name,
                                                       syntax::dim_to_string(*w.lhs), cmp_op_spelling(w.op),
                                                       syntax::dim_to_string(*w.rhs), a, cmp_op_spelling(w.op), c));
                if (!sizes.empty()) d.note(fmt::format("with {}", sizes));
                d.note("required by this `where` clause", w.span);
                failed = true;
            }
        }
        if (failed) throw Abandon{};
        for (const Param& p : fn.params) param_types.push_back(agg_type_from_ast(*p.type));
        if (fn.result) result_type = agg_type_from_ast(*fn.result);
    } catch (...) {
        std::swap(binding_, b);
        module_index_ = saved_module;
        call_site_ = nullptr;
        callee_item_ = nullptr;
        throw;
    }
    std::swap(binding_, b);
    module_index_ = saved_module;
    call_site_ = nullptr;
    callee_item_ = nullptr;
    int32_t index = in_.instantiate(fn, module_index, callee_binding, call.span);
    if (index < 0) throw Abandon{};  // the callee's errors were reported
    std::vector<ValueId> flat;
    for (size_t i = 0; i < args.size(); ++i) {
        Val a = coerce_val(std::move(args[i]), param_types[i], call.args[i].span,
                           fmt::format("parameter `{}` of `{}`", fn.params[i].name.name, fn.name.name));
        flatten(a, flat, call.args[i].span);
    }
    const ir::Function& callee = in_.module_.functions[static_cast<size_t>(index)];
    if (param_types_out) *param_types_out = param_types;
    ir::Op op{ir::OpKind::Call};
    op.callee = index;
    op.operands = flat;
    op.span = call.span;
    if (callee.results.empty() || !result_type) {
        ops_->push_back(std::move(op));
        return Val::tensor(ir::kNoValue);
    }
    std::vector<ValueId> results;
    for (ValueId r : callee.results) {
        ValueId v = f_.add_value(callee.types[r]);
        flexible_.push_back(false);
        weak_.push_back(false);
        producer_.push_back({nullptr, 0});
        dim_names_.emplace_back(callee.types[r].rank());
        results.push_back(v);
    }
    op.results = results;
    ops_->push_back(std::move(op));
    size_t next = 0;
    Val out = unflatten(*result_type, results, next);
    std::vector<const AggType*> leaves;
    flatten_type(*result_type, leaves);
    for (size_t i = 0; i < leaves.size() && i < results.size(); ++i) {
        if (leaves[i]->dim_names.size() == type(results[i]).rank()) dim_names_[results[i]] = leaves[i]->dim_names;
    }
    return out;
}

// `grad(f)(args)` / `value_and_grad(f)(args)`: typed here (the gradient has the type of
// f's first argument, sharding included); the differentiation itself is a later pass
// over the Grad op.
Val FunctionBuilder::call_grad(const Expr& grad_call, const Expr& call) {
    Val g = lookup(grad_call.lhs->name);
    bool with_value = g.builtin == Builtin::value_and_grad;
    const char* name = with_value ? "value_and_grad" : "grad";
    if (grad_call.args.size() != 1 || grad_call.args[0].label) {
        fail(DiagCode::E0309, grad_call.span, fmt::format("`{}` takes one function: `{}(f)`", name, name));
    }
    const Expr& target = *grad_call.args[0].value;
    const Item* fn = nullptr;
    size_t module = module_index_;
    if (target.kind == ExprKind::Name) {
        Val f = lookup(target.name);
        if (f.kind == Val::Function) fn = f.fn;
    } else if (target.kind == ExprKind::Field && target.lhs->kind == ExprKind::Name) {
        Val m = lookup(target.lhs->name);
        if (m.kind == Val::Module) {
            module = m.module;
            for (const Item* item : in_.program_.modules[m.module]->items) {
                if (item->kind == ItemKind::Fn && item->name.name == target.name.name) fn = item;
            }
        }
    }
    if (!fn) fail(DiagCode::E0601, target.span, fmt::format("`{}` differentiates a function you wrote; this is not one", name));
    if (fn->params.empty()) fail(DiagCode::E0601, target.span, fmt::format("`{}` has no argument to differentiate with respect to", fn->name.name));
    module = in_.item_module_.at(fn);
    // Type the call as an ordinary call first: arguments, binding, result.
    size_t op_count = ops_->size();
    std::vector<AggType> param_types;
    Val value = call_user(*fn, module, call, &param_types);
    MESHC_ASSERT(ops_->size() > op_count && ops_->back().kind == ir::OpKind::Call, "call_user emits a call");
    ir::Op op = std::move(ops_->back());
    ops_->pop_back();
    if (value.kind != Val::Tensor || value.id == ir::kNoValue || type(value.id).rank() != 0 ||
        !is_float(type(value.id).dtype)) {
        std::string returns = value.kind != Val::Tensor || value.id == ir::kNoValue
                                  ? std::string(value.kind == Val::Tensor ? "nothing" : "a tuple or struct")
                                  : "`" + type_str(type(value.id)) + "`";
        std::vector<std::pair<std::string, Span>> notes{{"declared here", fn->name.span}};
        if (value.kind == Val::Tensor && value.id != ir::kNoValue && type(value.id).rank() > 0) {
            notes.push_back({fmt::format("help: a loss is a scalar: return `mean(...)` or `sum(...)` of this value from `{}`",
                                         fn->name.name),
                             {}});
        } else if (value.kind == Val::Tensor && value.id != ir::kNoValue) {
            notes.push_back({"help: differentiate a float loss: `cast` an integer result to f32", {}});
        }
        fail(DiagCode::E0601, call.span,
             fmt::format("`{}` needs `{}` to return a float scalar; it returns {}", name, fn->name.name, returns),
             std::move(notes));
    }
    // The gradient has the types of the first argument's leaves.
    const AggType& first = param_types[0];
    std::vector<const AggType*> first_leaves;
    flatten_type(first, first_leaves);
    ir::Op grad_op{ir::OpKind::Grad};
    grad_op.callee = op.callee;
    grad_op.operands = op.operands;
    grad_op.span = call.span;
    grad_op.dim = with_value ? 1 : 0;
    std::vector<ValueId> results;
    auto add = [&](TensorType t) {
        ValueId v = new_value(std::move(t));
        results.push_back(v);
        return v;
    };
    ValueId loss = with_value ? add(type(value.id)) : ir::kNoValue;
    std::vector<ValueId> grads;
    for (size_t i = 0; i < first_leaves.size(); ++i) grads.push_back(add(type(op.operands[i])));
    grad_op.results = results;
    ops_->push_back(std::move(grad_op));
    size_t next = 0;
    Val gradient = unflatten(first, grads, next);
    if (!with_value) return gradient;
    Val pair;
    pair.kind = Val::Tuple;
    pair.elems = {Val::tensor(loss), std::move(gradient)};
    return pair;
}

}  // namespace meshc::sema::check

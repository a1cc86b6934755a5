// Type, shape and sharding inference, AST -> GIR; see sema/infer.h.
//
// Each function is lowered once per instantiation (sizes and meshes bound). Values are
// typed as they are built: shapes and element types by the usual rules, layouts by the
// sharding rules of docs/language.md, "Sharding rules" applied forward, and backwards for creation
// ops: a value made by `zeros`, `random_normal`, ... (and element-wise chains of such
// values) is "flexible" until its first use that needs a layout, which then fixes it, so
// each device creates only its own piece and nothing moves. Where a value's layout
// differs from what a use requires, plan_coercion() inserts the collectives (or free
// local slices) that convert it.
//
// The checker's shared state: the per-program Inferer and the per-instance
// FunctionBuilder, and the values they pass around. The checker is split by construct,
// one file per family (handle_*.cpp), in the manner of a handler table:
//   builder.cpp            emitting ops, types from the AST, layouts, coercions
//   handle_aggregate.cpp   tuples, structs, struct literals, binding generics
//   handle_stmt.cpp        statements, bindings, returns, names
//   handle_expr.cpp        expressions: the dispatch
//   handle_control.cpp     if, for, regions
//   handle_elementwise.cpp element-wise operators and broadcasting
//   handle_contract.cpp    matmul, einsum, reductions
//   handle_call.cpp        calls of user functions and of grad, loads, reshapes, arguments
//   handle_builtin.cpp     the built-ins
//   handle_tree.cpp        built-ins over parameter trees (leaf-wise, zeros_like, global_norm)
//   inferer.cpp            instances, probing generic functions, infer_program()
// Internal to sema/check: nothing outside it includes this header.
#pragma once

#include "sema/infer.h"
#include "ir/op_rules.h"

#include <algorithm>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sema/builtins.h"
#include "ir/cost_model.h"
#include "ir/reshard_plan.h"
#include "sema/mesh.h"
#include "sema/signature.h"
#include "syntax/ast_printer.h"

namespace meshc::sema::check {

using namespace meshc::ast;
using ir::TensorType;
using ir::ValueId;
using sema::AxisList;

// Thrown after a diagnostic has been emitted, to abandon the current instantiation.
struct Abandon {};
// Thrown when a choice made in this instantiation turned out costlier than its
// alternative: the instantiation is lowered again with the alternative (a hint).
struct Retry {};

// Identifies a source construct across attempts.
using SpanKey = std::tuple<FileId, uint32_t, uint32_t>;
inline SpanKey key_of(Span s) { return {s.file, s.begin, s.end}; }

inline std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

inline bool is_float(DType t) {
    return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

inline std::string mesh_axis_list(const Mesh& mesh, const sema::AxisList& axes) {
    std::string s;
    for (uint8_t a : axes) s += (s.empty() ? "" : ", ") + mesh.axes[a].name;
    return s;
}

struct AggType;

struct Binding {
    std::map<std::string_view, int64_t> sizes;
    std::map<std::string_view, int32_t> meshes;  // generic mesh parameter -> module mesh
    // `P: Params` parameters: the tensor, tuple or struct type each stands for, and that
    // type spelled out in full (element types, shapes, meshes, layouts) for the key.
    std::map<std::string_view, std::shared_ptr<const AggType>> types;
    std::map<std::string_view, std::string> type_keys;
    std::map<std::string_view, std::string> type_names;  // for messages: `struct Mlp`
    std::map<std::string_view, DType> dtypes;  // `T: Float` parameters -> element types
    // Tensor types written `with _` (a parameter that takes its argument's layout): the
    // layout each has in this instance.
    std::map<const ast::Type*, ir::Layout> layouts;

    /// `B = 8, D = 16` for messages.
    std::string describe() const {
        std::string out;
        for (const auto& [n, v] : sizes) out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", n, v);
        for (const auto& [n, t] : type_names) out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", n, t);
        for (const auto& [n, t] : dtypes) out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", n, dtype_name(t));
        return out;
    }

    std::string key() const {
        std::string k;
        for (const auto& [n, v] : sizes) k += fmt::format("{}={};", n, v);
        for (const auto& [n, m] : meshes) k += fmt::format("{}=@{};", n, m);
        for (const auto& [n, t] : type_keys) k += fmt::format("{}=<{}>;", n, t);
        for (const auto& [n, t] : dtypes) k += fmt::format("{}:{};", n, dtype_name(t));
        for (const auto& [t, l] : layouts) {
            k += fmt::format("{}={{", static_cast<const void*>(t));
            for (const auto& axes : l.dims) {
                for (uint8_t a : axes) k += fmt::format("{}.", a);
                k += ",";
            }
            k += fmt::format("}}{};", l.partial);
        }
        return k;
    }
};

// What a name denotes inside a function body.
struct Val {
    // Poison: the value of a statement that failed (its error was reported); using it
    // abandons the using statement silently, so one mistake gives one diagnostic.
    enum Kind { Tensor, Function, BuiltinFn, Module, Tuple, Struct, Poison, Path } kind = Tensor;
    // Path: a path argument, `arg("init", "init.npy")`; id is its index in ir::Module::args.
    ValueId id = ir::kNoValue;
    const Item* fn = nullptr;            // Function; Struct: the struct item
    Builtin builtin = Builtin::Count;
    size_t module = 0;
    std::vector<Val> elems;              // Tuple elements; Struct fields in declaration order
    std::shared_ptr<Binding> binding;    // Struct: its generic arguments
    // Tuple, Struct: the `P: Params` parameter of the function being checked that is this
    // value's type, or empty. Such a value is opaque: only leaf-wise operations apply.
    std::string_view opaque;

    static Val tensor(ValueId v) { return Val{Tensor, v}; }
};

inline bool is_aggregate(const Val& v) { return v.kind == Val::Tuple || v.kind == Val::Struct; }

// The type of a parameter, result, field or annotation: a tensor, or an aggregate of them.
struct AggType {
    enum Kind { Tensor, Tuple, Struct } kind = Tensor;
    TensorType tensor;
    std::vector<std::string_view> dim_names;  // Tensor: size-variable name of each dim, or ""
    std::vector<AggType> elems;          // Tuple elements; Struct fields
    const Item* item = nullptr;          // Struct
    std::shared_ptr<Binding> binding;    // Struct: its generic arguments
    const Item* item_module_hint = nullptr;
    std::string_view type_param;         // Tuple, Struct: see Val::opaque
    bool any_layout = false;             // Tensor written `with _` and not bound: the value's layout
};

class Inferer;

// Lowers one function instance.
class FunctionBuilder {
public:
    FunctionBuilder(Inferer& inferer, ir::Function& f, const Item& item, size_t module_index,
                    Binding binding);
    void lower_body();

private:
    friend class Inferer;
    // ---------------------------------------------------------------- helpers
    [[noreturn]] void fail(DiagCode code, Span span, std::string message,
                           std::vector<std::pair<std::string, Span>> notes = {});
    const TensorType& type(ValueId v) const { return f_.types[v]; }
    ValueId emit(ir::Op op, TensorType type, std::vector<std::string_view> dim_names = {});
    std::string type_str(const TensorType& t) const;
    const Mesh* mesh_of(const TensorType& t) const;

    int64_t eval_dim(const Dim& d);
    TensorType type_from_ast(const Type& t, std::vector<std::string_view>* dim_names);
    /// The element type a `T: Float` parameter stands for in this instance (E0310 when no
    /// argument fixed it).
    DType bound_dtype(const Ident& name);
    Layout layout_from_ast(const Type& t, const TensorType& partial_type, const Mesh& mesh);
    int32_t mesh_index(const Ident& name);

    // layouts
    void fix_layout(ValueId v, int32_t mesh, const Layout& layout);
    /// Gives a weakly typed value (an untyped literal, a creation op without a dtype, or
    /// an element-wise chain of those) the element type its context asks for, with the
    /// chain that made it; it is then typed (a second context must agree).
    void settle_dtype(ValueId v, DType dtype);
    /// E0105 / E0308 when the literal or `full` fill value that makes v cannot be a
    /// `dtype` value (out of range, or a fraction for an integer type).
    void check_fits(ValueId v, DType dtype);
    ValueId coerce(ValueId v, const TensorType& target, Span span, const std::string& reason,
                   bool inserted = true);
    ValueId plan_coercion(ValueId v, int32_t mesh, const Layout& target, Span span,
                          const std::string& reason, bool inserted);
    ValueId plan_coercion_once(ValueId v, int32_t mesh, const Layout& target, Span span,
                          const std::string& reason, bool inserted);
    ValueId collective(ir::OpKind kind, ValueId v, AxisSet axes, int32_t dim, int32_t dim2,
                       Layout result, Span span, const std::string& reason, bool inserted);
    ValueId reduce_partial(ValueId v, AxisSet axes, Span span, const std::string& reason);
    /// Coercions done so far, by (value, target layout, the op list they were done in).
    std::map<std::tuple<ValueId, std::string, const void*>, ValueId> coerced_;
    /// The op list enclosing each region's list while it is open: a coercion done in an
    /// enclosing list before the region is used again inside it.
    std::map<const void*, std::vector<ir::Op>*> parent_list_;
    void enter_list(std::vector<ir::Op>* list) {
        parent_list_[list] = ops_;
        ops_ = list;
    }
    /// v converted to the layout `key` earlier in this list or an enclosing one, or kNoValue.
    ValueId find_coerced(ValueId v, const std::string& key) const {
        for (const std::vector<ir::Op>* list = ops_; list;) {
            auto it = coerced_.find(std::make_tuple(v, key, static_cast<const void*>(list)));
            if (it != coerced_.end()) return it->second;
            auto p = parent_list_.find(list);
            list = p == parent_list_.end() ? nullptr : p->second;
        }
        return ir::kNoValue;
    }
    /// v with its pending sums completed earlier (same splits), or v itself.
    ValueId completed_if_known(ValueId v) const;
    ValueId place(ValueId v, int32_t mesh, Span span, bool scalars_too = false);

    // aggregates, statements, control flow
    struct Binding_ {
        Val value;
        bool is_var = false;
        // A `var` whose first value was still flexible (created without a layout): its
        // layout may follow its later assignments (see assign()).
        bool flexible_start = false;
        Span decl;
    };
    AggType agg_type_from_ast(const Type& t);
    AggType struct_type(const Item& item, Binding inner);
    const Item* find_struct(const Type& t);
    void flatten(const Val& v, std::vector<ValueId>& out, Span span);
    void flatten_type(const AggType& t, std::vector<const AggType*>& out);
    Val unflatten(const AggType& t, const std::vector<ValueId>& values, size_t& next);
    std::string agg_string(const AggType& t) const;
    Val coerce_val(Val v, const AggType& t, Span span, const std::string& reason, bool inserted = true);
    void bind_generics(const Type& param, const Val& arg, Binding& b, Span span, const Item* owner = nullptr);
    /// Binds the `P: Params` parameter `name` of `owner` to the type of `arg` (E0307 when
    /// a leaf is not a float tensor).
    void bind_params_type(std::string_view name, const Val& arg, Binding& b, Span span);
    /// A full spelling of an aggregate type (item, leaves with meshes and layouts).
    std::string agg_key(const AggType& t) const;
    /// Leaf-wise application of an element-wise operation: the aggregate operands must
    /// have one structure; a tensor operand must be a scalar and joins every leaf.
    Val leafwise(const std::vector<Val>& operands, Span span, std::string_view what,
                 const std::function<ValueId(const std::vector<ValueId>&)>& apply);
    /// Values already lowered for an operand expression (leaf-wise application).
    std::map<const Expr*, ValueId> operand_override_;
    /// Scalars broadcast over a tree's leaves by the leaf-wise application in progress: a
    /// float one takes each float leaf's element type (docs/language.md, "Element types").
    std::set<ValueId> tree_scalars_;
    /// `zeros_like`, `ones_like`, `global_norm`: built-ins over any tensor, tuple or struct.
    Val lower_tree_builtin(Builtin b, const Expr& call);
    /// An element-wise built-in (or operator) applied to aggregates leaf by leaf.
    Val lower_elementwise_builtin(Builtin b, const Expr& call);
    [[noreturn]] void opaque_error(const Val& v, Span span, std::string_view what);
    Val struct_literal(const Expr& e);
    bool open_mesh_ok(const Item& item, const std::vector<Val>& values, const std::vector<const Expr*>& loads) const;
    void keep_generic_meshes(const Item& item, Binding& b);
    void bind_pattern(const Pattern& p, Val v, Span span);
    void lower_stmt(const Stmt& s);
    void settle(const Val& v);
    Binding_* find_binding(std::string_view name);
    AggType type_of_val(const Val& v);
    void assign(const Expr& target, Val value, Span span);
    size_t field_index(const Item& item, const Ident& name);
    Val lower_if(const Expr& e, bool as_value);
    void poison_names(const Stmt& s);
    bool failed_ = false;  // a statement of this instance failed (its error is reported)
    AggType join_type(const AggType& a, const AggType& b);
    void lower_for(const Stmt& s);
    Val lower_block_value(const Block& b, bool as_value);
    std::vector<std::string_view> assigned_vars(const Block& b);
    ir::Region open_region(std::vector<ValueId> args);
    void close_region(ir::Region& region, std::vector<ir::Op>* saved);
    Val call_grad(const Expr& grad_call, const Expr& call);
    ValueId new_value(TensorType t);
    std::optional<Val> lower_returning(const std::vector<const Stmt*>& stmts, size_t i, const Expr* tail,
                                       const AggType* rt);
    ValueId reshape(ValueId x, const std::vector<int64_t>& shape, Span span);
    bool is_load_call(const Expr& e);
    ValueId lower_load(const Expr& call, const AggType& t);
    /// A load op of a `t` value: a file holds whole values, so a pending sum is loaded
    /// whole and made pending by the coercion (make_partial: no communication).
    ValueId emit_load(ir::Op op, const TensorType& t, std::vector<std::string_view> dim_names);
    Val lower_load_val(const Expr& call, const AggType& t);
    /// E0312 when a tensor of `type` would hold 2^62 bytes or more (a parameter's, a
    /// result's or an op's).
    void check_size(const TensorType& type, Span span);
    /// How a message names value `v` in source: its name, or `<the value>`.
    std::string source_name(ValueId v) const;
    static bool is_safetensors_path(std::string_view path);
    void safetensors_leaves(const Val& v, const std::string& prefix,
                            std::vector<std::pair<std::string, ValueId>>& out, Span span);
    int32_t default_mesh() const;
    ValueId scalar_condition(const Expr& e, DType want, const char* what);

    // expressions
    ValueId lower_expr(const Expr& e);
    /// lower_expr of a value evaluated already (`e` is its expression, for messages).
    ValueId tensor_of(const Val& v, const Expr& e);
    Val eval(const Expr& e);
    Val lookup(const Ident& name);
    ValueId constant(double value, DType dtype, bool weak, Span span);
    /// Gives every weakly typed leaf of `v` the element type it has now (an annotation
    /// fixed it).
    void settle_leaves(const Val& v, Span span);
    ValueId elementwise(ir::Ew ew, std::vector<ValueId> operands, Span span);
    /// A cast op converting `x` to `to` (the value `cast(x, to)` makes of a typed x).
    ValueId convert(ValueId x, DType to, Span span);
    ValueId contract(std::string spec, ValueId a, ValueId b, Span span);
    ValueId matmul(ValueId a, ValueId b, Span span);
    ValueId reduce(ir::ReduceKind kind, ValueId x, std::vector<int64_t> dims, bool keep, Span span);
    Val lower_call(const Expr& e);
    ValueId lower_builtin(Builtin b, const Expr& call);
    Val call_user(const Item& fn, size_t module_index, const Expr& call,
                  std::vector<AggType>* param_types_out = nullptr);
    std::vector<int64_t> shape_arg(const Expr& e);
    int64_t int_arg(const Expr& e);
    /// The value of an integer expression known at compile time, or none (int_arg's rules).
    std::optional<int64_t> const_int(const Expr& e);
    /// An integer scalar computed at run time (a seed, a slice start): lowered, checked
    /// (rank 0, integer), its pending sum completed.
    ValueId run_time_int(const Expr& e, const std::string& what);
    /// `arg("name", default)`: a program argument (an Arg op, or a Path for a string).
    Val lower_arg(const Expr& call);
    /// The file of `load` / `save`: a string literal, or a path argument (`ints` {k}).
    void path_arg(const Expr& e, ir::Op& op, const char* what);
    /// `file:line:col` of a span, for run-time error messages.
    std::string location(Span span) const;
    int64_t axis_arg(const Expr& e, ValueId operand);
    AxisSet over_arg(const Expr& e, ValueId operand);
    DType dtype_arg(const Expr& e);

    Inferer& in_;
    ir::Function& f_;
    const Item& item_;
    size_t module_index_;
    Binding binding_;
    std::vector<std::map<std::string_view, Binding_>> scopes_;
    std::vector<bool> flexible_;
    /// Flexible element-wise results made from a flexible value, by that value: fixing
    /// the value fixes them (their ops would otherwise mix a placed operand and an
    /// unplaced result).
    std::map<ValueId, std::vector<ValueId>> flexible_users_;
    std::vector<bool> weak_;                     // untyped literals and creations: element type from context
    // The op list and index of each value's producer (null for parameters and region
    // arguments); valid while that list is open, which is as long as a value can be
    // flexible.
    std::vector<std::pair<std::vector<ir::Op>*, size_t>> producer_;
    std::vector<ir::Op>* ops_ = nullptr;         // where emit() appends
    std::shared_ptr<AggType> result_type_;
    std::vector<std::vector<std::string_view>> dim_names_;
    bool explicit_comm_ = false;
    /// Under --strict-comm, a declared effect (`! comm(model)`) is the permission to
    /// communicate over the axes it names (docs/language.md, "Effects").
    bool permitted(const ir::Mesh& mesh, AxisSet axes) const {
        if (!item_.effect.declared || explicit_comm_) return false;
        for (size_t a = 0; a < mesh.axes.size(); ++a) {
            if (!(axes & ir::axis_bit(a))) continue;
            bool named = false;
            for (const ast::EffectAxis& e : item_.effect.axes) named = named || e.axis.name == mesh.axes[a].name;
            if (!named) return false;
        }
        return true;
    }
    bool plan_reported_ = false;  // a coercion's E0406 is reported for its whole plan
    const Expr* statement_call_ = nullptr;  // a call whose value is discarded
    const Expr* call_site_ = nullptr;       // while computing a callee's types at a call
    const Item* callee_item_ = nullptr;     // the callee then
    // Contractions that left a pending sum where a gather was the alternative: what the
    // gather would have cost, and what completing the sum has cost so far.
    struct Choice {
        SpanKey where;
        double gather_cost;
        double paid;
    };
    std::map<ValueId, Choice> choices_;
    bool choice_pending_ = false;
    double pending_gather_cost_ = 0;
    void settle_choices();
    /// A decision point of the plan (docs/architecture.md, "Whole-function plan search"):
    /// alternative 0 is the locally cheapest, the others are tried by the search.
    /// Returns the alternative this lowering takes.
    int choose(Span span, int tag, int count);
    double* dry_cost_ = nullptr;  // set while costing a plan without emitting it
    Layout dry_layout_;
    double coercion_cost(ValueId v, int32_t mesh, const Layout& target);
    double coercion_cost_from(const TensorType& from, const Layout& target);
    const TensorType* dry_type_ = nullptr;  // costing a value not built yet
    const TensorType& plan_type(ValueId v) const { return dry_type_ ? *dry_type_ : type(v); }
    // The type the expression at expected_span_ is converted to right away (a result
    // type, an annotation): lets a choice count the conversion that follows it.
    const TensorType* expected_ = nullptr;
    // The struct type a struct literal at expected_agg_span_ is wanted as (an annotated
    // `let`, a function's result): it binds the generics no field tells (a mesh).
    const AggType* expected_agg_ = nullptr;
    Span expected_agg_span_{};
    Span expected_span_;
};

class Inferer {
public:
    Inferer(const SourceManager& sources, const Program& program, DiagnosticEngine& diags,
            const InferOptions& options)
        : sources_(sources), program_(program), diags_(&diags), options_(options) {}

    ir::Module run();
    bool instantiated(const Item& fn) const;
    /// A generic function that nothing instantiates is still type-checked (see inferer.cpp).
    void probe(const Item& fn);
    static bool is_mesh_param(const Item& fn, std::string_view name);
    static bool is_dtype_param(const Item& fn, std::string_view name);
    static bool is_params_param(const Item& fn, std::string_view name);
    static constexpr size_t kMaxCallDepth = 512;
    /// The function index of `fn` instantiated with `binding`, or -1 after errors.
    int32_t instantiate(const Item& fn, size_t module_index, Binding binding, Span call_site);
    /// Moves the diagnostics [first, end) that lie inside `fn` to its call (see inferer.cpp).
    void point_at_call(const Item& fn, const Binding& binding, Span call_site, size_t first);

    const SourceManager& sources_;
    const Program& program_;
    DiagnosticEngine* diags_;  // a scratch engine while probing
    const InferOptions& options_;
    ir::Module module_;
    std::map<const Item*, int32_t> mesh_items_;
    std::map<const Item*, size_t> item_module_;
    std::map<std::string, int32_t> instances_;
    std::set<const Item*> active_;
    std::set<int32_t> failed_;
    /// Contractions with a one-sided contracted split where gathering is the better plan.
    // Contractions (by the function instance's label and the span) found cheaper with a
    // gather: each instance is planned for its own sizes.
    std::set<std::pair<std::string, SpanKey>> gather_hints_;
    /// Vars (by declaration) whose layout follows a later assignment: (mesh, layout).
    std::map<SpanKey, std::pair<int32_t, Layout>> var_hints_;

    // Whole-function plan search (inferer.cpp, search_plan()): each lowering logs its
    // decision points; the search lowers the function again with other alternatives
    // (plan_hints_) and keeps a change when the function's collectives cost less.
    using ChoiceKey = std::tuple<std::string, SpanKey, int>;
    struct ChoicePoint {
        ChoiceKey key;
        int count = 0;
        int chosen = 0;
    };
    std::map<ChoiceKey, int> plan_hints_;
    std::vector<ChoicePoint>* choice_log_ = nullptr;  // the instance being lowered
    int probing_ = 0;                                 // no search while probing
    /// Functions a probe checked (the probed one and every callee it instantiated with
    /// sizes all distinct, as a probe of its own would): not probed again on their own, so a chain of N generic functions nothing calls
    /// costs one probe, not N (each probe's instances are dropped afterwards).
    std::set<const Item*> probed_;
    // What each instance was lowered from, and its decision points (by function index).
    struct InstanceSource {
        const Item* fn = nullptr;
        size_t module_index = 0;
        Binding binding;
        std::vector<ChoicePoint> log;
    };
    std::map<int32_t, InstanceSource> instance_sources_;
    /// Lowers `fn` into `f` (again after a Retry), logging its decision points.
    bool lower_instance(const Item& fn, size_t module_index, const Binding& binding, ir::Function& f,
                        std::vector<ChoicePoint>& log, size_t diagnostics_before);
    /// The search over every instance that is not differentiated, once all are lowered.
    void search_plans();
    void search_plan(int32_t index, InstanceSource& source);
};

}  // namespace meshc::sema::check

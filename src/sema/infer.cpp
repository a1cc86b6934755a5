// Type, shape and sharding inference, AST -> GIR; see infer.h.
//
// Each function is lowered once per instantiation (sizes and meshes bound). Values are
// typed as they are built: shapes and element types by the usual rules, layouts by the
// sharding rules of LANGUAGE.md section 6 applied forward, and backwards for creation
// ops: a value made by `zeros`, `random_normal`, ... (and element-wise chains of such
// values) is "flexible" until its first use that needs a layout, which then fixes it, so
// each device creates only its own piece and nothing moves. Where a value's layout
// differs from what a use requires, plan_coercion() inserts the collectives (or free
// local slices) that convert it.
#include "sema/infer.h"

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

namespace meshc::sema {

namespace {

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
SpanKey key_of(Span s) { return {s.file, s.begin, s.end}; }

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

bool is_float(DType t) {
    return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

std::string mesh_axis_list(const Mesh& mesh, const sema::AxisList& axes) {
    std::string s;
    for (uint8_t a : axes) s += (s.empty() ? "" : ", ") + mesh.axes[a].name;
    return s;
}

struct Binding {
    std::map<std::string_view, int64_t> sizes;
    std::map<std::string_view, int32_t> meshes;  // generic mesh parameter -> module mesh

    /// `B = 8, D = 16` for messages.
    std::string describe() const {
        std::string out;
        for (const auto& [n, v] : sizes) out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", n, v);
        return out;
    }

    std::string key() const {
        std::string k;
        for (const auto& [n, v] : sizes) k += fmt::format("{}={};", n, v);
        for (const auto& [n, m] : meshes) k += fmt::format("{}=@{};", n, m);
        return k;
    }
};

// What a name denotes inside a function body.
struct Val {
    // Poison: the value of a statement that failed (its error was reported); using it
    // abandons the using statement silently, so one mistake gives one diagnostic.
    enum Kind { Tensor, Function, BuiltinFn, Module, Tuple, Struct, Poison } kind = Tensor;
    ValueId id = ir::kNoValue;
    const Item* fn = nullptr;            // Function; Struct: the struct item
    Builtin builtin = Builtin::Count;
    size_t module = 0;
    std::vector<Val> elems;              // Tuple elements; Struct fields in declaration order
    std::shared_ptr<Binding> binding;    // Struct: its generic arguments

    static Val tensor(ValueId v) { return Val{Tensor, v}; }
};

// The type of a parameter, result, field or annotation: a tensor, or an aggregate of them.
struct AggType {
    enum Kind { Tensor, Tuple, Struct } kind = Tensor;
    TensorType tensor;
    std::vector<std::string_view> dim_names;  // Tensor: size-variable name of each dim, or ""
    std::vector<AggType> elems;          // Tuple elements; Struct fields
    const Item* item = nullptr;          // Struct
    std::shared_ptr<Binding> binding;    // Struct: its generic arguments
    const Item* item_module_hint = nullptr;
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
    void bind_generics(const Type& param, const Val& arg, Binding& b, Span span);
    Val struct_literal(const Expr& e);
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
    int32_t default_mesh() const;
    ValueId scalar_condition(const Expr& e, DType want, const char* what);

    // expressions
    ValueId lower_expr(const Expr& e);
    Val eval(const Expr& e);
    Val lookup(const Ident& name);
    ValueId constant(double value, DType dtype, bool weak, Span span);
    ValueId elementwise(ir::Ew ew, std::vector<ValueId> operands, Span span);
    ValueId contract(std::string spec, ValueId a, ValueId b, Span span);
    ValueId matmul(ValueId a, ValueId b, Span span);
    ValueId reduce(ir::ReduceKind kind, ValueId x, std::vector<int64_t> dims, bool keep, Span span);
    Val lower_call(const Expr& e);
    ValueId lower_builtin(Builtin b, const Expr& call);
    Val call_user(const Item& fn, size_t module_index, const Expr& call,
                  std::vector<AggType>* param_types_out = nullptr);
    std::vector<int64_t> shape_arg(const Expr& e);
    int64_t int_arg(const Expr& e);
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
    std::vector<bool> weak_;                     // untyped literals and creations: element type from context
    // The op list and index of each value's producer (null for parameters and region
    // arguments); valid while that list is open, which is as long as a value can be
    // flexible.
    std::vector<std::pair<std::vector<ir::Op>*, size_t>> producer_;
    std::vector<ir::Op>* ops_ = nullptr;         // where emit() appends
    std::shared_ptr<AggType> result_type_;
    std::vector<std::vector<std::string_view>> dim_names_;
    bool explicit_comm_ = false;
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

    ir::Module run() {
        for (size_t m = 0; m < program_.modules.size(); ++m) {
            for (const Item* item : program_.modules[m]->items) {
                if (item->kind == ItemKind::Mesh) {
                    mesh_items_[item] = static_cast<int32_t>(module_.meshes.size());
                    module_.meshes.push_back(mesh_from_item(*item));
                }
                if (item->kind == ItemKind::Fn) item_module_[item] = m;
            }
        }
        const Module& root = *program_.modules[0];
        for (const Item* item : root.items) {
            if (item->kind != ItemKind::Fn) continue;
            if (item->name.name == "main" || !has_size_variables(*item, root)) {
                instantiate(*item, 0, Binding{}, item->name.span);
            }
        }
        for (const Item* item : root.items) {
            if (item->kind == ItemKind::Fn && !instantiated(*item)) probe(*item);
        }
        return std::move(module_);
    }

    bool instantiated(const Item& fn) const {
        std::string prefix = fmt::format("{}#", static_cast<const void*>(&fn));
        auto it = instances_.lower_bound(prefix);
        return it != instances_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
    }

    // A generic function that nothing instantiates is still type-checked: with sizes
    // chosen to satisfy every split and `where` clause (multiples of the meshes' axis
    // sizes, distinct per variable, so that mixed-up sizes show), and its mesh
    // parameters bound to a declared mesh with the axes it names. Only errors of types,
    // shapes and collectives are kept (E03, E0405, E0407), with a note naming the sizes;
    // the probe's GIR is dropped. A function the probe cannot instantiate is skipped.
    void probe(const Item& fn) {
        Binding b;
        int64_t base = 1;
        for (const Mesh& m : module_.meshes) {
            for (const MeshAxis& a : m.axes) base = std::lcm(base, a.size);
        }
        for (const ast::Constraint& w : fn.where) {
            if (w.lhs->kind == DimKind::Binary && w.lhs->op == DimOp::Mod && w.lhs->rhs->kind == DimKind::Int &&
                w.lhs->rhs->value > 0) {
                base = std::lcm(base, w.lhs->rhs->value);
            }
        }
        if (base > 1024) return;
        static const int64_t kFactors[] = {1, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
        size_t next = 0;
        std::set<std::string_view> axes_used;
        bool ok = true;
        auto visit_dim = [&](auto& self, const Dim& d) -> void {
            if (d.kind == DimKind::Var && !b.sizes.count(d.name.name) && !is_mesh_param(fn, d.name.name)) {
                if (next >= std::size(kFactors)) {
                    ok = false;
                    return;
                }
                b.sizes[d.name.name] = base * kFactors[next++];
            }
            if (d.kind == DimKind::Axis) axes_used.insert(d.axis.name);
            if (d.kind == DimKind::Binary) {
                self(self, *d.lhs);
                self(self, *d.rhs);
            }
        };
        auto visit_type = [&](auto& self, const Type& t) -> void {
            for (const Dim* d : t.shape) visit_dim(visit_dim, *d);
            for (const Dim* d : t.args) visit_dim(visit_dim, *d);
            for (const Type* e : t.elements) self(self, *e);
            if (t.layout) {
                for (const LayoutEntry& e : t.layout->entries) {
                    for (const Ident& a : e.axes) axes_used.insert(a.name);
                }
            }
            if (t.partial) {
                for (const Ident& a : *t.partial) axes_used.insert(a.name);
            }
        };
        for (const GenericParam& g : fn.generics) {
            if (!is_mesh_param(fn, g.name.name) && !b.sizes.count(g.name.name)) {
                if (next >= std::size(kFactors)) return;
                b.sizes[g.name.name] = base * kFactors[next++];
            }
        }
        for (const Param& p : fn.params) visit_type(visit_type, *p.type);
        if (fn.result) visit_type(visit_type, *fn.result);
        if (!ok) return;
        for (const GenericParam& g : fn.generics) {
            if (!is_mesh_param(fn, g.name.name)) continue;
            int32_t chosen = -1;
            for (size_t m = 0; m < module_.meshes.size() && chosen < 0; ++m) {
                bool has_all = true;
                for (std::string_view a : axes_used) has_all &= module_.meshes[m].axis_index(a).has_value();
                if (has_all) chosen = static_cast<int32_t>(m);
            }
            if (chosen < 0) return;
            b.meshes[g.name.name] = chosen;
        }
        // `where` clauses: an equation `X == e` defines X; then every clause must hold.
        auto eval = [&](auto& self, const Dim& d) -> std::optional<int64_t> {
            switch (d.kind) {
            case DimKind::Int: return d.value;
            case DimKind::Var: {
                auto it = b.sizes.find(d.name.name);
                if (it == b.sizes.end()) return std::nullopt;
                return it->second;
            }
            case DimKind::Axis: {
                auto m = b.meshes.find(d.name.name);
                int32_t index = -1;
                if (m != b.meshes.end()) index = m->second;
                for (const auto& [item, i] : mesh_items_) {
                    if (index < 0 && item->name.name == d.name.name) index = i;
                }
                if (index < 0) return std::nullopt;
                auto a = module_.meshes[static_cast<size_t>(index)].axis_index(d.axis.name);
                if (!a) return std::nullopt;
                return module_.meshes[static_cast<size_t>(index)].axes[*a].size;
            }
            case DimKind::Binary: {
                auto x = self(self, *d.lhs), y = self(self, *d.rhs);
                if (!x || !y) return std::nullopt;
                switch (d.op) {
                case DimOp::Add: return *x + *y;
                case DimOp::Sub: return *x - *y;
                case DimOp::Mul: return *x * *y;
                case DimOp::Div: return *y != 0 && *x % *y == 0 ? std::optional<int64_t>(*x / *y) : std::nullopt;
                case DimOp::Mod: return *y != 0 ? std::optional<int64_t>(((*x % *y) + *y) % *y) : std::nullopt;
                }
            }
            }
            return std::nullopt;
        };
        for (const ast::Constraint& w : fn.where) {
            if (w.op == ast::CmpOp::Eq && w.lhs->kind == DimKind::Var) {
                if (auto v = eval(eval, *w.rhs); v && *v >= 1) b.sizes[w.lhs->name.name] = *v;
            }
        }
        for (const ast::Constraint& w : fn.where) {
            auto x = eval(eval, *w.lhs), y = eval(eval, *w.rhs);
            if (!x || !y) return;
            bool holds = compare(w.op, *x, *y);
            if (!holds) return;
        }
        // Probe with a scratch engine; keep only the errors the probe can be trusted with.
        DiagnosticEngine scratch;
        DiagnosticEngine* real = diags_;
        diags_ = &scratch;
        size_t functions_before = module_.functions.size();
        auto instances_before = instances_;
        instantiate(fn, 0, b, fn.name.span);
        diags_ = real;
        module_.functions.resize(functions_before);
        instances_ = std::move(instances_before);
        std::string sizes = b.describe();
        for (const auto& [n, m] : b.meshes) {
            sizes += fmt::format("{}{} = {}", sizes.empty() ? "" : ", ", n, module_.meshes[static_cast<size_t>(m)].name);
        }
        for (const Diagnostic& d : scratch.diagnostics()) {
            std::string_view code = diag_code_info(d.code).name;
            bool trusted = (code.substr(0, 3) == "E03" && d.code != DiagCode::E0310 && d.code != DiagCode::E0311) ||
                           d.code == DiagCode::E0405 || d.code == DiagCode::E0407;
            if (!trusted) continue;
            Diagnostic& copy = real->emit(d.code, d.span, d.message);
            copy.notes = d.notes;
            copy.note(fmt::format("found by checking `{}` with {} (nothing in this file instantiates it)", fn.name.name,
                                  sizes.empty() ? "its declared sizes" : sizes));
        }
    }

    static bool is_mesh_param(const Item& fn, std::string_view name) {
        for (const GenericParam& g : fn.generics) {
            if (g.name.name == name && g.kind && g.kind->name == "Mesh") return true;
        }
        return false;
    }

    // Returns the function index of `fn` instantiated with `binding`, or -1 after errors.
    static constexpr size_t kMaxCallDepth = 512;

    int32_t instantiate(const Item& fn, size_t module_index, Binding binding, Span call_site) {
        std::string key = fmt::format("{}#{}", static_cast<const void*>(&fn), binding.key());
        if (auto it = instances_.find(key); it != instances_.end()) return it->second;
        if (active_.count(&fn)) return -1;  // recursion: reported by name resolution
        if (active_.size() >= kMaxCallDepth) {
            // Each level of a call chain is a level of the checker's recursion (and of
            // autodiff's inlining): a bounded depth instead of a stack overflow.
            diags_->emit(DiagCode::E0107, call_site,
                         fmt::format("calls nested more than {} deep: `{}` is called at depth {}", kMaxCallDepth,
                                     fn.name.name, active_.size() + 1))
                .note("split the chain, or call the functions one after another from a shallower one");
            return -1;
        }
        auto index = static_cast<int32_t>(module_.functions.size());
        module_.functions.emplace_back();
        instances_[key] = index;
        active_.insert(&fn);
        ir::Function f;
        f.name = std::string(fn.name.name);
        f.span = fn.name.span;
        for (const auto& [n, v] : binding.sizes) f.instance[std::string(n)] = v;
        for (const auto& [n, m] : binding.meshes) f.mesh_instance[std::string(n)] = module_.meshes[static_cast<size_t>(m)].name;
        bool ok = true;
        size_t diagnostics_before = diags_->diagnostics().size();
        for (int attempt = 0;; ++attempt) {
            try {
                FunctionBuilder builder(*this, f, fn, module_index, binding);
                builder.lower_body();
            } catch (const Abandon&) {
                ok = false;
            } catch (const Retry&) {
                if (attempt < 4) {
                    diags_->truncate(diagnostics_before);
                    ir::Function fresh;
                    fresh.name = f.name;
                    fresh.span = f.span;
                    fresh.instance = f.instance;
                    fresh.mesh_instance = f.mesh_instance;
                    f = std::move(fresh);
                    continue;
                }
            }
            break;
        }
        active_.erase(&fn);
        module_.functions[index] = std::move(f);
        if (!ok) {
            failed_.insert(index);
            return -1;
        }
        return index;
    }

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
};

// ==================================================================== FunctionBuilder

FunctionBuilder::FunctionBuilder(Inferer& inferer, ir::Function& f, const Item& item,
                                 size_t module_index, Binding binding)
    : in_(inferer), f_(f), item_(item), module_index_(module_index), binding_(std::move(binding)),
      ops_(&f.ops) {
    for (const Attribute& a : item.attrs) {
        if (a.name.name == "explicit_comm") explicit_comm_ = true;
        if (a.name.name == "checkpoint") f.checkpoint = true;
    }
}

void FunctionBuilder::fail(DiagCode code, Span span, std::string message,
                           std::vector<std::pair<std::string, Span>> notes) {
    auto& d = in_.diags_->emit(code, span, std::move(message));
    for (auto& [text, at] : notes) d.note(std::move(text), at);
    throw Abandon{};
}

ValueId FunctionBuilder::emit(ir::Op op, TensorType type, std::vector<std::string_view> dim_names) {
    // Every size, byte count and index of a tensor must fit 64 bits with room to spare.
    uint64_t bytes = ir::dtype_bytes(type.dtype);
    for (int64_t d : type.shape) {
        if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) || bytes >= (uint64_t{1} << 62)) {
            fail(DiagCode::E0312, op.span,
                 fmt::format("a tensor of shape {} and element type {} is too large (2^62 bytes or more)", shape_string(type.shape),
                             dtype_name(type.dtype)));
        }
    }
    ValueId v = f_.add_value(std::move(type));
    op.results = {v};
    flexible_.push_back(false);
    weak_.push_back(false);
    producer_.push_back({ops_, ops_->size()});
    if (dim_names.size() != f_.types[v].rank()) dim_names.assign(f_.types[v].rank(), "");
    dim_names_.push_back(std::move(dim_names));
    ops_->push_back(std::move(op));
    return v;
}

std::string FunctionBuilder::type_str(const TensorType& t) const {
    return ir::type_to_string(in_.module_, t);
}

const Mesh* FunctionBuilder::mesh_of(const TensorType& t) const { return in_.module_.mesh(t.mesh); }

int32_t FunctionBuilder::mesh_index(const Ident& name) {
    if (auto it = binding_.meshes.find(name.name); it != binding_.meshes.end()) return it->second;
    for (const auto& [item, index] : in_.mesh_items_) {
        // Meshes of the function's own module first.
        const Module& m = *in_.program_.modules[module_index_];
        if (item->name.name == name.name &&
            std::find(m.items.begin(), m.items.end(), item) != m.items.end()) {
            return index;
        }
    }
    fail(DiagCode::E0310, name.span, fmt::format("mesh `{}` is not bound here", name.name));
}

int64_t FunctionBuilder::eval_dim(const Dim& d) {
    switch (d.kind) {
    case DimKind::Int: return d.value;
    case DimKind::Var: {
        auto it = binding_.sizes.find(d.name.name);
        if (it == binding_.sizes.end()) {
            // Whether a parameter's shape mentions the size (inside an expression the
            // arguments do not determine, then).
            std::function<bool(const Dim&)> mentions = [&](const Dim& x) {
                if (x.kind == DimKind::Var) return x.name.name == d.name.name;
                return x.kind == DimKind::Binary && (mentions(*x.lhs) || mentions(*x.rhs));
            };
            std::function<bool(const Type&)> in_type = [&](const Type& t) {
                for (const Dim* x : t.shape) {
                    if (x && mentions(*x)) return true;
                }
                for (const Type* e : t.elements) {
                    if (e && in_type(*e)) return true;
                }
                for (const Dim* x : t.args) {
                    if (x && mentions(*x)) return true;
                }
                return false;
            };
            bool mentioned = false;
            const Item& owner = callee_item_ ? *callee_item_ : item_;
            for (const auto& prm : owner.params) mentioned = mentioned || (prm.type && in_type(*prm.type));
            fail(DiagCode::E0310, d.span,
                 fmt::format("the size `{}` is not known here", d.name.name),
                 {{mentioned ? fmt::format("sizes are inferred from the arguments of each call: from a parameter's dim "
                                           "that is the size, or an expression that determines it (`{0} * 2`, `{0} + 1`); "
                                           "here `{0}` appears only where the arguments do not determine it", d.name.name)
                             : std::string("sizes are inferred from the arguments of each call; a size that no "
                                           "parameter shape mentions cannot be inferred"), {}}});
        }
        return it->second;
    }
    case DimKind::Axis: {
        int32_t m = mesh_index(d.name);
        const Mesh& mesh = in_.module_.meshes[m];
        auto axis = mesh.axis_index(d.axis.name);
        if (!axis) fail(DiagCode::E0401, d.axis.span, fmt::format("mesh `{}` has no axis `{}`", mesh.name, d.axis.name));
        return mesh.axes[*axis].size;
    }
    case DimKind::Binary: {
        int64_t a = eval_dim(*d.lhs);
        int64_t b = eval_dim(*d.rhs);
        int64_t r = 0;
        bool overflow = false;
        switch (d.op) {
        case DimOp::Add: overflow = __builtin_add_overflow(a, b, &r); break;
        case DimOp::Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
        case DimOp::Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
        case DimOp::Div:
        case DimOp::Mod:
            if (b == 0) fail(DiagCode::E0501, d.span, "division by zero in a size");
            if (d.op == DimOp::Div && a % b != 0) {
                fail(DiagCode::E0501, d.span,
                     fmt::format("`{}` is {} / {}, which is not exact", syntax::dim_to_string(d), a, b),
                     {{"`/` in a size must divide exactly", {}}});
            }
            r = d.op == DimOp::Div ? a / b : ((a % b) + b) % b;
            break;
        }
        if (overflow) fail(DiagCode::E0310, d.span, "size arithmetic overflows 64 bits");
        return r;
    }
    }
    return 0;
}

Layout FunctionBuilder::layout_from_ast(const Type& t, const TensorType& tt, const Mesh& mesh) {
    Layout layout = Layout::replicated(tt.rank());
    if (t.layout) {
        for (const LayoutEntry& e : t.layout->entries) {
            size_t d = 0;
            if (e.key_name) {
                for (size_t i = 0; i < t.shape.size(); ++i) {
                    if (t.shape[i]->kind == DimKind::Var && t.shape[i]->name.name == e.key_name->name) d = i;
                }
            } else {
                d = static_cast<size_t>(e.key_pos);
            }
            for (const Ident& axis : e.axes) {
                auto index = mesh.axis_index(axis.name);
                if (!index) fail(DiagCode::E0401, axis.span, fmt::format("mesh `{}` has no axis `{}`", mesh.name, axis.name));
                layout.dims[d].push_back(static_cast<uint8_t>(*index));
            }
            int64_t factor = layout.split_factor(mesh, d);
            if (tt.shape[d] % factor != 0 && call_site_) {
                std::string sizes = binding_.describe();
                fail(DiagCode::E0501, call_site_->span,
                     fmt::format("this call splits dim {} of size {} over ({}) into {} pieces, which does not divide it",
                                 d, tt.shape[d], mesh_axis_list(mesh, layout.dims[d]), factor),
                     {{fmt::format("with {}", sizes), {}}, {"the parameter's type asks for the split here", e.span}});
            }
            if (tt.shape[d] % factor != 0) {
                fail(DiagCode::E0501, e.span,
                     fmt::format("dim {} has size {}, which the split over ({}) into {} pieces does "
                                 "not divide", d, tt.shape[d], mesh_axis_list(mesh, layout.dims[d]), factor),
                     {{"splitting a dim of size n over axes of total size k requires n % k == 0", {}}});
            }
        }
    }
    if (t.partial) {
        for (const Ident& axis : *t.partial) {
            auto index = mesh.axis_index(axis.name);
            if (!index) fail(DiagCode::E0401, axis.span, fmt::format("mesh `{}` has no axis `{}`", mesh.name, axis.name));
            layout.partial |= sema::axis_bit(*index);
        }
    }
    return layout;
}

TensorType FunctionBuilder::type_from_ast(const Type& t, std::vector<std::string_view>* dim_names) {
    TensorType tt;
    switch (t.kind) {
    case TypeKind::Scalar: tt.dtype = t.dtype; return tt;
    case TypeKind::Tensor: break;
    case TypeKind::Tuple:
    case TypeKind::Named:
        fail(DiagCode::E0311, t.span,
             "tuple and struct types are not supported by the type checker yet",
             {{"`meshc check` (syntax and names) accepts them; `explain` and `--emit=gir` "
               "need the checker's support, which is in progress", {}}});
    }
    tt.dtype = t.dtype;
    for (const Dim* d : t.shape) {
        int64_t n = eval_dim(*d);
        if (n < 1) fail(DiagCode::E0307, d->span, fmt::format("a dim has size {}; sizes are at least 1", n));
        tt.shape.push_back(n);
        if (dim_names) dim_names->push_back(d->kind == DimKind::Var ? d->name.name : std::string_view());
    }
    if (t.mesh) {
        tt.mesh = mesh_index(*t.mesh);
        tt.layout = layout_from_ast(t, tt, in_.module_.meshes[tt.mesh]);
    } else {
        tt.layout = Layout::replicated(tt.rank());
    }
    return tt;
}

// ---------------------------------------------------------------- layouts

void FunctionBuilder::check_fits(ValueId v, DType dtype) {
    auto [list, index] = producer_[v];
    if (!list || is_float(dtype) || dtype == DType::Bool) return;
    const ir::Op& op = (*list)[index];
    bool literal = op.kind == ir::OpKind::Constant;
    bool fill = op.kind == ir::OpKind::Create && op.create == ir::CreateKind::Full;
    if (!literal && !fill) return;
    if (literal && weak_[v] && is_float(f_.types[v].dtype)) {
        // `q + 0.5 * iota(..)` with an integer q: the chain becomes integer, the literal cannot.
        fail(DiagCode::E0308, op.span, fmt::format("a float literal meets a {} value", dtype_name(dtype)));
    }
    if (fill && op.number != std::floor(op.number)) {
        fail(DiagCode::E0308, op.span, fmt::format("`full` with the fill value {} makes a {} tensor", op.number, dtype_name(dtype)));
    }
    double lo = dtype == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dtype == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
    if (op.number < lo || op.number > hi) {
        fail(DiagCode::E0105, op.span, fmt::format("{} does not fit {}", static_cast<long long>(op.number), dtype_name(dtype)));
    }
}

void FunctionBuilder::settle_dtype(ValueId v, DType dtype) {
    auto [list, index] = producer_[v];
    check_fits(v, dtype);
    f_.types[v].dtype = dtype;
    weak_[v] = false;
    if (!list) return;
    const ir::Op& op = (*list)[index];
    if (op.kind != ir::OpKind::Elementwise || op.ew == ir::Ew::Cast) return;
    bool compares = op.ew == ir::Ew::Eq || op.ew == ir::Ew::Ne || op.ew == ir::Ew::Lt || op.ew == ir::Ew::Le ||
                    op.ew == ir::Ew::Gt || op.ew == ir::Ew::Ge || op.ew == ir::Ew::And || op.ew == ir::Ew::Or || op.ew == ir::Ew::Not;
    if (compares) return;
    size_t first = op.ew == ir::Ew::Select ? 1 : 0;
    for (size_t i = first; i < op.operands.size(); ++i) {
        if (weak_[op.operands[i]]) settle_dtype(op.operands[i], dtype);
    }
}

void FunctionBuilder::fix_layout(ValueId v, int32_t mesh, const Layout& layout) {
    TensorType& t = f_.types[v];
    t.mesh = mesh;
    t.layout = layout;
    flexible_[v] = false;
    auto [list, index] = producer_[v];
    if (!list) return;
    ir::Op& op = (*list)[index];
    if (op.kind != ir::OpKind::Elementwise) return;
    for (ValueId o : op.operands) {
        if (!flexible_[o]) continue;
        const TensorType& ot = f_.types[o];
        Layout ol = Layout::replicated(ot.rank());
        size_t offset = t.rank() - ot.rank();
        for (size_t d = 0; d < ot.rank(); ++d) {
            if (ot.shape[d] == t.shape[d + offset]) ol.dims[d] = layout.dims[d + offset];
        }
        ol.partial = 0;
        fix_layout(o, mesh, ol);
    }
}

ValueId FunctionBuilder::place(ValueId v, int32_t mesh, Span span, bool scalars_too) {
    if (type(v).mesh == mesh || mesh < 0) return v;
    if (type(v).mesh >= 0) {
        fail(DiagCode::E0405, span,
             fmt::format("a value on mesh `{}` is used on mesh `{}`", in_.module_.meshes[type(v).mesh].name,
                         in_.module_.meshes[mesh].name),
             {{"values never move between meshes implicitly", {}}});
    }
    if (flexible_[v]) {
        fix_layout(v, mesh, Layout::replicated(type(v).rank()));
        return v;
    }
    // A mesh-free scalar goes with any mesh as it is.
    if (type(v).rank() == 0 && !scalars_too) return v;
    // An unplaced value is replicated everywhere: viewing it on a mesh is free.
    TensorType t = type(v);
    t.mesh = mesh;
    t.layout = Layout::replicated(t.rank());
    ir::Op op{ir::OpKind::Place};
    op.operands = {v};
    op.span = span;
    std::vector<std::string_view> names = dim_names_[v];
    return emit(std::move(op), std::move(t), std::move(names));
}

ValueId FunctionBuilder::collective(ir::OpKind kind, ValueId v, AxisSet axes, int32_t dim,
                                    int32_t dim2, Layout result, Span span,
                                    const std::string& reason, bool inserted) {
    if (dry_cost_) {
        // Costing a plan: add what this step would cost (LANGUAGE.md 6 and 8), emit nothing.
        TensorType in = plan_type(v);
        in.layout = dry_layout_;
        TensorType out = in;
        out.layout = result;
        const Mesh* mesh = mesh_of(in);
        std::optional<CollectiveKind> ck;
        int64_t bytes = 0;
        switch (kind) {
        case ir::OpKind::AllReduce: ck = CollectiveKind::AllReduce; bytes = in.local_bytes(mesh); break;
        case ir::OpKind::ReduceScatter: ck = CollectiveKind::ReduceScatter; bytes = in.local_bytes(mesh); break;
        case ir::OpKind::AllGather: ck = CollectiveKind::AllGather; bytes = out.local_bytes(mesh); break;
        case ir::OpKind::AllToAll: ck = CollectiveKind::AllToAll; bytes = in.local_bytes(mesh); break;
        default: break;
        }
        if (ck && mesh) *dry_cost_ += collective_cost(*ck, *mesh, axes, static_cast<double>(bytes)).seconds;
        dry_layout_ = std::move(result);
        return v;
    }
    ir::Op op{kind};
    op.operands = {v};
    op.axes = axes;
    op.dim = dim;
    op.dim2 = dim2;
    op.span = span;
    op.inserted = inserted;
    op.reason = reason;
    TensorType t = type(v);
    t.layout = std::move(result);
    bool communicates = kind != ir::OpKind::LocalSlice && kind != ir::OpKind::MakePartial;
    const Mesh* mesh = mesh_of(t);
    if (communicates && inserted && mesh && mesh->group_size(axes) > 1 &&
        (in_.options_.strict_comm || explicit_comm_)) {
        const TensorType& in_type = type(v);
        int64_t bytes = kind == ir::OpKind::AllGather ? t.local_bytes(mesh) : in_type.local_bytes(mesh);
        auto& d = in_.diags_->emit(
            DiagCode::E0406, span,
            fmt::format("this needs {} {} over ({}) of {} per-device bytes",
                        kind == ir::OpKind::ReduceScatter ? "a" : "an", ir::op_name(kind),
                        mesh->axis_names(axes), bytes));
        d.note(fmt::format("why: {}", reason));
        d.note(fmt::format("{}; write the conversion yourself with `reshard(x, {})` (or the "
                           "explicit collective) to allow it",
                           in_.options_.strict_comm ? "--strict-comm forbids inserted communication"
                                                    : "this function is `@explicit_comm`",
                           layout_to_string(t.layout, *mesh)));
    }
    if (auto choice = choices_.find(v); choice != choices_.end() && mesh &&
        (kind == ir::OpKind::AllReduce || kind == ir::OpKind::ReduceScatter)) {
        CollectiveKind ck = kind == ir::OpKind::AllReduce ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
        choice->second.paid += collective_cost(ck, *mesh, axes, static_cast<double>(type(v).local_bytes(mesh))).seconds;
    }
    std::vector<std::string_view> names = dim_names_[v];
    return emit(std::move(op), std::move(t), std::move(names));
}

void FunctionBuilder::settle_choices() {
    bool retry = false;
    for (const auto& [v, c] : choices_) {
        if (c.paid > c.gather_cost && !in_.gather_hints_.count({ir::function_label(f_), c.where})) {
            in_.gather_hints_.insert({ir::function_label(f_), c.where});
            retry = true;
        }
    }
    if (retry) throw Retry{};
}

ValueId FunctionBuilder::reduce_partial(ValueId v, AxisSet axes, Span span, const std::string& reason) {
    axes &= type(v).layout.partial;
    if (!axes) return v;
    Layout l = type(v).layout;
    l.partial &= ~axes;
    // A pending sum completed earlier in this block is used again, not summed twice.
    const Mesh* mesh = mesh_of(type(v));
    if (!mesh || dry_cost_) return collective(ir::OpKind::AllReduce, v, axes, -1, -1, l, span, reason, true);
    auto key = std::make_tuple(v, layout_to_string(l, *mesh), static_cast<const void*>(ops_));
    if (auto it = coerced_.find(key); it != coerced_.end()) return it->second;
    ValueId r = collective(ir::OpKind::AllReduce, v, axes, -1, -1, l, span, reason, true);
    coerced_[key] = r;
    return r;
}

ValueId FunctionBuilder::coerce(ValueId v, const TensorType& target, Span span,
                                const std::string& reason, bool inserted) {
    const TensorType& t = type(v);
    if (t.shape != target.shape) {
        fail(DiagCode::E0307, span,
             fmt::format("shape mismatch: expected {}, found {}", shape_string(target.shape), shape_string(t.shape)),
             {{fmt::format("the value has type {}; {} requires {}", type_str(t), reason, type_str(target)), {}}});
    }
    if (t.dtype != target.dtype) {
        if (weak_[v]) {
            settle_dtype(v, target.dtype);
        } else {
            fail(DiagCode::E0308, span,
                 fmt::format("element type mismatch: expected {}, found {}", dtype_name(target.dtype), dtype_name(t.dtype)),
                 {{fmt::format("{} requires {}", reason, type_str(target)), {}}});
        }
    }
    if (target.mesh < 0) {
        if (flexible_[v] || t.mesh < 0) {
            if (flexible_[v]) fix_layout(v, -1, Layout::replicated(t.rank()));
            return v;
        }
        // Off the mesh: replicate, then view as mesh-free.
        int32_t from = t.mesh;
        v = plan_coercion(v, from, Layout::replicated(t.rank()), span, reason, inserted);
        TensorType off = type(v);
        off.mesh = -1;
        ir::Op op{ir::OpKind::Place};
        op.operands = {v};
        op.span = span;
        std::vector<std::string_view> names = dim_names_[v];
        return emit(std::move(op), std::move(off), std::move(names));
    }
    if (t.mesh >= 0 && t.mesh != target.mesh) place(v, target.mesh, span);  // reports E0405
    if (flexible_[v]) {
        // A creation is made in the target's layout; a pending sum it must be is then one
        // make_partial (each device cannot hold the whole value as its share of a sum).
        Layout plain = target.layout;
        plain.partial = 0;
        fix_layout(v, target.mesh, plain);
        if (!target.layout.partial) return v;
        return plan_coercion(v, target.mesh, target.layout, span, reason, inserted);
    }
    v = place(v, target.mesh, span, /*scalars_too=*/true);
    return plan_coercion(v, target.mesh, target.layout, span, reason, inserted);
}

// Converts v's layout into `target` with the table of LANGUAGE.md section 6: pending sums
// first (reduce_scatter where the target splits a dim over the reduced axes, else one
// all_reduce over all of them), then free local slices over axes nothing uses, then
// all_to_all for an axis moving from one dim to another, then all_gathers, then the
// remaining local slices. Buffers shrink before anything is sent where possible.
// A coercion done earlier in the same block (the same value to the same layout) is used
// again rather than communicated twice.
ValueId FunctionBuilder::plan_coercion(ValueId v, int32_t mesh_index, const Layout& target, Span span,
                                       const std::string& reason, bool inserted) {
    if (dry_cost_ || plan_type(v).layout == target) return plan_coercion_once(v, mesh_index, target, span, reason, inserted);
    auto key = std::make_tuple(v, layout_to_string(target, in_.module_.meshes[mesh_index]), static_cast<const void*>(ops_));
    if (auto it = coerced_.find(key); it != coerced_.end() && type(it->second).mesh == mesh_index) return it->second;
    ValueId r = plan_coercion_once(v, mesh_index, target, span, reason, inserted);
    coerced_[key] = r;
    return r;
}

ValueId FunctionBuilder::plan_coercion_once(ValueId v, int32_t mesh_index, const Layout& target, Span span,
                                            const std::string& reason, bool inserted) {
    Layout cur = plan_type(v).layout;
    if (dry_cost_) dry_layout_ = cur;
    if (cur == target) return v;
    for (const ir::ReshardStep& s : ir::plan_reshard(cur, target)) {
        v = collective(s.kind, v, s.axes, s.dim, s.dim2, s.result, span, reason, inserted);
    }
    (void)mesh_index;
    return v;
}

// The same for a value of type `from` that is not built yet (a candidate result).
double FunctionBuilder::coercion_cost_from(const TensorType& from, const Layout& target) {
    if (from.layout == target || from.mesh < 0) return 0;
    dry_type_ = &from;
    double cost = coercion_cost(ir::kNoValue, from.mesh, target);
    dry_type_ = nullptr;
    return cost;
}

// What converting v to `target` would cost, by the plan plan_coercion() would choose;
// infinity when there is no such plan.
double FunctionBuilder::coercion_cost(ValueId v, int32_t mesh, const Layout& target) {
    if (plan_type(v).layout == target) return 0;
    double cost = 0;
    double* saved = dry_cost_;
    Layout saved_layout = dry_layout_;
    dry_cost_ = &cost;
    try {
        plan_coercion(v, mesh, target, {}, {}, true);
    } catch (const InternalError&) {
        cost = std::numeric_limits<double>::infinity();
    }
    dry_cost_ = saved;
    dry_layout_ = std::move(saved_layout);
    return cost;
}

// ---------------------------------------------------------------- body

// ---------------------------------------------------------------- aggregates

AggType FunctionBuilder::agg_type_from_ast(const Type& t) {
    AggType a;
    switch (t.kind) {
    case TypeKind::Scalar:
    case TypeKind::Tensor:
        a.kind = AggType::Tensor;
        a.tensor = type_from_ast(t, &a.dim_names);
        return a;
    case TypeKind::Tuple:
        a.kind = AggType::Tuple;
        for (const Type* e : t.elements) a.elems.push_back(agg_type_from_ast(*e));
        return a;
    case TypeKind::Named: break;
    }
    const Item* item = find_struct(t);
    Binding inner;
    for (size_t i = 0; i < item->generics.size() && i < t.args.size(); ++i) {
        const GenericParam& g = item->generics[i];
        const Dim& arg = *t.args[i];
        if (g.kind && g.kind->name == "Mesh") {
            inner.meshes[g.name.name] = mesh_index(arg.name);
        } else {
            inner.sizes[g.name.name] = eval_dim(arg);
        }
    }
    return struct_type(*item, std::move(inner));
}

AggType FunctionBuilder::struct_type(const Item& item, Binding inner) {
    AggType a;
    a.kind = AggType::Struct;
    a.item = &item;
    a.binding = std::make_shared<Binding>(inner);
    std::swap(binding_, inner);  // field types are written in the struct's own generics
    try {
        for (const Param& field : item.fields) a.elems.push_back(agg_type_from_ast(*field.type));
    } catch (...) {
        std::swap(binding_, inner);
        throw;
    }
    std::swap(binding_, inner);
    return a;
}

const Item* FunctionBuilder::find_struct(const Type& t) {
    const Module* module = in_.program_.modules[module_index_].get();
    if (t.module) {
        for (const Item* item : module->items) {
            if (item->kind == ItemKind::Import && item->name.name == t.module->name) {
                module = in_.program_.modules[in_.program_.import_targets.at(item)].get();
            }
        }
    }
    for (const Item* item : module->items) {
        if (item->kind == ItemKind::Struct && item->name.name == t.name.name) return item;
    }
    fail(DiagCode::E0310, t.span, fmt::format("`{}` is not a struct here", t.name.name));
}

void FunctionBuilder::flatten(const Val& v, std::vector<ValueId>& out, Span span) {
    if (v.kind == Val::Poison) throw Abandon{};
    switch (v.kind) {
    case Val::Tensor: out.push_back(v.id); return;
    case Val::Tuple:
    case Val::Struct:
        for (const Val& e : v.elems) flatten(e, out, span);
        return;
    default: fail(DiagCode::E0309, span, "a function is not a value here");
    }
}

void FunctionBuilder::flatten_type(const AggType& t, std::vector<const AggType*>& out) {
    if (t.kind == AggType::Tensor) {
        out.push_back(&t);
        return;
    }
    for (const AggType& e : t.elems) flatten_type(e, out);
}

// Rebuilds a Val of type `t` from flat GIR values, consuming them from `next`.
Val FunctionBuilder::unflatten(const AggType& t, const std::vector<ValueId>& values, size_t& next) {
    if (t.kind == AggType::Tensor) return Val::tensor(values[next++]);
    Val v;
    v.kind = t.kind == AggType::Tuple ? Val::Tuple : Val::Struct;
    v.fn = t.item;
    v.binding = t.binding;
    for (const AggType& e : t.elems) v.elems.push_back(unflatten(e, values, next));
    return v;
}

std::string FunctionBuilder::agg_string(const AggType& t) const {
    switch (t.kind) {
    case AggType::Tensor: return type_str(t.tensor);
    case AggType::Tuple: {
        std::string s = "(";
        for (size_t i = 0; i < t.elems.size(); ++i) s += (i ? ", " : "") + agg_string(t.elems[i]);
        return s + (t.elems.size() == 1 ? ",)" : ")");
    }
    case AggType::Struct: return fmt::format("struct {}", t.item->name.name);
    }
    return "?";
}

Val FunctionBuilder::coerce_val(Val v, const AggType& t, Span span, const std::string& reason,
                                bool inserted) {
    if (v.kind == Val::Poison) throw Abandon{};
    if (t.kind == AggType::Tensor) {
        if (v.kind != Val::Tensor) fail(DiagCode::E0307, span, fmt::format("expected {} ({}), found a tuple or struct", type_str(t.tensor), reason));
        ValueId r = coerce(v.id, t.tensor, span, reason, inserted);
        if (!t.dim_names.empty()) dim_names_[r] = t.dim_names;
        return Val::tensor(r);
    }
    Val::Kind want = t.kind == AggType::Tuple ? Val::Tuple : Val::Struct;
    if (v.kind != want || v.elems.size() != t.elems.size() || (want == Val::Struct && v.fn != t.item)) {
        fail(DiagCode::E0307, span, fmt::format("expected {} ({})", agg_string(t), reason));
    }
    for (size_t i = 0; i < t.elems.size(); ++i) {
        std::string field = want == Val::Struct ? fmt::format("field `{}` of ", t.item->fields[i].name.name) : "";
        v.elems[i] = coerce_val(std::move(v.elems[i]), t.elems[i], span, field + reason, inserted);
    }
    v.binding = t.binding;
    return v;
}

// Binds the generic sizes and meshes of `param` (a type in the callee's or struct's
// generics) from the value `arg`, the way unification would.
void FunctionBuilder::bind_generics(const Type& param, const Val& arg, Binding& b, Span span) {
    switch (param.kind) {
    case TypeKind::Scalar: return;
    case TypeKind::Tensor: {
        if (arg.kind != Val::Tensor) return;
        const TensorType& at = type(arg.id);
        if (param.mesh && at.mesh >= 0 && !b.meshes.count(param.mesh->name)) {
            b.meshes[param.mesh->name] = at.mesh;
        }
        if (at.rank() != param.shape.size()) {
            fail(DiagCode::E0307, span,
                 fmt::format("rank mismatch: expected a tensor of rank {}, found {}", param.shape.size(), type_str(at)),
                 {{fmt::format("the declared type is {}", syntax::type_to_string(param)), {}}});
        }
        for (size_t d = 0; d < param.shape.size(); ++d) {
            const Dim& dim = *param.shape[d];
            if (dim.kind == DimKind::Var && !b.sizes.count(dim.name.name)) b.sizes[dim.name.name] = at.shape[d];
        }
        // A size inside `B * 2`, `B + 1`, `2 * B - 1`... is solved from the argument's
        // size once the rest of the expression is known (the call's type check then
        // reports a size that does not fit).
        std::function<std::optional<int64_t>(const Dim&)> known = [&](const Dim& x) -> std::optional<int64_t> {
            switch (x.kind) {
            case DimKind::Int: return x.value;
            case DimKind::Var: {
                auto it = b.sizes.find(x.name.name);
                if (it == b.sizes.end()) return std::nullopt;
                return it->second;
            }
            case DimKind::Axis: return std::nullopt;
            case DimKind::Binary: {
                auto l = known(*x.lhs), r = known(*x.rhs);
                if (!l || !r) return std::nullopt;
                switch (x.op) {
                case DimOp::Add: return *l + *r;
                case DimOp::Sub: return *l - *r;
                case DimOp::Mul: return *l * *r;
                case DimOp::Div: return *r != 0 ? std::optional<int64_t>(*l / *r) : std::nullopt;
                case DimOp::Mod: return *r != 0 ? std::optional<int64_t>(*l % *r) : std::nullopt;
                }
                return std::nullopt;
            }
            }
            return std::nullopt;
        };
        std::function<void(const Dim&, int64_t)> solve = [&](const Dim& x, int64_t target) {
            if (x.kind == DimKind::Var) {
                if (!b.sizes.count(x.name.name) && target >= 0) b.sizes[x.name.name] = target;
                return;
            }
            if (x.kind != DimKind::Binary) return;
            auto l = known(*x.lhs), r = known(*x.rhs);
            if (l && r) return;
            if (!l && !r) return;
            int64_t k = l ? *l : *r;
            const Dim& unknown = l ? *x.rhs : *x.lhs;
            switch (x.op) {
            case DimOp::Add: solve(unknown, target - k); break;
            case DimOp::Sub: solve(unknown, l ? k - target : target + k); break;
            case DimOp::Mul:
                if (k != 0 && target % k == 0) solve(unknown, target / k);
                break;
            case DimOp::Div:
            case DimOp::Mod: break;
            }
        };
        for (size_t d = 0; d < param.shape.size(); ++d) {
            if (param.shape[d]->kind == DimKind::Binary) solve(*param.shape[d], at.shape[d]);
        }
        return;
    }
    case TypeKind::Tuple:
        if (arg.kind != Val::Tuple) return;
        for (size_t i = 0; i < param.elements.size() && i < arg.elems.size(); ++i) {
            bind_generics(*param.elements[i], arg.elems[i], b, span);
        }
        return;
    case TypeKind::Named: {
        if (arg.kind != Val::Struct || !arg.binding) return;
        const Item& item = *arg.fn;
        for (size_t i = 0; i < item.generics.size() && i < param.args.size(); ++i) {
            const Dim& a = *param.args[i];
            if (a.kind != DimKind::Var) continue;
            const GenericParam& g = item.generics[i];
            if (g.kind && g.kind->name == "Mesh") {
                auto m = arg.binding->meshes.find(g.name.name);
                if (m != arg.binding->meshes.end() && !b.meshes.count(a.name.name)) b.meshes[a.name.name] = m->second;
            } else {
                auto n = arg.binding->sizes.find(g.name.name);
                if (n != arg.binding->sizes.end() && !b.sizes.count(a.name.name)) b.sizes[a.name.name] = n->second;
            }
        }
        return;
    }
    }
}

// A binding names only the item's generic meshes (a declared mesh is not a parameter).
void FunctionBuilder::keep_generic_meshes(const Item& item, Binding& b) {
    for (auto it = b.meshes.begin(); it != b.meshes.end();) {
        bool generic = std::any_of(item.generics.begin(), item.generics.end(), [&](const GenericParam& g) {
            return g.name.name == it->first && g.kind && g.kind->name == "Mesh";
        });
        it = generic ? std::next(it) : b.meshes.erase(it);
    }
}

Val FunctionBuilder::struct_literal(const Expr& e) {
    const Module& module = *in_.program_.modules[module_index_];
    const Item* item = nullptr;
    for (const Item* it : module.items) {
        if (it->kind == ItemKind::Struct && it->name.name == e.name.name) item = it;
    }
    if (!item) fail(DiagCode::E0310, e.name.span, fmt::format("`{}` is not a struct here", e.name.name));
    std::vector<Val> values(item->fields.size());
    // A field given as `load(...)` takes its type from the field's declaration, once the
    // struct's generic parameters are known from the other fields or the wanted type.
    std::vector<const Expr*> loads(item->fields.size(), nullptr);
    for (const FieldInit& f : e.fields) {
        for (size_t i = 0; i < item->fields.size(); ++i) {
            if (item->fields[i].name.name != f.name.name) continue;
            if (is_load_call(*f.value)) {
                loads[i] = f.value;
            } else {
                values[i] = eval(*f.value);
            }
        }
    }
    Binding inner;
    for (size_t i = 0; i < item->fields.size(); ++i) {
        if (!loads[i]) bind_generics(*item->fields[i].type, values[i], inner, e.span);
    }
    keep_generic_meshes(*item, inner);
    const AggType* wanted = expected_agg_ && expected_agg_->item == item && expected_agg_->binding &&
                                    key_of(expected_agg_span_) == key_of(e.span)
                                ? expected_agg_
                                : nullptr;
    for (const GenericParam& g : item->generics) {
        bool is_mesh = g.kind && g.kind->name == "Mesh";
        if (is_mesh && !inner.meshes.count(g.name.name) && wanted) {
            // No field says where the struct lives: the type it is wanted as does.
            if (auto it = wanted->binding->meshes.find(g.name.name); it != wanted->binding->meshes.end()) inner.meshes[g.name.name] = it->second;
        }
        if (!is_mesh && !inner.sizes.count(g.name.name) && wanted) {
            if (auto it = wanted->binding->sizes.find(g.name.name); it != wanted->binding->sizes.end()) inner.sizes[g.name.name] = it->second;
        }
        if (is_mesh && !inner.meshes.count(g.name.name) && default_mesh() >= 0) {
            inner.meshes[g.name.name] = default_mesh();  // fields not placed yet
        }
        bool bound = is_mesh ? inner.meshes.count(g.name.name) > 0 : inner.sizes.count(g.name.name) > 0;
        if (!bound) {
            fail(DiagCode::E0310, e.span,
                 fmt::format("cannot infer the generic parameter `{}` of `{}` from the fields", g.name.name, item->name.name));
        }
    }
    AggType t = struct_type(*item, inner);
    for (size_t i = 0; i < loads.size(); ++i) {
        if (loads[i]) values[i] = Val::tensor(lower_load(*loads[i], t.elems[i]));
    }
    Val v;
    v.kind = Val::Struct;
    v.fn = item;
    v.elems = std::move(values);
    return coerce_val(std::move(v), t, e.span, fmt::format("the struct `{}`", item->name.name));
}

// ---------------------------------------------------------------- body

void FunctionBuilder::bind_pattern(const Pattern& p, Val v, Span span) {
    switch (p.kind) {
    case PatternKind::Wildcard: return;
    case PatternKind::Name:
        if (v.kind == Val::Tensor && f_.names[v.id].empty()) f_.names[v.id] = std::string(p.name.name);
        scopes_.back()[p.name.name] = Binding_{std::move(v), false};
        return;
    case PatternKind::Tuple:
        if (v.kind != Val::Tuple || v.elems.size() != p.elements.size()) {
            fail(DiagCode::E0307, p.span,
                 fmt::format("a tuple pattern of {} elements does not match this value", p.elements.size()));
        }
        for (size_t i = 0; i < p.elements.size(); ++i) bind_pattern(*p.elements[i], std::move(v.elems[i]), span);
        return;
    }
}

void FunctionBuilder::lower_stmt(const Stmt& s) {
    switch (s.kind) {
    case StmtKind::Let: {
        if (s.type && is_load_call(*s.value)) {
            bind_pattern(*s.pattern, Val::tensor(lower_load(*s.value, agg_type_from_ast(*s.type))), s.span);
            return;
        }
        std::optional<AggType> annotated;
        if (s.type) annotated = agg_type_from_ast(*s.type);
        if (annotated && annotated->kind == AggType::Tensor) {
            expected_ = &annotated->tensor;
            expected_span_ = s.value->span;
        }
        if (annotated && annotated->kind == AggType::Struct) {
            expected_agg_ = &*annotated;
            expected_agg_span_ = s.value->span;
        }
        Val v = eval(*s.value);
        expected_ = nullptr;
        expected_agg_ = nullptr;
        if (annotated) v = coerce_val(std::move(v), *annotated, s.value->span, "the annotation");
        bind_pattern(*s.pattern, std::move(v), s.span);
        return;
    }
    case StmtKind::Var: {
        Val v = eval(*s.value);
        if (s.type) v = coerce_val(std::move(v), agg_type_from_ast(*s.type), s.value->span, "the annotation");
        bool flexible_start = !s.type && v.kind == Val::Tensor && flexible_[v.id];
        auto hint = in_.var_hints_.find(key_of(s.name.span));
        if (flexible_start && hint != in_.var_hints_.end()) {
            // A later assignment showed the layout this var keeps: create it that way.
            Layout plain = hint->second.second;
            plain.partial = 0;
            fix_layout(v.id, hint->second.first, plain);
            if (hint->second.second.partial) {
                v.id = plan_coercion(v.id, hint->second.first, hint->second.second, s.span,
                                     "the layout of the variable's later values", true);
            }
        }
        settle(v);
        Binding_ binding{std::move(v), true, flexible_start, s.name.span};
        scopes_.back()[s.name.name] = std::move(binding);
        return;
    }
    case StmtKind::Assign: {
        Val value = eval(*s.value);
        assign(*s.target, std::move(value), s.span);
        return;
    }
    case StmtKind::Expr:
        statement_call_ = s.value;
        if (s.value->kind == ExprKind::If) {
            lower_if(*s.value, /*as_value=*/false);
        } else {
            eval(*s.value);
        }
        statement_call_ = nullptr;
        return;
    case StmtKind::Empty: return;
    case StmtKind::Return:
        fail(DiagCode::E0311, s.span, "`return` before the end of a function is not supported by the type checker yet");
    case StmtKind::For: lower_for(s); return;
    }
}

// A var's layout is fixed where it is declared: a value still flexible there is made
// replicated, so later assignments know what to convert to.
void FunctionBuilder::settle(const Val& v) {
    std::vector<ValueId> leaves;
    flatten(v, leaves, {});
    for (ValueId id : leaves) {
        if (!flexible_[id]) continue;
        // Not placed yet: on the program's only mesh, if it has one (a var's later values
        // will be on it), else nowhere (replicated everywhere).
        int32_t mesh = type(id).mesh >= 0 ? type(id).mesh : default_mesh();
        fix_layout(id, mesh, Layout::replicated(type(id).rank()));
    }
}

int32_t FunctionBuilder::default_mesh() const {
    return in_.module_.meshes.size() == 1 ? 0 : -1;
}

FunctionBuilder::Binding_* FunctionBuilder::find_binding(std::string_view name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        if (auto found = it->find(name); found != it->end()) return &found->second;
    }
    return nullptr;
}

AggType FunctionBuilder::type_of_val(const Val& v) {
    AggType t;
    switch (v.kind) {
    case Val::Tensor:
        t.kind = AggType::Tensor;
        t.tensor = type(v.id);
        t.dim_names = dim_names_[v.id];
        return t;
    case Val::Tuple:
    case Val::Struct:
        t.kind = v.kind == Val::Tuple ? AggType::Tuple : AggType::Struct;
        t.item = v.fn;
        t.binding = v.binding;
        for (const Val& e : v.elems) t.elems.push_back(type_of_val(e));
        return t;
    default: return t;
    }
}

void FunctionBuilder::assign(const Expr& target, Val value, Span span) {
    // The root variable and the path of fields to the assigned part.
    std::vector<const Expr*> path;
    const Expr* root = &target;
    while (root->kind == ExprKind::Field) {
        path.push_back(root);
        root = root->lhs;
    }
    Binding_* var = find_binding(root->name.name);
    if (!var) fail(DiagCode::E0310, root->span, fmt::format("`{}` has no value here", root->name.name));
    std::reverse(path.begin(), path.end());
    Val* slot = &var->value;
    if (slot->kind == Val::Poison) throw Abandon{};
    for (const Expr* field : path) {
        if (slot->kind != Val::Struct) fail(DiagCode::E0309, field->span, "only a struct has fields");
        size_t i = field_index(*slot->fn, field->name);
        slot = &slot->elems[i];
    }
    // LANGUAGE.md 4: a var's type comes from all its assignments. A var that began as a
    // freshly created value takes the layout of the first assignment that differs, and
    // the function is lowered again with that layout from the start.
    if (path.empty() && var->flexible_start && value.kind == Val::Tensor && slot->kind == Val::Tensor &&
        type(value.id).shape == type(slot->id).shape && type(value.id).mesh >= 0 &&
        !(type(value.id).layout == type(slot->id).layout && type(value.id).mesh == type(slot->id).mesh) &&
        !in_.var_hints_.count(key_of(var->decl))) {
        in_.var_hints_[key_of(var->decl)] = {type(value.id).mesh, type(value.id).layout};
        throw Retry{};
    }
    *slot = coerce_val(std::move(value), type_of_val(*slot), span,
                       fmt::format("the variable `{}` (a `var` keeps the layout of its values)", root->name.name));
}

size_t FunctionBuilder::field_index(const Item& item, const Ident& name) {
    for (size_t i = 0; i < item.fields.size(); ++i) {
        if (item.fields[i].name.name == name.name) return i;
    }
    fail(DiagCode::E0309, name.span, fmt::format("struct `{}` has no field `{}`", item.name.name, name.name));
}

void FunctionBuilder::lower_body() {
    scopes_.emplace_back();
    for (const Param& p : item_.params) {
        AggType t = agg_type_from_ast(*p.type);
        std::vector<const AggType*> leaves;
        flatten_type(t, leaves);
        std::vector<ValueId> values;
        for (const AggType* leaf : leaves) {
            ValueId v = f_.add_value(leaf->tensor, leaves.size() == 1 ? std::string(p.name.name) : "");
            flexible_.push_back(false);
            weak_.push_back(false);
            producer_.push_back({nullptr, 0});
            dim_names_.push_back(leaf->dim_names.size() == leaf->tensor.rank() ? leaf->dim_names
                                                                                 : std::vector<std::string_view>(leaf->tensor.rank()));
            f_.params.push_back(v);
            values.push_back(v);
        }
        size_t next = 0;
        scopes_.back()[p.name.name] = Binding_{unflatten(t, values, next), false};
    }
    const Block& body = *item_.body;
    std::optional<AggType> rt;
    if (item_.result) rt = agg_type_from_ast(*item_.result);
    std::optional<Val> result = lower_returning(body.stmts, 0, body.tail, rt ? &*rt : nullptr);
    if (rt) {
        if (!result) {
            fail(DiagCode::E0309, item_.body->span,
                 fmt::format("function `{}` returns nothing, but its type says it returns a value", item_.name.name));
        }
        flatten(*result, f_.results, item_.body->span);
        result_type_ = std::make_shared<AggType>(std::move(*rt));
    }
    // Flexible values nobody constrained are replicated.
    for (ValueId v = 0; v < flexible_.size(); ++v) {
        if (flexible_[v]) fix_layout(v, f_.types[v].mesh, Layout::replicated(f_.types[v].rank()));
    }
    settle_choices();
}

namespace {
// `if c { ...; return e; }` with no `else`: an early return.
bool is_early_return(const Stmt& s) {
    if (s.kind != StmtKind::Expr || s.value->kind != ExprKind::If) return false;
    const Expr& e = *s.value;
    if (e.else_block || e.else_if || e.then_block->tail || e.then_block->stmts.empty()) return false;
    return e.then_block->stmts.back()->kind == StmtKind::Return;
}
}  // namespace

// Lowers the function body's statements from `i` on and returns the function's value,
// converted to the result type. An early return splits the rest into the `else` of an
// `if` whose two branches both yield the result.
std::optional<Val> FunctionBuilder::lower_returning(const std::vector<const Stmt*>& stmts, size_t i,
                                                    const Expr* tail, const AggType* rt) {
    auto finish = [&](const Expr* value, Span span) -> std::optional<Val> {
        if (!value) return std::nullopt;
        if (!rt && value->kind == ExprKind::If) {
            // A function without a result ending in `if`: a statement (no branch values).
            lower_if(*value, /*as_value=*/false);
            return std::nullopt;
        }
        if (rt && rt->kind == AggType::Tensor) {
            expected_ = &rt->tensor;
            expected_span_ = value->span;
        }
        if (rt && rt->kind == AggType::Struct) {
            expected_agg_ = rt;
            expected_agg_span_ = value->span;
        }
        Val v = eval(*value);
        expected_ = nullptr;
        expected_agg_ = nullptr;
        if (!rt) return v;
        return coerce_val(std::move(v), *rt, span, fmt::format("the result type of `{}`", item_.name.name));
    };
    for (; i < stmts.size(); ++i) {
        const Stmt& s = *stmts[i];
        if (s.kind == StmtKind::Return) {
            if (!rt && s.value) {
                fail(DiagCode::E0309, s.value->span,
                     fmt::format("`{}` has no result type, so its `return` takes no value", item_.name.name),
                     {{"declare the result type: `fn name(...) -> TYPE`", {}}});
            }
            if (i + 1 != stmts.size() || tail) {
                fail(DiagCode::E0311, s.span, "statements after `return` are not supported by the type checker yet");
            }
            return finish(s.value, s.value ? s.value->span : s.span);
        }
        if (is_early_return(s) && rt) {
            const Expr& e = *s.value;
            ValueId cond = scalar_condition(*e.cond, DType::Bool, "the condition of `if`");
            ir::Op op{ir::OpKind::If};
            op.operands = {cond};
            op.span = e.span;
            std::vector<ir::Op>* saved = ops_;
            // then: the block up to its `return`.
            {
                ir::Region r = open_region({});
                ops_ = &r.ops;
                scopes_.emplace_back();
                const auto& inner = e.then_block->stmts;
                std::optional<Val> v = lower_returning(inner, 0, nullptr, rt);
                scopes_.pop_back();
                flatten(*v, r.yields, e.span);
                close_region(r, saved);
                op.regions.push_back(std::move(r));
            }
            // else: the rest of the function.
            {
                ir::Region r = open_region({});
                ops_ = &r.ops;
                scopes_.emplace_back();
                std::optional<Val> v = lower_returning(stmts, i + 1, tail, rt);
                scopes_.pop_back();
                if (!v) fail(DiagCode::E0309, e.span, "the function's value is missing after this early return");
                flatten(*v, r.yields, e.span);
                close_region(r, saved);
                op.regions.push_back(std::move(r));
            }
            std::vector<ValueId> results;
            for (ValueId y : op.regions[0].yields) results.push_back(new_value(type(y)));
            op.results = results;
            ops_->push_back(std::move(op));
            size_t next = 0;
            return unflatten(*rt, results, next);
        }
        // A statement that fails has reported its error; its names become poison and
        // the next statement is checked, so independent errors are all reported.
        std::vector<ir::Op>* list = ops_;
        size_t depth = scopes_.size();
        size_t first_value = f_.types.size();
        try {
            lower_stmt(s);
        } catch (const Abandon&) {
            failed_ = true;
            ops_ = list;
            coerced_.clear();
            // Values the statement made may point into regions that no longer exist.
            for (size_t v = first_value; v < producer_.size(); ++v) {
                producer_[v] = {nullptr, 0};
                flexible_[v] = false;
            }
            scopes_.resize(depth);
            statement_call_ = nullptr;
            expected_ = nullptr;
            poison_names(s);
        }
    }
    if (failed_) throw Abandon{};
    return finish(tail, tail ? tail->span : Span{});
}

// The names a failed statement would have bound, bound to poison.
void FunctionBuilder::poison_names(const Stmt& s) {
    Val poison;
    poison.kind = Val::Poison;
    switch (s.kind) {
    case StmtKind::Let: {
        auto bind = [&](auto& self, const Pattern& p) -> void {
            if (p.kind == PatternKind::Name) scopes_.back()[p.name.name] = Binding_{poison, false};
            for (const Pattern* e : p.elements) self(self, *e);
        };
        bind(bind, *s.pattern);
        return;
    }
    case StmtKind::Var: scopes_.back()[s.name.name] = Binding_{poison, true}; return;
    case StmtKind::Assign: {
        const Expr* root = s.target;
        while (root->kind == ExprKind::Field) root = root->lhs;
        if (root->kind == ExprKind::Name) {
            if (Binding_* b = find_binding(root->name.name)) b->value = poison;
        }
        return;
    }
    default: {
        // An `if` or `for` statement: the vars it assigns are unknown now.
        Block wrapper;
        if (s.kind == StmtKind::For) wrapper = *s.body;
        if (s.kind == StmtKind::Expr && s.value) wrapper.tail = s.value;
        for (std::string_view n : assigned_vars(wrapper)) find_binding(n)->value = poison;
        return;
    }
    }
}

Val FunctionBuilder::lookup(const Ident& name) {
    if (Binding_* b = find_binding(name.name)) return b->value;
    const Module& module = *in_.program_.modules[module_index_];
    for (const Item* item : module.items) {
        if (item->name.name != name.name) continue;
        if (item->kind == ItemKind::Fn) return Val{Val::Function, ir::kNoValue, item};
        if (item->kind == ItemKind::Import) {
            auto t = in_.program_.import_targets.find(item);
            if (t != in_.program_.import_targets.end()) return Val{Val::Module, ir::kNoValue, nullptr, Builtin::Count, t->second};
        }
    }
    Builtin b = find_builtin(name.name);
    if (b != Builtin::Count) return Val{Val::BuiltinFn, ir::kNoValue, nullptr, b};
    if (auto it = binding_.sizes.find(name.name); it != binding_.sizes.end()) {
        return Val::tensor(constant(static_cast<double>(it->second), DType::I64, true, name.span));
    }
    fail(DiagCode::E0310, name.span, fmt::format("`{}` has no value here", name.name));
}

ValueId FunctionBuilder::constant(double value, DType dtype, bool weak, Span span) {
    ir::Op op{ir::OpKind::Constant};
    op.number = value;
    op.span = span;
    TensorType t;
    t.dtype = dtype;
    ValueId v = emit(std::move(op), std::move(t));
    weak_[v] = weak;
    return v;
}

ValueId FunctionBuilder::lower_expr(const Expr& e) {
    Val v = eval(e);
    if (v.kind == Val::Tensor) return v.id;
    if (v.kind == Val::Tuple || v.kind == Val::Struct) {
        fail(DiagCode::E0309, e.span, "expected a tensor, found a tuple or struct");
    }
    fail(DiagCode::E0309, e.span, "a function is not a value here; call it");
}

Val FunctionBuilder::eval(const Expr& e) {
    switch (e.kind) {
    case ExprKind::IntLit: return Val::tensor(constant(static_cast<double>(e.int_value), DType::I64, true, e.span));
    case ExprKind::FloatLit: return Val::tensor(constant(e.float_value, DType::F32, true, e.span));
    case ExprKind::BoolLit: return Val::tensor(constant(e.bool_value ? 1 : 0, DType::Bool, false, e.span));
    case ExprKind::Name: {
        Val v = lookup(e.name);
        if (v.kind == Val::Poison) throw Abandon{};
        return v;
    }
    case ExprKind::Unary:
        return Val::tensor(elementwise(e.unary_op == UnaryOp::Neg ? ir::Ew::Neg : ir::Ew::Not, {lower_expr(*e.lhs)}, e.span));
    case ExprKind::Binary: {
        if (e.binary_op == BinaryOp::MatMul) return Val::tensor(matmul(lower_expr(*e.lhs), lower_expr(*e.rhs), e.span));
        static const std::map<BinaryOp, ir::Ew> kOps = {
            {BinaryOp::Add, ir::Ew::Add}, {BinaryOp::Sub, ir::Ew::Sub}, {BinaryOp::Mul, ir::Ew::Mul},
            {BinaryOp::Div, ir::Ew::Div}, {BinaryOp::Mod, ir::Ew::Mod}, {BinaryOp::Eq, ir::Ew::Eq},
            {BinaryOp::Ne, ir::Ew::Ne}, {BinaryOp::Lt, ir::Ew::Lt}, {BinaryOp::Le, ir::Ew::Le},
            {BinaryOp::Gt, ir::Ew::Gt}, {BinaryOp::Ge, ir::Ew::Ge}, {BinaryOp::And, ir::Ew::And},
            {BinaryOp::Or, ir::Ew::Or}};
        ValueId a = lower_expr(*e.lhs);
        ValueId b = lower_expr(*e.rhs);
        return Val::tensor(elementwise(kOps.at(e.binary_op), {a, b}, e.span));
    }
    case ExprKind::Call: {
        bool as_statement = statement_call_ == &e;
        Val v = lower_call(e);
        if (v.kind == Val::Tensor && v.id == ir::kNoValue && !as_statement) {
            fail(DiagCode::E0309, e.span, "this call returns nothing; its value cannot be used");
        }
        return v;
    }
    case ExprKind::Field: {
        if (e.lhs->kind == ExprKind::Name && !find_binding(e.lhs->name.name)) {
            // `M.data`: the size of a mesh axis, as an i64 value.
            const Module& module = *in_.program_.modules[module_index_];
            bool is_mesh = binding_.meshes.count(e.lhs->name.name) > 0;
            for (const Item* item : module.items) {
                if (item->kind == ItemKind::Mesh && item->name.name == e.lhs->name.name) is_mesh = true;
            }
            if (is_mesh) {
                Dim d{DimKind::Axis, e.span};
                d.name = e.lhs->name;
                d.axis = e.name;
                return Val::tensor(constant(static_cast<double>(eval_dim(d)), DType::I64, true, e.span));
            }
        }
        Val base = eval(*e.lhs);
        if (base.kind == Val::Module) {
            for (const Item* item : in_.program_.modules[base.module]->items) {
                if (item->kind == ItemKind::Fn && item->name.name == e.name.name) return Val{Val::Function, ir::kNoValue, item};
            }
            fail(DiagCode::E0309, e.span, fmt::format("`{}` is not a function of this module", e.name.name));
        }
        if (base.kind != Val::Struct) fail(DiagCode::E0309, e.span, fmt::format("`.{}`: only a struct has fields", e.name.name));
        return base.elems[field_index(*base.fn, e.name)];
    }
    case ExprKind::Tuple: {
        Val t;
        t.kind = Val::Tuple;
        for (const Expr* x : e.elements) t.elems.push_back(eval(*x));
        return t;
    }
    case ExprKind::StructLit: return struct_literal(e);
    case ExprKind::If: return lower_if(e, /*as_value=*/true);
    case ExprKind::StringLit:
    case ExprKind::DTypeName:
    case ExprKind::List:
    case ExprKind::LayoutLit:
        fail(DiagCode::E0309, e.span, "this is only an argument of a built-in function");
    }
    return Val{};
}

// ---------------------------------------------------------------- control flow

namespace {
void collect_assigned(const Block& b, std::vector<std::string_view>& out);
void collect_assigned_expr(const Expr& e, std::vector<std::string_view>& out) {
    switch (e.kind) {
    case ExprKind::If:
        collect_assigned_expr(*e.cond, out);
        collect_assigned(*e.then_block, out);
        if (e.else_block) collect_assigned(*e.else_block, out);
        if (e.else_if) collect_assigned_expr(*e.else_if, out);
        return;
    case ExprKind::Unary:
    case ExprKind::Field: collect_assigned_expr(*e.lhs, out); return;
    case ExprKind::Binary:
        collect_assigned_expr(*e.lhs, out);
        collect_assigned_expr(*e.rhs, out);
        return;
    case ExprKind::Call:
        collect_assigned_expr(*e.lhs, out);
        for (const Arg& a : e.args) collect_assigned_expr(*a.value, out);
        return;
    case ExprKind::Tuple:
    case ExprKind::List:
        for (const Expr* x : e.elements) collect_assigned_expr(*x, out);
        return;
    case ExprKind::StructLit:
        for (const FieldInit& f : e.fields) collect_assigned_expr(*f.value, out);
        return;
    default: return;
    }
}
void collect_assigned(const Block& b, std::vector<std::string_view>& out) {
    for (const Stmt* s : b.stmts) {
        switch (s->kind) {
        case StmtKind::Assign: {
            const Expr* root = s->target;
            while (root->kind == ExprKind::Field) root = root->lhs;
            if (root->kind == ExprKind::Name &&
                std::find(out.begin(), out.end(), root->name.name) == out.end()) {
                out.push_back(root->name.name);
            }
            collect_assigned_expr(*s->value, out);
            break;
        }
        case StmtKind::For: collect_assigned(*s->body, out); break;
        case StmtKind::Let:
        case StmtKind::Var:
        case StmtKind::Return:
        case StmtKind::Expr:
            if (s->value) collect_assigned_expr(*s->value, out);
            break;
        case StmtKind::Empty: break;
        }
    }
    if (b.tail) collect_assigned_expr(*b.tail, out);
}
}  // namespace

// The outer `var`s that a block assigns (they become values carried by the loop or
// produced by the `if`).
std::vector<std::string_view> FunctionBuilder::assigned_vars(const Block& b) {
    std::vector<std::string_view> names, vars;
    collect_assigned(b, names);
    for (std::string_view n : names) {
        Binding_* binding = find_binding(n);
        if (binding && binding->is_var) vars.push_back(n);
    }
    return vars;
}

ir::Region FunctionBuilder::open_region(std::vector<ValueId> args) {
    ir::Region r;
    r.args = std::move(args);
    return r;
}

// Flexible values made inside the region are settled (replicated) before the region's
// ops move into their op, which invalidates the producers' addresses.
void FunctionBuilder::close_region(ir::Region& region, std::vector<ir::Op>* saved) {
    for (ValueId v = 0; v < flexible_.size(); ++v) {
        if (flexible_[v] && producer_[v].first == &region.ops) {
            fix_layout(v, f_.types[v].mesh, Layout::replicated(f_.types[v].rank()));
        }
    }
    for (ValueId v = 0; v < producer_.size(); ++v) {
        if (producer_[v].first == &region.ops) producer_[v] = {nullptr, 0};
    }
    for (auto it = coerced_.begin(); it != coerced_.end();) {
        it = std::get<2>(it->first) == &region.ops ? coerced_.erase(it) : std::next(it);
    }
    ops_ = saved;
}

// Lowers a block's statements in a new scope; returns its tail value (as_value) or none.
Val FunctionBuilder::lower_block_value(const Block& b, bool as_value) {
    scopes_.emplace_back();
    for (const Stmt* s : b.stmts) {
        if (s->kind == StmtKind::Return) {
            fail(DiagCode::E0311, s->span, "`return` inside a block is not supported by the type checker yet");
        }
        lower_stmt(*s);
    }
    Val v;
    v.id = ir::kNoValue;
    if (b.tail && !as_value && b.tail->kind == ExprKind::If) {
        // `if` closing a block whose value nobody uses (a loop body, a unit function) is
        // a statement: its branches need no value (Rust's rule).
        lower_if(*b.tail, /*as_value=*/false);
    } else if (b.tail) {
        statement_call_ = as_value ? nullptr : b.tail;
        v = eval(*b.tail);
        statement_call_ = nullptr;
    } else if (as_value) {
        fail(DiagCode::E0309, b.span, "this block has no value: end it with an expression (no `;`)");
    }
    scopes_.pop_back();
    return v;
}

// `t` is taken by value: it is often a type of this function, which add_value() may move.
ValueId FunctionBuilder::new_value(TensorType t) {
    size_t rank = t.rank();
    ValueId v = f_.add_value(std::move(t));
    flexible_.push_back(false);
    weak_.push_back(false);
    producer_.push_back({nullptr, 0});
    dim_names_.emplace_back(rank);
    return v;
}

ValueId FunctionBuilder::scalar_condition(const Expr& e, DType want, const char* what) {
    ValueId c = lower_expr(e);
    if (weak_[c] && want == DType::I64 && type(c).dtype == DType::I64) return c;
    if (type(c).rank() != 0 || type(c).dtype != want) {
        fail(DiagCode::E0308, e.span,
             fmt::format("{} must be a {} scalar, found {}", what, dtype_name(want), type_str(type(c))));
    }
    c = reduce_partial(c, type(c).layout.partial, e.span, fmt::format("{} needs the summed value", what));
    return c;
}

// Where two values meet (the branches of an `if`): the layout with more splits when the
// other is the same without them (slicing is free), else the first.
AggType FunctionBuilder::join_type(const AggType& a, const AggType& b) {
    if (a.kind != AggType::Tensor || b.kind != AggType::Tensor) {
        AggType out = a;
        for (size_t i = 0; i < out.elems.size() && i < b.elems.size(); ++i) out.elems[i] = join_type(a.elems[i], b.elems[i]);
        return out;
    }
    const TensorType& x = a.tensor;
    const TensorType& y = b.tensor;
    if (x.shape != y.shape || x.dtype != y.dtype || x.layout == y.layout || x.layout.partial || y.layout.partial) return a;
    auto refines = [](const Layout& more, const Layout& less) {
        // `less` is `more` with some trailing axes of some dims dropped.
        for (size_t d = 0; d < more.dims.size(); ++d) {
            const AxisList& m = more.dims[d];
            const AxisList& l = less.dims[d];
            if (l.size() > m.size() || !std::equal(l.begin(), l.end(), m.begin())) return false;
        }
        return true;
    };
    if (x.mesh >= 0 && y.mesh >= 0 && x.mesh != y.mesh) return a;
    if (refines(y.layout, x.layout)) {
        AggType out = a;
        out.tensor.layout = y.layout;
        out.tensor.mesh = y.mesh >= 0 ? y.mesh : x.mesh;
        return out;
    }
    return a;
}

Val FunctionBuilder::lower_if(const Expr& e, bool as_value) {
    ValueId cond = scalar_condition(*e.cond, DType::Bool, "the condition of `if`");
    bool has_else = e.else_block || e.else_if;
    if (as_value && !has_else) fail(DiagCode::E0309, e.span, "an `if` without `else` has no value");
    std::vector<std::string_view> vars = assigned_vars(*e.then_block);
    if (e.else_block) {
        for (std::string_view n : assigned_vars(*e.else_block)) {
            if (std::find(vars.begin(), vars.end(), n) == vars.end()) vars.push_back(n);
        }
    }
    if (e.else_if) {
        Block wrapper;
        wrapper.tail = e.else_if;
        for (std::string_view n : assigned_vars(wrapper)) {
            if (std::find(vars.begin(), vars.end(), n) == vars.end()) vars.push_back(n);
        }
    }
    std::vector<Val> entry;
    std::vector<AggType> entry_types;
    for (std::string_view n : vars) {
        Binding_* b = find_binding(n);
        settle(b->value);
        entry.push_back(b->value);
        entry_types.push_back(type_of_val(b->value));
    }
    ir::Op op{ir::OpKind::If};
    op.operands = {cond};
    op.span = e.span;
    std::vector<ir::Op>* saved = ops_;
    // Both branches are lowered first; then their values meet in one type (the join),
    // converted inside each branch; the regions close last.
    struct Branch {
        ir::Region region;
        Val value;
        std::vector<Val> vars;
    };
    Branch branches[2];
    auto run = [&](Branch& br, auto&& lower) {
        ops_ = &br.region.ops;
        br.value = lower();
        if (as_value) settle(br.value);
        for (size_t i = 0; i < vars.size(); ++i) {
            Binding_* b = find_binding(vars[i]);
            br.vars.push_back(b->value);
            b->value = entry[i];  // the other branch starts from the entry values
        }
        ops_ = saved;
    };
    run(branches[0], [&] { return lower_block_value(*e.then_block, as_value); });
    run(branches[1], [&] {
        if (e.else_block) return lower_block_value(*e.else_block, as_value);
        if (e.else_if) {
            statement_call_ = nullptr;
            return lower_if(*e.else_if, as_value);
        }
        return Val::tensor(ir::kNoValue);
    });
    std::optional<AggType> value_type;
    if (as_value) value_type = join_type(type_of_val(branches[0].value), type_of_val(branches[1].value));
    for (Branch& br : branches) {
        ops_ = &br.region.ops;
        if (as_value) {
            Val v = coerce_val(std::move(br.value), *value_type, e.span, "the value of the other branch of `if`");
            flatten(v, br.region.yields, e.span);
        }
        for (size_t i = 0; i < vars.size(); ++i) {
            Val now = coerce_val(br.vars[i], entry_types[i], e.span,
                                 fmt::format("the variable `{}` (a `var` keeps the layout of its first value)", vars[i]));
            flatten(now, br.region.yields, e.span);
        }
        close_region(br.region, saved);
        op.regions.push_back(std::move(br.region));
    }
    // Results: the value (if any), then the variables.
    std::vector<ValueId> results;
    for (ValueId y : op.regions[0].yields) results.push_back(new_value(type(y)));
    op.results = results;
    ops_->push_back(std::move(op));
    size_t next = 0;
    Val value = Val::tensor(ir::kNoValue);
    if (as_value) value = unflatten(*value_type, results, next);
    for (size_t i = 0; i < vars.size(); ++i) find_binding(vars[i])->value = unflatten(entry_types[i], results, next);
    return value;
}

void FunctionBuilder::lower_for(const Stmt& s) {
    ValueId lo = scalar_condition(*s.range_begin, DType::I64, "a `for` bound");
    ValueId hi = scalar_condition(*s.range_end, DType::I64, "a `for` bound");
    std::vector<std::string_view> vars = assigned_vars(*s.body);
    std::vector<AggType> entry_types;
    ir::Op op{ir::OpKind::For};
    op.operands = {lo, hi};
    op.span = s.span;
    for (std::string_view n : vars) {
        Binding_* b = find_binding(n);
        settle(b->value);
        entry_types.push_back(type_of_val(b->value));
        flatten(b->value, op.operands, s.span);
    }
    // Region arguments: the index, then a fresh value per carried leaf.
    TensorType index_type;
    index_type.dtype = DType::I64;
    std::vector<ValueId> args{new_value(index_type)};
    f_.names[args[0]] = std::string(s.name.name);
    for (size_t i = 2; i < op.operands.size(); ++i) {
        ValueId a = new_value(type(op.operands[i]));
        dim_names_[a] = dim_names_[op.operands[i]];
        args.push_back(a);
    }
    std::vector<ir::Op>* saved = ops_;
    ir::Region body = open_region(args);
    ops_ = &body.ops;
    size_t next = 1;
    std::vector<Val> saved_values;
    for (size_t i = 0; i < vars.size(); ++i) {
        Binding_* b = find_binding(vars[i]);
        saved_values.push_back(b->value);
        b->value = unflatten(entry_types[i], args, next);
    }
    scopes_.emplace_back();
    scopes_.back()[s.name.name] = Binding_{Val::tensor(args[0]), false};
    lower_block_value(*s.body, false);
    scopes_.pop_back();
    for (size_t i = 0; i < vars.size(); ++i) {
        Binding_* b = find_binding(vars[i]);
        Val now = coerce_val(b->value, entry_types[i], s.span,
                             fmt::format("the variable `{}` carried by the loop (a `var` keeps the layout of its first value)", vars[i]));
        flatten(now, body.yields, s.span);
    }
    close_region(body, saved);
    op.regions.push_back(std::move(body));
    std::vector<ValueId> results;
    for (size_t i = 2; i < op.operands.size(); ++i) results.push_back(new_value(type(op.operands[i])));
    op.results = results;
    ops_->push_back(std::move(op));
    next = 0;
    for (size_t i = 0; i < vars.size(); ++i) find_binding(vars[i])->value = unflatten(entry_types[i], results, next);
}

// ---------------------------------------------------------------- element-wise

namespace {
bool is_linear(ir::Ew ew) { return ew == ir::Ew::Add || ew == ir::Ew::Sub || ew == ir::Ew::Neg; }
bool is_comparison(ir::Ew ew) {
    return ew == ir::Ew::Eq || ew == ir::Ew::Ne || ew == ir::Ew::Lt || ew == ir::Ew::Le ||
           ew == ir::Ew::Gt || ew == ir::Ew::Ge;
}
}  // namespace

ValueId FunctionBuilder::elementwise(ir::Ew ew, std::vector<ValueId> operands, Span span) {
    // Element types: weak literals take the type of the typed operands.
    std::optional<DType> dtype;
    size_t first_data = ew == ir::Ew::Select ? 1 : 0;
    for (size_t i = first_data; i < operands.size(); ++i) {
        if (weak_[operands[i]]) continue;
        DType t = type(operands[i]).dtype;
        if (dtype && *dtype != t) {
            fail(DiagCode::E0308, span,
                 fmt::format("element type mismatch: {} and {}", dtype_name(*dtype), dtype_name(t)),
                 {{"convert one side with `cast(x, dtype)`", {}}});
        }
        dtype = t;
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
    for (ValueId& o : operands) {
        const TensorType& t = type(o);
        const Mesh* m = t.layout.partial ? mesh_of(t) : nullptr;
        if (!m || dry_cost_) continue;
        Layout whole = t.layout;
        whole.partial = 0;
        auto it = coerced_.find(std::make_tuple(o, layout_to_string(whole, *m), static_cast<const void*>(ops_)));
        if (it != coerced_.end()) o = it->second;
    }
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
                for (ValueId& o : operands) {
                    o = reduce_partial(o, type(o).layout.partial, span,
                                       fmt::format("`{}` needs the summed value", ir::ew_name(ew)));
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
        leader = best_leader;
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
                if (keep_pending) result = pending.layout;
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
    op.operands = operands;
    op.span = span;
    TensorType t;
    t.dtype = is_comparison(ew) ? DType::Bool : *dtype;
    t.shape = shape;
    t.mesh = mesh;
    t.layout = result;
    ValueId v = emit(std::move(op), std::move(t), std::move(names));
    flexible_[v] = all_flexible && std::any_of(operands.begin(), operands.end(), [&](ValueId o) { return flexible_[o]; });
    // A result of weakly typed operands is weak too (context may still choose its element
    // type), except a comparison's: it is bool whatever its operands are.
    bool all_weak = std::all_of(operands.begin(), operands.end(), [&](ValueId o) { return weak_[o]; });
    weak_[v] = all_weak && !is_comparison(ew);
    return v;
}

// ---------------------------------------------------------------- contractions

ValueId FunctionBuilder::matmul(ValueId a, ValueId b, Span span) {
    size_t ra = type(a).rank(), rb = type(b).rank();
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
        // result: one of them is gathered. The candidate plans are costed (section 8),
        // with the conversion of the result to the type it is wanted in, and the
        // cheapest wins (ties: the first operand leads, the later index is gathered).
        struct Plan {
            Layout want_a, want_b;
            AxisSet used = 0;
            bool pending_choice = false;
            double pending_gather = 0;
            bool conflict = false;  // a choice was made (two splits, or an axis twice)
        };
        auto make_plan = [&](bool a_leads, bool gather_later) {
            Plan pl{type(a).layout, type(b).layout};
            for (auto [c, n] : size) {
                auto sa = axes_of(a, ia, c), sb = axes_of(b, ib, c);
                bool in_a = ia.find(c) != std::string::npos, in_b = ib.find(c) != std::string::npos;
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
                if (sb.empty()) {
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
        Plan chosen = make_plan(true, true);
        double best = chosen.conflict ? plan_cost(chosen) : 0;
        for (auto [a_leads, later] : {std::pair{true, false}, std::pair{false, true}, std::pair{false, false}}) {
            if (!chosen.conflict) break;  // nothing to choose
            Plan candidate = make_plan(a_leads, later);
            double cost = plan_cost(candidate);
            if (cost < best) {
                best = cost;
                chosen = std::move(candidate);
            }
        }
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
    const TensorType& xt = type(x);
    TensorType r;
    r.dtype = xt.dtype;
    r.mesh = xt.mesh;
    r.layout.partial = xt.layout.partial;
    std::vector<std::string_view> names;
    AxisSet reduced_axes = 0;
    for (size_t d = 0; d < xt.rank(); ++d) {
        bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
        if (reduced) {
            for (uint8_t a : xt.layout.dims[d]) reduced_axes |= sema::axis_bit(a);
            if (!keep) continue;
            r.shape.push_back(1);
            r.layout.dims.emplace_back();
            names.emplace_back();
            continue;
        }
        r.shape.push_back(xt.shape[d]);
        r.layout.dims.push_back(xt.layout.dims[d]);
        names.push_back(dim_names_[x][d]);
    }
    // Reduced split dims leave a pending sum (sum, mean), or a pending max that the
    // all_reduce(max) below completes at once.
    r.layout.partial |= reduced_axes;
    ir::Op op{ir::OpKind::Reduce};
    op.reduce = kind;
    op.ints = dims;
    op.dim2 = keep ? 1 : 0;
    op.operands = {x};
    op.span = span;
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

bool FunctionBuilder::is_load_call(const Expr& e) {
    if (e.kind != ExprKind::Call || e.lhs->kind != ExprKind::Name) return false;
    if (find_binding(e.lhs->name.name)) return false;
    return find_builtin(e.lhs->name.name) == Builtin::load;
}

// `load("x.npy")` takes its type, layout included, from the annotation; each device
// reads its own piece. The file's dtype and shape are checked when the program runs.
ValueId FunctionBuilder::lower_load(const Expr& call, const AggType& t) {
    if (call.args.size() != 1 || call.args[0].value->kind != ExprKind::StringLit) {
        fail(DiagCode::E0309, call.span, "`load` takes one file name: `load(\"x.npy\")`");
    }
    if (t.kind != AggType::Tensor) fail(DiagCode::E0309, call.span, "`load` reads one tensor");
    ir::Op op{ir::OpKind::Load};
    op.text = call.args[0].value->string_value;
    op.span = call.span;
    return emit(std::move(op), t.tensor, t.dim_names);
}

// ---------------------------------------------------------------- reshape

// LANGUAGE.md rule 4: a split dim factored into n1..nk keeps its axes on n1 if they
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
    const Mesh* mesh = mesh_of(type(x));
    Layout in_layout = type(x).layout;
    Layout out_layout = Layout::replicated(shape.size());
    out_layout.partial = in_layout.partial;
    Layout need = in_layout;  // what the operand must be before the reshape
    // Group input and output dims with equal products, left to right.
    size_t i = 0, o = 0;
    while (i < t.rank() || o < shape.size()) {
        size_t i0 = i, o0 = o;
        int64_t pi = i < t.rank() ? t.shape[i++] : 1;
        int64_t po = o < shape.size() ? shape[o++] : 1;
        while (pi != po) {
            if (pi < po && i < t.rank()) pi *= t.shape[i++];
            else if (o < shape.size()) po *= shape[o++];
            else break;
        }
        // Trailing size-1 dims join the group.
        size_t ni = i - i0, no = o - o0;
        if (!mesh) continue;
        // The outer dims of the group, size-1 dims skipped (they are never split).
        size_t outer_in = i0, outer_out = o0;
        while (outer_in + 1 < i && t.shape[outer_in] == 1) ++outer_in;
        while (outer_out + 1 < o && shape[outer_out] == 1) ++outer_out;
        bool inner_unsplit = true;
        for (size_t k = outer_in + 1; k < i; ++k) inner_unsplit &= in_layout.dims[k].empty();
        if (ni >= 1 && no >= 1 && inner_unsplit && !in_layout.dims[outer_in].empty()) {
            int64_t factor = in_layout.split_factor(*mesh, outer_in);
            if (shape[outer_out] % factor == 0) {
                out_layout.dims[outer_out] = in_layout.dims[outer_in];
                continue;
            }
        }
        for (size_t k = i0; k < i; ++k) need.dims[k].clear();
    }
    if (mesh && !(need == in_layout)) x = plan_coercion(x, type(x).mesh, need, span, "`reshape` cannot keep these splits", true);
    TensorType r = type(x);
    r.shape = shape;
    r.layout = out_layout;
    ir::Op op{ir::OpKind::Reshape};
    op.operands = {x};
    op.ints = shape;
    op.span = span;
    return emit(std::move(op), std::move(r));
}

// ---------------------------------------------------------------- calls

int64_t FunctionBuilder::int_arg(const Expr& e) {
    switch (e.kind) {
    case ExprKind::IntLit: return e.int_value;
    case ExprKind::Unary:
        if (e.unary_op == UnaryOp::Neg) return -int_arg(*e.lhs);
        break;
    case ExprKind::Name:
        if (auto it = binding_.sizes.find(e.name.name); it != binding_.sizes.end()) return it->second;
        break;
    case ExprKind::Field:
        if (e.lhs->kind == ExprKind::Name) {
            Dim d{DimKind::Axis, e.span};
            d.name = e.lhs->name;
            d.axis = e.name;
            return eval_dim(d);
        }
        break;
    case ExprKind::Binary: {
        int64_t a = int_arg(*e.lhs), b = int_arg(*e.rhs);
        switch (e.binary_op) {
        case BinaryOp::Add: return a + b;
        case BinaryOp::Sub: return a - b;
        case BinaryOp::Mul: return a * b;
        case BinaryOp::Div:
            if (b != 0 && a % b == 0) return a / b;
            break;
        default: break;
        }
        break;
    }
    default: break;
    }
    fail(DiagCode::E0309, e.span, "expected a size known at compile time (an integer, a size variable or `M.axis`)");
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
    for (const Arg& a : call.args) args.push_back(eval(*a.value));
    Binding b;
    for (size_t i = 0; i < fn.params.size(); ++i) bind_generics(*fn.params[i].type, args[i], b, call.args[i].span);
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
        fail(DiagCode::E0601, call.span,
             fmt::format("`{}` needs `{}` to return a float scalar", name, fn->name.name),
             {{"declared here", fn->name.span}});
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
        return create(b == Builtin::random_normal ? ir::CreateKind::RandomNormal : ir::CreateKind::RandomUniform,
                      shape_arg(*pos[1]), std::nullopt, int_arg(*pos[0]), 0);
    }
    case Builtin::exp: case Builtin::log: case Builtin::sqrt: case Builtin::rsqrt: case Builtin::tanh:
    case Builtin::sigmoid: case Builtin::relu: case Builtin::gelu: case Builtin::abs: {
        want(1, 1);
        static const std::map<Builtin, ir::Ew> kUnary = {
            {Builtin::exp, ir::Ew::Exp}, {Builtin::log, ir::Ew::Log}, {Builtin::sqrt, ir::Ew::Sqrt},
            {Builtin::rsqrt, ir::Ew::Rsqrt}, {Builtin::tanh, ir::Ew::Tanh}, {Builtin::sigmoid, ir::Ew::Sigmoid},
            {Builtin::relu, ir::Ew::Relu}, {Builtin::gelu, ir::Ew::Gelu}, {Builtin::abs, ir::Ew::Abs}};
        ValueId x = lower_expr(*pos[0]);
        if (b != Builtin::abs && b != Builtin::relu && !is_float(type(x).dtype) && !weak_[x]) {
            fail(DiagCode::E0308, pos[0]->span, fmt::format("`{}` takes a float tensor, found {}", builtin_info(b).name, dtype_name(type(x).dtype)));
        }
        return elementwise(kUnary.at(b), {x}, call.span);
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
        ValueId v = elementwise(ir::Ew::Cast, {x}, call.span);
        f_.types[v].dtype = to;
        return v;
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
        size_t first = 0;
        if (b == Builtin::save) {
            want(2, 2);
            if (pos[0]->kind != ExprKind::StringLit) fail(DiagCode::E0309, pos[0]->span, "`save` takes a file name (a string) first");
            text = pos[0]->string_value;
            first = 1;
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
        int64_t b = int_arg(*start), n = int_arg(*size);
        const TensorType& t = type(x);
        if (b < 0 || n < 1 || b + n > t.shape[d]) {
            fail(DiagCode::E0307, call.span, fmt::format("slice [{}, {}) is outside dim {} of size {}", b, b + n, d, t.shape[d]));
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
        op.ints = {b, n};
        op.span = call.span;
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
            const Mesh* mesh = mesh_of(type(x));
            if (pos[1]->kind != ExprKind::LayoutLit) fail(DiagCode::E0309, pos[1]->span, "`reshard` takes a layout like `{B: data}`");
            if (!mesh) {
                if (!pos[1]->layout->entries.empty()) fail(DiagCode::E0407, call.span, "`reshard` of a value that is on no mesh");
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

}  // namespace

ir::Module infer_program(const SourceManager& sources, const Program& program,
                         DiagnosticEngine& diags, const InferOptions& options) {
    return Inferer(sources, program, diags, options).run();
}

}  // namespace meshc::sema

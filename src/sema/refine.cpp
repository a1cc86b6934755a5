// Generic refinement checking; see refine.h.
//
// Per function: the signature's size variables become solver symbols (a generic mesh's
// axis sizes too; a concrete mesh's are constants). Facts: `where` clauses, and `k | d` for
// every dim d split over axes of total size k in a parameter or result type (struct
// parameters contribute their fields' layouts). Obligations: the same for every layout
// written in the body, and, at each call of a user function whose arguments' shapes are
// known from the signature or an annotation, the callee's facts with its size variables
// replaced by the caller's expressions.
#include "sema/refine.h"

#include <map>
#include <set>
#include <optional>

#include <fmt/format.h>

#include "sema/dims_from_ast.h"
#include "sema/signature.h"
#include "solver/refinement.h"
#include "syntax/ast_printer.h"

namespace meshc::sema {

namespace {

using namespace meshc::ast;
using solver::CmpOp;
using solver::Constraint;

struct Obligation {
    Constraint constraint;
    std::string what;  // why it is needed, for the message
};

solver::CmpOp to_solver(ast::CmpOp op) {
    switch (op) {
    case ast::CmpOp::Eq: return CmpOp::Eq;
    case ast::CmpOp::Ne: return CmpOp::Ne;
    case ast::CmpOp::Lt: return CmpOp::Lt;
    case ast::CmpOp::Le: return CmpOp::Le;
    case ast::CmpOp::Gt: return CmpOp::Gt;
    case ast::CmpOp::Ge: return CmpOp::Ge;
    }
    return CmpOp::Eq;
}

class FunctionRefiner {
public:
    FunctionRefiner(const Program& program, size_t module, const Item& fn, SymbolTable& symbols,
                    solver::RefinementSolver& solver, DiagnosticEngine& diags, RefineStats& stats)
        : program_(program), module_(module), fn_(fn), symbols_(symbols), solver_(solver),
          diags_(diags), stats_(stats) {}

    void run() {
        for (const GenericParam& g : fn_.generics) {
            if (g.kind && g.kind->name == "Mesh") generic_meshes_.insert(g.name.name);
        }
        // Facts from the signature.
        solver_.push();
        scope_.emplace_back();
        for (const Param& p : fn_.params) {
            std::vector<Constraint> facts;
            if (!layout_constraints(*p.type, {}, facts)) continue;
            for (Constraint& c : facts) solver_.assume(std::move(c));
            scope_.back()[p.name.name] = p.type;
        }
        if (fn_.result) {
            std::vector<Constraint> facts;
            if (layout_constraints(*fn_.result, {}, facts)) {
                for (Constraint& c : facts) solver_.assume(std::move(c));
            }
        }
        for (const ast::Constraint& w : fn_.where) {
            if (auto c = where_constraint(w, {})) solver_.assume(std::move(*c));
        }
        if (!solver_.facts_contradictory()) walk_block(*fn_.body);
        scope_.pop_back();
        solver_.pop();
    }

private:
    using Subst = std::map<std::string_view, DimExpr>;

    // The symbol or constant a dim name denotes in this function (or, with `subst`, in a
    // callee or struct whose generics are replaced by the caller's expressions).
    std::optional<DimExpr> dim(const Dim& d, const Subst& subst) {
        DimNameResolver resolve = [&](std::string_view name, std::optional<std::string_view> axis) {
            if (!axis) {
                if (auto it = subst.find(name); it != subst.end()) {
                    return DimBinding::unbound();  // handled below by substitution
                }
                return DimBinding::of_symbol(size_var(name));
            }
            if (auto m = callee_meshes_.find(name); m != callee_meshes_.end()) name = m->second;
            if (const Item* mesh = concrete_mesh(name)) {
                for (const MeshAxisDecl& a : mesh->axes) {
                    if (a.name.name == *axis) return DimBinding::of_constant(a.size);
                }
                return DimBinding::unbound();
            }
            return DimBinding::of_symbol(axis_size(name, *axis));
        };
        if (!subst.empty()) return substituted(d, subst, resolve);
        auto r = from_ast(d, symbols_, resolve);
        if (!r) return std::nullopt;
        return std::move(r).value();
    }

    // from_ast with some names replaced by expressions: convert with placeholders, then
    // substitute.
    std::optional<DimExpr> substituted(const Dim& d, const Subst& subst, const DimNameResolver& outer) {
        std::map<std::string_view, SymbolId> placeholders;
        DimNameResolver resolve = [&](std::string_view name, std::optional<std::string_view> axis) {
            if (!axis && subst.count(name)) {
                auto [it, inserted] = placeholders.emplace(name, SymbolId{});
                if (inserted) it->second = symbols_.add_size_var(fmt::format("{}'", name));
                return DimBinding::of_symbol(it->second);
            }
            if (!axis) return DimBinding::unbound();  // a callee variable the call does not bind
            return outer(name, axis);
        };
        auto r = from_ast(d, symbols_, resolve);
        if (!r) return std::nullopt;
        Substitution s;
        for (const auto& [name, id] : placeholders) s[id] = subst.at(name);
        auto out = substitute(r.value(), s, symbols_);
        if (!out) return std::nullopt;
        return std::move(out).value();
    }

    SymbolId size_var(std::string_view name) {
        auto it = vars_.find(name);
        if (it != vars_.end()) return it->second;
        SymbolId id = symbols_.add_size_var(std::string(name));
        vars_.emplace(name, id);
        return id;
    }

    SymbolId axis_size(std::string_view mesh, std::string_view axis) {
        std::string key = fmt::format("{}.{}", mesh, axis);
        auto it = axes_.find(key);
        if (it != axes_.end()) return it->second;
        SymbolId id = symbols_.add_axis_size(mesh, axis);
        axes_.emplace(key, id);
        return id;
    }

    const Item* concrete_mesh(std::string_view name) const {
        if (generic_meshes_.count(name)) return nullptr;
        for (const Item* item : program_.modules[module_]->items) {
            if (item->kind == ItemKind::Mesh && item->name.name == name) return item;
        }
        return nullptr;
    }

    // The size of a group of mesh axes as an expression (`M.data * M.model`).
    std::optional<DimExpr> axes_size(const Ident& mesh, const std::vector<Ident>& axes, const Subst& subst) {
        DimExpr k = DimExpr::constant(1);
        for (const Ident& a : axes) {
            Dim d{DimKind::Axis, a.span};
            d.name = mesh;
            d.axis = a;
            auto e = dim(d, subst);
            if (!e) return std::nullopt;
            auto m = mul(k, *e);
            if (!m) return std::nullopt;
            k = std::move(m).value();
        }
        return k;
    }

    // `k | d` for each split dim of a tensor type (and of a struct's fields).
    bool layout_constraints(const Type& t, const Subst& subst, std::vector<Constraint>& out) {
        switch (t.kind) {
        case TypeKind::Scalar: return true;
        case TypeKind::Tuple:
            for (const Type* e : t.elements) layout_constraints(*e, subst, out);
            return true;
        case TypeKind::Named: return struct_constraints(t, subst, out);
        case TypeKind::Tensor: break;
        }
        if (!t.mesh || !t.layout) return true;
        for (const LayoutEntry& e : t.layout->entries) {
            size_t index = 0;
            if (e.key_name) {
                bool found = false;
                for (size_t i = 0; i < t.shape.size(); ++i) {
                    if (t.shape[i]->kind == DimKind::Var && t.shape[i]->name.name == e.key_name->name) {
                        index = i;
                        found = true;
                    }
                }
                if (!found) continue;
            } else {
                if (e.key_pos < 0 || static_cast<size_t>(e.key_pos) >= t.shape.size()) continue;
                index = static_cast<size_t>(e.key_pos);
            }
            auto n = dim(*t.shape[index], subst);
            auto k = axes_size(*t.mesh, e.axes, subst);
            if (!n || !k) continue;
            out.push_back(Constraint::divides(*k, *n));
        }
        return true;
    }

    bool struct_constraints(const Type& t, const Subst& subst, std::vector<Constraint>& out) {
        const Item* s = find_struct(t);
        if (!s || s->generics.size() != t.args.size()) return false;
        Subst inner;
        for (size_t i = 0; i < s->generics.size(); ++i) {
            const GenericParam& g = s->generics[i];
            if (g.kind && (g.kind->name == "Mesh" || g.kind->name == "Params" || g.kind->name == "Float")) continue;  // meshes: axis sizes stay symbolic
            auto e = dim(*t.args[i], subst);
            if (!e) return false;
            inner[g.name.name] = *e;
        }
        for (const Param& f : s->fields) layout_constraints(*f.type, inner, out);
        return true;
    }

    const Item* find_struct(const Type& t) const {
        const Module* m = program_.modules[module_].get();
        if (t.module) {
            for (const Item* item : m->items) {
                if (item->kind == ItemKind::Import && item->name.name == t.module->name) {
                    auto it = program_.import_targets.find(item);
                    if (it == program_.import_targets.end()) return nullptr;
                    m = program_.modules[it->second].get();
                }
            }
        }
        for (const Item* item : m->items) {
            if (item->kind == ItemKind::Struct && item->name.name == t.name.name) return item;
        }
        return nullptr;
    }

    std::optional<Constraint> where_constraint(const ast::Constraint& w, const Subst& subst) {
        // `X % Y == 0` is divisibility.
        if (w.op == ast::CmpOp::Eq && w.lhs->kind == DimKind::Binary && w.lhs->op == DimOp::Mod &&
            w.rhs->kind == DimKind::Int && w.rhs->value == 0) {
            auto x = dim(*w.lhs->lhs, subst);
            auto y = dim(*w.lhs->rhs, subst);
            if (!x || !y) return std::nullopt;
            return Constraint::divides(*y, *x);
        }
        auto a = dim(*w.lhs, subst);
        auto b = dim(*w.rhs, subst);
        if (!a || !b) return std::nullopt;
        return Constraint::compare(*a, to_solver(w.op), *b);
    }

    void require(const Constraint& c, Span at, const std::string& what, std::vector<std::pair<std::string, Span>> notes) {
        ++stats_.obligations;
        solver::Outcome o = solver_.prove(c);
        if (o.proved()) return;
        std::string text = c.to_string(symbols_);
        auto& d = diags_.emit(DiagCode::E0502, at,
                              o.refuted() ? fmt::format("{} needs `{}`, which does not follow from what is known", what, text)
                                          : fmt::format("{} needs `{}`, which could not be proved", what, text));
        if (o.refuted() && !o.counterexample.empty()) {
            d.note(fmt::format("counterexample: {}", o.counterexample.to_string(symbols_)));
        }
        if (o.unknown() && !o.reason.empty()) d.note(fmt::format("the solver gave up: {}", o.reason));
        for (auto& [n, s] : notes) d.note(std::move(n), s);
        d.note(fmt::format("facts for `{}` are its `where` clauses and the splits in its signature; "
                           "add `where {}` if it always holds", fn_.name.name, text));
    }

    void walk_block(const Block& b) {
        scope_.emplace_back();
        for (const Stmt* s : b.stmts) walk_stmt(*s);
        if (b.tail) walk_expr(*b.tail);
        scope_.pop_back();
    }

    void walk_stmt(const Stmt& s) {
        switch (s.kind) {
        case StmtKind::Let:
        case StmtKind::Var: {
            if (s.value) walk_expr(*s.value);
            if (s.type) {
                std::vector<Constraint> needed;
                layout_constraints(*s.type, {}, needed);
                for (const Constraint& c : needed) require(c, s.type->span, "this annotation", {});
                if (s.kind == StmtKind::Var) scope_.back()[s.name.name] = s.type;
                if (s.kind == StmtKind::Let && s.pattern->kind == PatternKind::Name) scope_.back()[s.pattern->name.name] = s.type;
            }
            return;
        }
        case StmtKind::Assign:
        case StmtKind::Return:
        case StmtKind::Expr:
            if (s.value) walk_expr(*s.value);
            return;
        case StmtKind::For:
            walk_expr(*s.range_begin);
            walk_expr(*s.range_end);
            walk_block(*s.body);
            return;
        case StmtKind::Empty: return;
        }
    }

    const Type* declared_type(std::string_view name) const {
        for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
            if (auto f = it->find(name); f != it->end()) return f->second;
        }
        return nullptr;
    }

    void walk_expr(const Expr& e) {
        switch (e.kind) {
        case ExprKind::Call:
            walk_expr(*e.lhs);
            for (const Arg& a : e.args) walk_expr(*a.value);
            check_call(e);
            return;
        case ExprKind::Unary:
        case ExprKind::Field: walk_expr(*e.lhs); return;
        case ExprKind::Binary:
            walk_expr(*e.lhs);
            walk_expr(*e.rhs);
            return;
        case ExprKind::Tuple:
        case ExprKind::List:
            for (const Expr* x : e.elements) walk_expr(*x);
            return;
        case ExprKind::StructLit:
            for (const FieldInit& f : e.fields) walk_expr(*f.value);
            return;
        case ExprKind::If:
            walk_expr(*e.cond);
            walk_block(*e.then_block);
            if (e.else_block) walk_block(*e.else_block);
            if (e.else_if) walk_expr(*e.else_if);
            return;
        default: return;
        }
    }

    // A call of a user function: bind its size variables from arguments whose declared
    // types are known, then require its facts.
    void check_call(const Expr& call) {
        const Item* callee = nullptr;
        if (call.lhs->kind == ExprKind::Name) {
            for (const Item* item : program_.modules[module_]->items) {
                if (item->kind == ItemKind::Fn && item->name.name == call.lhs->name.name) callee = item;
            }
        }
        if (!callee || callee == &fn_ || callee->params.size() != call.args.size()) return;
        // A callee generic over its mesh: each mesh parameter is the mesh of the argument
        // whose parameter type names it (a declared mesh, or this function's own mesh
        // parameter); its axis sizes in the callee's `where` clauses are then that mesh's.
        std::map<std::string_view, std::string_view> meshes;
        for (size_t i = 0; i < call.args.size(); ++i) {
            const Expr& a = *call.args[i].value;
            const Type& pt = *callee->params[i].type;
            if (a.kind != ExprKind::Name || pt.kind != TypeKind::Tensor || !pt.mesh) continue;
            const Type* at = declared_type(a.name.name);
            if (at && at->kind == TypeKind::Tensor && at->mesh) meshes.emplace(pt.mesh->name, at->mesh->name);
        }
        for (const GenericParam& g : callee->generics) {
            if (g.kind && g.kind->name == "Params") return;  // a tree type: checked per instance
            if (g.kind && g.kind->name == "Mesh" && !meshes.count(g.name.name)) return;  // not bound here
        }
        struct MeshScope {
            std::map<std::string_view, std::string_view>& slot;
            std::map<std::string_view, std::string_view> saved;
            ~MeshScope() { slot = std::move(saved); }
        } mesh_scope{callee_meshes_, std::move(callee_meshes_)};
        callee_meshes_ = meshes;
        Subst subst;
        for (size_t i = 0; i < call.args.size(); ++i) {
            const Expr& a = *call.args[i].value;
            if (a.kind != ExprKind::Name) continue;
            const Type* at = declared_type(a.name.name);
            const Type& pt = *callee->params[i].type;
            if (!at || at->kind != TypeKind::Tensor || pt.kind != TypeKind::Tensor || at->shape.size() != pt.shape.size()) continue;
            for (size_t d = 0; d < pt.shape.size(); ++d) {
                if (pt.shape[d]->kind != DimKind::Var || subst.count(pt.shape[d]->name.name)) continue;
                if (auto e = dim(*at->shape[d], {})) subst[pt.shape[d]->name.name] = *e;
            }
        }
        if (subst.empty()) return;
        std::vector<std::pair<std::string, Span>> where_notes;
        auto covered = [&](const Dim& d) {
            // Every size variable of `d` is bound by the call.
            bool ok = true;
            auto visit = [&](auto& self, const Dim& x) -> void {
                if (x.kind == DimKind::Var && !subst.count(x.name.name)) ok = false;
                if (x.kind == DimKind::Binary) {
                    self(self, *x.lhs);
                    self(self, *x.rhs);
                }
            };
            visit(visit, d);
            return ok;
        };
        for (const ast::Constraint& w : callee->where) {
            if (!covered(*w.lhs) || !covered(*w.rhs)) continue;
            if (auto c = where_constraint(w, subst)) {
                require(*c, call.span, fmt::format("this call of `{}`", callee->name.name),
                        {{"required by this `where` clause", w.span}});
            }
        }
        callee_meshes_.clear();  // the parameters' own layouts: declared meshes only
        for (const Param& p : callee->params) {
            if (p.type->kind != TypeKind::Tensor || !p.type->layout || !p.type->mesh) continue;
            if (generic_mesh_of(*callee, *p.type)) continue;
            bool all = true;
            for (const Dim* d : p.type->shape) all &= covered(*d);
            if (!all) continue;
            std::vector<Constraint> needed;
            layout_constraints(*p.type, subst, needed);
            for (const Constraint& c : needed) {
                require(c, call.span, fmt::format("this call of `{}`", callee->name.name),
                        {{fmt::format("parameter `{}` is split like this", p.name.name), p.type->span}});
            }
        }
    }

    static bool generic_mesh_of(const Item& fn, const Type& t) {
        for (const GenericParam& g : fn.generics) {
            if (t.mesh && g.name.name == t.mesh->name) return true;
        }
        return false;
    }

    const Program& program_;
    size_t module_;
    const Item& fn_;
    SymbolTable& symbols_;
    solver::RefinementSolver& solver_;
    DiagnosticEngine& diags_;
    RefineStats& stats_;
    std::map<std::string_view, SymbolId> vars_;
    // While checking a call: the callee's mesh parameters -> the meshes of the arguments.
    std::map<std::string_view, std::string_view> callee_meshes_;
    std::map<std::string, SymbolId> axes_;
    std::set<std::string_view> generic_meshes_;
    std::vector<std::map<std::string_view, const Type*>> scope_;
};

}  // namespace

RefineStats check_refinements(const SourceManager& sources, const Program& program,
                              DiagnosticEngine& diags, const std::set<const ast::Item*>* skip,
                              unsigned solver_budget_ms) {
    (void)sources;
    RefineStats stats;
    SymbolTable symbols;
    solver::SolverOptions options;
    options.run_budget_ms = solver_budget_ms;
    solver::RefinementSolver solver(symbols, options);
    for (size_t m = 0; m < program.modules.size(); ++m) {
        for (const Item* item : program.modules[m]->items) {
            if (item->kind != ItemKind::Fn || (skip && skip->count(item))) continue;
            // A function without size variables is checked by inference with its sizes.
            if (item->where.empty() && !has_size_variables(*item, *program.modules[m])) continue;
            ++stats.functions;
            FunctionRefiner(program, m, *item, symbols, solver, diags, stats).run();
        }
    }
    return stats;
}

}  // namespace meshc::sema

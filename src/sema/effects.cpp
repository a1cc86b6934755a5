// Communication effects; see effects.h.
#include "sema/effects.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include "sema/explain.h"
#include "sema/resolve.h"

namespace meshc::sema {
namespace {

using ir::OpKind;

/// One collective as an effect: the names of its axes and the bytes each device sends.
struct Traffic {
    std::vector<std::string> axes;
    double bytes = 0;
};

std::optional<Traffic> traffic_of(const ir::Module& module, const ir::Function& f, const ir::Op& op) {
    std::optional<CollectiveInfo> info = collective_info(module, f, op);
    if (!info) return std::nullopt;
    const ir::Mesh* mesh = nullptr;
    if (!op.operands.empty() && op.operands[0] < f.types.size()) mesh = module.mesh(f.types[op.operands[0]].mesh);
    if (!mesh) return std::nullopt;
    Traffic t;
    for (size_t a = 0; a < mesh->axes.size(); ++a) {
        if (info->axes & ir::axis_bit(a)) t.axes.push_back(mesh->axes[a].name);
    }
    t.bytes = info->cost.bytes_sent;
    return t;
}

/// Calls `visit(function, op, times, calls)` for every collective reached from `fn`: its own
/// ops and, through calls, its callees' (each `times` per run of `fn`; `calls` the call
/// sites on the way, outermost first).
using Visit = std::function<void(const ir::Function&, const ir::Op&, const Traffic&, double, const std::vector<Span>&)>;

void walk(const ir::Module& module, const ir::Function& fn, double times, std::vector<Span>& calls, bool& exact,
          const Visit& visit, int depth = 0) {
    if (depth > 200) return;  // no recursion in Mesh; a guard all the same
    for_each_counted(fn.ops, constants_of(fn), times, exact, [&](const ir::Op& op, double t) {
        if (auto traffic = traffic_of(module, fn, op)) visit(fn, op, *traffic, t, calls);
        if ((op.kind == OpKind::Call || op.kind == OpKind::Grad) && op.callee >= 0 &&
            static_cast<size_t>(op.callee) < module.functions.size()) {
            calls.push_back(op.span);
            walk(module, module.functions[static_cast<size_t>(op.callee)], t, calls, exact, visit, depth + 1);
            calls.pop_back();
        }
    });
}

/// The function item each GIR function instance comes from (by its name's position).
std::map<std::pair<FileId, uint32_t>, const ast::Item*> items_by_name(const Program& program) {
    std::map<std::pair<FileId, uint32_t>, const ast::Item*> out;
    for (const auto& m : program.modules) {
        for (const ast::Item* item : m->items) {
            if (item->kind == ast::ItemKind::Fn) out[{item->name.span.file, item->name.span.begin}] = item;
        }
    }
    return out;
}

const ast::Item* item_of(const std::map<std::pair<FileId, uint32_t>, const ast::Item*>& items, const ir::Function& f) {
    if (!f.span.valid()) return nullptr;
    auto it = items.find({f.span.file, f.span.begin});
    return it == items.end() ? nullptr : it->second;
}

std::string declared_text(const SourceManager& sources, const ast::Effect& e) {
    return std::string(sources.text(e.span));
}

/// A bound's value for one instance: its sizes, and `M.axis` of its meshes.
std::optional<double> evaluate(const ast::Dim& d, const ir::Module& module, const ir::Function& f, std::string& unknown) {
    switch (d.kind) {
    case ast::DimKind::Int: return static_cast<double>(d.value);
    case ast::DimKind::Var: {
        auto it = f.instance.find(std::string(d.name.name));
        if (it != f.instance.end()) return static_cast<double>(it->second);
        unknown = std::string(d.name.name);
        return std::nullopt;
    }
    case ast::DimKind::Axis: {
        std::string mesh(d.name.name);
        if (auto it = f.mesh_instance.find(mesh); it != f.mesh_instance.end()) mesh = it->second;
        for (const ir::Mesh& m : module.meshes) {
            if (m.name != mesh) continue;
            if (auto a = m.axis_index(d.axis.name)) return static_cast<double>(m.axes[*a].size);
        }
        unknown = fmt::format("{}.{}", d.name.name, d.axis.name);
        return std::nullopt;
    }
    case ast::DimKind::Binary: {
        auto l = evaluate(*d.lhs, module, f, unknown);
        auto r = evaluate(*d.rhs, module, f, unknown);
        if (!l || !r) return std::nullopt;
        switch (d.op) {
        case ast::DimOp::Add: return *l + *r;
        case ast::DimOp::Sub: return *l - *r;
        case ast::DimOp::Mul: return *l * *r;
        case ast::DimOp::Div: return *r == 0 ? 0.0 : std::floor(*l / *r);
        case ast::DimOp::Mod: return *r == 0 ? 0.0 : std::fmod(*l, *r);
        }
    }
    }
    return std::nullopt;
}

std::string effect_bytes_text(double b) { return fmt::format("{:.0f}", b); }

/// `an all_reduce`, `a reduce_scatter`.
std::string with_article(OpKind kind) {
    std::string_view name = ir::op_name(kind);
    bool vowel = !name.empty() && std::string_view("aeiou").find(name[0]) != std::string_view::npos;
    return fmt::format("{} {}", vowel ? "an" : "a", name);
}

void check_inlined(const SourceManager& sources, const Program& program, const ir::Module& module,
                   DiagnosticEngine& diags, std::set<std::pair<const ast::Item*, std::string>>& reported,
                   const std::set<const ast::Item*>& bad_declaration);

/// The size variables a function's signature names: its generic parameters and the dims
/// of its parameters' and result's types.
void signature_names(const ast::Type* t, std::set<std::string_view>& out) {
    if (!t) return;
    std::function<void(const ast::Dim*)> dim = [&](const ast::Dim* d) {
        if (!d) return;
        if (d->kind == ast::DimKind::Var) out.insert(d->name.name);
        dim(d->lhs);
        dim(d->rhs);
    };
    for (const ast::Dim* d : t->shape) dim(d);
    for (const ast::Dim* d : t->args) dim(d);
    for (const ast::Type* e : t->elements) signature_names(e, out);
}

void bound_unknowns(const ast::Dim* d, const std::set<std::string_view>& names, std::vector<const ast::Dim*>& out) {
    if (!d) return;
    if (d->kind == ast::DimKind::Var && !names.count(d->name.name)) out.push_back(d);
    bound_unknowns(d->lhs, names, out);
    bound_unknowns(d->rhs, names, out);
}

/// A generic function no instance reaches: its declaration is still checked for what it
/// says without sizes (an axis no mesh has, a bound naming a size its signature lacks;
/// E0409); its effect itself is checked where it is instantiated.
void check_uninstantiated(const Program& program, const std::set<std::string>& mesh_axes,
                          const std::set<const ast::Item*>& instantiated, DiagnosticEngine& diags) {
    for (const auto& m : program.modules) {
        for (const ast::Item* item : m->items) {
            if (item->kind != ast::ItemKind::Fn || !item->effect.declared || instantiated.count(item)) continue;
            std::set<std::string_view> names;
            for (const ast::GenericParam& g : item->generics) names.insert(g.name.name);
            for (const ast::Param& p : item->params) signature_names(p.type, names);
            signature_names(item->result, names);
            // Generic in its mesh: its axes are those of the meshes it is given, unknown here.
            bool mesh_generic = std::any_of(item->generics.begin(), item->generics.end(), [](const ast::GenericParam& g) {
                return g.kind && g.kind->name == "Mesh";
            });
            for (const ast::EffectAxis& a : item->effect.axes) {
                if (!mesh_generic && !mesh_axes.empty() && !mesh_axes.count(std::string(a.axis.name))) {
                    std::vector<std::string_view> known(mesh_axes.begin(), mesh_axes.end());
                    auto& d = diags.emit(DiagCode::E0409, a.axis.span,
                                         fmt::format("no mesh of the program has an axis `{}`", a.axis.name));
                    if (auto best = closest_name(a.axis.name, known)) d.note(fmt::format("did you mean `{}`?", *best));
                    d.note(fmt::format("`{}` is not instantiated by the program; its declaration is checked all the same",
                                       item->name.name));
                }
                std::vector<const ast::Dim*> unknown;
                bound_unknowns(a.bound, names, unknown);
                for (const ast::Dim* u : unknown) {
                    diags.emit(DiagCode::E0409, u->span,
                               fmt::format("the bound names `{}`, which is not a size of `{}`", u->name.name, item->name.name))
                        .note("a bound is an expression of the function's size variables and mesh axis sizes (`M.data`), "
                              "in bytes per device");
                }
            }
        }
    }
}

}  // namespace

std::vector<CommEffect> infer_effects(const ir::Module& module) {
    std::vector<CommEffect> out(module.functions.size());
    for (size_t i = 0; i < module.functions.size(); ++i) {
        std::vector<Span> calls;
        CommEffect& e = out[i];
        walk(module, module.functions[i], 1, calls, e.exact,
             [&](const ir::Function&, const ir::Op&, const Traffic& t, double times, const std::vector<Span>&) {
                 for (const std::string& a : t.axes) e.bytes[a] += t.bytes * times;
             });
    }
    return out;
}

std::string effect_to_string(const CommEffect& effect) {
    if (effect.bytes.empty()) return "! nocomm";
    std::string out = "! comm(";
    bool first = true;
    for (const auto& [axis, bytes] : effect.bytes) {
        out += fmt::format("{}{} <= {} bytes", first ? "" : ", ", axis, effect_bytes_text(bytes));
        first = false;
    }
    return out + ")";
}

void check_effects(const SourceManager& sources, const Program& program, const ir::Module& module,
                   DiagnosticEngine& diags) {
    // Nothing to check (and nothing to pay, at 10,000 layers) without a declaration.
    bool any = false;
    for (const auto& m : program.modules) {
        for (const ast::Item* item : m->items) any = any || (item->kind == ast::ItemKind::Fn && item->effect.declared);
    }
    if (!any) return;
    auto items = items_by_name(program);
    std::set<std::string> mesh_axes;
    for (const ir::Mesh& m : module.meshes) {
        for (const ir::MeshAxis& a : m.axes) mesh_axes.insert(a.name);
    }
    std::set<const ast::Item*> bad_declaration;  // E0409 once per item
    std::set<std::pair<const ast::Item*, std::string>> reported;  // E0408 once per item and axis
    std::set<const ast::Item*> instantiated;
    for (const ir::Function& f : module.functions) {
        if (const ast::Item* item = item_of(items, f)) instantiated.insert(item);
    }
    check_uninstantiated(program, mesh_axes, instantiated, diags);
    for (const ir::Function& f : module.functions) {
        if (f.has_errors) continue;
        const ast::Item* item = item_of(items, f);
        if (!item || !item->effect.declared || bad_declaration.count(item)) continue;
        const ast::Effect& decl = item->effect;
        // The axes it names must be axes of a mesh of the program.
        bool ok = true;
        for (const ast::EffectAxis& a : decl.axes) {
            if (mesh_axes.count(std::string(a.axis.name))) continue;
            std::vector<std::string_view> names(mesh_axes.begin(), mesh_axes.end());
            auto& d = diags.emit(DiagCode::E0409, a.axis.span,
                                 fmt::format("no mesh of the program has an axis `{}`", a.axis.name));
            if (auto best = closest_name(a.axis.name, names)) d.note(fmt::format("did you mean `{}`?", *best));
            ok = false;
        }
        std::map<std::string, double> bounds;
        for (const ast::EffectAxis& a : decl.axes) {
            if (!a.bound) continue;
            std::string unknown;
            std::optional<double> v = evaluate(*a.bound, module, f, unknown);
            if (!v) {
                diags.emit(DiagCode::E0409, a.bound->span,
                           fmt::format("the bound names `{}`, which is not a size of `{}`", unknown, item->name.name))
                    .note("a bound is an expression of the function's size variables and mesh axis sizes (`M.data`), "
                          "in bytes per device");
                ok = false;
                break;
            }
            bounds[std::string(a.axis.name)] = *v;
        }
        if (!ok) {
            bad_declaration.insert(item);
            continue;
        }
        std::set<std::string> allowed;
        for (const ast::EffectAxis& a : decl.axes) allowed.insert(std::string(a.axis.name));
        const bool backward_fn = !f.derived.empty();
        // Bytes so far per axis, forward and backward counted apart (each within the bound).
        std::map<std::pair<std::string, bool>, double> sent;
        // What has counted toward each bound so far (bytes, op), for the error's notes.
        struct Toward {
            double bytes;
            const ir::Op* op;
            Span call;  // the outermost call on the way (invalid: the op is the function's own)
        };
        std::map<std::pair<std::string, bool>, std::vector<Toward>> toward;
        std::vector<Span> calls;
        bool exact = true;
        walk(module, f, 1, calls, exact,
             [&](const ir::Function& where, const ir::Op& op, const Traffic& t, double times,
                 const std::vector<Span>& chain) {
                 bool backward = op.backward;
                 for (const std::string& axis : t.axes) {
                     std::string problem;
                     if (!allowed.count(axis)) {
                         problem = fmt::format("this {} communicates over `{}`, and `{}` is declared `{}`",
                                               ir::op_name(op.kind), axis, item->name.name, declared_text(sources, decl));
                     } else if (auto b = bounds.find(axis); b != bounds.end()) {
                         double& so_far = sent[{axis, backward}];
                         double before = so_far;
                         so_far += t.bytes * times;
                         toward[{axis, backward}].push_back({t.bytes * times, &op, chain.empty() ? Span{} : chain.front()});
                         if (so_far > b->second && before <= b->second) {
                             problem = fmt::format(
                                 "with this {} each device sends {} bytes over `{}` per call of `{}`{}, past the {} "
                                 "bytes of its declared `{}`",
                                 ir::op_name(op.kind), effect_bytes_text(so_far), axis, item->name.name,
                                 backward ? " in its backward pass" : "", effect_bytes_text(b->second),
                                 declared_text(sources, decl));
                         }
                     }
                     // Once per axis (and per pass for a bound: forward and backward each have it).
                     std::string key = allowed.count(axis) ? axis + (backward ? "/backward" : "/forward") : axis;
                     if (problem.empty() || !reported.insert({item, key}).second) continue;
                     Span at = op.span.valid() ? op.span : where.span;
                     auto& d = diags.emit(DiagCode::E0408, at, problem);
                     if (backward || backward_fn) {
                         d.note(fmt::format("in the backward pass of `{}` that autodiff derives ({}): the declaration "
                                            "covers it too",
                                            item->name.name, backward ? "the transpose of a forward op here"
                                                                      : "its forward part"));
                     }
                     for (Span s : op.call_path) d.note("through the call here (inlined by autodiff)", s);
                     for (auto it = chain.rbegin(); it != chain.rend(); ++it) d.note("called from here", *it);
                     if (op.inserted && !op.reason.empty()) d.note(fmt::format("inserted: {}", op.reason));
                     // A total crossed its bound here; the largest earlier sends are as much
                     // the cause (the op that crosses need not be the one an edit added).
                     if (auto tw = toward.find({axis, backward}); allowed.count(axis) && tw != toward.end()) {
                         std::vector<Toward> before_this(tw->second.begin(), tw->second.end() - 1);
                         std::stable_sort(before_this.begin(), before_this.end(),
                                          [](const Toward& a, const Toward& b) { return a.bytes > b.bytes; });
                         for (size_t k = 0; k < before_this.size() && k < 3; ++k) {
                             const Toward& w = before_this[k];
                             Span at = w.call.valid() ? w.call : w.op->span;
                             if (!at.valid()) continue;
                             d.note(fmt::format("{} bytes of the total are an earlier {}{}", effect_bytes_text(w.bytes),
                                                ir::op_name(w.op->kind), w.call.valid() ? ", in the call here" : ", here"),
                                    at);
                         }
                     }
                     d.note(fmt::format("`{}` declares its effect here", item->name.name), decl.span);
                 }
             });
    }
    check_inlined(sources, program, module, diags, reported, bad_declaration);
}

namespace {

/// The function item whose text holds `span` (an op autodiff inlined from a callee).
/// Function items by file and start, for item_holding (items do not nest).
using ItemIndex = std::map<std::pair<FileId, uint32_t>, const ast::Item*>;

ItemIndex index_items(const Program& program) {
    ItemIndex out;
    for (const auto& m : program.modules) {
        for (const ast::Item* item : m->items) {
            if (item->kind == ast::ItemKind::Fn) out[{m->file, item->span.begin}] = item;
        }
    }
    return out;
}

const ast::Item* item_holding(const ItemIndex& index, Span span) {
    if (!span.valid()) return nullptr;
    auto it = index.upper_bound({span.file, span.begin});
    if (it == index.begin()) return nullptr;
    --it;
    const ast::Item* item = it->second;
    if (it->first.first != span.file || span.end > item->span.end) return nullptr;
    return item;
}

/// The op that made `v`'s pending sum: back through the ops that only carry it (element-
/// wise, reshapes, broadcasts) to the contraction or reduction that left it; the maker of
/// `v` itself when `v` is not partial.
const ir::Op* pending_origin(const ir::Function& f, const std::map<ir::ValueId, const ir::Op*>& made_by, ir::ValueId v) {
    auto it = made_by.find(v);
    if (it == made_by.end()) return nullptr;
    const ir::Op* op = it->second;
    for (int steps = 0; steps < 10000; ++steps) {
        if (v >= f.types.size() || f.types[v].layout.partial == 0) return op;
        if (op->kind == OpKind::Contract || op->kind == OpKind::Reduce || op->kind == OpKind::MakePartial ||
            op->kind == OpKind::Embedding) {
            return op;
        }
        // A carrier: follow the operand with the same pending sum.
        ir::ValueId next = ir::kNoValue;
        for (ir::ValueId o : op->operands) {
            if (o < f.types.size() && (f.types[o].layout.partial & f.types[v].layout.partial)) {
                next = o;
                break;
            }
        }
        auto m = next == ir::kNoValue ? made_by.end() : made_by.find(next);
        if (m == made_by.end()) return op;
        v = next;
        op = m->second;
    }
    return op;
}

/// The backward pass of a layer autodiff inlined into a derived function: its collectives
/// are the layer's, so they are checked against the layer's declared axes (Megatron's
/// column-parallel layer, local forward, an all_reduce of dx in its backward).
void check_inlined(const SourceManager& sources, const Program& program, const ir::Module& module,
                   DiagnosticEngine& diags, std::set<std::pair<const ast::Item*, std::string>>& reported,
                   const std::set<const ast::Item*>& bad_declaration) {
    ItemIndex index = index_items(program);
    auto items = items_by_name(program);
    for (const ir::Function& f : module.functions) {
        if (f.has_errors || f.derived.empty()) continue;
        // Where each value is made: a gradient's pending sum is completed at the end of the
        // derived function (its all_reduce is placed at the `grad` call), but the layer
        // whose backward made it partial owns that communication.
        std::map<ir::ValueId, const ir::Op*> made_by;
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            for (ir::ValueId r : op.results) made_by[r] = &op;
        });
        // Bytes sent so far by each inlined call's backward pass, per axis.
        std::map<std::tuple<const ast::Item*, uint32_t, std::string>, double> sent;
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            auto traffic = traffic_of(module, f, op);
            if (!traffic) return;
            const ast::Item* owner = nullptr;
            const ir::Op* at = &op;
            // An inserted backward collective is the transpose of a coercion, which may be
            // its caller's (at a call site) though autodiff places it at the value it
            // differentiates: it is charged to the layer whose backward op made its operand.
            std::vector<const ir::Op*> candidates;
            if (!op.backward || !op.inserted) candidates.push_back(&op);
            // (Backward collectives only: a forward coercion at a call site is the caller's.)
            if (op.backward && !op.operands.empty()) {
                if (const ir::Op* origin = pending_origin(f, made_by, op.operands[0]); origin && origin->backward) {
                    candidates.push_back(origin);
                }
            }
            for (const ir::Op* c : candidates) {
                if (c->call_path.empty()) continue;  // not inlined from a callee
                const ast::Item* o = item_holding(index, c->span);
                if (o && o->effect.declared && !bad_declaration.count(o)) {
                    owner = o;
                    at = c;
                    break;
                }
            }
            // Else an inserted backward collective made while differentiating a layer's op
            // (its inlined call's): the sum it completes may have several makers (a
            // residual stream's cotangent joins a layer's dx), but the layer's backward
            // pass is where it runs.
            if (!owner && op.backward && op.inserted && op.inlined_callee >= 0 &&
                static_cast<size_t>(op.inlined_callee) < module.functions.size()) {
                const ast::Item* o = item_of(items, module.functions[static_cast<size_t>(op.inlined_callee)]);
                if (o && o->effect.declared && !bad_declaration.count(o)) owner = o;
            }
            if (!owner) return;
            std::set<std::string> allowed;
            for (const ast::EffectAxis& a : owner->effect.axes) allowed.insert(std::string(a.axis.name));
            // The layer's backward pass, call by call, within its declared bounds (its
            // forward pass is its own instance's, checked there).
            if (op.backward && at->inlined_callee >= 0 && static_cast<size_t>(at->inlined_callee) < module.functions.size()) {
                const ir::Function& callee = module.functions[static_cast<size_t>(at->inlined_callee)];
                for (const ast::EffectAxis& a : owner->effect.axes) {
                    if (!a.bound || std::find(traffic->axes.begin(), traffic->axes.end(), std::string(a.axis.name)) ==
                                        traffic->axes.end()) {
                        continue;
                    }
                    std::string unknown;
                    std::optional<double> bound = evaluate(*a.bound, module, callee, unknown);
                    if (!bound) continue;  // E0409 at the declaration, from the callee's own check
                    std::string axis(a.axis.name);
                    double& so_far = sent[{owner, at->inlined_call, axis}];
                    double before = so_far;
                    so_far += traffic->bytes;
                    if (so_far <= *bound || before > *bound || !reported.insert({owner, axis + "/backward"}).second) continue;
                    auto& d = diags.emit(
                        DiagCode::E0408, at->span,
                        fmt::format("{} each device sends {} bytes over `{}` per call of `{}` in its backward pass, past "
                                    "the {} bytes of its declared `{}`",
                                    at == &op ? fmt::format("with this {}", ir::op_name(op.kind))
                                              : fmt::format("the backward pass of this op needs {}: with it",
                                                            with_article(op.kind)),
                                    effect_bytes_text(so_far), axis, owner->name.name, effect_bytes_text(*bound),
                                    std::string(sources.text(owner->effect.span))));
                    d.note(fmt::format("in the backward pass of `{}`, which autodiff inlined into `{}`: the declaration "
                                       "covers it too",
                                       owner->name.name, ir::function_label(f)));
                    if (at != &op) d.note(fmt::format("the {} is here", ir::op_name(op.kind)), op.span);
                    for (auto it = at->call_path.rbegin(); it != at->call_path.rend(); ++it) d.note("called from here", *it);
                    if (op.inserted && !op.reason.empty()) d.note(fmt::format("inserted: {}", op.reason));
                    d.note(fmt::format("`{}` declares its effect here", owner->name.name), owner->effect.span);
                }
            }
            for (const std::string& axis : traffic->axes) {
                if (allowed.count(axis) || !reported.insert({owner, axis}).second) continue;
                std::string what = at == &op ? fmt::format("this {} communicates", ir::op_name(op.kind))
                                             : fmt::format("the {} pass of this op needs {} over `{}`",
                                                           op.backward ? "backward" : "forward",
                                                           with_article(op.kind), axis);
                auto& d = diags.emit(DiagCode::E0408, at->span,
                                     at == &op ? fmt::format("{} over `{}`, and `{}` is declared `{}`", what, axis,
                                                             owner->name.name,
                                                             std::string(sources.text(owner->effect.span)))
                                               : fmt::format("{}, and `{}` is declared `{}`", what, owner->name.name,
                                                             std::string(sources.text(owner->effect.span))));
                d.note(fmt::format("in {} pass of `{}`, which autodiff inlined into `{}`",
                                   op.backward || at->backward ? "the backward" : "the forward", owner->name.name,
                                   ir::function_label(f)));
                if (at != &op) d.note(fmt::format("the {} is here", ir::op_name(op.kind)), op.span);
                for (auto it = at->call_path.rbegin(); it != at->call_path.rend(); ++it) d.note("called from here", *it);
                if (op.inserted && !op.reason.empty()) d.note(fmt::format("inserted: {}", op.reason));
                d.note(fmt::format("`{}` declares its effect here", owner->name.name), owner->effect.span);
            }
        });
    }
}

}  // namespace

void print_effects(std::ostream& out, const SourceManager& sources, const Program& program, const ir::Module& module,
                   bool json) {
    auto items = items_by_name(program);
    std::vector<CommEffect> effects = infer_effects(module);
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < module.functions.size(); ++i) {
        const ir::Function& f = module.functions[i];
        const ast::Item* item = item_of(items, f);
        std::string declared = item && item->effect.declared ? declared_text(sources, item->effect) : "";
        if (json) {
            nlohmann::json axes = nlohmann::json::object();
            for (const auto& [axis, bytes] : effects[i].bytes) axes[axis] = bytes;
            list.push_back({{"function", ir::function_label(f)},
                            {"name", f.name},
                            {"derived", f.derived.empty() ? nlohmann::json() : nlohmann::json(f.derived)},
                            {"nocomm", effects[i].bytes.empty()},
                            {"bytes_per_axis", axes},
                            {"exact", effects[i].exact},
                            {"declared", declared.empty() ? nlohmann::json() : nlohmann::json(declared)}});
            continue;
        }
        out << fmt::format("fn {}  {}{}{}\n", ir::function_label(f), effect_to_string(effects[i]),
                           effects[i].exact ? "" : "  (a loop of unknown trips counted once)",
                           declared.empty() ? "" : fmt::format("  (declared: {})", declared));
    }
    if (json) out << nlohmann::json{{"effects", list}}.dump(2) << "\n";
}

}  // namespace meshc::sema

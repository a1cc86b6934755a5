// The checker's driver: one instance of each function per binding of its sizes and
// meshes, probes of generic functions nothing instantiates, and infer_program().
#include "sema/check/context.h"
#include "sema/explain.h"

#include <algorithm>
#include <optional>

namespace meshc::sema::check {

ir::Module Inferer::run() {
    module_.device = options_.device;
    for (size_t m = 0; m < program_.modules.size(); ++m) {
        for (const Item* item : program_.modules[m]->items) {
            if (item->kind == ItemKind::Mesh) {
                mesh_items_[item] = static_cast<int32_t>(module_.meshes.size());
                module_.meshes.push_back(mesh_from_item(*item));
            }
            if (item->kind == ItemKind::Fn || item->kind == ItemKind::Struct) item_module_[item] = m;
        }
    }
    const Module& root = *program_.modules[0];
    for (const Item* item : root.items) {
        if (item->kind != ItemKind::Fn) continue;
        if (item->name.name == "main" || !has_size_variables(*item, root)) {
            instantiate(*item, 0, Binding{}, item->name.span);
        }
    }
    if (options_.plan_search > 0) search_plans();
    for (const Item* item : root.items) {
        if (item->kind == ItemKind::Fn && !instantiated(*item) && !probed_.count(item)) probe(*item);
    }
    return std::move(module_);
}

bool Inferer::instantiated(const Item& fn) const {
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
void Inferer::probe(const Item& fn) {
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
    for (const GenericParam& g : fn.generics) {
        if (is_dtype_param(fn, g.name.name)) {
            b.dtypes[g.name.name] = DType::F32;  // a `T: Float` is probed as f32
            continue;
        }
        if (!is_mesh_param(fn, g.name.name) && !is_params_param(fn, g.name.name) && !b.sizes.count(g.name.name)) {
            if (next >= std::size(kFactors)) return;
            b.sizes[g.name.name] = base * kFactors[next++];
        }
    }
    for_each_signature_part(
        fn,
        [&](const Dim& d) {
            DType keyword;
            if (d.kind == DimKind::Var && !b.sizes.count(d.name.name) && !is_mesh_param(fn, d.name.name) &&
                !is_params_param(fn, d.name.name) && !is_dtype_param(fn, d.name.name) && !dtype_from_name(d.name.name, keyword)) {
                if (next >= std::size(kFactors)) {
                    ok = false;
                    return;
                }
                b.sizes[d.name.name] = base * kFactors[next++];
            }
            if (d.kind == DimKind::Axis) axes_used.insert(d.axis.name);
        },
        [&](const Type& t) {
            if (t.layout) {
                for (const LayoutEntry& e : t.layout->entries) {
                    for (const Ident& a : e.axes) axes_used.insert(a.name);
                }
            }
            if (t.partial) {
                for (const Ident& a : *t.partial) axes_used.insert(a.name);
            }
        });
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
    // A `P: Params` parameter stands for a pair: a matrix split over the first axis of a
    // mesh, and a scalar. Code that treats P as anything but a tree of float tensors
    // (a field access, a matmul, a destructuring) fails on it, as it would on a struct.
    for (const GenericParam& g : fn.generics) {
        if (!is_params_param(fn, g.name.name)) continue;
        if (next + 2 > std::size(kFactors)) return;
        AggType pair;
        pair.kind = AggType::Tuple;
        AggType matrix;
        matrix.tensor.dtype = DType::F32;
        matrix.tensor.shape = {base * kFactors[next], base * kFactors[next + 1]};
        next += 2;
        matrix.tensor.layout = Layout::replicated(2);
        int32_t mesh = b.meshes.empty() ? (module_.meshes.empty() ? -1 : 0) : b.meshes.begin()->second;
        matrix.tensor.mesh = mesh;
        if (mesh >= 0 && !module_.meshes[static_cast<size_t>(mesh)].axes.empty()) matrix.tensor.layout.dims[0] = {0};
        AggType scalar;
        scalar.tensor.dtype = DType::F32;
        scalar.tensor.mesh = mesh;
        pair.elems = {matrix, scalar};
        b.type_keys[g.name.name] = "probe";
        b.type_names[g.name.name] = "a pair (a split matrix, a scalar)";
        b.types[g.name.name] = std::make_shared<const AggType>(std::move(pair));
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
    size_t args_before = module_.args.size();  // a probe's `arg`s are not the program's
    auto instances_before = instances_;
    ++probing_;
    instantiate(fn, 0, b, fn.name.span);
    --probing_;
    diags_ = real;
    module_.functions.resize(functions_before);
    module_.args.resize(args_before);
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

// An error inside a called function that depends on the call (the callee is generic and
// this instance has its own sizes or meshes) or that lies in another file (the stdlib, a
// module) keeps its place, the faulty expression, and gains a note at the call that
// instantiated it: "in `h` (called with K = 6), instantiated here". Applied at each level
// of a call chain, the notes lead outwards from the error to the user's outermost call,
// as clang's and rustc's instantiation notes do. (The language server shows an error in
// another file at the outermost of those calls in the file being edited.)
void Inferer::point_at_call(const Item& fn, const Binding& binding, Span call_site, size_t first) {
    if (!call_site.valid() || (call_site.file == fn.name.span.file && call_site.begin == fn.name.span.begin)) return;
    bool depends = !binding.sizes.empty() || !binding.meshes.empty();
    std::string with = binding.describe();
    for (const auto& [n, m] : binding.meshes) {
        with += fmt::format("{}{} = {}", with.empty() ? "" : ", ", n, module_.meshes[static_cast<size_t>(m)].name);
    }
    auto within = [&](Span span) { return span.file == fn.span.file && span.begin >= fn.span.begin && span.end <= fn.span.end; };
    for (size_t i = first; i < diags_->diagnostics().size(); ++i) {
        Diagnostic& d = diags_->diagnostic(i);
        // Its place is in this function, or it came up through a call made here.
        const DiagNote* last = nullptr;
        for (const DiagNote& n : d.notes) {
            if (n.instantiation) last = &n;
        }
        bool inside = last ? within(last->span) : within(d.span);
        if (!inside) continue;
        if (!depends && !last && call_site.file == d.span.file) continue;  // found once, in the body
        d.notes.push_back(DiagNote{call_site,
                                   fmt::format("in `{}`{}, instantiated here", fn.name.name,
                                               with.empty() ? "" : fmt::format(" (called with {})", with)),
                                   true});
    }
}

bool Inferer::is_params_param(const Item& fn, std::string_view name) {
    for (const GenericParam& g : fn.generics) {
        if (g.name.name == name && g.kind && g.kind->name == "Params") return true;
    }
    return false;
}

bool Inferer::is_dtype_param(const Item& fn, std::string_view name) {
    for (const GenericParam& g : fn.generics) {
        if (g.name.name == name && g.kind && g.kind->name == "Float") return true;
    }
    return false;
}

bool Inferer::is_mesh_param(const Item& fn, std::string_view name) {
    for (const GenericParam& g : fn.generics) {
        if (g.name.name == name && g.kind && g.kind->name == "Mesh") return true;
    }
    return false;
}

// Returns the function index of `fn` instantiated with `binding`, or -1 after errors.
int32_t Inferer::instantiate(const Item& fn, size_t module_index, Binding binding, Span call_site) {
    std::string key = fmt::format("{}#{}", static_cast<const void*>(&fn), binding.key());
    if (auto it = instances_.find(key); it != instances_.end()) {
        return failed_.count(it->second) ? -1 : it->second;  // a failed instance: its errors were reported
    }
    if (active_.count(&fn)) return -1;  // recursion: reported by name resolution
    if (options_.skip && options_.skip->count(&fn)) return -1;  // its errors were reported
    if (active_.size() >= kMaxCallDepth) {
        // Each level of a call chain is a level of the checker's recursion (and of
        // autodiff's inlining): a bounded depth instead of a stack overflow.
        diags_->emit(DiagCode::E0107, call_site,
                     fmt::format("calls nested more than {} deep: `{}` is called at depth {}", kMaxCallDepth,
                                 fn.name.name, active_.size() + 1))
            .note("split the chain, or call the functions one after another from a shallower one");
        return -1;
    }
    if (probing_) {
        // Checked with sizes that are all distinct, as its own probe would choose: covered.
        std::set<int64_t> values;
        for (const auto& [n, v] : binding.sizes) values.insert(v);
        if (values.size() == binding.sizes.size()) probed_.insert(&fn);
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
    for (const auto& [n, t] : binding.dtypes) f.dtype_instance[std::string(n)] = std::string(dtype_name(t));
    size_t diagnostics_before = diags_->diagnostics().size();
    std::vector<ChoicePoint> log;
    bool ok = lower_instance(fn, module_index, binding, f, log, diagnostics_before);
    if (ok && !probing_) instance_sources_[index] = InstanceSource{&fn, module_index, binding, std::move(log)};
    active_.erase(&fn);
    for (size_t i = diagnostics_before; i < diags_->diagnostics().size() && !f.has_errors; ++i)
        f.has_errors = diags_->diagnostics()[i].severity == Severity::Error;
    module_.functions[index] = std::move(f);
    point_at_call(fn, binding, call_site, diagnostics_before);
    if (!ok) {
        failed_.insert(index);
        return -1;
    }
    return index;
}

bool Inferer::lower_instance(const Item& fn, size_t module_index, const Binding& binding, ir::Function& f,
                             std::vector<ChoicePoint>& log, size_t diagnostics_before) {
    std::vector<ChoicePoint>* outer = choice_log_;
    choice_log_ = &log;
    bool ok = true;
    for (int attempt = 0;; ++attempt) {
        log.clear();
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
                fresh.dtype_instance = f.dtype_instance;
                f = std::move(fresh);
                continue;
            }
        }
        break;
    }
    choice_log_ = outer;
    return ok;
}

// The whole-function plan search. The checker decides a value's plan where the value is
// made, costing what it can see there (the operands' conversions, the type the value is
// wanted in when that is known). A decision that looks cheapest there can cost more
// later: a pending sum completed on a scalar where gathering a small operand first would
// have been cheaper, an operand that leads an element-wise op whose result another op
// wants laid out like the other operand. Each lowering logs its decision points (choose());
// the search then lowers the function again, one point at a time, with each other
// alternative, and keeps a change when the function's collectives (costed like `meshc
// explain`, loops counted by their trip counts) cost strictly less: coordinate descent
// over the decision points, from the local choices, bounded by options_.plan_search
// lowerings and by the ops those lowerings make. A lowering with errors never wins. At the
// end the function is lowered once more with the best alternatives (the lowering is
// deterministic), so its GIR, diagnostics and hints are those of the plan kept.
//
// Functions instantiated for `grad` (and what they call) keep the local choices: their
// backward pass is made later from this GIR, and combine_collectives then merges the
// loss's scalar all_reduce into the gradients' one, so the forward's cost here would
// mislead (on the GPT's ZeRO-3 step the search made the forward cheaper and the whole
// step dearer, 1.380 to 1.413 ms modelled).
void Inferer::search_plans() {
    // The instances `grad` differentiates, and everything they call.
    std::set<int32_t> differentiated;
    std::vector<int32_t> todo;
    for (const ir::Function& g : module_.functions) {
        ir::for_each_op(g.ops, [&](const ir::Op& op) {
            if (op.kind == ir::OpKind::Grad && op.callee >= 0) todo.push_back(op.callee);
        });
    }
    while (!todo.empty()) {
        int32_t i = todo.back();
        todo.pop_back();
        if (i < 0 || static_cast<size_t>(i) >= module_.functions.size() || !differentiated.insert(i).second) continue;
        ir::for_each_op(module_.functions[static_cast<size_t>(i)].ops, [&](const ir::Op& op) {
            if ((op.kind == ir::OpKind::Call || op.kind == ir::OpKind::Grad) && op.callee >= 0) todo.push_back(op.callee);
        });
    }
    for (auto& [index, source] : instance_sources_) {
        if (static_cast<size_t>(index) >= module_.functions.size() || failed_.count(index) || differentiated.count(index)) continue;
        if (module_.functions[static_cast<size_t>(index)].has_errors) continue;
        search_plan(index, source);
    }
}

// The whole-function plan search. The checker decides a value's plan where the value is
// made, costing what it can see there (the operands' conversions, the type the value is
// wanted in when that is known). A decision that looks cheapest there can cost more
// later: a pending sum completed on a scalar where gathering a small operand first would
// have been cheaper, an operand that leads an element-wise op whose result another op
// wants laid out like the other operand. Each lowering logs its decision points (choose());
// once every instance is lowered, the search lowers each one again, one point at a time,
// with each other alternative, and keeps a change when the function's collectives (costed
// like `meshc explain`, loops counted by their trip counts) cost strictly less: coordinate
// descent over the decision points, from the local choices, bounded by
// options_.plan_search lowerings and by the ops those lowerings make. A lowering with
// errors, or one that changes the function's result types (its callers are lowered
// already), never wins. At the end the function is lowered once more with the best
// alternatives (the lowering is deterministic), so its GIR and hints are those of the plan
// kept; the diagnostics of the trials and of that last lowering are dropped (the first
// lowering reported them).
//
// Instances `grad` differentiates (and what they call) keep the local choices: their
// backward pass is made later from this GIR, and combine_collectives then merges the
// loss's scalar all_reduce into the gradients' one, so the forward's cost here would
// mislead (on the GPT's ZeRO-3 step the search made the forward cheaper and the whole
// step dearer, 1.380 to 1.413 ms modelled).
void Inferer::search_plan(int32_t index, InstanceSource& source) {
    const std::vector<ChoicePoint>& log = source.log;
    if (std::none_of(log.begin(), log.end(), [](const ChoicePoint& c) { return c.count > 1; })) return;
    // (A trial may instantiate a callee, which grows module_.functions: no reference into
    // it is held across a lowering.)
    const ir::Function& f = module_.functions[static_cast<size_t>(index)];
    ir::Function head;
    head.name = f.name;
    head.span = f.span;
    head.instance = f.instance;
    head.mesh_instance = f.mesh_instance;
    head.dtype_instance = f.dtype_instance;
    const size_t diagnostics_before = diags_->diagnostics().size();
    auto clean = [&] {
        for (size_t i = diagnostics_before; i < diags_->diagnostics().size(); ++i) {
            if (diags_->diagnostics()[i].severity == Severity::Error) return false;
        }
        return true;
    };
    size_t ops = 0;
    ir::for_each_op(f.ops, [&](const ir::Op&) { ++ops; });
    // A lowering of a big function costs in proportion to its ops: at most about 20,000
    // ops lowered by the search per instance.
    int budget = static_cast<int>(
        std::min<size_t>(static_cast<size_t>(options_.plan_search), 20000 / std::max<size_t>(1, ops)));
    auto cost_of = [&](const ir::Function& g) { return function_totals(module_, g).cost_seconds(); };
    auto result_types = [](const ir::Function& g) {
        std::vector<ir::TensorType> out;
        for (ir::ValueId v : g.results) out.push_back(g.types[v]);
        return out;
    };
    const std::vector<ir::TensorType> results = result_types(f);
    auto fresh = [&] { return head; };
    double best = cost_of(f);
    std::vector<ChoicePoint> points = log;
    auto saved_gather = gather_hints_;
    auto saved_var = var_hints_;
    bool changed = false;
    // One trial: the hints `moves` added to the kept ones, the function lowered again.
    // Returns its cost (infinity when it failed), leaving its log and hints in `last_*`.
    std::vector<ChoicePoint> last_log;
    // The search also stops after kFutile trials in a row that found nothing cheaper (on a
    // long function whose local plan is already the best, the budget would otherwise go
    // on re-lowering all of it).
    constexpr int kFutile = 12;
    int futile = 0;
    auto trial_cost = [&](const std::vector<std::pair<ChoiceKey, int>>& moves) {
        --budget;
        if (++futile >= kFutile) budget = 0;
        for (const auto& [key, alt] : moves) plan_hints_[key] = alt;
        ir::Function trial = fresh();
        last_log.clear();
        // A trial may instantiate a callee anew (a `with _` parameter given another
        // layout): those instances are dropped after it, so that a rejected trial leaves
        // no function behind (one with errors whose diagnostics are gone, say); the final
        // lowering of the kept plan instantiates them again.
        const size_t functions_before = module_.functions.size();
        auto instances_before = instances_;
        auto failed_before = failed_;
        active_.insert(source.fn);
        bool ok = lower_instance(*source.fn, source.module_index, source.binding, trial, last_log,
                                 diagnostics_before) &&
                  clean() && result_types(trial) == results &&
                  ir::verify_function(module_, trial).empty();  // a rule's gap never becomes the plan
        active_.erase(source.fn);
        diags_->truncate(diagnostics_before);
        double cost = ok ? cost_of(trial) : std::numeric_limits<double>::infinity();
        module_.functions.resize(functions_before);
        instances_ = std::move(instances_before);
        failed_ = std::move(failed_before);
        instance_sources_.erase(instance_sources_.lower_bound(static_cast<int32_t>(functions_before)),
                                instance_sources_.end());
        return cost;
    };
    auto cheaper = [&](double cost) { return cost < best * (1 - 1e-9) - 1e-15; };
    // Undo a trial's hints (back to the kept ones).
    auto undo = [&](const std::vector<std::pair<ChoiceKey, int>>& moves,
                    const std::vector<std::optional<int>>& previous) {
        for (size_t k = 0; k < moves.size(); ++k) {
            if (previous[k]) {
                plan_hints_[moves[k].first] = *previous[k];
            } else {
                plan_hints_.erase(moves[k].first);
            }
        }
        gather_hints_ = saved_gather;
        var_hints_ = saved_var;
    };
    auto previous_of = [&](const std::vector<std::pair<ChoiceKey, int>>& moves) {
        std::vector<std::optional<int>> out;
        for (const auto& m : moves) {
            auto it = plan_hints_.find(m.first);
            out.push_back(it == plan_hints_.end() ? std::nullopt : std::optional<int>(it->second));
        }
        return out;
    };
    auto distinct_points = [&] {
        std::vector<ChoicePoint> out;  // a point met again (a span lowered twice) is decided once
        std::set<ChoiceKey> seen;
        for (const ChoicePoint& c : points) {
            if (c.count > 1 && seen.insert(c.key).second) out.push_back(c);
        }
        return out;
    };
    // Passes over the decision points until one changes nothing: at each point every other
    // alternative is tried and the cheapest kept. (Pairs of points changed together were
    // tried too: on the plan-optimality programs they found nothing more, at many more
    // lowerings.)
    while (budget > 0 && best > 0) {
        bool improved = false;
        std::vector<ChoicePoint> pass = distinct_points();
        for (const ChoicePoint& planned : pass) {
            if (budget <= 0) break;
            // The point as the kept plan now has it (an earlier change may have removed it).
            auto now = std::find_if(points.begin(), points.end(),
                                    [&](const ChoicePoint& c) { return c.key == planned.key; });
            if (now == points.end() || now->count <= 1) continue;
            const ChoicePoint point = *now;
            std::optional<std::pair<int, double>> found;
            std::vector<ChoicePoint> found_log;
            auto found_gather = saved_gather;
            auto found_var = saved_var;
            for (int alt = 0; alt < point.count && budget > 0; ++alt) {
                if (alt == point.chosen) continue;
                std::vector<std::pair<ChoiceKey, int>> moves{{point.key, alt}};
                auto previous = previous_of(moves);
                double cost = trial_cost(moves);
                if (cheaper(cost) && (!found || cost < found->second)) {
                    found = std::pair{alt, cost};
                    found_log = last_log;
                    found_gather = gather_hints_;
                    found_var = var_hints_;
                }
                undo(moves, previous);
            }
            if (found) {
                futile = 0;
                plan_hints_[point.key] = found->first;
                best = found->second;
                points = std::move(found_log);
                saved_gather = gather_hints_ = std::move(found_gather);
                saved_var = var_hints_ = std::move(found_var);
                improved = changed = true;
            }
        }
        if (!improved) break;
    }
    if (!changed) return;
    // The plan kept, lowered again (deterministic: the same GIR as its trial).
    ir::Function kept = fresh();
    std::vector<ChoicePoint> kept_log;
    active_.insert(source.fn);
    bool ok = lower_instance(*source.fn, source.module_index, source.binding, kept, kept_log, diagnostics_before) && clean();
    active_.erase(source.fn);
    diags_->truncate(diagnostics_before);
    if (!ok) return;
    kept.has_errors = false;
    module_.functions[static_cast<size_t>(index)] = std::move(kept);
    source.log = std::move(kept_log);
}

int FunctionBuilder::choose(Span span, int tag, int count) {
    if (count <= 1 || dry_cost_ || !in_.choice_log_) return 0;
    Inferer::ChoiceKey key{ir::function_label(f_), key_of(span), tag};
    int pick = 0;
    if (auto it = in_.plan_hints_.find(key); it != in_.plan_hints_.end() && it->second < count) pick = it->second;
    in_.choice_log_->push_back({std::move(key), count, pick});
    return pick;
}

}  // namespace meshc::sema::check

namespace meshc::sema {

ir::Module infer_program(const SourceManager& sources, const Program& program,
                         DiagnosticEngine& diags, const InferOptions& options) {
    return check::Inferer(sources, program, diags, options).run();
}

}  // namespace meshc::sema

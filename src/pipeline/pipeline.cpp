// The pass list and its runner; see pipeline.h.
#include "pipeline/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "ir/gir_parse.h"
#include "sema/effects.h"
#include "sema/infer.h"
#include "sema/lint.h"
#include "sema/rebind.h"
#include "sema/refine.h"
#include "sema/resolve.h"
#include "syntax/ast_printer.h"
#include "transform/autodiff.h"
#include "transform/combine_collectives.h"

namespace meshc::pipeline {

std::string_view form_name(Form form) {
    switch (form) {
    case Form::Source: return "source";
    case Form::Ast: return "ast";
    case Form::Gir: return "gir";
    case Form::Local: return "local";
    }
    return "?";
}

const std::vector<PassInfo>& passes() {
    static const std::vector<PassInfo> list{
        {"parse", Form::Source, Form::Ast, "reads the source file and every module it imports into syntax trees"},
        {"rebind", Form::Ast, Form::Ast, "`--mesh NAME=axis:size,...`: gives the named meshes new sizes"},
        {"resolve", Form::Ast, Form::Ast, "resolves names, imports and generic mesh axes"},
        {"refine", Form::Ast, Form::Ast, "proves the divisibility refinements of generic functions (Z3)"},
        {"infer", Form::Ast, Form::Gir,
         "infers types, shapes and layouts and inserts the collectives: the typed global IR"},
        {"autodiff", Form::Gir, Form::Gir, "turns every `grad` and `value_and_grad` into forward and backward functions"},
        {"combine-collectives", Form::Gir, Form::Gir,
         "combines the gradient all_reduces of a backward pass that run over the same axes"},
        {"effects", Form::Gir, Form::Gir,
         "checks the declared communication effects (`! nocomm`, `! comm(...)`) of each function and its backward pass"},
        {"lint", Form::Gir, Form::Gir, "the cost model's warnings (W0001...) and the --memory budget (E0709)"},
        {"partition", Form::Gir, Form::Local,
         "SPMD partitioning: every value's per-device shape, every collective's device group"},
    };
    return list;
}

const PassInfo* find_pass(std::string_view name) {
    for (const PassInfo& p : passes()) {
        if (p.name == name) return &p;
    }
    return nullptr;
}

std::string pass_names() {
    std::string out;
    for (const PassInfo& p : passes()) {
        if (!out.empty()) out += ", ";
        out += p.name;
    }
    return out;
}

void print_ir(std::ostream& out, const State& state) {
    switch (state.form) {
    case Form::Source: break;
    case Form::Ast:
        if (state.program) {
            for (const auto& module : state.program->modules) syntax::print_ast(out, state.sources, *module);
        }
        break;
    case Form::Gir:
        if (state.gir) ir::print_module(out, state.sources, *state.gir);
        break;
    case Form::Local:
        if (state.local) spmd::print(out, *state.local);
        break;
    }
}

namespace {

/// True when every error so far lies inside a function item (collected in `out`): the
/// other functions can still be checked.
bool functions_with_errors(const sema::Program& program, const DiagnosticEngine& diags, std::set<const ast::Item*>& out) {
    for (const Diagnostic& d : diags.diagnostics()) {
        if (d.severity != Severity::Error) continue;
        const ast::Item* found = nullptr;
        for (const auto& module : program.modules) {
            if (module->file != d.span.file) continue;
            for (const ast::Item* item : module->items) {
                if (item->kind == ast::ItemKind::Fn && item->span.begin <= d.span.begin && d.span.end <= item->span.end) {
                    found = item;
                }
            }
        }
        if (!found) return false;
        out.insert(found);
    }
    return true;
}

/// Whether the passes after a front-end pass run: no errors, or (keep_going) errors only
/// inside functions.
bool front_ok(State& s, const Options& o) {
    if (!s.diags.has_errors()) return true;
    return o.keep_going && functions_with_errors(*s.program, s.diags, s.with_errors);
}

bool has_grad(const ir::Module& m) {
    for (const ir::Function& f : m.functions) {
        bool found = false;
        ir::for_each_op(f.ops, [&](const ir::Op& op) { found = found || op.kind == ir::OpKind::Grad; });
        if (found) return true;
    }
    return false;
}

bool verified(State& s, const std::string& who) {
    std::vector<std::string> problems =
        s.form == Form::Local ? spmd::verify(*s.local) : s.form == Form::Gir ? ir::verify_module(*s.gir) : std::vector<std::string>{};
    if (problems.empty()) return true;
    s.internal_error = who == "infer"       ? "the checker produced invalid GIR"
                       : who == "partition" ? "SPMD partitioning produced invalid local IR"
                                            : fmt::format("`{}` produced invalid {}", who, s.form == Form::Local ? "local IR" : "GIR");
    s.problems = std::move(problems);
    return false;
}

/// Runs one pass; false when the run stops after it.
bool run_pass(State& s, const Options& o, const PassInfo& pass) {
    const std::string_view name = pass.name;
    if (name == "parse") {
        s.program = std::make_unique<sema::Program>(sema::load_program(s.sources, s.diags, s.path, o.load));
        s.gir.reset();
        s.local.reset();
        s.form = Form::Ast;
        return !s.program->modules.empty();
    }
    if (name == "rebind") {
        if (o.meshes.empty() && o.links.empty()) return true;
        sema::rebind_meshes(*s.program, o.meshes, s.diags);
        sema::rebind_links(*s.program, o.links, s.diags);
        return !s.diags.has_errors();
    }
    if (name == "resolve") {
        sema::resolve_program(s.sources, *s.program, s.diags, o.names);
        return front_ok(s, o);
    }
    if (name == "refine") {
        sema::check_refinements(s.sources, *s.program, s.diags, o.keep_going ? &s.with_errors : nullptr, o.solver_budget_ms);
        return front_ok(s, o);
    }
    if (name == "infer") {
        sema::InferOptions io;
        io.strict_comm = o.strict_comm;
        io.plan_search = o.plan_search;
        io.device = o.device;
        io.skip = o.keep_going ? &s.with_errors : nullptr;
        s.gir = std::make_unique<ir::Module>(sema::infer_program(s.sources, *s.program, s.diags, io));
        s.form = Form::Gir;
        if (s.diags.has_errors()) {
            if (o.keep_going) {
                // The backward passes of the functions without errors are still derived,
                // for their errors (E0406 under --strict-comm, what cannot be
                // differentiated). The module is then of no further use.
                transform::AutodiffOptions ad;
                ad.strict_comm = o.strict_comm;
                transform::autodiff(*s.gir, s.sources, s.diags, ad);
            }
            return false;
        }
        return !(o.verify || o.verify_each) || verified(s, "infer");
    }
    if (name == "autodiff") {
        if (o.keep_checked && has_grad(*s.gir)) s.checked = std::make_unique<ir::Module>(*s.gir);
        transform::AutodiffOptions ad;
        ad.strict_comm = o.strict_comm;
        transform::autodiff(*s.gir, s.sources, s.diags, ad);
        if (s.diags.has_errors()) return false;
        return !o.verify_each || verified(s, "autodiff");
    }
    if (name == "combine-collectives") {
        transform::combine_collectives(*s.gir);
        return !(o.verify || o.verify_each) || verified(s, "combine-collectives");
    }
    if (name == "effects") {
        sema::check_effects(s.sources, *s.program, *s.gir, s.diags);
        return !s.diags.has_errors();
    }
    if (name == "lint") {
        sema::LintOptions lo;
        lo.memory_budget = o.memory_budget;
        sema::lint_module(s.sources, *s.program, *s.gir, s.diags, lo);
        return !s.diags.has_errors() && (!o.verify_each || verified(s, "lint"));
    }
    if (name == "partition") {
        s.local = std::make_unique<spmd::LocalModule>(spmd::partition(*s.gir));
        s.form = Form::Local;
        return !(o.verify || o.verify_each) || verified(s, "partition");
    }
    return true;
}

/// E0713 where the state cannot feed the pass; true when it can.
bool can_run(State& s, const PassInfo& pass, bool from_gir) {
    std::string why;
    if (pass.in == Form::Source) {
        if (from_gir) why = "it reads the source file, and `meshc opt` starts from GIR";
    } else if (from_gir && pass.in != Form::Gir) {
        why = "it reads the syntax tree, and `meshc opt` starts from GIR";
    } else if (from_gir && (pass.name == "lint" || pass.name == "effects")) {
        why = pass.name == "lint"
                  ? "its warnings need the program's syntax tree as well as its GIR, and `meshc opt` starts from GIR"
                  : "the effects it checks are declared in the program's syntax tree, and `meshc opt` starts from GIR";
    } else if (pass.in != s.form) {
        why = fmt::format("it reads the {} and the pipeline holds the {} here", form_name(pass.in), form_name(s.form));
    }
    if (why.empty()) return true;
    std::string runnable;
    for (const PassInfo& p : passes()) {
        if (p.in == Form::Gir && p.name != "lint" && p.name != "effects") runnable += (runnable.empty() ? "" : ", ") + std::string(p.name);
    }
    s.diags.emit(DiagCode::E0713, {}, fmt::format("pass `{}` cannot run here: {}", pass.name, why))
        .note(fmt::format("the passes that run on GIR text: {}", runnable));
    return false;
}

bool step(State& s, const Options& o, const PassInfo& pass, bool from_gir) {
    if (!can_run(s, pass, from_gir)) return false;
    bool ok = true;
    if (o.around) {
        o.around(pass.name, [&] { ok = run_pass(s, o, pass); });
    } else {
        ok = run_pass(s, o, pass);
    }
    s.last = std::string(pass.name);
    if (s.internal_error.empty() && o.dump && (o.dump_after.count(pass.name) || o.dump_after.count("all"))) {
        *o.dump << fmt::format("// ----- IR after {} ({}) -----\n", pass.name, form_name(s.form));
        print_ir(*o.dump, s);
        o.dump->flush();
    }
    return ok;
}

}  // namespace

bool run(State& state, const Options& options, std::string_view first, std::string_view last) {
    const auto& list = passes();
    auto index = [&](std::string_view n) {
        for (size_t i = 0; i < list.size(); ++i) {
            if (list[i].name == n) return i;
        }
        return list.size();
    };
    size_t from = index(first), to = index(last);
    for (size_t i = from; i <= to && i < list.size(); ++i) {
        if (!step(state, options, list[i], false)) return false;
    }
    return true;
}

bool run_on_gir(State& state, const Options& options, const std::vector<std::string>& names, FileId file) {
    std::optional<ir::Module> module = ir::parse_module(state.sources, file, state.diags);
    if (!module) return false;
    if (std::vector<std::string> problems = ir::verify_module(*module); !problems.empty()) {
        auto& d = state.diags.emit(DiagCode::E0712, Span{file, 0, 0},
                                   fmt::format("the GIR does not verify: {}", problems.front()));
        for (size_t i = 1; i < problems.size() && i < 10; ++i) d.note(problems[i]);
        return false;
    }
    state.gir = std::make_unique<ir::Module>(std::move(*module));
    state.form = Form::Gir;
    for (const std::string& name : names) {
        const PassInfo* pass = find_pass(name);
        if (!pass) {
            state.diags.emit(DiagCode::E0713, {}, fmt::format("there is no pass `{}`", name))
                .note(fmt::format("the passes: {}", pass_names()));
            return false;
        }
        if (!step(state, options, *pass, true)) return false;
    }
    // The result is verified whatever --verify-each says (infer/combine/partition verify
    // always; the others under verify_each).
    return state.internal_error.empty() && verified(state, state.last.empty() ? "the input" : state.last);
}

}  // namespace meshc::pipeline

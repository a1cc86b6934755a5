// evaluate: one candidate program, checked as `meshc check` checks it (load, --mesh
// rebinding, resolve, refinements, inference with the plan search, autodiff, collective
// combining) and costed as `meshc explain` costs it (sema/explain.h).
#include <sstream>

#include <fmt/format.h>

#include "autopar/internal.h"
#include "ir/gir.h"
#include "sema/explain.h"
#include "sema/infer.h"
#include "sema/rebind.h"
#include "sema/refine.h"
#include "sema/resolve.h"
#include "transform/autodiff.h"
#include "transform/combine_collectives.h"

namespace meshc::autopar {

std::map<std::string, std::string> rewrite(const std::vector<Site>& sites, const std::vector<int>& choice,
                                           const std::map<std::string, std::string>& originals) {
    std::map<std::string, std::vector<size_t>> by_file;
    for (size_t i = 0; i < sites.size(); ++i) by_file[sites[i].canonical].push_back(i);
    std::map<std::string, std::string> out;
    for (auto& [path, list] : by_file) {
        auto it = originals.find(path);
        if (it == originals.end()) continue;
        std::string text = it->second;
        // From the end, so that earlier offsets stay valid.
        std::sort(list.begin(), list.end(), [&](size_t a, size_t b) { return sites[a].begin > sites[b].begin; });
        for (size_t i : list) {
            const std::string& layout = sites[i].candidates[static_cast<size_t>(choice[i])];
            text.replace(sites[i].begin, sites[i].end - sites[i].begin, layout);
        }
        out[path] = std::move(text);
    }
    return out;
}

namespace {

std::string share_key(const ir::Function& f) {
    std::string key = f.name + "[";
    for (const auto& [n, v] : f.instance) key += fmt::format("{}={},", n, v);
    for (const auto& [n, m] : f.mesh_instance) key += fmt::format("{}={},", n, m);
    for (const auto& [n, t] : f.dtype_instance) key += fmt::format("{}={},", n, t);
    return key + "]";
}

std::string first_error(const SourceManager& sources, const DiagnosticEngine& diags) {
    std::vector<Diagnostic> errors;
    for (const Diagnostic& d : diags.sorted()) {
        if (d.severity == Severity::Error) {
            errors.push_back(d);
            break;
        }
    }
    std::ostringstream text;
    render_short(text, sources, errors);
    std::string s = text.str();
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

}  // namespace

Evaluation evaluate(const ShardOptions& options, const std::map<std::string, std::string>& overlays, bool verify) {
    Evaluation e;
    SourceManager sources;
    DiagnosticEngine diags;
    std::map<std::string, std::string> all = overlays;
    if (options.overlays) {
        for (const auto& [path, text] : *options.overlays) all.emplace(path, text);
    }
    sema::LoadOptions load{options.stdlib_dir, &all};
    try {
        sema::Program program = sema::load_program(sources, diags, options.path, load);
        if (program.modules.empty() || diags.has_errors()) {
            e.error = first_error(sources, diags);
            return e;
        }
        if (!options.meshes.empty()) sema::rebind_meshes(program, options.meshes, diags);
        if (!diags.has_errors()) sema::resolve_program(sources, program, diags);
        if (!diags.has_errors()) sema::check_refinements(sources, program, diags, nullptr, options.solver_budget_ms);
        if (diags.has_errors()) {
            e.error = first_error(sources, diags);
            return e;
        }
        sema::InferOptions infer;
        infer.strict_comm = options.strict_comm;
        infer.plan_search = options.plan_search;
        infer.device = options.device;
        ir::Module gir = sema::infer_program(sources, program, diags, infer);
        if (diags.has_errors() || (verify && !ir::verify_module(gir).empty())) {
            e.error = diags.has_errors() ? first_error(sources, diags) : "the checker produced invalid GIR";
            return e;
        }
        transform::AutodiffOptions ad;
        ad.strict_comm = options.strict_comm;
        transform::autodiff(gir, sources, diags, ad);
        if (diags.has_errors()) {
            e.error = first_error(sources, diags);
            return e;
        }
        transform::combine_collectives(gir);
        if (verify && !ir::verify_module(gir).empty()) {
            e.error = "autodiff produced invalid GIR";
            return e;
        }
        sema::ProgramFacts facts = sema::analyse_program(gir);
        if (facts.main < 0) {
            e.error = "the program has no `main`: nothing runs, so nothing has a cost";
            return e;
        }
        for (size_t i = 0; i < gir.functions.size(); ++i) {
            if (facts.runs[i] == 0) continue;
            sema::FunctionTotals t = sema::function_totals(gir, gir.functions[i]);
            double share = facts.runs[i] * t.cost_seconds();
            e.cost += share;
            e.compute += facts.runs[i] * t.compute_seconds;
            e.communication += facts.runs[i] * t.seconds;
            e.shares[share_key(gir.functions[i])] += share;
        }
        const sema::MemoryBreakdown& m = facts.peak_parts[static_cast<size_t>(facts.main)];
        e.peak = m.total();
        e.state = m.state;
        e.saved = m.saved;
        e.temporaries = m.temporaries;
        e.ok = true;
    } catch (const InternalError& ie) {
        e.ok = false;
        e.error = "internal compiler error: " + ie.message;
    }
    return e;
}

}  // namespace meshc::autopar

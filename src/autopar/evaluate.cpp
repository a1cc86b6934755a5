// evaluate: one candidate program, checked as `meshc check` checks it (the pass list of
// src/pipeline/ from parse to combine-collectives) and costed as `meshc explain` costs it (sema/explain.h).
#include <sstream>

#include <fmt/format.h>

#include "autopar/internal.h"
#include "ir/gir.h"
#include "pipeline/pipeline.h"
#include "sema/explain.h"

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
    // The driver's pass list (src/pipeline/) up to combine-collectives, stopping at the
    // first error.
    pipeline::Options po;
    po.load = sema::LoadOptions{options.stdlib_dir, &all};
    po.meshes = options.meshes;
    po.strict_comm = options.strict_comm;
    po.plan_search = options.plan_search;
    po.device = options.device;
    po.solver_budget_ms = options.solver_budget_ms;
    po.verify = verify;
    pipeline::State state(sources, diags);
    state.path = options.path;
    try {
        bool parsed = pipeline::run(state, po, "parse", "parse") && !diags.has_errors();
        if (!parsed || !pipeline::run(state, po, "rebind", "combine-collectives")) {
            e.error = !state.internal_error.empty() ? state.internal_error
                      : diags.has_errors()          ? first_error(sources, diags)
                                                    : "the program has no module";
            return e;
        }
        const ir::Module& gir = *state.gir;
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

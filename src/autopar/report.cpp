// `meshc shard`'s reports of a solve: text for people, JSON for tools.
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autopar/shard.h"

namespace meshc::autopar {

namespace {

std::string time_text(double s) {
    if (s >= 1) return fmt::format("{:.3f} s", s);
    if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.3f} us", s * 1e6);
}

std::string location(const SourceManager& sources, const Site& s) {
    LineCol lc = sources.line_col(s.file, s.begin);
    return fmt::format("{}:{}:{}", s.path, lc.line, lc.col);
}

nlohmann::ordered_json evaluation_json(const Evaluation& e) {
    nlohmann::ordered_json j;
    j["cost_s"] = e.cost;
    j["compute_s"] = e.compute;
    j["communication_s"] = e.communication;
    j["peak_bytes"] = e.peak;
    j["memory"] = {{"state_bytes", e.state}, {"saved_bytes", e.saved}, {"temporary_bytes", e.temporaries}};
    return j;
}

}  // namespace

void print_text(std::ostream& out, const SourceManager& sources, const ShardResult& r) {
    if (r.sites.empty()) {
        out << "meshc shard: no `with auto` in the program: nothing to choose\n";
        return;
    }
    for (size_t i = 0; i < r.sites.size(); ++i) {
        const Site& s = r.sites[i];
        const SiteAnswer& a = r.answers[i];
        out << fmt::format("{}: {}: auto -> {}\n", location(sources, s), s.what,
                           s.candidates[static_cast<size_t>(a.chosen)]);
        if (a.next_best >= 0) {
            double more = a.next_best_cost - a.cost;
            out << fmt::format("    why: the plan costs {} per run; the best plan with `{}` here costs {} ({}{})\n",
                               time_text(a.cost), s.candidates[static_cast<size_t>(a.next_best)],
                               time_text(a.next_best_cost), more >= 0 ? "+" : "-", time_text(std::abs(more)));
        } else {
            out << fmt::format("    why: none of the other {} candidates here gives a plan that checks{}\n",
                               s.candidates.size() - 1, r.memory_budget > 0 ? " and fits the budget" : "");
        }
    }
    const Evaluation& f = r.final;
    out << fmt::format("plan: cost per run {} = compute {} + communication {}; memory at peak {} bytes per device "
                       "= state {} + saved for backward {} + temporaries {}{}\n",
                       time_text(f.cost), time_text(f.compute), time_text(f.communication), f.peak, f.state, f.saved,
                       f.temporaries,
                       r.memory_budget > 0 ? fmt::format(" (budget {})", r.memory_budget) : std::string());
    out << fmt::format("inference alone (`_` where allowed, else `{{}}`): cost per run {}, memory at peak {} bytes per device\n",
                       time_text(r.baseline.cost), r.baseline.peak);
    out << fmt::format("solver: {}; {} candidate programs checked{}; 0-1 program of {} variables and {} rows, "
                       "optimum {}, LP relaxation {} ({:.3f}% below), gap {:.3f}%{}; {} in all ({} in CBC)\n",
                       r.method, r.evaluations,
                       r.pruned > 0 ? fmt::format(" ({} descent candidates the program rates out of reach left unchecked)", r.pruned)
                                    : std::string(),
                       r.ilp_variables, r.ilp_rows, time_text(r.ilp_objective),
                       time_text(r.lp_bound), r.lp_gap * 100, r.gap * 100, r.proven_optimal ? ", proven optimal" : "",
                       time_text(r.seconds), time_text(r.ilp_seconds));
    out << (r.exact ? "certificate: every instance's share was checked over all the choices of the sites it depends "
                      "on, so the plan is the cheapest of the candidates under the cost model\n"
                    : "certificate: none (some shares were estimated; the plan was finished by coordinate descent on "
                      "checked costs)\n");
}

void print_json(std::ostream& out, const SourceManager& sources, const ShardResult& r) {
    nlohmann::ordered_json j;
    nlohmann::ordered_json sites = nlohmann::ordered_json::array();
    for (size_t i = 0; i < r.sites.size(); ++i) {
        const Site& s = r.sites[i];
        const SiteAnswer& a = r.answers[i];
        LineCol lc = sources.line_col(s.file, s.begin);
        nlohmann::ordered_json site;
        site["file"] = s.path;
        site["line"] = lc.line;
        site["col"] = lc.col;
        site["what"] = s.what;
        site["layout"] = s.candidates[static_cast<size_t>(a.chosen)];
        site["candidates"] = s.candidates.size();
        site["cost_s"] = a.cost;
        if (a.next_best >= 0) {
            site["next_best"] = {{"layout", s.candidates[static_cast<size_t>(a.next_best)]}, {"cost_s", a.next_best_cost}};
        } else {
            site["next_best"] = nullptr;
        }
        sites.push_back(std::move(site));
    }
    j["sites"] = std::move(sites);
    if (!r.sites.empty()) {
        j["plan"] = evaluation_json(r.final);
        j["baseline"] = evaluation_json(r.baseline);
    }
    j["memory_budget"] = r.memory_budget > 0 ? nlohmann::ordered_json(r.memory_budget) : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json s{{"method", r.method}, {"exact", r.exact}, {"proven_optimal", r.proven_optimal},
                             {"objective_s", r.ilp_objective}, {"lp_bound_s", r.lp_bound}, {"lp_gap", r.lp_gap},
                             {"best_bound_s", r.best_bound}, {"gap", r.gap}, {"variables", r.ilp_variables},
                             {"rows", r.ilp_rows}, {"evaluations", r.evaluations}, {"pruned", r.pruned}, {"solve_s", r.seconds},
                             {"ilp_s", r.ilp_seconds}};
    j["solver"] = std::move(s);
    out << j.dump(2) << "\n";
}

}  // namespace meshc::autopar

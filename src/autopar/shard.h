// The layout solver of `with auto` (docs/language.md, "Layouts the compiler chooses").
// Input: a program whose types may write `with auto`; output: a layout for every such
// site, chosen to minimise the modelled time of one run of `main` (compute plus
// communication, forward, backward and update: explain's "program cost") under a
// per-device memory budget, with the certificate of the 0-1 program that chose it, and
// the program rewritten with the layouts written in.
//
// Each site's candidates are `_` (the value's own layout; not for struct fields),
// `{}` and every split of its dims over the mesh's axes. A candidate assignment is
// costed by checking the program with those layouts written in, through autodiff, and
// reading explain's totals (evaluate.cpp): the cost model is the arbiter, nothing is
// estimated apart from it. The program's cost is a sum over function instances (runs
// times cost); each instance's share depends on the sites it sees. Those dependencies
// are measured (one site changed at a time), each instance's share is tabulated over the
// joint choices of its sites, and the choice is a 0-1 program over one-hot site
// variables and one-hot table entries, solved exactly by CBC (solver/ilp.h); the
// memory row is linear in the site choices and every answer is re-checked against the
// real peak. The chosen plan is checked once more, and its measured cost is the one
// reported. (solve.cpp; the text and JSON reports and the rewrite: report.cpp.)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/device_model.h"
#include "sema/loader.h"
#include "support/diagnostics.h"
#include "support/source_manager.h"
#include "syntax/parser.h"

namespace meshc::autopar {

/// One `with auto` in the program's source.
struct Site {
    std::string path;       // the file, as the SourceManager names it
    std::string canonical;  // its canonical path (the loader's overlay key)
    FileId file = kNoFile;  // in the SourceManager of the program find_sites read
    uint32_t begin = 0, end = 0;  // the `auto` token
    Span span;
    std::string what;       // "parameter `w1` of `loss`", "field `wte` of `Mats`", ...
    bool allows_value_layout = true;  // `_` is a candidate (not for struct fields)
    std::vector<std::string> candidates;  // texts that replace `auto`: "_", "{}", "{H: model}"
};

/// Every `with auto` of the program's modules (not the standard library's), in source
/// order, with its candidates: the program's meshes (after --mesh rebinding) give the
/// axes; an axis of size 1 splits nothing and is left out.
std::vector<Site> find_sites(const SourceManager& sources, const sema::Program& program,
                             const std::string& stdlib_dir);

struct ShardOptions {
    std::string path;                  // the root file
    std::string stdlib_dir;
    std::vector<std::string> meshes;   // --mesh rebindings
    ir::DeviceModel device;
    int plan_search = 32;
    unsigned solver_budget_ms = 1500;  // --solver-budget (refinements)
    bool strict_comm = false;
    int64_t memory_budget = 0;         // bytes per device; 0: none
    double time_limit_s = 60;          // the whole solve; the ILP's own limit is within it
    int max_evaluations = 4000;        // checks of candidate programs
    int threads = 1;                   // candidate programs checked at once
    /// Texts of files to read instead of the disk (standard input, the editor's buffers).
    const std::map<std::string, std::string>* overlays = nullptr;
};

/// What one checked candidate program costs (explain's program totals).
struct Evaluation {
    bool ok = false;
    double cost = 0, compute = 0, communication = 0;
    int64_t peak = 0, state = 0, saved = 0, temporaries = 0;
    /// Each function instance's share of `cost` (runs times cost per run), by function
    /// and sizes (the layouts of a `_` instance are not part of the key).
    std::map<std::string, double> shares;
    std::string error;  // !ok: the first error, rendered on one line
};

struct SiteAnswer {
    int chosen = 0;          // index into Site::candidates
    double cost = 0;         // the plan's modelled time (== the result's final.cost)
    int next_best = -1;      // the best other candidate at this site (-1: none checks)
    double next_best_cost = 0;  // the best plan with that site changed
};

struct ShardResult {
    /// The program does not check even with every site `_` (or `{}`): its own errors,
    /// which checking it as written reports (sites is then empty).
    bool program_errors = false;
    std::vector<Site> sites;
    std::vector<SiteAnswer> answers;
    Evaluation final;          // the chosen plan, checked
    Evaluation baseline;       // every site `_` (or `{}`): what inference alone does
    std::string method;        // "ilp" or "coordinate descent"
    bool exact = false;        // every instance share tabulated over its sites' choices
    bool proven_optimal = false;  // CBC proved the 0-1 program's optimum
    /// The 0-1 program's optimum, the LP relaxation's bound (lp_gap: how far below the
    /// optimum it is), and CBC's final bound (gap: the optimality gap, 0 when proven).
    double ilp_objective = 0, lp_bound = 0, lp_gap = 0, best_bound = 0, gap = 0;
    int ilp_variables = 0, ilp_rows = 0;
    int evaluations = 0;
    /// Descent candidates left unchecked: the 0-1 program rates them further from the plan
    /// than twice its largest error on the plans checked.
    int pruned = 0;
    double seconds = 0, ilp_seconds = 0;
    int64_t memory_budget = 0;
    /// The files with sites, rewritten: every `auto` replaced by its chosen layout.
    std::map<std::string, std::string> rewritten;  // by canonical path
    std::map<std::string, std::string> display_path;  // canonical path -> as given
    /// The chosen layouts by canonical path and `auto` offset: sema::LoadOptions's
    /// auto_layouts, so that the program reads as solved with its own spans.
    std::map<std::string, syntax::AutoLayouts> chosen;
};

/// Solves the `auto` sites of `options.path`. Errors (the program's own, E0710 when no
/// plan fits the budget, E0711 when a site has no candidate that checks) go to `diags`
/// with spans in `sources`; returns nullopt after errors. A program without sites gives
/// a result with no sites.
std::optional<ShardResult> solve(SourceManager& sources, DiagnosticEngine& diags, const ShardOptions& options);

/// `meshc shard`'s report: per site `FILE:LINE:COL: what: auto -> LAYOUT`, why (its cost
/// against the next best), and the plan's totals and certificate.
void print_text(std::ostream& out, const SourceManager& sources, const ShardResult& result);
void print_json(std::ostream& out, const SourceManager& sources, const ShardResult& result);

}  // namespace meshc::autopar

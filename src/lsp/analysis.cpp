// The checker run for the language server; see analysis.h. The driver's pass list
// (src/pipeline/), so the editor shows what `meshc check` prints.
#include "lsp/analysis.h"

#include <algorithm>
#include <filesystem>
#include <new>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "autopar/shard.h"

#include "pipeline/pipeline.h"

namespace meshc::lsp {

std::string canonical_path(const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : p.string();
}

namespace {
void solve_auto_sites(Analysis& a, const std::string& path, const std::map<std::string, std::string>& overlays,
                      const AnalysisOptions& options);
}  // namespace

std::unique_ptr<Analysis> analyse(const std::string& path, const std::map<std::string, std::string>& overlays,
                                  const AnalysisOptions& options) {
    auto a = std::make_unique<Analysis>();
    // The driver's pass list (src/pipeline/), stopping at the first phase with errors;
    // resolve also fills the index for navigation, and the checker's GIR is kept for
    // hovers when autodiff fails.
    pipeline::Options po;
    po.load = sema::LoadOptions{options.stdlib_dir, &overlays};
    po.strict_comm = options.strict_comm;
    po.names = &a->names;
    po.keep_checked = true;
    pipeline::State state(a->sources, a->diags);
    state.path = path;
    try {
        // Load, names and refinements; false where checking stops there.
        auto front = [&] {
            a->names = sema::NameIndex{};
            bool parsed = pipeline::run(state, po, "parse", "parse");
            if (state.program && !state.program->modules.empty()) a->root = state.program->modules.front()->file;
            return parsed && pipeline::run(state, po, "rebind", "refine");
        };
        auto finish = [&] {
            a->program = std::move(state.program);
            a->gir = std::move(state.gir);
            if (a->diags.has_errors() && state.checked) a->gir = std::move(state.checked);  // autodiff failed
            if (!state.internal_error.empty()) a->internal_error = state.internal_error;
        };
        if (!front()) {
            finish();
            return a;
        }
        // `with auto`: the layouts `meshc shard` chooses, for hover and code actions; the
        // program is then read again with them in place of `auto`, as `meshc check` does
        // (the spans stay the editor's text's).
        if (!autopar::find_sites(a->sources, *state.program, options.stdlib_dir).empty()) {
            solve_auto_sites(*a, path, overlays, options);
            if (a->diags.has_errors()) {
                finish();
                return a;
            }
            if (a->auto_layouts) {
                po.load.auto_layouts = a->auto_layouts.get();
                if (!front()) {
                    finish();
                    return a;
                }
            }
        }
        pipeline::run(state, po, "infer", "lint");
        finish();
    } catch (const InternalError& e) {
        a->program = std::move(state.program);  // what was read still serves navigation
        a->internal_error = e.message;
    } catch (const std::bad_alloc&) {
        a->internal_error = "out of memory";
    }
    return a;
}

namespace {

// The solve of the program's `with auto` sites, cached on the texts it read: a hover or
// a keystroke elsewhere does not solve again. Its diagnostics (E0710, E0711) are moved
// into the analysis at the same offsets of the same files.
void solve_auto_sites(Analysis& a, const std::string& path, const std::map<std::string, std::string>& overlays,
                      const AnalysisOptions& options) {
    struct Cached {
        std::string key;
        std::vector<AutoSite> sites;
        std::string plan;
        std::vector<Diagnostic> diags;  // spans: file = index into `files`
        std::vector<std::string> files;
        std::shared_ptr<const std::map<std::string, syntax::AutoLayouts>> chosen;
    };
    static Cached cache;
    std::string key = canonical_path(path) + '\0' + options.stdlib_dir + '\0' + fmt::format("{}", options.strict_comm);
    for (size_t f = 0; f < a.sources.file_count(); ++f) {
        key += '\0' + a.sources.path(static_cast<FileId>(f)) + '\0' + std::string(a.sources.text(static_cast<FileId>(f)));
    }
    if (cache.key != key) {
        Cached fresh;
        fresh.key = key;
        SourceManager sources;
        DiagnosticEngine diags;
        autopar::ShardOptions so;
        so.path = path;
        so.stdlib_dir = options.stdlib_dir;
        so.strict_comm = options.strict_comm;
        so.time_limit_s = options.auto_time_limit_s;
        so.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
        so.overlays = &overlays;
        std::optional<autopar::ShardResult> r = autopar::solve(sources, diags, so);
        if (r && !r->program_errors) {
            fresh.chosen = std::make_shared<const std::map<std::string, syntax::AutoLayouts>>(r->chosen);
            for (size_t i = 0; i < r->sites.size(); ++i) {
                const autopar::Site& site = r->sites[i];
                const autopar::SiteAnswer& ans = r->answers[i];
                AutoSite out{site.canonical, site.begin, site.end, site.what,
                             site.candidates[static_cast<size_t>(ans.chosen)], ""};
                out.why = ans.next_best >= 0
                              ? fmt::format("the plan costs {:.3f} us per run; the best plan with `{}` here costs {:.3f} us",
                                            ans.cost * 1e6, site.candidates[static_cast<size_t>(ans.next_best)],
                                            ans.next_best_cost * 1e6)
                              : "no other candidate here gives a plan that checks";
                fresh.sites.push_back(std::move(out));
            }
            std::ostringstream text;
            autopar::print_text(text, sources, *r);
            std::string all = text.str();
            // The plan's line and the solver's line.
            std::istringstream lines(all);
            for (std::string line; std::getline(lines, line);) {
                if (line.rfind("plan:", 0) == 0 || line.rfind("solver:", 0) == 0) fresh.plan += line + "\n";
            }
        }
        for (const Diagnostic& d : diags.sorted()) {
            Diagnostic copy = d;
            auto file_index = [&](Span& s) {
                if (!s.valid()) return;
                std::string p = canonical_path(sources.path(s.file));
                auto it = std::find(fresh.files.begin(), fresh.files.end(), p);
                if (it == fresh.files.end()) it = fresh.files.insert(fresh.files.end(), p);
                s.file = static_cast<FileId>(it - fresh.files.begin());
            };
            file_index(copy.span);
            for (DiagNote& n : copy.notes) file_index(n.span);
            fresh.diags.push_back(std::move(copy));
        }
        cache = std::move(fresh);
    }
    a.auto_sites = cache.sites;
    a.auto_plan = cache.plan;
    a.auto_layouts = cache.chosen;
    auto map_span = [&](Span s) -> Span {
        if (!s.valid()) return s;
        for (size_t f = 0; f < a.sources.file_count(); ++f) {
            if (canonical_path(a.sources.path(static_cast<FileId>(f))) == cache.files[s.file]) {
                return Span{static_cast<FileId>(f), s.begin, s.end};
            }
        }
        return Span{};
    };
    for (const Diagnostic& d : cache.diags) {
        Diagnostic& out = a.diags.emit(d.code, map_span(d.span), d.message);
        for (const DiagNote& n : d.notes) out.note(n.message, map_span(n.span));
    }
}

}  // namespace

}  // namespace meshc::lsp

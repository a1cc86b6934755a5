// One check of one open document, kept for the requests that follow it: the same
// pipeline as `meshc check` (load with the editor's unsaved buffers, resolve with a
// name index, refine, infer, verify, autodiff), stopping where `meshc check` stops.
// Produced by analyse(); read by features.cpp.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/gir.h"
#include "sema/loader.h"
#include "sema/name_index.h"
#include "support/diagnostics.h"

namespace meshc::lsp {

struct AnalysisOptions {
    std::string stdlib_dir;
    bool strict_comm = false;
    /// Seconds the `with auto` solve may take per change of the program's text.
    double auto_time_limit_s = 10;
};

/// A `with auto` of the document, solved (autopar/shard.h): for hover and code actions.
struct AutoSite {
    std::string canonical;      // the file's canonical path
    uint32_t begin = 0, end = 0;  // the `auto` token
    std::string what;           // "field `w1` of `W`"
    std::string layout;         // the chosen layout's text, `{H: model}` or `_`
    std::string why;            // its cost against the best other choice there
};

struct Analysis {
    SourceManager sources;  // declared first: the AST points into it
    /// The solved `with auto` layouts the program was read with (its names point here).
    std::shared_ptr<const std::map<std::string, syntax::AutoLayouts>> auto_layouts;
    DiagnosticEngine diags;
    std::unique_ptr<sema::Program> program;
    /// The checked GIR (after autodiff when it succeeded; the checker's when autodiff
    /// reported errors); null when checking stopped before inference.
    std::unique_ptr<ir::Module> gir;
    sema::NameIndex names;
    FileId root = kNoFile;
    /// Set when a phase failed internally (MESHC_ASSERT): the message.
    std::string internal_error;
    /// Every `with auto` of the program's files with its solved layout (empty when the
    /// program has none, or the solve failed: its errors are in `diags`), and the plan's
    /// totals and certificate in one line.
    std::vector<AutoSite> auto_sites;
    std::string auto_plan;
    /// Filled on first use by features.cpp: each GIR function's source item extent.
    mutable std::vector<Span> function_extents;
};

/// Checks the file at `path` (its text, and that of every other open document, from
/// `overlays`, keyed by canonical path).
std::unique_ptr<Analysis> analyse(const std::string& path, const std::map<std::string, std::string>& overlays,
                                  const AnalysisOptions& options);

/// The canonical form of a path, as overlays are keyed.
std::string canonical_path(const std::string& path);

}  // namespace meshc::lsp

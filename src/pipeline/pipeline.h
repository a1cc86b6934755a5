// The pass list: every phase from source to the local IR, in one table, run the same way by
// `meshc check`/`build`/`run`/`explain` (src/driver/), the language server (src/lsp/) and
// the layout solver's evaluation of a candidate plan (src/autopar/). `--dump-after=PASS`
// prints the IR a pass leaves, `--verify-each` runs the IR verifier after every pass, and
// `meshc opt` runs the GIR passes on a GIR file (docs/cli.md, "The pass list").
//
//   parse       source -> syntax tree (every imported module)
//   rebind      `--mesh NAME=...`: the meshes' sizes replaced
//   resolve     names and the generic mesh axes
//   refine      divisibility refinements (Z3)
//   infer       syntax tree -> GIR: types, layouts, inserted collectives
//   autodiff    GIR -> GIR: every `grad` becomes forward and backward functions
//   combine-collectives  GIR -> GIR: a backward pass's gradient all_reduces combined
//   effects     the declared communication effects checked (`! nocomm`, `! comm(...)`)
//   lint        the cost model's warnings and the memory budget (reads the GIR)
//   partition   GIR -> local IR: per-device shapes and device groups (SPMD)
//
// Code generation and linking (src/codegen/) follow `partition` in `meshc build`.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/device_model.h"
#include "ir/gir.h"
#include "sema/loader.h"
#include "sema/name_index.h"
#include "spmd/spmd.h"
#include "support/diagnostics.h"
#include "support/source_manager.h"

namespace meshc::pipeline {

/// The IR a pass reads and leaves.
enum class Form : uint8_t { Source, Ast, Gir, Local };
std::string_view form_name(Form form);  // "source", "ast", "gir", "local"

struct PassInfo {
    std::string_view name;
    Form in;
    Form out;
    std::string_view summary;  // one line, for `meshc opt --list-passes` and the docs
};

/// The passes, in the order they run.
const std::vector<PassInfo>& passes();
/// The pass named `name`, or null.
const PassInfo* find_pass(std::string_view name);
/// The names of the passes, comma-separated (for messages).
std::string pass_names();

struct Options {
    sema::LoadOptions load;
    std::vector<std::string> meshes;  // --mesh NAME=axis:size,... (rebind)
    std::vector<std::string> links;   // --link NAME.axis=latency:S,bandwidth:B (rebind)
    bool strict_comm = false;
    int plan_search = 32;
    ir::DeviceModel device;
    unsigned solver_budget_ms = 1500;
    int64_t memory_budget = 0;             // lint: --memory
    sema::NameIndex* names = nullptr;      // resolve: the index for navigation (the language server)
    /// Errors confined to function items do not stop the passes before `infer`: the other
    /// functions are still checked, and where `infer` finds errors, `autodiff` still runs
    /// for its own (one run shows the errors of every phase). Off: any error stops.
    bool keep_going = false;
    /// Before `autodiff` changes a module with a `grad`, keep a copy of the checker's GIR
    /// (State::checked): the language server hovers over it when autodiff fails.
    bool keep_checked = false;
    /// Run the IR verifier after `infer`, `combine-collectives` and `partition` (off: the
    /// layout solver's evaluation of many candidates, which verifies when asked).
    bool verify = true;
    /// Run the IR verifier after every pass that changes the IR.
    bool verify_each = false;
    /// Pass names after which the IR is printed to `dump` ("all": after every pass).
    std::set<std::string, std::less<>> dump_after;
    std::ostream* dump = nullptr;
    /// Wraps each pass (the driver's `--time-report`).
    std::function<void(std::string_view pass, const std::function<void()>& body)> around;
};

struct State {
    State(SourceManager& s, DiagnosticEngine& d) : sources(s), diags(d) {}
    SourceManager& sources;
    DiagnosticEngine& diags;
    std::string path;  // the root source file (parse)
    std::unique_ptr<sema::Program> program;
    /// Function items with errors (keep_going): the later passes skip them.
    std::set<const ast::Item*> with_errors;
    std::unique_ptr<ir::Module> gir;
    std::unique_ptr<ir::Module> checked;  // keep_checked: the checker's GIR
    std::unique_ptr<spmd::LocalModule> local;
    Form form = Form::Source;
    /// Set when a verifier rejected what a pass produced (a compiler bug, not a user
    /// error): "autodiff produced invalid GIR: ..." with every problem on its own line.
    std::string internal_error;
    std::vector<std::string> problems;
    /// The last pass that ran.
    std::string last;
};

/// Runs the passes from `first` to `last` (names of passes(), inclusive) on `state`. A
/// pass whose input form the state does not hold is an E0713 error. Returns false when a
/// pass stopped the run: errors (in `diags`), or a verifier's rejection (internal_error).
bool run(State& state, const Options& options, std::string_view first, std::string_view last);

/// Runs the named passes, in the given order, on a module read from GIR text (`meshc opt`):
/// only passes that read GIR; `partition` last. The module is verified first (its problems
/// are E0712 errors at `file`) and after the last pass (after each with verify_each).
bool run_on_gir(State& state, const Options& options, const std::vector<std::string>& names, FileId file);

/// Prints the state's current IR: each module's syntax tree, the GIR or the local IR.
void print_ir(std::ostream& out, const State& state);

}  // namespace meshc::pipeline

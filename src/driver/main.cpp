// meshc: the command-line driver. Parses flags (CLI11), runs the pipeline as one
// straight-line function per sub-command, renders the diagnostics bundle once.
// Exit status: 0 clean, 1 user errors, 2 usage or internal errors.
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ir/gir.h"
#include "sema/explain.h"
#include "sema/infer.h"
#include "sema/loader.h"
#include "sema/refine.h"
#include "sema/resolve.h"
#include "support/diagnostics.h"
#include "syntax/ast_printer.h"
#include "syntax/parser.h"

namespace {

using namespace meshc;

enum class ErrorFormat { Human, Json };

struct CheckOptions {
    std::vector<std::string> files;
    bool syntax_only = false;
    bool strict_comm = false;
    bool stop_after_names = false;
    bool time_report = false;
    std::string emit;  // "", "ast", "gir"
    std::string explain_fn;      // explain: only this function
    std::string explain_format;  // explain: "text" or "json"
    std::string stdlib_dir;
    ErrorFormat error_format = ErrorFormat::Human;
    size_t max_errors = 100;
};

std::string default_stdlib_dir() {
    if (const char* env = std::getenv("MESHC_STDLIB")) return env;
    return MESHC_STDLIB_DIR;
}

void render(const SourceManager& sources, const DiagnosticEngine& diags, ErrorFormat format,
            size_t max_errors) {
    std::vector<Diagnostic> all = diags.sorted();
    if (format == ErrorFormat::Json) {
        render_json(std::cout, sources, all);
        return;
    }
    size_t shown = all.size();
    if (max_errors != 0 && shown > max_errors) shown = max_errors;
    std::vector<Diagnostic> head(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown));
    render_human(std::cerr, sources, head);
    if (shown < all.size()) {
        size_t hidden = all.size() - shown;
        std::cerr << fmt::format("meshc: {} more diagnostic{} not shown (--max-errors=0 shows all)\n",
                                 hidden, hidden == 1 ? "" : "s");
    }
    if (diags.error_count() > 0) {
        std::cerr << fmt::format("meshc: {} error{} found\n", diags.error_count(),
                                 diags.error_count() == 1 ? "" : "s");
    }
}

#if defined(__SANITIZE_ADDRESS__)
#define MESHC_FREE_AT_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MESHC_FREE_AT_EXIT 1
#endif
#endif

// The compiler's big structures die with the process: freeing a 10,000-layer program
// node by node costs more than checking it (clang's -disable-free does the same).
// Sanitizer builds free everything, so that leak checking stays meaningful.
template <typename T>
struct BuryAtExit {
    std::unique_ptr<T>& owner;
    ~BuryAtExit() {
#ifndef MESHC_FREE_AT_EXIT
        (void)owner.release();
#endif
    }
};
template <typename T>
BuryAtExit(std::unique_ptr<T>&) -> BuryAtExit<T>;

// Wall time per phase, for `--time-report` (printed to stderr at the end).
class PhaseTimer {
public:
    explicit PhaseTimer(bool enabled) : enabled_(enabled) {}
    template <typename F>
    auto run(const char* phase, F&& f) {
        auto start = std::chrono::steady_clock::now();
        struct Record {
            PhaseTimer& t;
            const char* phase;
            std::chrono::steady_clock::time_point start;
            ~Record() {
                t.total_[phase] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            }
        } record{*this, phase, start};
        return f();
    }
    void report() const {
        if (!enabled_) return;
        double all = 0;
        for (const auto& [p, s] : total_) all += s;
        for (const char* p : {"parse", "resolve", "refine", "infer", "verify"}) {
            auto it = total_.find(p);
            if (it != total_.end()) std::cerr << fmt::format("meshc: time {:<8} {:8.2f} ms\n", p, it->second * 1e3);
        }
        std::cerr << fmt::format("meshc: time {:<8} {:8.2f} ms\n", "total", all * 1e3);
    }

private:
    bool enabled_;
    std::map<std::string, double> total_;
};

// `meshc check` / `meshc explain`: the pipeline up to the typed global IR, in order.
int run_check(const CheckOptions& options) {
    SourceManager sources;
    DiagnosticEngine diags;
    PhaseTimer timer(options.time_report);
    sema::LoadOptions load{options.stdlib_dir};
    for (const std::string& path : options.files) {
        if (options.syntax_only || options.emit == "ast") {
            FileId file = sema::read_source_file(sources, diags, path);
            if (file == kNoFile) continue;
            auto module = timer.run("parse", [&] { return syntax::parse_file(sources, file, diags); });
            if (options.emit == "ast") syntax::print_ast(std::cout, sources, *module);
            continue;
        }
        auto program_owner = timer.run("parse", [&] {
            return std::make_unique<sema::Program>(sema::load_program(sources, diags, path, load));
        });
        sema::Program& program = *program_owner;
        BuryAtExit bury_program(program_owner);
        if (program.modules.empty()) continue;
        timer.run("resolve", [&] { sema::resolve_program(sources, program, diags); });
        // Refinements of generic functions (once each), then type and sharding inference
        // of each instantiation (on programs whose names resolve).
        if (options.stop_after_names || diags.has_errors()) continue;
        timer.run("refine", [&] { sema::check_refinements(sources, program, diags); });
        if (diags.has_errors()) continue;
        sema::InferOptions infer_options;
        infer_options.strict_comm = options.strict_comm;
        auto gir_owner = timer.run("infer", [&] {
            return std::make_unique<ir::Module>(sema::infer_program(sources, program, diags, infer_options));
        });
        ir::Module& gir = *gir_owner;
        BuryAtExit bury_gir(gir_owner);
        if (diags.has_errors()) continue;
        auto problems = timer.run("verify", [&] { return ir::verify_module(gir); });
        if (!problems.empty()) {
            for (const std::string& p : problems) std::cerr << "meshc: GIR verifier: " << p << "\n";
            internal_error("the checker produced invalid GIR", __FILE__, __LINE__);
        }
        if (options.emit == "gir") ir::print_module(std::cout, sources, gir);
        if (options.explain_format == "json") {
            sema::explain_json(std::cout, sources, gir, options.explain_fn);
        } else if (options.explain_format == "text") {
            sema::explain_text(std::cout, sources, gir, options.explain_fn);
        }
    }
    render(sources, diags, options.error_format, options.max_errors);
    timer.report();
    return diags.has_errors() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"meshc: the Mesh compiler (sharding is part of the type)", "meshc"};
    app.set_version_flag("--version", std::string("meshc ") + MESHC_VERSION);
    app.require_subcommand(0, 1);

    CheckOptions check;
    check.stdlib_dir = default_stdlib_dir();
    std::string error_format = "human";
    CLI::App* check_cmd = app.add_subcommand(
        "check", "Check Mesh source files: syntax, names, types, shapes and shardings");
    check_cmd->add_option("files", check.files, "Source files (.msh)")->required();
    check_cmd->add_flag("--syntax-only", check.syntax_only, "Stop after parsing");
    check_cmd->add_option("--emit", check.emit, "Print an intermediate form: ast, gir")
        ->check(CLI::IsMember({"ast", "gir"}));
    check_cmd->add_flag("--time-report", check.time_report, "Print the time each phase took (stderr)");
    check_cmd->add_flag("--names-only", check.stop_after_names,
                        "Stop after name resolution (no type, shape or sharding inference)");
    check_cmd->add_flag("--strict-comm", check.strict_comm,
                        "Every communicating coercion the checker would insert is an error (E0406)");
    check_cmd->add_option("--error-format", error_format, "Diagnostics as `human` text or `json` lines")
        ->check(CLI::IsMember({"human", "json"}));
    check_cmd->add_option("--stdlib", check.stdlib_dir, "Standard library folder (default: "
                                                        "$MESHC_STDLIB or the built-in path)");
    check_cmd->add_option("--max-errors", check.max_errors,
                          "Show at most N diagnostics in human format (0: all)")
        ->check(CLI::Validator(
            [](std::string& text) -> std::string {
                if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) return {};
                return "expected a non-negative integer, found `" + text + "`";
            },
            "N"));

    CheckOptions explain;
    explain.stdlib_dir = check.stdlib_dir;
    std::string explain_error_format = "human";
    std::string explain_format = "text";
    CLI::App* explain_cmd = app.add_subcommand(
        "explain", "Show each value's layout and each collective the checker chose");
    explain_cmd->add_option("files", explain.files, "Source files (.msh)")->required();
    explain_cmd->add_option("--fn", explain.explain_fn, "Only this function (all its instances)");
    explain_cmd->add_option("--format", explain_format, "`text` or `json`")
        ->check(CLI::IsMember({"text", "json"}));
    explain_cmd->add_flag("--strict-comm", explain.strict_comm,
                          "Every communicating coercion is an error (E0406)");
    explain_cmd->add_option("--error-format", explain_error_format, "Diagnostics as `human` or `json`")
        ->check(CLI::IsMember({"human", "json"}));
    explain_cmd->add_option("--stdlib", explain.stdlib_dir, "Standard library folder");

    std::string help_topic;
    CLI::App* help_cmd = app.add_subcommand("help", "Show help for meshc or a sub-command");
    help_cmd->add_option("command", help_topic, "Sub-command");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int status = app.exit(e);
        return status == 0 ? 0 : 2;
    }

    if (help_cmd->parsed()) {
        if (help_topic.empty()) {
            // app.help() would describe the selected `help` sub-command itself.
            std::cout << app.get_formatter()->make_help(&app, "meshc", CLI::AppFormatMode::Normal);
            return 0;
        }
        for (CLI::App* sub : app.get_subcommands({})) {
            if (sub->get_name() == help_topic) {
                std::cout << sub->help();
                return 0;
            }
        }
        std::cerr << fmt::format("meshc: no sub-command `{}`; see `meshc help`\n", help_topic);
        return 2;
    }
    if (explain_cmd->parsed()) {
        explain.explain_format = explain_format;
        explain.error_format = explain_error_format == "json" ? ErrorFormat::Json : ErrorFormat::Human;
        check = explain;
    } else if (!check_cmd->parsed()) {
        std::cerr << app.help();
        return 2;
    } else {
        check.error_format = error_format == "json" ? ErrorFormat::Json : ErrorFormat::Human;
    }
    try {
        return run_check(check);
    } catch (const InternalError& e) {
        std::cerr << "meshc: internal compiler error: " << e.message << "\n";
        return 2;
    } catch (const std::bad_alloc&) {
        std::cerr << "meshc: internal compiler error: out of memory\n";
        return 2;
    }
}

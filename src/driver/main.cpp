// meshc: the command-line driver. Parses flags (CLI11), runs the pipeline as one
// straight-line function per sub-command, renders the diagnostics bundle once.
// Exit status: 0 clean, 1 user errors, 2 usage or internal errors.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <tuple>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <iostream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/install_paths.h"
#include "codegen/codegen.h"
#include "lsp/lsp.h"
#include "ir/gir.h"
#include "sema/mesh.h"
#include "sema/effects.h"
#include "sema/explain.h"
#include "sema/predict.h"
#include "sema/rebind.h"
#include "spmd/spmd.h"
#include "sema/infer.h"
#include "sema/lint.h"
#include "transform/autodiff.h"
#include "transform/combine_collectives.h"
#include "sema/loader.h"
#include "sema/refine.h"
#include "sema/resolve.h"
#include "support/diagnostics.h"
#include "syntax/ast_printer.h"
#include "syntax/lexer.h"
#include "syntax/parser.h"
#include "sema/device.h"
#include "autopar/cache.h"
#include "autopar/shard.h"
#include "pipeline/pipeline.h"

namespace {

using namespace meshc;

enum class ErrorFormat { Human, Json, Short };

/// `--error-format=human|json|short`.
ErrorFormat error_format_of(const std::string& name) {
    return name == "json" ? ErrorFormat::Json : name == "short" ? ErrorFormat::Short : ErrorFormat::Human;
}

struct CheckOptions {
    std::vector<std::string> files;
    bool syntax_only = false;
    bool strict_comm = false;
    int plan_search = 32;                // --plan-search: extra lowerings per function (0: off)
    std::string device_model = "cpu";    // --device-model: a profile name or a JSON file
    std::vector<std::string> deny;       // --deny W0001,...: these warnings are errors
    int64_t memory = 0;                  // --memory: the per-device budget in bytes (0: none)
    unsigned solver_budget_ms = 1500;    // --solver-budget: Z3 time of undecided goals per run
    bool stop_after_names = false;
    bool time_report = false;
    std::string emit;  // "", "ast", "gir-checked", "gir", ...
    std::vector<std::string> dump_after;  // --dump-after=PASS,...: the IR after these passes (stderr)
    bool verify_each = false;             // --verify-each: the IR verifier after every pass
    std::string explain_fn;      // explain: only this function
    std::string explain_format;  // explain: "text" or "json"
    bool explain_effects = false;  // explain --effects: each function's communication effect
    bool predict = false;           // predict: one step of main's loop, from the cost model
    std::string trace;              // predict --trace FILE: the step's timeline (Chrome trace JSON)
    std::vector<std::string> links; // --link NAME.axis=latency:S,bandwidth:B
    std::string stdlib_dir;
    ErrorFormat error_format = ErrorFormat::Human;
    bool color = false;          // --color (auto: stderr is a terminal and NO_COLOR unset)
    size_t max_errors = 100;
    // build / run
    bool build = false;
    bool run = false;
    std::string output;                  // -o
    int opt_level = 2;                   // -O
    std::vector<std::string> meshes;     // --mesh NAME=axis:size,...
    bool gpu = false;                    // --gpu
    std::string gpu_arch = "sm_90";      // --gpu-arch
    unsigned jobs = 0;                   // -j: code generation threads (0: one per core)
    std::vector<std::string> run_args;   // run: after `--`
    double auto_time_limit_s = 60;       // --auto-time-limit: the `with auto` solve
};

/// $MESHC_STDLIB, else the stdlib beside the executable (an installed prefix's
/// share/meshc/stdlib, or the build tree's stdlib link), else the path of the build.
std::string default_stdlib_dir() {
    if (const char* env = std::getenv("MESHC_STDLIB")) return env;
    std::string found = find_beside_executable({"../share/meshc/stdlib", "stdlib"});
    return found.empty() ? std::string(MESHC_STDLIB_DIR) : found;
}

// The real standard output while `-o FILE` sends an --emit form to FILE (std::cout's
// buffer is swapped then): JSON diagnostics still go to standard output.
std::streambuf* g_stdout_buffer = nullptr;

void render(const SourceManager& sources, const DiagnosticEngine& diags, ErrorFormat format,
            size_t max_errors, bool color = false) {
    std::vector<Diagnostic> all = diags.sorted();
    if (format == ErrorFormat::Json) {
        std::ostream out(g_stdout_buffer ? g_stdout_buffer : std::cout.rdbuf());
        render_json(out, sources, all);
        out.flush();
        return;
    }
    if (format == ErrorFormat::Short) {
        render_short(std::cerr, sources, all);
        return;
    }
    size_t shown = all.size();
    if (max_errors != 0 && shown > max_errors) shown = max_errors;
    std::vector<Diagnostic> head(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown));
    if (color) render_human_colored(std::cerr, sources, head);
    else render_human(std::cerr, sources, head);
    if (shown < all.size()) {
        size_t hidden = all.size() - shown;
        std::cerr << fmt::format("meshc: {} more diagnostic{} not shown (--max-errors=0 shows all)\n",
                                 hidden, hidden == 1 ? "" : "s");
    }
    // Of the diagnostics shown and not (sorted() drops repeats of one diagnostic).
    size_t errors = static_cast<size_t>(
        std::count_if(all.begin(), all.end(), [](const Diagnostic& d) { return d.severity == Severity::Error; }));
    size_t warnings = static_cast<size_t>(
        std::count_if(all.begin(), all.end(), [](const Diagnostic& d) { return d.severity == Severity::Warning; }));
    if (errors > 0) {
        std::cerr << fmt::format("meshc: {} error{} found\n", errors, errors == 1 ? "" : "s");
    } else if (warnings > 0) {
        std::cerr << fmt::format("meshc: {} warning{} (`--deny CODE` makes one an error)\n", warnings,
                                 warnings == 1 ? "" : "s");
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
    auto run(std::string phase, F&& f) {
        auto start = std::chrono::steady_clock::now();
        struct Record {
            PhaseTimer& t;
            std::string phase;
            std::chrono::steady_clock::time_point start;
            ~Record() {
                t.total_[phase] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            }
        } record{*this, std::move(phase), start};
        return f();
    }
    void report() const {
        if (!enabled_) return;
        double all = 0;
        for (const auto& [p, s] : total_) all += s;
        for (const char* p : {"parse", "auto", "rebind", "resolve", "refine", "infer", "autodiff", "combine-collectives", "lint",
                              "partition", "codegen", "link"}) {
            auto it = total_.find(p);
            if (it != total_.end()) std::cerr << fmt::format("meshc: time {:<19} {:8.2f} ms\n", p, it->second * 1e3);
            auto note = notes_.find(p);
            if (note != notes_.end()) std::cerr << fmt::format("meshc:      {:<19} ({})\n", "", note->second);
        }
        std::cerr << fmt::format("meshc: time {:<19} {:8.2f} ms\n", "total", all * 1e3);
    }

    /// A remark printed under the phase's time.
    void note(const char* phase, std::string text) { notes_[phase] = std::move(text); }

private:
    bool enabled_;
    std::map<std::string, double> total_;
    std::map<std::string, std::string> notes_;
};

std::string file_stem(const std::string& path) {
    std::string base = path.substr(path.find_last_of('/') + 1);
    auto dot = base.rfind('.');
    return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

/// Where `meshc run` keeps the executables it builds: $MESHC_CACHE, else
/// $XDG_CACHE_HOME/meshc, else ~/.cache/meshc, else /tmp/meshc-cache.
std::string cache_dir() {
    if (const char* env = std::getenv("MESHC_CACHE"); env && *env) return env;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/meshc";
    if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/meshc";
    return "/tmp/meshc-cache";
}

bool make_dirs(const std::string& dir) {
    std::string sofar;
    for (size_t i = 0; i <= dir.size(); ++i) {
        if (i == dir.size() || (dir[i] == '/' && i > 0)) {
            sofar = dir.substr(0, i);
            if (mkdir(sofar.c_str(), 0755) != 0 && errno != EEXIST) return false;
        }
    }
    return true;
}

/// The most devices a program may run on (its largest mesh): the runtime's
/// MESHRT_MAX_DEVICES (runtime/include/meshrt.h), which refuses more at start-up; the
/// simulated mesh starts a thread per device. `meshc build` reports E0707 beyond it.
constexpr int64_t kMaxDevices = 65536;

/// The executable `meshc run` built (or found in its cache).
std::string built_executable;
/// The `with auto` layouts the program was checked with ("" without sites): part of the
/// run cache's key, since --memory and the device model change them.
std::string g_auto_layouts_key;

/// FNV-1a: the cache key of a `meshc run` build (the sources and every option that
/// changes the executable).
uint64_t fnv1a(std::string_view text, uint64_t h = 1469598103934665603ull) {
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h;
}

/// What `meshc run` records of an executable it cached, in `EXE.sum` beside it: the
/// size and FNV-1a hash of its bytes ("" when it cannot be read). An entry is reused only
/// when the record matches, so a damaged executable (truncated, overwritten, a disk
/// error) is rebuilt rather than run.
std::string file_digest(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    uint64_t h = 1469598103934665603ull;
    uint64_t size = 0;
    char chunk[1 << 16];
    while (in) {
        in.read(chunk, sizeof chunk);
        auto n = static_cast<size_t>(in.gcount());
        h = fnv1a(std::string_view(chunk, n), h);
        size += n;
    }
    if (in.bad()) return "";
    return fmt::format("{} {:016x}\n", size, h);
}

bool cached_executable_ok(const std::string& exe) {
    if (access(exe.c_str(), X_OK) != 0) return false;
    std::ifstream in(exe + ".sum", std::ios::binary);
    std::string recorded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return !recorded.empty() && recorded == file_digest(exe);
}

/// The pass list's options for a command's (src/pipeline/); nullopt when --device-model
/// names no device (E0708).
std::optional<pipeline::Options> pipeline_options(const CheckOptions& options, const sema::LoadOptions& load,
                                                  DiagnosticEngine& diags) {
    pipeline::Options po;
    po.load = load;
    po.meshes = options.meshes;
    po.links = options.links;
    po.strict_comm = options.strict_comm;
    po.plan_search = options.plan_search;
    po.solver_budget_ms = options.solver_budget_ms;
    po.memory_budget = options.memory;
    po.keep_going = true;
    po.verify_each = options.verify_each;
    for (const std::string& pass : options.dump_after) po.dump_after.insert(pass);
    std::optional<ir::DeviceModel> device = sema::device_model_of(options.device_model, diags);
    if (!device) return std::nullopt;
    po.device = *device;
    return po;
}

/// A verifier's rejection of what a pass produced: its problems, then the internal error.
bool report_internal(const pipeline::State& state) {
    if (state.internal_error.empty()) return false;
    for (const std::string& p : state.problems) std::cerr << "meshc: verifier after `" << state.last << "`: " << p << "\n";
    internal_error(state.internal_error, __FILE__, __LINE__);
}

// `meshc build` / `meshc run` after the checker: GIR -> local IR -> LLVM -> object ->
// executable (or the requested --emit form on stdout).
int build_program(const CheckOptions& options, pipeline::State& state, const pipeline::Options& po, const std::string& path,
                  PhaseTimer& timer) {
    const SourceManager& sources = state.sources;
    DiagnosticEngine& diags = state.diags;
    const sema::Program& program = *state.program;
    const ir::Module& gir = *state.gir;
    // The executable starts every device of its largest mesh (the simulated mesh: a
    // thread each), and the runtime refuses more than it can start (docs/running.md).
    bool too_many = false;
    for (const auto& module : program.modules) {
        for (const ast::Item* item : module->items) {
            if (item->kind != ast::ItemKind::Mesh) continue;
            int64_t devices = sema::mesh_from_item(*item).device_count();
            if (devices <= kMaxDevices) continue;
            too_many = true;
            diags.emit(DiagCode::E0707, item->span,
                       fmt::format("mesh `{}` has {} devices; a program runs on at most {}", item->name.name, devices,
                                   kMaxDevices))
                .note("the simulated mesh starts a thread for each device; rebind the mesh to fewer devices "
                      "with `--mesh NAME=axis:size,...`");
        }
    }
    if (too_many) return 1;
    for (const ir::Function& fn : gir.functions) {
        if (fn.name != "main" || !fn.instance.empty() || (fn.params.empty() && fn.results.empty())) continue;
        diags.emit(DiagCode::E0702, fn.span,
                   fmt::format("`fn main` is the program's entry: it takes no parameters and returns nothing (this one {})",
                               !fn.params.empty() ? fmt::format("takes {} parameter{}", fn.params.size(), fn.params.size() == 1 ? "" : "s")
                                                  : "returns a value"))
            .note("read inputs with `load` and write results with `save` or `print`");
        return 1;
    }
    if (!pipeline::run(state, po, "partition", "partition")) {
        if (report_internal(state)) return 2;
        return 1;
    }
    const spmd::LocalModule& local = *state.local;
    if (options.emit == "local") {
        spmd::print(std::cout, local);
        return 0;
    }
    if (local.entry < 0) {
        diags.emit(DiagCode::E0702, {}, fmt::format("`{}` has no `fn main()`: `meshc {}` needs one as the program's entry", path,
                                                    options.run ? "run" : "build"))
            .note("`meshc check` and `meshc explain` accept libraries without `main`");
        return 1;
    }
    codegen::Options cg;
    cg.opt_level = options.opt_level;
    cg.program_name = file_stem(path);
    cg.gpu = options.gpu;
    cg.gpu_arch = options.gpu_arch;
    cg.jobs = options.jobs;
    cg.locate = [&sources](Span s) -> std::string {
        if (!s.valid()) return {};
        LineCol lc = sources.line_col(s.file, s.begin);
        return fmt::format("{}:{}:{}", sources.path(s.file), lc.line, lc.col);
    };
    // A GPU build needs CUDA's libdevice and LLVM's NVPTX target: E0706 when one is missing.
    auto guarded = [&](auto&& work) {
        try {
            work();
            return true;
        } catch (const codegen::GpuError& e) {
            diags.emit(DiagCode::E0706, {}, fmt::format("cannot build the GPU kernels of `{}`: {}", path, e.what()))
                .note("`meshc build` without --gpu makes a program whose loops run on the host");
            return false;
        }
    };
    auto generate = [&](codegen::EmitKind kind, std::string& out) {
        return guarded([&] { out = timer.run("codegen", [&] { return codegen::generate(local, cg, kind); }); });
    };
    if (options.emit == "llvm" || options.emit == "asm" || options.emit == "ptx") {
        std::string text;
        codegen::EmitKind kind = options.emit == "llvm" ? codegen::EmitKind::LLVM
                                 : options.emit == "asm" ? codegen::EmitKind::Asm
                                                         : codegen::EmitKind::Ptx;
        if (!generate(kind, text)) return 1;
        std::cout << text;
        return 0;
    }
    std::string output = options.output;
    if (options.run) {
        std::string key;
        for (FileId f = 0; f < sources.file_count(); ++f) key += sources.path(f) + "\n" + std::string(sources.text(f)) + "\n";
        key += fmt::format("O{} s{} {} {} {}", options.opt_level, options.plan_search, fmt::join(options.meshes, ";"), MESHC_VERSION,
                           options.gpu ? options.gpu_arch : "host");
        // The device model steers the plan search, so it is part of the build.
        key += fmt::format(" d{{{} {} {} {} {} {} {}}}", options.device_model, gir.device.matmul_f64, gir.device.matmul_f32,
                           gir.device.matmul_f16, gir.device.matmul_int, gir.device.vector_flops, gir.device.memory_bandwidth);
        key += codegen::toolchain_identity();
        key += g_auto_layouts_key;
        std::string dir = cache_dir();
        if (!make_dirs(dir)) {
            diags.emit(DiagCode::E0704, {}, fmt::format("cannot create the build cache `{}`: {}", dir, std::strerror(errno)));
            return 1;
        }
        output = fmt::format("{}/{}-{:016x}", dir, cg.program_name, fnv1a(key));
        built_executable = output;
        if (cached_executable_ok(output)) return 0;  // built before
    }
    if (output.empty()) output = options.emit == "obj" ? cg.program_name + ".o" : cg.program_name;
    // Never write the executable over a source file (`-o model.msh`).
    struct stat out_st {};
    if (stat(output.c_str(), &out_st) == 0) {
        for (FileId f = 0; f < sources.file_count(); ++f) {
            struct stat src_st {};
            if (stat(sources.path(f).c_str(), &src_st) == 0 && src_st.st_dev == out_st.st_dev && src_st.st_ino == out_st.st_ino) {
                diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: it is the source file `{}`", output, sources.path(f)))
                    .note("name the executable with `-o`, e.g. `-o model`");
                return 1;
            }
        }
    }
    // The object code: one object, or for a large program one per part compiled in
    // parallel (codegen::generate_objects), each written beside the output.
    std::vector<std::string> objects;
    codegen::CodegenReport report;
    if (!guarded([&] { objects = timer.run("codegen", [&] { return codegen::generate_objects(local, cg, &report); }); })) return 1;
    std::vector<std::string> cpu;
    for (double s : report.part_cpu_seconds) cpu.push_back(fmt::format("{:.2f}", s));
    timer.note("codegen", fmt::format("{}optimisation and emission {} s of CPU time",
                                      objects.size() > 1 ? fmt::format("{} parts in parallel; ", objects.size()) : "",
                                      fmt::join(cpu, " + ")));
    bool whole = options.emit == "obj" && objects.size() == 1;  // written as the output itself
    std::vector<std::string> object_paths;
    for (size_t i = 0; i < objects.size(); ++i) {
        object_paths.push_back(whole                 ? output
                               : objects.size() == 1 ? output + fmt::format(".{}.o", getpid())
                                                     : output + fmt::format(".{}.{}.o", getpid(), i));
    }
    auto remove_objects = [&] {
        for (const std::string& p : object_paths) std::remove(p.c_str());
    };
    for (size_t i = 0; i < objects.size(); ++i) {
        std::ofstream out(object_paths[i], std::ios::binary);
        out.write(objects[i].data(), static_cast<std::streamsize>(objects[i].size()));
        if (!out) {
            diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", output, std::strerror(errno)));
            remove_objects();
            return 1;
        }
    }
    if (whole) return 0;
    if (options.emit == "obj") {
        std::string error;
        bool combined = timer.run("link", [&] { return codegen::combine_objects(object_paths, output, error); });
        remove_objects();
        if (!combined) {
            diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", output, error));
            return 1;
        }
        return 0;
    }
    // Link to a temporary name, then rename: an interrupted build never leaves a broken
    // executable (the run cache relies on it).
    std::string partial = output + fmt::format(".{}.tmp", getpid());
    std::string error;
    bool linked = timer.run("link", [&] { return codegen::link_executable(object_paths, partial, error); });
    remove_objects();
    if (!linked) {
        std::remove(partial.c_str());
        diags.emit(DiagCode::E0704, {}, fmt::format("cannot link `{}`: {}", output, error));
        return 1;
    }
    if (std::rename(partial.c_str(), output.c_str()) != 0) {
        std::remove(partial.c_str());
        diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", output, std::strerror(errno)));
        return 1;
    }
    if (options.run) {
        // The record that makes the entry reusable, written last (and renamed into place):
        // an entry without it is built again.
        std::string sum = output + ".sum", sum_partial = sum + fmt::format(".{}.tmp", getpid());
        std::string digest = file_digest(output);
        std::ofstream(sum_partial, std::ios::binary) << digest;
        if (digest.empty() || std::rename(sum_partial.c_str(), sum.c_str()) != 0) std::remove(sum_partial.c_str());
    }
    return 0;
}

// `meshc check` / `meshc explain`: the pipeline up to the typed global IR, in order.
/// Adds to `out` the function items that hold an error; false when some error lies
/// outside every function (a mesh, a struct, an import: later phases would cascade).
/// The `with auto` solve of `path` with the checker's options (autopar/shard.h).
std::optional<autopar::ShardResult> solve_auto(const CheckOptions& options, SourceManager& sources,
                                               DiagnosticEngine& diags, const std::string& path,
                                               const std::map<std::string, std::string>* overlays) {
    std::optional<ir::DeviceModel> device = sema::device_model_of(options.device_model, diags);
    if (!device) return std::nullopt;
    autopar::ShardOptions so;
    so.path = path;
    so.stdlib_dir = options.stdlib_dir;
    so.meshes = options.meshes;
    so.device = *device;
    so.plan_search = options.plan_search;
    so.solver_budget_ms = options.solver_budget_ms;
    so.strict_comm = options.strict_comm;
    so.memory_budget = options.memory;
    so.time_limit_s = options.auto_time_limit_s;
    so.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    so.overlays = overlays;
    return autopar::solve(sources, diags, so);
}

/// The cache entry of the `with auto` answer for the texts in `sources` and every option
/// the solve reads.
std::string auto_cache_entry(const SourceManager& sources, const CheckOptions& o) {
    std::string key = "meshc-auto-1\n";
    for (FileId f = 0; f < sources.file_count(); ++f) key += sources.path(f) + "\n" + std::string(sources.text(f)) + "\n";
    key += fmt::format("m{} s{} p{} c{} t{} d{} {} {}", o.memory, o.solver_budget_ms, o.plan_search, o.strict_comm,
                       o.auto_time_limit_s, o.device_model, fmt::join(o.meshes, ";"), MESHC_VERSION);
    // This meshc (a rebuilt compiler may cost differently) and a device model given as a
    // file: its contents.
    key += codegen::toolchain_identity();
    if (std::ifstream in(o.device_model, std::ios::binary); in) {
        std::stringstream text;
        text << in.rdbuf();
        key += text.str();
    }
    return fmt::format("{}/auto-{:016x}.json", cache_dir(), fnv1a(key));
}

bool has_auto_sites(const SourceManager& sources, const sema::Program& program, const std::string& stdlib_dir) {
    return !program.modules.empty() && !autopar::find_sites(sources, program, stdlib_dir).empty();
}

/// `meshc opt FILE.gir --pass=NAME,...`: the GIR passes on a GIR file (docs/cli.md).
struct OptOptions {
    std::string file;
    std::vector<std::string> passes;
    std::vector<std::string> dump_after;
    bool verify_each = false;
    bool strict_comm = false;
    bool list_passes = false;
    std::string output;
    ErrorFormat error_format = ErrorFormat::Human;
    bool color = false;
};

int run_opt(const OptOptions& o) {
    if (o.list_passes) {
        for (const pipeline::PassInfo& p : pipeline::passes()) {
            std::cout << fmt::format("{:<20} {:>6} -> {:<6} {}\n", p.name, pipeline::form_name(p.in),
                                     pipeline::form_name(p.out), p.summary);
        }
        return 0;
    }
    SourceManager sources;
    DiagnosticEngine diags;
    FileId file = kNoFile;
    if (o.file == "-") {
        std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        file = sources.add_file("<stdin>", std::move(text));
    } else {
        file = sema::read_source_file(sources, diags, o.file);
    }
    pipeline::State state(sources, diags);
    bool ok = false;
    if (file != kNoFile) {
        pipeline::Options po;
        po.strict_comm = o.strict_comm;
        po.verify_each = o.verify_each;
        for (const std::string& pass : o.dump_after) po.dump_after.insert(pass);
        po.dump = &std::cerr;
        ok = pipeline::run_on_gir(state, po, o.passes, file);
        if (!ok) report_internal(state);
    }
    if (ok) {
        if (o.output.empty()) {
            pipeline::print_ir(std::cout, state);
        } else {
            std::ofstream out(o.output, std::ios::binary | std::ios::trunc);
            if (out) pipeline::print_ir(out, state);
            if (!out) diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", o.output, std::strerror(errno)));
        }
    }
    render(sources, diags, o.error_format, 100, o.color);
    return diags.has_errors() ? 1 : 0;
}

int run_check(const CheckOptions& options) {
    SourceManager sources;
    DiagnosticEngine diags;
    for (const std::string& code : options.deny) {
        for (DiagCode c : all_diag_codes()) {
            const DiagCodeInfo& info = diag_code_info(c);
            if (info.severity == Severity::Warning && (code == "warnings" || code == info.name)) diags.deny(c);
        }
    }
    PhaseTimer timer(options.time_report);
    sema::LoadOptions load{options.stdlib_dir};
    // `-` is standard input, read once and named `<stdin>` (imports are looked up in the
    // current folder, then the stdlib).
    const std::string stdin_name = "<stdin>";
    std::map<std::string, std::string> stdin_overlay;
    if (std::find(options.files.begin(), options.files.end(), "-") != options.files.end()) {
        // At most one byte past the source limit: the loader then reports E0111, and an
        // endless standard input is not read to the end.
        std::string text;
        char chunk[1 << 16];
        while (text.size() <= syntax::kMaxSourceBytes && std::cin) {
            size_t want = std::min(sizeof chunk, syntax::kMaxSourceBytes + 1 - text.size());
            std::cin.read(chunk, static_cast<std::streamsize>(want));
            text.append(chunk, static_cast<size_t>(std::cin.gcount()));
        }
        std::error_code ec;
        std::filesystem::path key = std::filesystem::weakly_canonical(stdin_name, ec);
        stdin_overlay[ec ? stdin_name : key.string()] = std::move(text);
        load.overlays = &stdin_overlay;
    }
    // `-o FILE` with a printed --emit form (not obj, which build writes itself): the form
    // goes to FILE instead of standard output; the file is removed again on errors.
    std::ofstream emit_file;
    struct RestoreStdout {
        std::string path;
        std::ofstream* file = nullptr;
        const DiagnosticEngine* diags = nullptr;
        ~RestoreStdout() {
            if (!g_stdout_buffer) return;
            std::cout.flush();
            std::cout.rdbuf(g_stdout_buffer);
            g_stdout_buffer = nullptr;
            file->close();
            if (diags->has_errors()) std::remove(path.c_str());
        }
    } restore_stdout{options.output, &emit_file, &diags};
    if (!options.emit.empty() && options.emit != "obj" && !options.output.empty()) {
        emit_file.open(options.output, std::ios::binary | std::ios::trunc);
        if (!emit_file) {
            diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", options.output, std::strerror(errno)));
            render(sources, diags, options.error_format, options.max_errors, options.color);
            return 1;
        }
        g_stdout_buffer = std::cout.rdbuf(emit_file.rdbuf());
    }
    for (const std::string& given_path : options.files) {
        const std::string& path = given_path == "-" ? stdin_name : given_path;
        if (options.syntax_only || options.emit == "ast") {
            FileId file = given_path == "-" ? sources.add_file(stdin_name, stdin_overlay.begin()->second)
                                            : sema::read_source_file(sources, diags, path);
            if (file == kNoFile) continue;
            auto module = timer.run("parse", [&] { return syntax::parse_file(sources, file, diags); });
            if (options.emit == "ast") syntax::print_ast(std::cout, sources, *module);
            continue;
        }
        // The pass list (src/pipeline/): parse, then the `with auto` solve where the
        // program has sites, then the rest up to `lint` (`partition` in build_program).
        pipeline::State state(sources, diags);
        state.path = path;
        std::optional<pipeline::Options> maybe = pipeline_options(options, load, diags);
        if (!maybe) break;
        pipeline::Options& po = *maybe;
        if (!po.dump_after.empty()) po.dump = &std::cerr;
        po.around = [&timer](std::string_view pass, const std::function<void()>& body) {
            timer.run(std::string(pass), body);
        };
        if (!pipeline::run(state, po, "parse", "parse")) {
            if (report_internal(state)) return 2;
            continue;
        }
        // `with auto`: the layouts are solved, and the program is read again with them
        // in place of `auto` (what `meshc shard -o` writes; spans stay the text's own).
        // An unchanged program with the same options reuses the last answer (the cache
        // folder of `meshc run`, autopar/cache.h).
        std::optional<autopar::ChosenLayouts> chosen;
        if (!diags.has_errors() && has_auto_sites(sources, *state.program, options.stdlib_dir)) {
            const std::string entry = auto_cache_entry(sources, options);
            chosen = autopar::load_cached(entry, sources);
            if (!chosen) {
                auto solved = timer.run("auto", [&] { return solve_auto(options, sources, diags, path, load.overlays); });
                if (!solved) continue;
                if (!solved->sites.empty() && !solved->program_errors) {
                    chosen = solved->chosen;
                    if (make_dirs(cache_dir())) autopar::store_cached(entry, *chosen);
                }
            }
            if (chosen) {
                for (const auto& [file, sites] : *chosen) {
                    for (const auto& [offset, layout] : sites) g_auto_layouts_key += fmt::format("{}:{}={};", file, offset, layout);
                }
                po.load.auto_layouts = &*chosen;
                if (!pipeline::run(state, po, "parse", "parse")) continue;
            }
        }
        BuryAtExit bury_program(state.program);
        BuryAtExit bury_gir(state.gir);
        if (options.stop_after_names) {
            pipeline::run(state, po, "rebind", "resolve");
            continue;
        }
        if (!pipeline::run(state, po, "rebind", "infer")) {
            if (report_internal(state)) return 2;
            continue;
        }
        if (options.emit == "gir-checked") ir::print_module(std::cout, sources, *state.gir);
        if (!pipeline::run(state, po, "autodiff", "lint")) {
            if (report_internal(state)) return 2;
            continue;
        }
        const sema::Program& program = *state.program;
        const ir::Module& gir = *state.gir;
        if (options.emit == "gir") ir::print_module(std::cout, sources, gir);
        // `build --emit=gir|gir-checked` prints and stops, like the other forms.
        if (options.build && (options.emit == "gir" || options.emit == "gir-checked")) continue;
        if (options.build) {
            int status = build_program(options, state, po, path, timer);
            if (status != 0 || diags.has_errors()) {
                render(sources, diags, options.error_format, options.max_errors, options.color);
                return status != 0 ? status : 1;
            }
            continue;
        }
        if (!options.explain_format.empty() && !options.explain_fn.empty()) {
            // `--fn NAME` names a function of the program (a generic one without
            // instances shows nothing, like a program without calls of it).
            std::vector<std::string_view> names;
            for (const ir::Function& fn : gir.functions) names.push_back(fn.name);
            for (const ast::Item* item : program.modules.front()->items) {
                if (item->kind == ast::ItemKind::Fn) names.push_back(item->name.name);
            }
            if (std::find(names.begin(), names.end(), options.explain_fn) == names.end()) {
                auto& d = diags.emit(DiagCode::E0201, {},
                                     fmt::format("`--fn {}`: `{}` has no function `{}`", options.explain_fn, path,
                                                 options.explain_fn));
                if (auto best = sema::closest_name(options.explain_fn, names)) d.note(fmt::format("did you mean `{}`?", *best));
                continue;
            }
        }
        if (options.predict) {
            sema::StepPrediction p = sema::predict_step(gir, sources);
            if (p.function.empty()) {
                diags.emit(DiagCode::E0702, {}, fmt::format("`{}` has no `fn main()`: `meshc predict` predicts a step of its loop", path))
                    .note("`meshc check` and `meshc explain` accept libraries without `main`");
                continue;
            }
            if (options.explain_format == "json") sema::print_prediction_json(std::cout, p);
            else sema::print_prediction_text(std::cout, p);
            if (!options.trace.empty()) {
                std::ofstream trace(options.trace);
                sema::write_trace(trace, p);
                trace.close();
                if (!trace) {
                    diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", options.trace, std::strerror(errno)));
                }
            }
            continue;
        }
        if (options.explain_effects) {
            sema::print_effects(std::cout, sources, program, gir, options.explain_format == "json");
        } else if (options.explain_format == "json") {
            sema::explain_json(std::cout, sources, gir, options.explain_fn, program.modules.front()->file);
        } else if (options.explain_format == "text") {
            sema::explain_text(std::cout, sources, gir, options.explain_fn, program.modules.front()->file);
        }
    }
    render(sources, diags, options.error_format, options.max_errors, options.color);
    timer.report();
    return diags.has_errors() ? 1 : 0;
}

/// `meshc shard FILE`: each `with auto` site's layout and why, the plan's totals and the
/// solver's certificate (autopar/shard.h); `-o OUT` writes the program with the layouts
/// written in (OUT a folder when sites lie in several files).
int run_shard(const CheckOptions& options, const std::string& format) {
    SourceManager sources;
    DiagnosticEngine diags;
    const std::string path = options.files.front();
    std::optional<autopar::ShardResult> r = solve_auto(options, sources, diags, path, nullptr);
    if (r && r->program_errors) {
        // The program's own errors: reported as `meshc check` reports them.
        CheckOptions check = options;
        check.output.clear();
        int status = run_check(check);
        return status != 0 ? status : 1;
    }
    if (!r) {
        render(sources, diags, options.error_format, options.max_errors, options.color);
        return 1;
    }
    if (format == "json") {
        autopar::print_json(std::cout, sources, *r);
    } else {
        autopar::print_text(std::cout, sources, *r);
    }
    if (!options.output.empty()) {
        std::map<std::string, std::string> files = r->rewritten;
        if (files.empty()) {
            // No sites: the program as it is.
            std::ifstream in(path, std::ios::binary);
            std::stringstream text;
            text << in.rdbuf();
            files[path] = text.str();
        }
        auto write = [&](const std::string& target, const std::string& text) {
            std::ofstream out(target, std::ios::binary | std::ios::trunc);
            out << text;
            out.close();
            if (!out) {
                diags.emit(DiagCode::E0704, {}, fmt::format("cannot write `{}`: {}", target, std::strerror(errno)));
            }
        };
        if (files.size() == 1) {
            write(options.output, files.begin()->second);
        } else {
            std::error_code ec;
            std::filesystem::create_directories(options.output, ec);
            for (const auto& [file, text] : files) {
                write((std::filesystem::path(options.output) / std::filesystem::path(file).filename()).string(), text);
            }
        }
    }
    render(sources, diags, options.error_format, options.max_errors, options.color);
    return diags.has_errors() ? 1 : 0;
}

/// `--color=auto|always|never`: auto colours where standard error is a terminal and
/// NO_COLOR (https://no-color.org) is unset or empty.
bool use_color(const std::string& mode) {
    if (mode == "always") return true;
    if (mode == "never") return false;
    const char* no_color = std::getenv("NO_COLOR");
    if (no_color && *no_color) return false;
    return isatty(STDERR_FILENO) != 0;
}

/// After a command line CLI11 rejected: "did you mean" for a misspelt sub-command
/// (`meshc chek f.msh`) or option (`meshc check --strict-com`).
void suggest_spelling(CLI::App& app, int argc, char** argv) {
    std::vector<std::string> commands;
    for (CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
    CLI::App* sub = nullptr;
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        std::string word = argv[1];
        for (CLI::App* s : app.get_subcommands({})) {
            if (s->get_name() == word) sub = s;
        }
        if (!sub) {
            std::vector<std::string_view> names(commands.begin(), commands.end());
            if (auto best = sema::closest_name(word, names)) {
                std::cerr << fmt::format("meshc: no sub-command `{}`; did you mean `{}`?\n", word, *best);
            }
            return;
        }
        first = 2;
    }
    CLI::App& scope = sub ? *sub : app;
    std::vector<std::string> known;
    for (const CLI::Option* opt : scope.get_options()) {
        for (const std::string& n : opt->get_lnames()) known.push_back("--" + n);
        for (const std::string& n : opt->get_snames()) known.push_back("-" + n);
    }
    std::vector<std::string_view> names(known.begin(), known.end());
    for (int i = first; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--") break;
        if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
        std::string name = arg.substr(0, arg.find('='));
        if (std::find(known.begin(), known.end(), name) != known.end()) continue;
        if (auto best = sema::closest_name(name, names)) {
            std::cerr << fmt::format("meshc: no option `{}`{}; did you mean `{}`?\n", name,
                                     sub ? " for `meshc " + sub->get_name() + "`" : std::string(), *best);
        }
    }
}

/// `--memory=BYTES`: an integer with an optional suffix k, M, G, T (powers of 1000) or
/// KiB, MiB, GiB, TiB (powers of 1024).
std::string parse_bytes(std::string text, int64_t& out) {
    size_t digits = 0;
    while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
    std::string number = text.substr(0, digits), suffix = text.substr(digits);
    double value = 0;
    try {
        size_t used = 0;
        value = number.empty() ? -1 : std::stod(number, &used);
        if (used != number.size()) value = -1;
    } catch (...) {
        value = -1;
    }
    static const std::map<std::string, double> scale = {
        {"", 1}, {"B", 1}, {"k", 1e3}, {"K", 1e3}, {"kB", 1e3}, {"M", 1e6}, {"MB", 1e6}, {"G", 1e9}, {"GB", 1e9},
        {"T", 1e12}, {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    auto it = scale.find(suffix);
    if (value <= 0 || it == scale.end() || value * it->second > 9.2e18) {
        return "expected a positive size in bytes, e.g. 80GB, 512MiB or 1000000, found `" + text + "`";
    }
    out = static_cast<int64_t>(value * it->second);
    return {};
}

/// The cost model's options, shared by check, explain, build and run.
void add_cost_options(CLI::App* cmd, CheckOptions& opts) {
    cmd->add_option("--device-model", opts.device_model,
                    "The device the cost model's compute side assumes: cpu (default), h100, h200, or a JSON file "
                    "(docs/cli.md, \"Device models\")");
    cmd->add_option("--memory", opts.memory,
                    "Per-device memory budget the program's peak must fit (E0709), e.g. 80GB or 512MiB")
        ->transform([](std::string text) {
            int64_t bytes = 0;
            std::string error = parse_bytes(text, bytes);
            if (!error.empty()) throw CLI::ValidationError("--memory", error);
            return std::to_string(bytes);
        });
    cmd->add_option("--solver-budget", opts.solver_budget_ms,
                    "Milliseconds of solver time that undecided refinements may take in all (default 1500; each "
                    "takes at most 1000; 0: no limit); past it the rest are reported as undecided at once")
        ->check(CLI::Range(0u, 3600000u));
    cmd->add_option("--deny", opts.deny, "Report a warning code (W0001, ...) as an error; `warnings`: every one")
        ->delimiter(',')
        ->check([](const std::string& code) {
            if (code == "warnings") return std::string();
            for (DiagCode c : all_diag_codes()) {
                if (diag_code_info(c).severity == Severity::Warning && diag_code_info(c).name == code) return std::string();
            }
            return "no warning `" + code + "` (docs/diagnostics.md lists the W codes)";
        });
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
    check_cmd->add_option("files", check.files, "Source files (.msh); `-` reads standard input")->required();
    check_cmd->add_flag("--syntax-only", check.syntax_only, "Stop after parsing");
    check_cmd->add_option("--emit", check.emit,
                          "Print an intermediate form: ast, gir-checked (the checker's GIR), gir (after autodiff)")
        ->check(CLI::IsMember({"ast", "gir-checked", "gir"}));
    check_cmd->add_option("-o", check.output, "Write the --emit form to this file instead of standard output")
        ->check([](const std::string& v) { return v.empty() ? std::string("an empty output file name") : std::string(); });
    check_cmd->add_flag("--time-report", check.time_report, "Print the time each phase took (stderr)");
    check_cmd->add_option("--mesh", check.meshes,
                          "Rebind a declared mesh's axis sizes: NAME=axis:size,... (repeatable), e.g. Pod=data:1,model:1")
        ->allow_extra_args(false);
    check_cmd->add_flag("--names-only", check.stop_after_names,
                        "Stop after name resolution (no type, shape or sharding inference)");
    check_cmd->add_option("--plan-search", check.plan_search,
                          "How many extra lowerings of each function the whole-function plan search may try (default 32; 0: each value's plan is chosen where it is made)")
        ->check(CLI::Range(0, 100000));
    add_cost_options(check_cmd, check);
    check_cmd->add_flag("--strict-comm", check.strict_comm,
                        "Every communicating coercion the checker would insert is an error (E0406)");
    check_cmd->add_option("--error-format", error_format,
                          "Diagnostics as `human` text, `json` lines or `short` lines (file:line:col: error[E...]: message)")
        ->check(CLI::IsMember({"human", "json", "short"}));
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
    explain_cmd->add_flag("--effects", explain.explain_effects,
                          "Print each function's communication effect (the axes it communicates over, the bytes per "
                          "device per call) and its declaration");
    explain_cmd->add_option("--mesh", explain.meshes,
                            "Rebind a declared mesh's axis sizes: NAME=axis:size,... (repeatable)")
        ->allow_extra_args(false);
    explain_cmd->add_option("--format", explain_format, "`text` or `json`")
        ->check(CLI::IsMember({"text", "json"}));
    explain_cmd->add_option("--plan-search", explain.plan_search,
                            "How many extra lowerings of each function the whole-function plan search may try (default 32; 0: each value's plan is chosen where it is made)")
        ->check(CLI::Range(0, 100000));
    add_cost_options(explain_cmd, explain);
    explain_cmd->add_flag("--strict-comm", explain.strict_comm,
                          "Every communicating coercion is an error (E0406)");
    explain_cmd->add_option("--error-format", explain_error_format, "Diagnostics as `human`, `json` or `short`")
        ->check(CLI::IsMember({"human", "json", "short"}));
    explain_cmd->add_option("--stdlib", explain.stdlib_dir, "Standard library folder");

    CheckOptions predict;
    predict.stdlib_dir = check.stdlib_dir;
    predict.predict = true;
    std::string predict_error_format = "human";
    std::string predict_format = "text";
    CLI::App* predict_cmd = app.add_subcommand(
        "predict", "Predict one step of main's loop on a mesh you need not have (compute, communication, memory, timeline)");
    predict_cmd->add_option("files", predict.files, "Source file (.msh) with `fn main()`")->required();
    predict_cmd->add_option("--mesh", predict.meshes,
                            "Rebind a declared mesh's axis sizes: NAME=axis:size,... (repeatable), e.g. Pod=data:64,model:8")
        ->allow_extra_args(false);
    predict_cmd->add_option("--link", predict.links,
                            "Rebind an axis's link: NAME.axis=latency:SECONDS,bandwidth:BYTES_PER_SECOND (repeatable)")
        ->allow_extra_args(false);
    predict_cmd->add_option("--trace", predict.trace, "Write the step's timeline as a Chrome trace (Perfetto opens it)");
    predict_cmd->add_option("--format", predict_format, "`text` or `json`")->check(CLI::IsMember({"text", "json"}));
    predict_cmd->add_option("--plan-search", predict.plan_search, "As for check (default 32)")->check(CLI::Range(0, 100000));
    add_cost_options(predict_cmd, predict);
    predict_cmd->add_option("--error-format", predict_error_format, "Diagnostics as `human`, `json` or `short`")
        ->check(CLI::IsMember({"human", "json", "short"}));
    predict_cmd->add_option("--stdlib", predict.stdlib_dir, "Standard library folder");
    // --link on check and explain too: the same program, costed on other links.
    for (auto [cmd, opts] : {std::pair{check_cmd, &check}, std::pair{explain_cmd, &explain}}) {
        cmd->add_option("--link", opts->links,
                        "Rebind an axis's link: NAME.axis=latency:SECONDS,bandwidth:BYTES_PER_SECOND (repeatable)")
            ->allow_extra_args(false);
    }

    // --color=auto|always|never on every command that renders diagnostics.
    std::string color_mode = "auto";
    for (CLI::App* cmd : {check_cmd, explain_cmd, predict_cmd}) {
        cmd->add_option("--color", color_mode, "Colour diagnostics: auto (a terminal without NO_COLOR), always, never")
            ->check(CLI::IsMember({"auto", "always", "never"}));
    }

    // build and run share the checker's options plus the back end's.
    CheckOptions build;
    build.stdlib_dir = check.stdlib_dir;
    build.build = true;
    std::string build_file, build_error_format = "human";
    CLI::App* build_cmd = app.add_subcommand("build", "Compile a program to a native executable (one SPMD program per mesh device)");
    CheckOptions run;
    run.stdlib_dir = check.stdlib_dir;
    run.build = true;
    run.run = true;
    std::string run_file, run_error_format = "human";
    CLI::App* run_cmd = app.add_subcommand("run", "Build a program (cached) and run it; arguments after `--` go to the program");
    for (auto [cmd, opts, file, format] : {std::tuple{build_cmd, &build, &build_file, &build_error_format},
                                           std::tuple{run_cmd, &run, &run_file, &run_error_format}}) {
        cmd->add_option("file", *file, "Source file (.msh) with `fn main()`")->required();
        cmd->add_option("-O", opts->opt_level, "Optimisation level 0-3 (default 2)")->check(CLI::Range(0, 3));
        cmd->add_option("-j,--jobs", opts->jobs,
                        "Threads that optimise and emit a large program's code (default 0: one per core; the "
                        "output is the same)")
            ->check(CLI::Range(0, 1024));
        cmd->add_option("--mesh", opts->meshes,
                        "Rebind a declared mesh's axis sizes: NAME=axis:size,... (repeatable), e.g. Pod=data:1,model:1")
            ->allow_extra_args(false);
        cmd->add_flag("--strict-comm", opts->strict_comm, "Every communicating coercion is an error (E0406)");
        add_cost_options(cmd, *opts);
        cmd->add_option("--plan-search", opts->plan_search, "How many extra lowerings of each function the whole-function plan search may try (default 32; 0: each value's plan is chosen where it is made)")
            ->check(CLI::Range(0, 100000));
        cmd->add_option("--error-format", *format, "Diagnostics as `human`, `json` or `short`")
            ->check(CLI::IsMember({"human", "json", "short"}));
        cmd->add_option("--stdlib", opts->stdlib_dir, "Standard library folder");
        cmd->add_flag("--time-report", opts->time_report, "Print the time each phase took (stderr)");
        cmd->add_option("--color", color_mode, "Colour diagnostics: auto, always, never")
            ->check(CLI::IsMember({"auto", "always", "never"}));
        cmd->add_flag("--gpu", opts->gpu,
                      "Also compile the data-parallel loops to GPU kernels (PTX, run with --device=cuda)");
        cmd->add_option("--gpu-arch", opts->gpu_arch, "The GPU for --gpu (default sm_90: H100/H200)")
            ->check(CLI::IsMember({"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"}));
    }
    build_cmd->add_option("-o", build.output,
                          "Output file (default: the source file's stem; with --emit=obj, STEM.o; with a printed "
                          "--emit form, where it is written instead of standard output)")
        ->check([](const std::string& v) { return v.empty() ? std::string("an empty output file name") : std::string(); });
    build_cmd->add_option("--emit", build.emit,
                          "Print an intermediate form instead: gir, local, llvm, asm, ptx (the GPU kernels); or write an object file: obj")
        ->check(CLI::IsMember({"gir-checked", "gir", "local", "llvm", "asm", "ptx", "obj"}));
    run_cmd->add_option("args", run.run_args, "Arguments for the program (after `--`)");

    CheckOptions shard;
    shard.stdlib_dir = check.stdlib_dir;
    std::string shard_format = "text", shard_error_format = "human";
    CLI::App* shard_cmd = app.add_subcommand(
        "shard", "Choose every `with auto` layout (the modelled step time, minimised under --memory) and say why");
    shard_cmd->add_option("file", shard.files, "Source file (.msh) with `fn main()`")->required()->expected(1);
    shard_cmd->add_option("-o", shard.output,
                          "Write the program with every `auto` replaced by its layout (a folder when the sites lie "
                          "in several files)")
        ->check([](const std::string& v) { return v.empty() ? std::string("an empty output file name") : std::string(); });
    shard_cmd->add_option("--format", shard_format, "`text` or `json`")->check(CLI::IsMember({"text", "json"}));
    shard_cmd->add_option("--mesh", shard.meshes, "Rebind a declared mesh's axis sizes: NAME=axis:size,... (repeatable)")
        ->allow_extra_args(false);
    shard_cmd->add_option("--plan-search", shard.plan_search,
                          "How many extra lowerings of each function the whole-function plan search may try (default 32)")
        ->check(CLI::Range(0, 100000));
    add_cost_options(shard_cmd, shard);
    shard_cmd->add_flag("--strict-comm", shard.strict_comm, "Every communicating coercion is an error (E0406)");
    shard_cmd->add_option("--error-format", shard_error_format, "Diagnostics as `human`, `json` or `short`")
        ->check(CLI::IsMember({"human", "json", "short"}));
    shard_cmd->add_option("--stdlib", shard.stdlib_dir, "Standard library folder");
    shard_cmd->add_option("--color", color_mode, "Colour diagnostics: auto, always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}));
    for (auto [cmd, opts] : {std::pair{check_cmd, &check}, std::pair{explain_cmd, &explain}, std::pair{build_cmd, &build},
                             std::pair{run_cmd, &run}, std::pair{shard_cmd, &shard}}) {
        cmd->add_option("--auto-time-limit", opts->auto_time_limit_s,
                        "Seconds the `with auto` solve may take (default 60; past it the best plan found is kept)")
            ->check(CLI::Range(0.1, 86400.0));
    }
    // The pass list's debugging options (src/pipeline/), on every command that runs it.
    auto pass_name_check = [](const std::string& name) {
        if (name == "all" || pipeline::find_pass(name)) return std::string();
        return fmt::format("no pass `{}` (the passes: {}; or `all`)", name, pipeline::pass_names());
    };
    OptOptions opt;
    std::string opt_error_format = "human";
    CLI::App* opt_cmd = app.add_subcommand("opt", "Run passes on a GIR file (the text of --emit=gir) and print the result");
    opt_cmd->add_option("file", opt.file, "GIR file (`-`: standard input)");
    opt_cmd->add_option("--pass", opt.passes,
                        "A pass to run, in the order given (repeatable or comma-separated): autodiff, "
                        "combine-collectives, partition; none: the module is read, verified and printed again")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(pass_name_check);
    opt_cmd->add_flag("--list-passes", opt.list_passes, "Print the pass list (every pass, what it reads and writes)");
    opt_cmd->add_option("-o", opt.output, "Write the result here instead of standard output")
        ->check([](const std::string& v) { return v.empty() ? std::string("an empty output file name") : std::string(); });
    opt_cmd->add_flag("--strict-comm", opt.strict_comm, "autodiff: a communicating coercion of a backward pass is an error (E0406)");
    opt_cmd->add_option("--error-format", opt_error_format, "Diagnostics as `human`, `json` or `short`")
        ->check(CLI::IsMember({"human", "json", "short"}));
    opt_cmd->add_option("--color", color_mode, "Colour diagnostics: auto, always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}));
    for (auto [cmd, dump, verify] : {std::tuple{check_cmd, &check.dump_after, &check.verify_each},
                                     std::tuple{explain_cmd, &explain.dump_after, &explain.verify_each},
                                     std::tuple{build_cmd, &build.dump_after, &build.verify_each},
                                     std::tuple{run_cmd, &run.dump_after, &run.verify_each},
                                     std::tuple{opt_cmd, &opt.dump_after, &opt.verify_each}}) {
        cmd->add_option("--dump-after", *dump,
                        "Print the IR after this pass to stderr (repeatable or comma-separated; `all`: after every "
                        "pass; `meshc opt --list-passes` lists them)")
            ->delimiter(',')
            ->allow_extra_args(false)
            ->check(pass_name_check);
        cmd->add_flag("--verify-each", *verify, "Run the IR verifier after every pass that changes the IR");
    }

    lsp::ServerOptions lsp_options;
    lsp_options.stdlib_dir = check.stdlib_dir;
    CLI::App* lsp_cmd = app.add_subcommand("lsp", "Run the language server on stdin/stdout (LSP, JSON-RPC)");
    lsp_cmd->add_option("--stdlib", lsp_options.stdlib_dir, "Standard library folder");
    lsp_cmd->add_flag("--strict-comm", lsp_options.strict_comm, "Check as `meshc check --strict-comm`");
    lsp_cmd->add_flag("--log", lsp_options.verbose, "Log each message and check to stderr");

    std::string help_topic;
    CLI::App* help_cmd = app.add_subcommand("help", "Show help for meshc or a sub-command");
    help_cmd->add_option("command", help_topic, "Sub-command");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int status = app.exit(e);
        if (status != 0) suggest_spelling(app, argc, argv);
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
    if (lsp_cmd->parsed()) return lsp::run_server(std::cin, std::cout, lsp_options);
    if (opt_cmd->parsed()) {
        if (opt.file.empty() && !opt.list_passes) {
            std::cerr << "meshc: `opt` needs a GIR file (`-`: standard input)\n" << opt_cmd->help();
            return 2;
        }
        opt.error_format = error_format_of(opt_error_format);
        opt.color = use_color(color_mode);
        try {
            return run_opt(opt);
        } catch (const InternalError& e) {
            std::cerr << "meshc: internal compiler error: " << e.message << "\n";
            return 2;
        }
    }
    if (shard_cmd->parsed()) {
        shard.error_format = error_format_of(shard_error_format);
        shard.color = use_color(color_mode);
        try {
            return run_shard(shard, shard_format);
        } catch (const InternalError& e) {
            std::cerr << "meshc: internal compiler error: " << e.message << "\n";
            return 2;
        }
    }
    if (build_cmd->parsed() || run_cmd->parsed()) {
        bool is_run = run_cmd->parsed();
        CheckOptions& opts = is_run ? run : build;
        opts.files = {is_run ? run_file : build_file};
        opts.error_format = error_format_of(is_run ? run_error_format : build_error_format);
        opts.color = use_color(color_mode);
        int status;
        try {
            status = run_check(opts);
        } catch (const InternalError& e) {
            std::cerr << "meshc: internal compiler error: " << e.message << "\n";
            return 2;
        }
        if (status != 0 || !is_run) return status;
        std::vector<char*> argv_run;
        argv_run.push_back(built_executable.data());
        for (std::string& a : opts.run_args) argv_run.push_back(a.data());
        argv_run.push_back(nullptr);
        std::cout.flush();
        execv(built_executable.c_str(), argv_run.data());
        std::cerr << fmt::format("meshc: cannot run `{}`: {}\n", built_executable, std::strerror(errno));
        return 2;
    }
    if (predict_cmd->parsed()) {
        predict.explain_format = predict_format;
        predict.error_format = error_format_of(predict_error_format);
        predict.color = use_color(color_mode);
        check = predict;
    } else if (explain_cmd->parsed()) {
        explain.explain_format = explain_format;
        explain.error_format = error_format_of(explain_error_format);
        explain.color = use_color(color_mode);
        check = explain;
    } else if (!check_cmd->parsed()) {
        std::cerr << app.help();
        return 2;
    } else {
        check.error_format = error_format_of(error_format);
        check.color = use_color(color_mode);
        if (!check.output.empty() && check.emit.empty()) {
            std::cerr << "meshc: `-o` needs `--emit` (check writes no other file)\n";
            return 2;
        }
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

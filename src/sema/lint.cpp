// The W-code lints and the memory budget; see lint.h.
#include "sema/lint.h"

#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sema/explain.h"

namespace meshc::sema {

namespace {

const ast::Item* fn_item(const Program& program, const ir::Function& f) {
    for (const auto& module : program.modules) {
        for (const ast::Item* item : module->items) {
            if (item->kind == ast::ItemKind::Fn && item->name.name == f.name && item->span.file == f.span.file) return item;
        }
    }
    return nullptr;
}

std::string bytes_text(double b) {
    if (b >= 1073741824.0) return fmt::format("{:.1f} GiB", b / 1073741824.0);
    if (b >= 1048576.0) return fmt::format("{:.1f} MiB", b / 1048576.0);
    return fmt::format("{:.0f} bytes", b);
}

/// A mesh axis of size > 1 that no forward contraction of a function instance splits
/// or leaves pending over.
struct Waste {
    int32_t mesh = -1;
    size_t axis = 0;
    const ir::Op* first = nullptr;  // the first contraction on that mesh
    size_t count = 0;               // contractions on that mesh
    std::set<ir::ValueId> operands; // their operands
};

std::vector<Waste> wasted_axes(const ir::Module& module, const ir::Function& f) {
    struct PerMesh {
        ir::AxisSet used = 0;
        const ir::Op* first = nullptr;
        size_t count = 0;
        std::set<ir::ValueId> operands;
    };
    std::map<int32_t, PerMesh> meshes;
    ir::for_each_op(f.ops, [&](const ir::Op& op) {
        if (op.kind != ir::OpKind::Contract || op.backward || op.results.empty()) return;
        const ir::TensorType& r = f.types[op.results[0]];
        if (r.mesh < 0) return;
        PerMesh& m = meshes[r.mesh];
        if (!m.first) m.first = &op;
        ++m.count;
        m.used |= r.layout.split_axes() | r.layout.partial;
        for (ir::ValueId v : op.operands) {
            m.used |= f.types[v].layout.split_axes() | f.types[v].layout.partial;
            m.operands.insert(v);
        }
    });
    std::vector<Waste> out;
    for (const auto& [mesh_index, m] : meshes) {
        const ir::Mesh& mesh = module.meshes[static_cast<size_t>(mesh_index)];
        for (size_t a = 0; a < mesh.axes.size(); ++a) {
            if (mesh.axes[a].size <= 1 || (m.used & ir::axis_bit(a))) continue;
            out.push_back(Waste{mesh_index, a, m.first, m.count, m.operands});
        }
    }
    return out;
}

Diagnostic& report_waste(const ir::Module& module, const ir::Function& f, const Waste& w, Span at, bool called,
                         DiagnosticEngine& diags) {
    const ir::Mesh& mesh = module.meshes[static_cast<size_t>(w.mesh)];
    const std::string& axis = mesh.axes[w.axis].name;
    auto& d = diags.emit(DiagCode::W0001, at,
                         fmt::format("`{}` splits nothing in `{}`{}: its {} devices repeat the same work", axis, f.name,
                                     called ? " (called here)" : "", mesh.axes[w.axis].size));
    // Said negatively for one contraction too ("the one contraction ... has an operand
    // split" read as the opposite of the warning).
    d.note(w.count == 1 ? fmt::format("the one contraction of `{}` on `{}` has no operand or result split over `{}` and no sum "
                                      "pending over it",
                                      ir::function_label(f), mesh.name, axis)
                        : fmt::format("none of the {} contractions of `{}` on `{}` has an operand or result split over `{}` "
                                      "or a sum pending over it",
                                      w.count, ir::function_label(f), mesh.name, axis),
           called ? w.first->span : Span{});
    d.note(fmt::format("split a dim of a weight or of the batch over `{}` (Megatron: the hidden dim of both matrices), "
                       "or declare the mesh without it",
                       axis));
    return d;
}

/// W0002 for the parameters of `f` feeding the contractions of `w`.
void report_defaults(const Program& program, const ir::Module& module, const ir::Function& f, const Waste& w,
                     DiagnosticEngine& diags) {
    const ast::Item* item = fn_item(program, f);
    if (!item) return;
    const ir::Mesh& mesh = module.meshes[static_cast<size_t>(w.mesh)];
    const std::string& axis = mesh.axes[w.axis].name;
    for (size_t i = 0; i < item->params.size() && i < f.params.size(); ++i) {
        const ast::Type* t = item->params[i].type;
        if (!t || t->kind != ast::TypeKind::Tensor) break;  // struct and tuple parameters flatten: stop here
        if (!t->mesh || t->layout || t->any_layout || t->partial || t->shape.size() < 2) continue;
        ir::ValueId v = f.params[i];
        if (!w.operands.count(v) || !f.types[v].layout.is_replicated()) continue;
        auto& d = diags.emit(DiagCode::W0002, item->params[i].span,
                             fmt::format("`{}` is replicated over `{}` only because its type names no layout",
                                         item->params[i].name.name, axis));
        d.note(fmt::format("every device holds all {} of it and repeats the contraction it feeds",
                           bytes_text(static_cast<double>(f.types[v].local_bytes(&mesh)))));
        d.note(fmt::format("write `with {{...}}` splitting one of its dims over `{}`, `with auto` to let meshc "
                           "choose (`meshc shard` says why), or `with {{}}` to keep it replicated on purpose",
                           axis));
    }
}

}  // namespace

void lint_module(const SourceManager& sources, const Program& program, const ir::Module& module,
                 DiagnosticEngine& diags, const LintOptions& options) {
    // Reported in the file checked: a function of it at its first contraction (and its
    // parameters), a function of an imported module at the first call from that file.
    FileId root = program.modules.empty() ? kNoFile : program.modules.front()->file;
    std::set<std::tuple<std::string, int32_t, size_t>> reported;
    std::vector<std::vector<Waste>> waste(module.functions.size());
    for (size_t i = 0; i < module.functions.size(); ++i) {
        const ir::Function& f = module.functions[i];
        if (!f.has_errors && f.derived.empty()) waste[i] = wasted_axes(module, f);
    }
    for (size_t i = 0; i < module.functions.size(); ++i) {
        const ir::Function& f = module.functions[i];
        if (f.span.file != root) continue;
        for (const Waste& w : waste[i]) {
            if (!reported.insert({f.name, w.mesh, w.axis}).second) continue;
            report_waste(module, f, w, w.first->span, false, diags);
            report_defaults(program, module, f, w, diags);
        }
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            if (op.kind != ir::OpKind::Call || op.callee < 0 || static_cast<size_t>(op.callee) >= module.functions.size()) return;
            const ir::Function& g = module.functions[static_cast<size_t>(op.callee)];
            if (g.span.file == root || op.span.file != root) return;
            for (const Waste& w : waste[static_cast<size_t>(op.callee)]) {
                if (!reported.insert({g.name, w.mesh, w.axis}).second) continue;
                report_waste(module, g, w, op.span, true, diags);
            }
        });
    }
    if (options.memory_budget <= 0) return;
    ProgramFacts facts = analyse_program(module);
    if (facts.main < 0) return;
    int64_t peak = facts.peak_bytes[static_cast<size_t>(facts.main)];
    if (peak <= options.memory_budget) return;
    const ir::Function& main = module.functions[static_cast<size_t>(facts.main)];
    auto& d = diags.emit(DiagCode::E0709, main.span,
                         fmt::format("the program's peak is {} bytes per device, over the budget of {} bytes (`--memory`)",
                                     peak, options.memory_budget));
    // The instance that holds the most at its own peak, where the memory goes.
    size_t worst = static_cast<size_t>(facts.main);
    for (size_t i = 0; i < module.functions.size(); ++i) {
        if (facts.runs[i] > 0 && i != static_cast<size_t>(facts.main) && facts.peak_bytes[i] > facts.peak_bytes[worst] / 2 &&
            facts.peak_bytes[i] >= facts.peak_bytes[worst] - facts.peak_bytes[worst] / 8) {
            worst = i;
        }
    }
    if (worst != static_cast<size_t>(facts.main)) {
        d.note(fmt::format("most of it is live inside `{}`: {} bytes per device", ir::function_label(module.functions[worst]),
                           facts.peak_bytes[worst]),
               module.functions[worst].span);
    }
    d.note("split more of the largest tensors over the mesh (`meshc explain` lists every value's layout), use "
           "`@checkpoint` on repeated blocks, or raise `--memory`");
    (void)sources;
}

}  // namespace meshc::sema

// `meshc explain` over GIR; see explain.h. The driver calls it after checking; the JSON
// form is the stable one (tools, tests), the text form is for people.
#include "sema/explain.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <ostream>

namespace meshc::sema {

using ir::OpKind;

std::optional<CollectiveInfo> collective_info(const ir::Module& module, const ir::Function& function,
                                              const ir::Op& op) {
    CollectiveKind kind;
    switch (op.kind) {
    case OpKind::AllReduce: kind = CollectiveKind::AllReduce; break;
    case OpKind::ReduceScatter: kind = CollectiveKind::ReduceScatter; break;
    case OpKind::AllGather: kind = CollectiveKind::AllGather; break;
    case OpKind::AllToAll: kind = CollectiveKind::AllToAll; break;
    default: return std::nullopt;
    }
    if (op.operands.size() != 1 || op.results.size() != 1) return std::nullopt;
    ir::ValueId unsplit_side = kind == CollectiveKind::AllGather ? op.results[0] : op.operands[0];
    if (unsplit_side >= function.types.size()) return std::nullopt;
    const ir::TensorType& type = function.types[unsplit_side];
    const Mesh* mesh = type.mesh >= 0 && static_cast<size_t>(type.mesh) < module.meshes.size()
                           ? module.mesh(type.mesh)
                           : nullptr;
    if (!mesh) return std::nullopt;
    CollectiveInfo info{kind, op.axes, type.local_bytes(mesh), {}};
    info.cost = collective_cost(kind, *mesh, op.axes, static_cast<double>(info.buffer_bytes));
    return info;
}

namespace {

bool selected(const ir::Function& f, std::string_view only_fn) {
    return only_fn.empty() || f.name == only_fn;
}

std::optional<LineCol> position(const SourceManager& sources, Span span) {
    if (!span.valid() || span.file >= sources.file_count()) return std::nullopt;
    return sources.line_col(span.file, span.begin);
}

std::string at(const SourceManager& sources, Span span) {
    auto lc = position(sources, span);
    return lc ? fmt::format("{}:{}", lc->line, lc->col) : std::string("?:?");
}

/// `30.004 us`, `1.250 ms`, `2.000 s`.
std::string seconds(double s) {
    if (s < 1e-3) return fmt::format("{:.3f} us", s * 1e6);
    if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.3f} s", s);
}

const Mesh* mesh_of(const ir::Module& module, const ir::TensorType& t) {
    if (t.mesh < 0 || static_cast<size_t>(t.mesh) >= module.meshes.size()) return nullptr;
    return module.mesh(t.mesh);
}

std::string value_label(const ir::Function& f, ir::ValueId id) {
    if (id < f.names.size() && !f.names[id].empty()) return fmt::format("%{} {}", id, f.names[id]);
    return fmt::format("%{}", id);
}

/// `all_reduce sum over (model)`, `all_to_all over (data) dim 0 -> 1`.
std::string describe(const ir::Module& module, const ir::Function& f, const ir::Op& op) {
    std::string out(ir::op_name(op.kind));
    if (op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter) {
        out += " ";
        out += ir::reduce_name(op.reduce);
    }
    const Mesh* mesh = nullptr;
    if (!op.operands.empty() && op.operands[0] < f.types.size()) mesh = mesh_of(module, f.types[op.operands[0]]);
    out += " over (" + (mesh ? mesh->axis_names(op.axes) : fmt::format("{:#x}", op.axes)) + ")";
    switch (op.kind) {
    case OpKind::ReduceScatter:
    case OpKind::AllGather:
    case OpKind::LocalSlice: out += fmt::format(" dim {}", op.dim); break;
    case OpKind::AllToAll: out += fmt::format(" dim {} -> {}", op.dim, op.dim2); break;
    default: break;
    }
    return out;
}

std::string global_shape(const ir::TensorType& t) {
    return fmt::format("{} [{}]", ast::dtype_name(t.dtype), fmt::join(t.shape, ", "));
}

std::string why(const ir::Op& op) {
    if (!op.inserted) return "  (written)";
    return op.reason.empty() ? "  (inserted)" : "  (inserted: " + op.reason + ")";
}

void explain_function(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                      const ir::Function& f) {
    out << "fn " << ir::function_label(f) << "\n";

    out << "  layouts:\n";
    auto show = [&](ir::ValueId id, const std::string& where) {
        if (id >= f.types.size()) return;
        const ir::TensorType& t = f.types[id];
        if (t.mesh < 0 && t.rank() == 0) return;  // a scalar has no layout
        out << "    " << value_label(f, id) << ": " << ir::type_to_string(module, t) << "  " << where << "\n";
    };
    for (ir::ValueId p : f.params) show(p, "(parameter)");
    ir::for_each_op(f.ops, [&](const ir::Op& op) {
        for (ir::ValueId r : op.results) show(r, at(sources, op.span));
    });

    double total = 0;
    std::vector<std::string> collectives, free;
    ir::for_each_op(f.ops, [&](const ir::Op& op) {
        if (auto info = collective_info(module, f, op)) {
            total += info->cost.seconds;
            const ir::TensorType& t = f.types[op.operands[0]];
            collectives.push_back(fmt::format(
                "    {}  {} of {}: b = {} bytes per device, sends {:.0f} bytes, {}{}", at(sources, op.span),
                describe(module, f, op), global_shape(t), info->buffer_bytes, info->cost.bytes_sent,
                seconds(info->cost.seconds), why(op)));
        } else if (op.kind == OpKind::LocalSlice || op.kind == OpKind::MakePartial) {
            std::string shape = !op.operands.empty() && op.operands[0] < f.types.size()
                                    ? " of " + global_shape(f.types[op.operands[0]])
                                    : std::string();
            free.push_back(fmt::format("    {}  {}{}: no communication{}", at(sources, op.span),
                                       describe(module, f, op), shape, why(op)));
        }
    });
    if (collectives.empty()) {
        out << "  collectives: none\n";
    } else {
        out << fmt::format("  collectives: {}, {} in all\n", collectives.size(), seconds(total));
        for (const std::string& line : collectives) out << line << "\n";
    }
    if (!free.empty()) {
        out << "  local slices (free):\n";
        for (const std::string& line : free) out << line << "\n";
    }
}

}  // namespace

void explain_text(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn) {
    bool first = true;
    for (const ir::Function& f : module.functions) {
        if (!selected(f, only_fn)) continue;
        if (!first) out << "\n";
        first = false;
        explain_function(out, sources, module, f);
    }
}

void explain_json(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn) {
    using nlohmann::ordered_json;
    auto place = [&](ordered_json& j, Span span) {
        auto lc = position(sources, span);
        j["line"] = lc ? lc->line : 0;
        j["col"] = lc ? lc->col : 0;
    };
    auto axes_of = [&](const ir::Op& op, const Mesh& mesh) {
        ordered_json axes = ordered_json::array();
        for (size_t a = 0; a < mesh.axes.size(); ++a) {
            if (op.axes & axis_bit(a)) axes.push_back(mesh.axes[a].name);
        }
        return axes;
    };
    auto provenance = [&](ordered_json& j, const ir::Op& op) {
        j["inserted"] = op.inserted;
        j["reason"] = op.inserted && !op.reason.empty() ? ordered_json(op.reason) : ordered_json(nullptr);
    };
    auto dims = [&](ordered_json& j, const ir::Op& op) {
        if (op.kind == OpKind::ReduceScatter || op.kind == OpKind::AllGather || op.kind == OpKind::LocalSlice) j["dim"] = op.dim;
        if (op.kind == OpKind::AllToAll) {
            j["from"] = op.dim;
            j["to"] = op.dim2;
        }
    };
    ordered_json functions = ordered_json::array();
    for (const ir::Function& f : module.functions) {
        if (!selected(f, only_fn)) continue;
        ordered_json fn;
        fn["name"] = f.name;
        fn["instance"] = ordered_json::object();
        for (const auto& [var, size] : f.instance) fn["instance"][var] = size;
        fn["collectives"] = ordered_json::array();
        ordered_json meshes = ordered_json::object();
        for (const auto& [var, mesh] : f.mesh_instance) meshes[var] = mesh;
        // Every value's inferred type and layout (scalars off any mesh have none).
        ordered_json layouts = ordered_json::array();
        auto show = [&](ir::ValueId id, Span span, bool parameter) {
            if (id >= f.types.size()) return;
            const ir::TensorType& t = f.types[id];
            if (t.mesh < 0 && t.rank() == 0) return;
            ordered_json v;
            v["value"] = id;
            v["name"] = id < f.names.size() && !f.names[id].empty() ? ordered_json(f.names[id]) : ordered_json(nullptr);
            v["type"] = ir::type_to_string(module, t);
            v["parameter"] = parameter;
            place(v, span);
            layouts.push_back(std::move(v));
        };
        for (ir::ValueId p : f.params) show(p, f.span, true);
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            for (ir::ValueId r : op.results) show(r, op.span, false);
        });
        ordered_json free = ordered_json::array();
        double total = 0;
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            if (auto info = collective_info(module, f, op)) {
                const ir::TensorType& t = f.types[op.operands[0]];
                const Mesh& mesh = *mesh_of(module, t);
                ordered_json c;
                c["kind"] = std::string(collective_name(info->kind));
                if (op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter) {
                    c["op"] = std::string(ir::reduce_name(op.reduce));
                } else {
                    c["op"] = nullptr;
                }
                c["axes"] = axes_of(op, mesh);
                c["dtype"] = std::string(ast::dtype_name(t.dtype));
                c["shape"] = t.shape;
                c["bytes"] = info->buffer_bytes;
                c["cost_s"] = info->cost.seconds;
                place(c, op.span);
                dims(c, op);
                c["sent_bytes"] = info->cost.bytes_sent;
                provenance(c, op);
                total += info->cost.seconds;
                fn["collectives"].push_back(std::move(c));
                return;
            }
            if (op.kind != OpKind::LocalSlice && op.kind != OpKind::MakePartial) return;
            if (op.operands.empty() || op.operands[0] >= f.types.size()) return;
            const ir::TensorType& t = f.types[op.operands[0]];
            const Mesh* mesh = mesh_of(module, t);
            if (!mesh) return;
            ordered_json c;
            c["op"] = std::string(ir::op_name(op.kind));
            c["axes"] = axes_of(op, *mesh);
            c["dtype"] = std::string(ast::dtype_name(t.dtype));
            c["shape"] = t.shape;
            place(c, op.span);
            dims(c, op);
            provenance(c, op);
            free.push_back(std::move(c));
        });
        fn["total_cost_s"] = total;
        fn["label"] = ir::function_label(f);
        fn["mesh_instance"] = std::move(meshes);
        fn["free"] = std::move(free);
        fn["layouts"] = std::move(layouts);
        functions.push_back(std::move(fn));
    }
    ordered_json root;
    root["functions"] = std::move(functions);
    out << root.dump(2) << "\n";
}

}  // namespace meshc::sema

// GIR helpers and the textual form (--emit=gir); see gir.h. The module comes from the
// checker (sema/check/); the text is read by people and by FileCheck tests, so it is
// one op per line, stable, with each op's source position and every inserted coercion
// marked with its reason.
#include "ir/gir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <ostream>

namespace meshc::ir {

size_t dtype_bytes(DType t) {
    switch (t) {
    case DType::Bool: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
    }
    return 0;
}

int64_t TensorType::elements() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

int64_t TensorType::local_bytes(const Mesh* mesh) const {
    // Robust against layouts the verifier would reject (wrong rank, unknown axes), so
    // that diagnostics about broken IR can still show sizes.
    int64_t n = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
        int64_t factor = 1;
        if (mesh && d < layout.dims.size()) {
            for (uint8_t a : layout.dims[d]) {
                if (a < mesh->axes.size()) factor *= mesh->axes[a].size;
            }
        }
        n *= factor > 1 ? (shape[d] + factor - 1) / factor : shape[d];
    }
    return n * static_cast<int64_t>(dtype_bytes(dtype));
}

std::string_view op_name(OpKind kind) {
    switch (kind) {
#define MESHC_OP(name, text) \
    case OpKind::name: return text;
#include "ir/ops.def"
#undef MESHC_OP
    }
    return "?";
}

std::string_view create_name(CreateKind kind) {
    switch (kind) {
    case CreateKind::Zeros: return "zeros";
    case CreateKind::Ones: return "ones";
    case CreateKind::Full: return "full";
    case CreateKind::Iota: return "iota";
    case CreateKind::RandomNormal: return "random_normal";
    case CreateKind::RandomUniform: return "random_uniform";
    case CreateKind::Permutation: return "permutation";
    }
    return "?";
}

std::string_view reduce_name(ReduceKind kind) {
    switch (kind) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Mean: return "mean";
    case ReduceKind::Max: return "max";
    }
    return "?";
}

namespace {

const Mesh* mesh_or_null(const Module& module, int32_t index) {
    if (index < 0 || static_cast<size_t>(index) >= module.meshes.size()) return nullptr;
    return &module.meshes[static_cast<size_t>(index)];
}

/// An axis's name, or `#i` where the index is not an axis of the mesh (broken IR).
std::string axis_label(const Mesh* mesh, size_t axis) {
    if (mesh && axis < mesh->axes.size()) return mesh->axes[axis].name;
    return fmt::format("#{}", axis);
}

std::string partial_names(AxisSet set, const Mesh* mesh) {
    std::string out;
    for (size_t i = 0; i < 64; ++i) {
        if (!(set & ir::axis_bit(i))) continue;
        if (!out.empty()) out += ", ";
        out += axis_label(mesh, i);
    }
    return out;
}

/// `{0: data, 1: (data2, model)}`, without the pending axes (printed separately).
std::string splits_to_string(const Layout& layout, const Mesh* mesh) {
    return ir::layout_to_string(Layout{layout.dims, 0}, mesh ? *mesh : Mesh{});
}

std::string quoted(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        default: out += c;
        }
    }
    return out + "\"";
}

std::string axes_clause(const Module& module, const Function& f, const Op& op) {
    // The axes' mesh is the one of the collective's operand (or result).
    int32_t mesh_index = -1;
    if (!op.operands.empty() && op.operands[0] < f.types.size()) mesh_index = f.types[op.operands[0]].mesh;
    if (mesh_index < 0 && !op.results.empty() && op.results[0] < f.types.size()) {
        mesh_index = f.types[op.results[0]].mesh;
    }
    return "over (" + partial_names(op.axes, mesh_or_null(module, mesh_index)) + ")";
}

std::string number(double value) { return fmt::format("{}", value); }

class Printer {
public:
    Printer(std::ostream& out, const SourceManager& sources, const Module& module)
        : out_(out), sources_(sources), module_(module) {
        // Two instances can print the same label (a function instantiated for two struct
        // types of one shape): the second is `@f#2`, the third `@f#3`, so that every call
        // names one function (ir/gir_parse.h reads them back).
        std::map<std::string, int> seen;
        for (const Function& f : module_.functions) {
            std::string l = function_label(f);
            int n = ++seen[l];
            labels_.push_back(n == 1 ? l : fmt::format("{}#{}", l, n));
        }
    }

    void print() {
        print_device();
        for (const Mesh& mesh : module_.meshes) print_mesh(mesh);
        static constexpr const char* kArgKinds[] = {"i64", "f32", "bool", "path"};
        for (const ProgramArg& a : module_.args) {
            out_ << "arg " << quoted(a.name) << ": " << kArgKinds[a.kind] << " = " << quoted(a.default_text) << "\n";
        }
        for (size_t i = 0; i < module_.functions.size(); ++i) {
            if (i || !module_.meshes.empty() || !module_.args.empty()) out_ << "\n";
            print_function(module_.functions[i]);
        }
    }

private:
    /// The device model, when it is not the default (`cpu`): every rate, so that a module
    /// read back (ir/gir_parse.h) costs its ops the same.
    void print_device() {
        const DeviceModel& d = module_.device;
        const DeviceModel def;
        if (d.name == def.name && d.matmul_f64 == def.matmul_f64 && d.matmul_f32 == def.matmul_f32 &&
            d.matmul_f16 == def.matmul_f16 && d.matmul_int == def.matmul_int && d.vector_flops == def.vector_flops &&
            d.memory_bandwidth == def.memory_bandwidth && d.memory_bytes == def.memory_bytes) {
            return;
        }
        out_ << fmt::format(
            "device {} = {{matmul_f64: {:g}, matmul_f32: {:g}, matmul_f16: {:g}, matmul_int: {:g}, vector_flops: {:g}, "
            "memory_bandwidth: {:g}, memory_bytes: {:g}}}\n",
            quoted(d.name), d.matmul_f64, d.matmul_f32, d.matmul_f16, d.matmul_int, d.vector_flops, d.memory_bandwidth,
            d.memory_bytes);
    }

    void print_mesh(const Mesh& mesh) {
        out_ << "mesh " << mesh.name << " = [";
        for (size_t i = 0; i < mesh.axes.size(); ++i) {
            const ir::MeshAxis& axis = mesh.axes[i];
            if (i) out_ << ", ";
            out_ << axis.name << ": " << axis.size;
            if (axis.latency != ir::kDefaultLatency || axis.bandwidth != ir::kDefaultBandwidth) {
                out_ << fmt::format(" {{latency: {:g}, bandwidth: {:g}}}", axis.latency, axis.bandwidth);
            }
        }
        out_ << "]\n";
    }

    std::string type_of(const Function& f, ValueId id) const {
        if (id >= f.types.size()) return "<no type>";
        return type_to_string(module_, f.types[id]);
    }

    static std::string use(ValueId id) { return id == kNoValue ? "%<none>" : fmt::format("%{}", id); }

    /// A value where it is defined: `%3`, or `%3 /*h*/` when it has a source name.
    static std::string def(const Function& f, ValueId id) {
        std::string out = use(id);
        if (id < f.names.size() && !f.names[id].empty()) out += " /*" + f.names[id] + "*/";
        return out;
    }

    static std::string uses(const std::vector<ValueId>& ids) {
        std::string out;
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ", ";
            out += use(ids[i]);
        }
        return out;
    }

    /// `path:line:col`, as the checker writes a run-time check's position ("slice" without one).
    std::string position_text(Span span) const {
        if (!span.valid() || span.file >= sources_.file_count()) return "slice";
        LineCol lc = sources_.line_col(span.file, span.begin);
        return fmt::format("{}:{}:{}", sources_.path(span.file), lc.line, lc.col);
    }

    std::string location(const Function& f, Span span) const {
        if (!span.valid() || span.file >= sources_.file_count()) return {};
        LineCol lc = sources_.line_col(span.file, span.begin);
        // `+N`: the construct's length in bytes (what a pass quotes of it, e.g. autodiff's
        // "backward of 12:5 tanh(x)").
        std::string length = span.end > span.begin ? fmt::format("+{}", span.end - span.begin) : "";
        // Ops from another file than their function's (an inlined library layer) name their file.
        if (f.span.valid() && span.file != f.span.file) {
            return fmt::format("@{}:{}:{}{}", sources_.path(span.file), lc.line, lc.col, length);
        }
        return fmt::format("@{}:{}{}", lc.line, lc.col, length);
    }

    void print_function(const Function& f) {
        out_ << "func @" << labels_[static_cast<size_t>(&f - module_.functions.data())] << "(";
        for (size_t i = 0; i < f.params.size(); ++i) {
            if (i) out_ << ", ";
            out_ << def(f, f.params[i]) << ": " << type_of(f, f.params[i]);
        }
        out_ << ")";
        if (!f.results.empty()) {
            out_ << " -> (";
            for (size_t i = 0; i < f.results.size(); ++i) {
                if (i) out_ << ", ";
                out_ << type_of(f, f.results[i]);
            }
            out_ << ")";
        }
        if (f.checkpoint) out_ << " checkpoint";
        out_ << " {";
        // The function's own position names its file; its ops' positions are in that file
        // unless they name another.
        if (f.span.valid() && f.span.file < sources_.file_count()) {
            LineCol lc = sources_.line_col(f.span.file, f.span.begin);
            out_ << fmt::format("  @{}:{}:{}", sources_.path(f.span.file), lc.line, lc.col);
            if (f.span.end > f.span.begin) out_ << fmt::format("+{}", f.span.end - f.span.begin);
        }
        out_ << "\n";
        for (const Op& op : f.ops) print_op(f, op);
        if (!f.results.empty()) out_ << "  return " << uses(f.results) << "\n";
        out_ << "}\n";
    }

    /// The op's name, attributes and operands: `contract "bd,dh->bh" %0, %1`.
    std::string body(const Function& f, const Op& op) const {
        std::string out(op_name(op.kind));
        auto operands = [&] {
            std::string text;  // appended, not `" " + ...` (GCC 12's -Wrestrict false positive at -O3)
            if (!op.operands.empty()) {
                text += ' ';
                text += uses(op.operands);
            }
            return text;
        };
        switch (op.kind) {
        case OpKind::Constant:
            out += " " + number(op.number) + operands();
            break;
        case OpKind::Create:
            out += " ";
            out += create_name(op.create);
            if ((op.create == CreateKind::RandomNormal || op.create == CreateKind::RandomUniform || op.create == CreateKind::Permutation) &&
                op.operands.empty()) {
                out += fmt::format(" seed {}", op.seed);
            }
            if (!op.operands.empty()) out += " seed";  // a run-time seed: the operand
            if (op.create == CreateKind::Full) out += " " + number(op.number);
            if (op.dim >= 0) out += fmt::format(" dim {}", op.dim);
            out += operands();
            break;
        case OpKind::Load:
        case OpKind::Save:
            if (!op.ints.empty() && op.ints[0] >= 0 && static_cast<size_t>(op.ints[0]) < module_.args.size()) {
                out += " arg " + quoted(module_.args[static_cast<size_t>(op.ints[0])].name);
            }
            out += " " + quoted(op.text);
            if (!op.names.empty()) {  // .safetensors: the tensor names
                out += " [";
                for (size_t i = 0; i < op.names.size(); ++i) out += (i ? ", " : "") + quoted(op.names[i]);
                out += "]";
            }
            out += operands();
            break;
        case OpKind::Arg:
            out += !op.ints.empty() && op.ints[0] >= 0 && static_cast<size_t>(op.ints[0]) < module_.args.size()
                       ? " " + quoted(module_.args[static_cast<size_t>(op.ints[0])].name)
                       : fmt::format(" <argument #{}>", op.ints.empty() ? -1 : op.ints[0]);
            break;
        case OpKind::Contract:
        case OpKind::Print:
            out += " " + quoted(op.text) + operands();
            break;
        case OpKind::Elementwise:
            out += " ";
            out += ew_name(op.ew);
            out += operands();
            break;
        case OpKind::Reduce:
            out += " ";
            out += reduce_name(op.reduce);
            // keep_dims shows in the result's rank (ir/gir_parse.cpp reads it from there).
            out += fmt::format(" dims [{}]", fmt::join(op.ints, ", ")) + operands();
            break;
        case OpKind::AllReduce:
            out += " ";
            out += reduce_name(op.reduce);
            out += " " + axes_clause(module_, f, op) + operands();
            break;
        case OpKind::ReduceScatter:
            out += " ";
            out += reduce_name(op.reduce);
            out += " " + axes_clause(module_, f, op) + fmt::format(" dim {}", op.dim) + operands();
            break;
        case OpKind::AllGather:
        case OpKind::LocalSlice:
            out += " " + axes_clause(module_, f, op) + fmt::format(" dim {}", op.dim) + operands();
            break;
        case OpKind::AllToAll:
            out += " " + axes_clause(module_, f, op) + fmt::format(" dim {} -> {}", op.dim, op.dim2) +
                   operands();
            break;
        case OpKind::MakePartial:
            out += " " + axes_clause(module_, f, op) + operands();
            break;
        case OpKind::For:
        case OpKind::If:
        case OpKind::Place:
        case OpKind::Embedding:
            out += operands();
            break;
        case OpKind::Reshape:
        case OpKind::Broadcast:
            out += fmt::format(" [{}]", fmt::join(op.ints, ", ")) + operands();
            break;
        case OpKind::OneHot:
            out += fmt::format(" {}", op.ints.empty() ? 0 : op.ints[0]) + operands();
            break;
        case OpKind::Slice:
        case OpKind::Pad:
            // A run-time start is the second operand: `slice dim 0 [%5, 4] %2`.
            if (op.operands.size() == 2 && op.ints.size() == 2) {
                out += fmt::format(" dim {} [%{}, {}] %{}", op.dim, op.operands[1], op.ints[1], op.operands[0]);
                // Where a run-time start out of range is reported: the op's own position
                // unless it says otherwise.
                // (A pad's start is in range by construction: its text stays empty.)
                if (op.kind == OpKind::Slice ? op.text != position_text(op.span) : !op.text.empty()) {
                    out += " at " + quoted(op.text);
                }
            } else {
                out += fmt::format(" dim {} [{}]", op.dim, fmt::join(op.ints, ", ")) + operands();
            }
            break;
        case OpKind::Concat:
            out += fmt::format(" dim {}", op.dim) + operands();
            break;
        case OpKind::Grad:
        case OpKind::Call: {
            if (op.kind == OpKind::Grad) out += op.dim == 1 ? " value_and_grad" : "";
            bool known = op.callee >= 0 && static_cast<size_t>(op.callee) < module_.functions.size();
            out += " @" + (known ? labels_[static_cast<size_t>(op.callee)] : fmt::format("<function #{}>", op.callee));
            out += "(" + uses(op.operands) + ")";
            break;
        }
        }
        return out;
    }

    void print_op(const Function& f, const Op& op, int depth = 1) {
        std::string line(static_cast<size_t>(depth) * 2, ' ');
        if (!op.results.empty()) {
            for (size_t i = 0; i < op.results.size(); ++i) {
                if (i) line += ", ";
                line += def(f, op.results[i]);
            }
            line += " = ";
        }
        line += body(f, op);
        if (op.results.size() == 1) {
            line += " : " + type_of(f, op.results[0]);
        } else if (op.results.size() > 1) {
            line += " : (";
            for (size_t i = 0; i < op.results.size(); ++i) {
                if (i) line += ", ";
                line += type_of(f, op.results[i]);
            }
            line += ")";
        }
        std::string loc = location(f, op.span);
        if (!loc.empty()) line += "  " + loc;
        if (!op.call_path.empty()) {  // the calls autodiff inlined it through, outermost first
            line += " via ";
            for (size_t i = 0; i < op.call_path.size(); ++i) {
                std::string at = location(f, op.call_path[i]);
                line += (i ? ", " : "") + (at.empty() ? std::string("@?") : at);
            }
        }
        if (op.inserted) {
            line += op.reason.empty() ? "  // inserted" : "  // inserted: " + op.reason;
        } else if (op.backward) {
            line += "  // backward";
        }
        out_ << line << "\n";
        std::string indent(static_cast<size_t>(depth) * 2 + 2, ' ');
        for (const Region& region : op.regions) {
            out_ << indent << "region(";
            for (size_t i = 0; i < region.args.size(); ++i) {
                if (i) out_ << ", ";
                out_ << def(f, region.args[i]) << ": " << type_of(f, region.args[i]);
            }
            out_ << ") {\n";
            for (const Op& inner : region.ops) print_op(f, inner, depth + 2);
            out_ << indent << "  yield " << uses(region.yields) << "\n";
            out_ << indent << "}\n";
        }
    }

    std::ostream& out_;
    const SourceManager& sources_;
    const Module& module_;
    std::vector<std::string> labels_;  // per function
};

}  // namespace

std::string type_to_string(const Module& module, const TensorType& type) {
    std::string_view dtype = dtype_name(type.dtype);
    bool has_splits = type.layout.split_axes() != 0;
    if (type.mesh < 0 && type.shape.empty() && !has_splits && type.layout.partial == 0) {
        return std::string(dtype);
    }
    const Mesh* mesh = mesh_or_null(module, type.mesh);
    std::string out = fmt::format("Tensor {} [{}]", dtype, fmt::join(type.shape, ", "));
    if (type.mesh >= 0) out += " on " + (mesh ? mesh->name : fmt::format("<mesh #{}>", type.mesh));
    if (has_splits) out += " with " + splits_to_string(type.layout, mesh);
    if (type.layout.partial) out += " partial {" + partial_names(type.layout.partial, mesh) + "}";
    return out;
}

std::string function_label(const Function& function) {
    if (!function.derived.empty()) {
        Function base;
        base.name = function.name;
        base.instance = function.instance;
        base.mesh_instance = function.mesh_instance;
        base.dtype_instance = function.dtype_instance;
        return function.derived + "(" + function_label(base) + ")";
    }
    if (function.instance.empty() && function.mesh_instance.empty() && function.dtype_instance.empty()) return function.name;
    std::string out = function.name + "[";
    bool first = true;
    for (const auto& [var, dtype] : function.dtype_instance) {
        if (!first) out += ", ";
        first = false;
        out += fmt::format("{} = {}", var, dtype);
    }
    for (const auto& [var, mesh] : function.mesh_instance) {
        if (!first) out += ", ";
        first = false;
        out += fmt::format("{} = {}", var, mesh);
    }
    for (const auto& [var, size] : function.instance) {
        if (!first) out += ", ";
        first = false;
        out += fmt::format("{} = {}", var, size);
    }
    return out + "]";
}

void print_module(std::ostream& out, const SourceManager& sources, const Module& module) {
    Printer(out, sources, module).print();
}

}  // namespace meshc::ir

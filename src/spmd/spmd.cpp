// SPMD partitioning (see spmd.h for the local meaning of each op).
#include "spmd/spmd.h"

#include "ir/op_rules.h"

#include <map>
#include <ostream>

#include <fmt/format.h>

namespace meshc::spmd {

using ir::Op;
using ir::OpKind;
using ir::TensorType;

std::vector<int64_t> local_shape(const ir::Module& module, const TensorType& type) {
    std::vector<int64_t> shape = type.shape;
    const ir::Mesh* mesh = module.mesh(type.mesh);
    if (!mesh) return shape;
    for (size_t d = 0; d < shape.size() && d < type.layout.dims.size(); ++d) {
        int64_t factor = type.layout.split_factor(*mesh, d);
        if (factor > 1) shape[d] /= factor;
    }
    return shape;
}

namespace {

std::vector<int32_t> axes_of(ir::AxisSet set) {
    std::vector<int32_t> out;
    for (int32_t a = 0; a < 64; ++a) {
        if (set & ir::axis_bit(static_cast<size_t>(a))) out.push_back(a);
    }
    return out;
}

// `longer` minus its prefix `prefix`; empty with ok = false when it is not a prefix.
std::vector<int32_t> suffix_after(const ir::AxisList& prefix, const ir::AxisList& longer, bool& ok) {
    std::vector<int32_t> out;
    ok = prefix.size() <= longer.size();
    for (size_t i = 0; ok && i < prefix.size(); ++i) ok = prefix[i] == longer[i];
    if (!ok) return out;
    for (size_t i = prefix.size(); i < longer.size(); ++i) out.push_back(longer[i]);
    return out;
}

}  // namespace

std::vector<int32_t> group_axes(const ir::Function& fn, const Op& op) {
    bool ok = true;
    switch (ir::op_rule(op.kind).comm) {
    case ir::CommRule::AllReduce:
    case ir::CommRule::MakePartial: return axes_of(op.axes);
    case ir::CommRule::AllGather: {
        const auto& in = fn.types[op.operands[0]].layout.dims[static_cast<size_t>(op.dim)];
        const auto& out = fn.types[op.results[0]].layout.dims[static_cast<size_t>(op.dim)];
        auto g = suffix_after(out, in, ok);
        return ok ? g : axes_of(op.axes);
    }
    case ir::CommRule::ReduceScatter:
    case ir::CommRule::LocalSlice: {
        const auto& in = fn.types[op.operands[0]].layout.dims[static_cast<size_t>(op.dim)];
        const auto& out = fn.types[op.results[0]].layout.dims[static_cast<size_t>(op.dim)];
        auto g = suffix_after(in, out, ok);
        return ok ? g : axes_of(op.axes);
    }
    case ir::CommRule::AllToAll: {
        const auto& in = fn.types[op.operands[0]].layout.dims[static_cast<size_t>(op.dim)];
        const auto& out = fn.types[op.results[0]].layout.dims[static_cast<size_t>(op.dim)];
        auto g = suffix_after(out, in, ok);
        return ok ? g : axes_of(op.axes);
    }
    case ir::CommRule::None: return {};
    }
    return {};
}

LocalModule partition(const ir::Module& module) {
    LocalModule out;
    out.global = &module;
    for (const ir::Mesh& m : module.meshes) out.device_count = std::max(out.device_count, m.device_count());
    for (size_t i = 0; i < module.functions.size(); ++i) {
        const ir::Function& fn = module.functions[i];
        LocalFunction lf;
        lf.global = &fn;
        lf.shape.reserve(fn.types.size());
        for (const TensorType& t : fn.types) lf.shape.push_back(local_shape(module, t));
        out.functions.push_back(std::move(lf));
        if (fn.name == "main" && fn.instance.empty() && fn.params.empty()) out.entry = static_cast<int32_t>(i);
    }
    return out;
}

// ---------------------------------------------------------------- verifier

namespace {

class Verifier {
public:
    Verifier(const LocalModule& m, const LocalFunction& f, std::vector<std::string>& problems)
        : m_(m), f_(f), fn_(*f.global), problems_(problems) {}

    void run() { ops(fn_.ops); }

private:
    const LocalModule& m_;
    const LocalFunction& f_;
    const ir::Function& fn_;
    std::vector<std::string>& problems_;

    const std::vector<int64_t>& shape(ir::ValueId v) const { return f_.shape[v]; }
    const ir::Mesh* mesh_of(ir::ValueId v) const { return m_.global->mesh(fn_.types[v].mesh); }

    void problem(const Op& op, const std::string& what) {
        problems_.push_back(fmt::format("{}: {} %{}: {}", ir::function_label(fn_), ir::op_name(op.kind),
                                        op.results.empty() ? -1 : static_cast<int64_t>(op.results[0]), what));
    }

    int64_t group_size(ir::ValueId v, const std::vector<int32_t>& axes) const {
        const ir::Mesh* mesh = mesh_of(v);
        int64_t n = 1;
        for (int32_t a : axes) {
            if (!mesh || a < 0 || static_cast<size_t>(a) >= mesh->axes.size()) return -1;
            n *= mesh->axes[static_cast<size_t>(a)].size;
        }
        return n;
    }

    void ops(const std::vector<Op>& list) {
        for (const Op& op : list) {
            check(op);
            for (const ir::Region& r : op.regions) ops(r.ops);
        }
    }

    void check(const Op& op) {
        switch (op.kind) {
        case OpKind::Elementwise: {
            const auto& r = shape(op.results[0]);
            for (ir::ValueId v : op.operands) {
                const auto& s = shape(v);
                if (s.size() > r.size()) {
                    problem(op, "operand of higher rank than the result");
                    continue;
                }
                size_t off = r.size() - s.size();
                for (size_t d = 0; d < s.size(); ++d) {
                    if (s[d] != 1 && s[d] != r[off + d]) problem(op, fmt::format("operand dim {} is {}, result {}", d, s[d], r[off + d]));
                }
            }
            break;
        }
        case OpKind::AllReduce:
        case OpKind::Place:
            for (size_t i = 0; i < op.operands.size() && i < op.results.size(); ++i) {
                if (shape(op.operands[i]) != shape(op.results[i])) problem(op, "changes the local shape");
            }
            if (op.operands.size() != op.results.size()) problem(op, "has as many results as operands");
            break;
        case OpKind::MakePartial: {
            // A split over a made-partial axis leaves the dim (the piece sits in zeros).
            const auto& in = shape(op.operands[0]);
            const auto& out = shape(op.results[0]);
            bool ok = in.size() == out.size();
            for (size_t d = 0; ok && d < in.size(); ++d) {
                const auto& li = fn_.types[op.operands[0]].layout.dims[d];
                const auto& lo = fn_.types[op.results[0]].layout.dims[d];
                bool prefix = lo.size() <= li.size();
                for (size_t k = 0; prefix && k < lo.size(); ++k) prefix = lo[k] == li[k];
                ok = prefix && out[d] % in[d] == 0;
            }
            if (!ok) problem(op, "its result's splits are not a prefix of its operand's");
            break;
        }
        case OpKind::AllGather:
        case OpKind::ReduceScatter:
        case OpKind::LocalSlice:
        case OpKind::AllToAll: {
            auto axes = group_axes(fn_, op);
            int64_t n = group_size(op.operands[0], axes);
            if (n < 1 || axes.empty()) {
                problem(op, "no device group");
                break;
            }
            ir::AxisSet set = 0;
            for (int32_t a : axes) set |= ir::axis_bit(static_cast<size_t>(a));
            if (set != op.axes) problem(op, "its group axes are not the axes it runs over");
            auto in = shape(op.operands[0]);
            const auto& out = shape(op.results[0]);
            auto d = static_cast<size_t>(op.dim);
            if (op.kind == OpKind::AllGather) in[d] *= n;
            else if (op.kind == OpKind::AllToAll) {
                in[d] *= n;
                in[static_cast<size_t>(op.dim2)] /= n;
            } else {
                if (in[d] % n != 0) problem(op, "dim not divisible by the group size");
                in[d] /= n;
            }
            if (in != out) problem(op, "local shapes do not match the group size");
            break;
        }
        case OpKind::Contract: {
            auto arrow = op.text.find("->");
            if (arrow == std::string::npos) {
                problem(op, "bad einsum spec");
                break;
            }
            std::string ins = op.text.substr(0, arrow), outs = op.text.substr(arrow + 2);
            std::vector<std::string> parts;
            size_t comma = ins.find(',');
            parts.push_back(ins.substr(0, comma));
            if (comma != std::string::npos) parts.push_back(ins.substr(comma + 1));
            std::map<char, int64_t> size;
            auto bind = [&](const std::string& letters, const std::vector<int64_t>& s) {
                if (letters.size() != s.size()) {
                    problem(op, "einsum rank mismatch");
                    return;
                }
                for (size_t i = 0; i < s.size(); ++i) {
                    auto [it, fresh] = size.emplace(letters[i], s[i]);
                    if (!fresh && it->second != s[i]) problem(op, fmt::format("letter {} is {} and {}", letters[i], it->second, s[i]));
                }
            };
            for (size_t i = 0; i < parts.size() && i < op.operands.size(); ++i) bind(parts[i], shape(op.operands[i]));
            bind(outs, shape(op.results[0]));
            break;
        }
        case OpKind::Constant:
        case OpKind::Create:
        case OpKind::Load:
        case OpKind::Arg:
        case OpKind::Reduce:
        case OpKind::Reshape:
        case OpKind::Broadcast:
        case OpKind::Slice:
        case OpKind::Pad:
        case OpKind::Concat:
        case OpKind::OneHot:
        case OpKind::Embedding:
        case OpKind::Call:
        case OpKind::Print:
        case OpKind::Save:
        case OpKind::For:
        case OpKind::If:
        case OpKind::Grad: break;
        }
    }
};

}  // namespace

std::vector<std::string> verify(const LocalModule& module) {
    std::vector<std::string> problems;
    for (const LocalFunction& f : module.functions) Verifier(module, f, problems).run();
    return problems;
}

// ---------------------------------------------------------------- printer

namespace {

std::string shape_str(DType dt, const std::vector<int64_t>& s) {
    return fmt::format("{}[{}]", dtype_name(dt), fmt::join(s, ", "));
}

class Printer {
public:
    Printer(std::ostream& out, const LocalModule& m, const LocalFunction& f) : out_(out), m_(m), f_(f), fn_(*f.global) {}

    void run() {
        out_ << "fn " << ir::function_label(fn_) << "(";
        for (size_t i = 0; i < fn_.params.size(); ++i) out_ << (i ? ", " : "") << value(fn_.params[i]);
        out_ << ")";
        if (!fn_.results.empty()) {
            out_ << " -> (";
            for (size_t i = 0; i < fn_.results.size(); ++i) out_ << (i ? ", " : "") << type(fn_.results[i]);
            out_ << ")";
        }
        out_ << " {\n";
        ops(fn_.ops, 1);
        out_ << "  return";
        for (size_t i = 0; i < fn_.results.size(); ++i) out_ << (i ? ", " : " ") << "%" << fn_.results[i];
        out_ << "\n}\n";
    }

private:
    std::ostream& out_;
    const LocalModule& m_;
    const LocalFunction& f_;
    const ir::Function& fn_;

    std::string type(ir::ValueId v) const { return shape_str(fn_.types[v].dtype, f_.shape[v]); }
    std::string value(ir::ValueId v) const { return fmt::format("%{}: {}", v, type(v)); }

    std::string group(const Op& op) const {
        const ir::Mesh* mesh = m_.global->mesh(fn_.types[op.operands[0]].mesh);
        if (!mesh) return "?";
        std::vector<std::string> names;
        int64_t n = 1;
        for (int32_t a : group_axes(fn_, op)) {
            names.push_back(mesh->axes[static_cast<size_t>(a)].name);
            n *= mesh->axes[static_cast<size_t>(a)].size;
        }
        return fmt::format("{}{{{}}} ({} devices)", mesh->name, fmt::join(names, ", "), n);
    }

    void ops(const std::vector<Op>& list, int depth) {
        std::string pad(static_cast<size_t>(depth) * 2, ' ');
        for (const Op& op : list) {
            out_ << pad;
            for (size_t i = 0; i < op.results.size(); ++i) out_ << (i ? ", " : "") << "%" << op.results[i];
            if (!op.results.empty()) out_ << " = ";
            out_ << ir::op_name(op.kind);
            switch (op.kind) {
            case OpKind::Elementwise: out_ << "." << ir::ew_name(op.ew); break;
            case OpKind::Reduce: out_ << "." << ir::reduce_name(op.reduce) << fmt::format(" dims [{}]", fmt::join(op.ints, ", ")); break;
            case OpKind::Create: out_ << "." << ir::create_name(op.create); break;
            case OpKind::Contract: out_ << " \"" << op.text << "\""; break;
            case OpKind::Constant: out_ << " " << op.number; break;
            case OpKind::AllReduce:
            case OpKind::ReduceScatter:
                out_ << "." << ir::reduce_name(op.reduce) << " group " << group(op);
                if (op.kind == OpKind::ReduceScatter) out_ << " dim " << op.dim;
                break;
            case OpKind::AllGather:
            case OpKind::LocalSlice: out_ << " group " << group(op) << " dim " << op.dim; break;
            case OpKind::AllToAll: out_ << " group " << group(op) << " from " << op.dim << " to " << op.dim2; break;
            case OpKind::MakePartial: out_ << " over " << group(op); break;
            case OpKind::Call: out_ << " @" << ir::function_label(m_.global->functions[static_cast<size_t>(op.callee)]); break;
            case OpKind::Load:
            case OpKind::Save:
            case OpKind::Print:
                out_ << " \"" << op.text << "\"";
                if (!op.names.empty()) out_ << " [\"" << fmt::format("{}", fmt::join(op.names, "\", \"")) << "\"]";
                break;
            case OpKind::Slice:
            case OpKind::Pad:
                // A run-time start is the second operand.
                if (op.operands.size() == 2) out_ << fmt::format(" dim {} [%{}, {}]", op.dim, op.operands[1], op.ints[1]);
                else out_ << fmt::format(" dim {} [{}]", op.dim, fmt::join(op.ints, ", "));
                break;
            case OpKind::Arg: out_ << " \"" << m_.global->args[static_cast<size_t>(op.ints[0])].name << "\""; break;
            case OpKind::Concat: out_ << " dim " << op.dim; break;
            case OpKind::Place:
            case OpKind::Reshape:
            case OpKind::Broadcast:
            case OpKind::OneHot:
            case OpKind::Embedding:
            case OpKind::For:
            case OpKind::If:
            case OpKind::Grad: break;
            }
            size_t shown = (op.kind == OpKind::Slice || op.kind == OpKind::Pad) ? 1 : op.operands.size();
            for (size_t i = 0; i < shown && i < op.operands.size(); ++i) out_ << (i ? ", %" : " %") << op.operands[i];
            if (!op.results.empty()) {
                out_ << " :";
                for (size_t i = 0; i < op.results.size(); ++i) out_ << (i ? ", " : " ") << type(op.results[i]);
            }
            out_ << "\n";
            for (size_t r = 0; r < op.regions.size(); ++r) {
                const ir::Region& region = op.regions[r];
                out_ << pad << (r == 0 ? "  do" : "  else") << " (";
                for (size_t i = 0; i < region.args.size(); ++i) out_ << (i ? ", " : "") << value(region.args[i]);
                out_ << ") {\n";
                ops(region.ops, depth + 2);
                out_ << pad << "    yield";
                for (size_t i = 0; i < region.yields.size(); ++i) out_ << (i ? ", %" : " %") << region.yields[i];
                out_ << "\n" << pad << "  }\n";
            }
        }
    }
};

}  // namespace

void print(std::ostream& out, const LocalModule& module) {
    out << fmt::format("// local IR: one program for each of {} devices\n", module.device_count);
    for (const ir::Mesh& m : module.global->meshes) {
        std::vector<std::string> axes;
        for (const auto& a : m.axes) axes.push_back(fmt::format("{}: {}", a.name, a.size));
        out << fmt::format("mesh {} = [{}]  // devices 0..{}\n", m.name, fmt::join(axes, ", "), m.device_count() - 1);
    }
    for (const LocalFunction& f : module.functions) {
        out << "\n";
        Printer(out, module, f).run();
    }
}

}  // namespace meshc::spmd

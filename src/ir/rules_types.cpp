// The type, shape and sharding rule of each GIR op (docs/language.md, "Sharding rules"
// and "The coercion table"): the result types that follow from the operand types and the
// op's attributes, or why none does. Factored ops derive their result layout and pending
// sums from their factors (rules_factors.cpp); collectives from the coercion table;
// reshapes from their chains of factors. The verifier compares every op's results with
// what this gives; the checker and autodiff build result types with it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ir/einsum.h"
#include "ir/rules_internal.h"

namespace meshc::ir {

std::string RuleInput::operand_label(size_t k) const {
    if (k < labels.size()) return labels[k];
    return fmt::format("#{}", k);
}

std::string RuleInput::result_label(size_t i) const {
    if (operands.size() + i < labels.size()) return labels[operands.size() + i];
    return fmt::format("#{}", i);
}

namespace rules {

AxisSet axes_set(const AxisList& axes) {
    AxisSet set = 0;
    for (uint8_t a : axes) set |= axis_bit(a);
    return set;
}

const Mesh* mesh_of(const Module& module, const TensorType& t) {
    return t.mesh >= 0 && static_cast<size_t>(t.mesh) < module.meshes.size() ? &module.meshes[static_cast<size_t>(t.mesh)]
                                                                             : nullptr;
}

namespace {

int popcount(AxisSet set) {
    int n = 0;
    for (; set; set &= set - 1) ++n;
    return n;
}

std::string axes_text(const Mesh* mesh, AxisSet set) {
    return "{" + (mesh ? mesh->axis_names(set) : std::to_string(set)) + "}";
}

std::string type_text(const RuleInput& in, const TensorType& t) { return type_to_string(in.module, t); }

/// The mesh of the op's placed operands (-1: none is placed); false when they disagree.
bool operands_mesh(const RuleInput& in, int32_t& mesh, std::string& error) {
    mesh = -1;
    for (size_t k = 0; k < in.operands.size(); ++k) {
        int32_t m = in.operands[k]->mesh;
        if (m < 0) continue;
        if (mesh >= 0 && m != mesh) {
            error = fmt::format("operand {} is on mesh #{}, another on mesh #{}", in.operand_label(k), m, mesh);
            return false;
        }
        mesh = m;
    }
    return true;
}

/// A factored op's result layout: each factor's split (every operand dim it maps to
/// agreeing) on its result dim; a split summed factor pending over its axes; `pending`
/// (the operands' pending sums as the op passes them on) besides.
std::string factored_layout(const RuleInput& in, TensorType& r, AxisSet pending) {
    r.layout = Layout::replicated(r.rank());
    OpFactors fs = op_factors(in);
    if (!fs.defined) return fmt::format("the operands do not fit {}", op_name(in.op.kind));
    if (r.mesh < 0) return {};
    r.layout.partial = pending;
    const Mesh* mesh = mesh_of(in.module, r);
    const TensorType* hint = in.hint();
    if (hint && (hint->rank() != r.rank() || hint->mesh != r.mesh)) hint = nullptr;
    std::vector<std::vector<bool>> covered(in.operands.size());
    for (size_t k = 0; k < in.operands.size(); ++k) covered[k].assign(in.operands[k]->rank(), false);
    for (const Factor& f : fs.factors) {
        AxisList split;
        int first = -1;
        for (size_t k = 0; k < in.operands.size(); ++k) {
            int d = f.operand_dims[k];
            if (d < 0) continue;
            covered[k][static_cast<size_t>(d)] = true;
            const TensorType& t = *in.operands[k];
            if (t.mesh < 0) continue;
            const AxisList& axes = t.layout.dims[static_cast<size_t>(d)];
            if (first < 0) {
                split = axes;
                first = static_cast<int>(k);
            } else if (axes != split) {
                std::string what = f.name ? fmt::format("index '{}'", f.name) : fmt::format("dim {}", d);
                return fmt::format("{} is split differently in operand {} ({}) and operand {} ({})", what,
                                   in.operand_label(static_cast<size_t>(first)),
                                   type_text(in, *in.operands[static_cast<size_t>(first)]), in.operand_label(k),
                                   type_text(in, t));
            }
        }
        // A factor of the result alone (a broadcast's new dim): split as the result is.
        if (first < 0 && f.kind == FactorKind::Pass && f.result_dim >= 0 && hint) {
            split = hint->layout.dims[static_cast<size_t>(f.result_dim)];
        }
        switch (f.kind) {
        case FactorKind::Whole:
            if (!split.empty()) {
                return fmt::format("the {} dim must be unsplit: {}",
                                   in.op.kind == OpKind::Concat ? "joined" : "sliced or padded",
                                   type_text(in, *in.operands[static_cast<size_t>(first)]));
            }
            break;
        case FactorKind::Sum: r.layout.partial |= axes_set(split); break;
        case FactorKind::Pass:
            if (f.result_dim >= 0) r.layout.dims[static_cast<size_t>(f.result_dim)] = split;
            break;
        }
    }
    for (size_t k = 0; k < in.operands.size(); ++k) {
        const TensorType& t = *in.operands[k];
        if (t.mesh < 0) continue;
        for (size_t d = 0; d < t.rank(); ++d) {
            if (!covered[k][d] && !t.layout.dims[d].empty()) {
                return fmt::format("dim {} of operand {} is split but meets no dim of the result: {}", d,
                                   in.operand_label(k), type_text(in, t));
            }
        }
    }
    (void)mesh;
    return {};
}

std::string pending_free(const RuleInput& in, size_t k, std::string_view why) {
    if (in.operands[k]->layout.partial) {
        return fmt::format("operand {} has a pending sum; {}: {}", in.operand_label(k), why, type_text(in, *in.operands[k]));
    }
    return {};
}

/// A run-time integer operand (a seed, a slice start): an integer scalar, not pending.
std::string run_time_int(const RuleInput& in, size_t k, const char* what) {
    const TensorType& t = *in.operands[k];
    if (t.rank() != 0 || t.layout.partial || (t.dtype != DType::I64 && t.dtype != DType::I32)) {
        return fmt::format("{} must be an integer scalar, found {}", what, type_text(in, t));
    }
    return {};
}

/// The path attribute of a load or save: a path argument where it names one.
std::string path_argument(const RuleInput& in) {
    const Op& op = in.op;
    if (!op.ints.empty() && (op.ints[0] < 0 || static_cast<size_t>(op.ints[0]) >= in.module.args.size() ||
                             in.module.args[static_cast<size_t>(op.ints[0])].kind != ProgramArg::Path)) {
        return "the path is not a path argument";
    }
    return {};
}

/// The result type a builder or the verifier gave, for ops whose type is not their operands'.
std::string needs_hint(const RuleInput& in, std::vector<TensorType>& out) {
    for (size_t i = 0; i < in.op.results.size() || i < in.results.size(); ++i) {
        const TensorType* h = in.hint(i);
        if (!h) return fmt::format("the type of {}'s result {} is its own (none was given)", op_name(in.op.kind), i);
        out.push_back(*h);
    }
    return {};
}

}  // namespace

// ---------------------------------------------------------------- creations and I/O

std::string type_constant(const RuleInput& in, std::vector<TensorType>& out) {
    TensorType r;
    if (const TensorType* h = in.hint()) r = *h;
    if (r.rank() != 0 || r.layout.partial) return "a constant is a scalar: " + type_text(in, r);
    out.push_back(std::move(r));
    return {};
}

std::string type_create(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    if (std::string e = needs_hint(in, out); !e.empty()) return e;
    const TensorType& r = out[0];
    if (op.create == CreateKind::Permutation && (r.rank() != 1 || r.dtype != DType::I64 || r.layout.partial)) {
        return "a permutation is an i64 vector: " + type_text(in, r);
    }
    // Zeros are a pending sum on any axes (every piece zero); other creations are whole.
    if (r.layout.partial && op.create != CreateKind::Zeros) return "only zeros are created pending: " + type_text(in, r);
    if (!in.operands.empty()) {
        if (op.create != CreateKind::RandomNormal && op.create != CreateKind::RandomUniform &&
            op.create != CreateKind::Permutation) {
            return "only a random creation takes an operand (its seed)";
        }
        return run_time_int(in, 0, "the seed");
    }
    return {};
}

std::string type_load(const RuleInput& in, std::vector<TensorType>& out) {
    if (std::string e = needs_hint(in, out); !e.empty()) return e;
    if (std::string e = path_argument(in); !e.empty()) return e;
    if (in.op.names.size() > 1) return "a load reads one tensor";
    if (out[0].layout.partial) return "a load is not pending: " + type_text(in, out[0]);
    return {};
}

std::string type_arg(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    if (op.ints.size() != 1 || op.ints[0] < 0 || static_cast<size_t>(op.ints[0]) >= in.module.args.size()) {
        return "not a program argument";
    }
    if (std::string e = needs_hint(in, out); !e.empty()) return e;
    const TensorType& r = out[0];
    if (r.rank() != 0 || r.mesh >= 0 || r.layout.partial) return "a program argument is a mesh-free scalar: " + type_text(in, r);
    return {};
}

std::string type_io(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    if (op.kind == OpKind::Save) {
        if (std::string e = path_argument(in); !e.empty()) return e;
        if (op.names.empty() && op.operands.size() != 1) return "a .npy save writes one tensor";
        if (!op.names.empty() && op.names.size() != op.operands.size()) return "a .safetensors save names each operand";
    }
    if (op.kind == OpKind::Print && !op.names.empty()) return "print has no tensor names";
    return {};
}

std::string type_structural(const RuleInput& in, std::vector<TensorType>& out) {
    // Calls, loops, branches and grads: their results are their callee's or regions'
    // (the verifier compares them there).
    return needs_hint(in, out);
}

// ---------------------------------------------------------------- computations

std::string type_elementwise(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    const EwRule& rule = ew_rule(op.ew);
    TensorType r;
    if (!broadcast_shape(in, r.shape)) {
        std::vector<std::string> shapes;
        for (const TensorType* t : in.operands) shapes.push_back(fmt::format("[{}]", fmt::join(t->shape, ", ")));
        return fmt::format("operand shapes {} do not broadcast", fmt::join(shapes, " and "));
    }
    std::string error;
    if (!operands_mesh(in, r.mesh, error)) return error;
    // Element type: a cast's target, bool, or the data operands' (a placed or ranked one first).
    size_t first_data = op.ew == Ew::Select ? 1 : 0;
    switch (rule.result) {
    case EwResult::Bool: r.dtype = DType::Bool; break;
    case EwResult::Target: r.dtype = op.dtype; break;
    case EwResult::Operand: {
        r.dtype = in.operands[first_data]->dtype;
        for (size_t k = first_data; k < in.operands.size(); ++k) {
            if (in.operands[k]->rank() > 0 || in.operands[k]->mesh >= 0) {
                r.dtype = in.operands[k]->dtype;
                break;
            }
        }
        break;
    }
    }
    // Pending sums (docs/language.md, "Sharding rules", rule 2).
    auto partial = [&](size_t k) { return in.operands[k]->layout.partial; };
    AxisSet pending = 0;
    bool ok = true;
    switch (rule.pending) {
    case EwPending::Sum:
        pending = partial(0);
        for (size_t k = 1; k < in.operands.size(); ++k) ok = ok && partial(k) == pending;
        break;
    case EwPending::Keep: pending = partial(0); break;
    case EwPending::Product:
        pending = partial(0) | partial(1);
        ok = partial(0) == 0 || partial(1) == 0;
        break;
    case EwPending::Quotient:
        pending = partial(0);
        ok = partial(1) == 0;
        break;
    case EwPending::Whole:
        for (size_t k = 0; k < in.operands.size(); ++k) ok = ok && partial(k) == 0;
        break;
    }
    if (!ok) return fmt::format("operands of {} with these pending sums need a reduction first", rule.name);
    if (std::string e = factored_layout(in, r, pending); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_reduce(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    const TensorType& x = *in.operands[0];
    std::vector<bool> reduced(x.rank(), op.ints.empty());  // no dims listed: every dim
    for (int64_t d : op.ints) {
        if (d < 0 || static_cast<size_t>(d) >= x.rank() || reduced[static_cast<size_t>(d)]) {
            return fmt::format("invalid reduced dims [{}] for rank {}", fmt::join(op.ints, ", "), x.rank());
        }
        reduced[static_cast<size_t>(d)] = true;
    }
    if (op.reduce == ReduceKind::Max && x.layout.partial) return "max over a value with a pending sum needs a reduction first";
    TensorType r;
    r.dtype = x.dtype;
    r.mesh = x.mesh;
    for (size_t d = 0; d < x.rank(); ++d) {
        if (!reduced[d]) r.shape.push_back(x.shape[d]);
        else if (op.keep_dims) r.shape.push_back(1);
    }
    if (std::string e = factored_layout(in, r, x.layout.partial); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_contract(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    auto spec = parse_einsum(op.text);
    if (!spec) return fmt::format("einsum spec \"{}\" has no '->'", op.text);
    if (spec->inputs.size() != in.operands.size()) {
        return fmt::format("einsum spec \"{}\" has {} inputs for {} operands", op.text, spec->inputs.size(),
                           in.operands.size());
    }
    int64_t sizes[26];
    std::fill(std::begin(sizes), std::end(sizes), -1);
    AxisSet pending = 0;
    for (size_t k = 0; k < spec->inputs.size(); ++k) {
        const std::string& term = spec->inputs[k];
        const TensorType& t = *in.operands[k];
        if (term.size() != t.rank()) {
            return fmt::format("einsum term \"{}\" does not match the rank {} of operand {}", term, t.rank(),
                               in.operand_label(k));
        }
        if (t.dtype != in.operands[0]->dtype) {
            return fmt::format("operand {} has another element type than operand {}", in.operand_label(k),
                               in.operand_label(0));
        }
        for (size_t i = 0; i < term.size(); ++i) {
            if (term[i] < 'a' || term[i] > 'z') return fmt::format("einsum spec \"{}\" has a character other than a-z", op.text);
            int64_t& s = sizes[term[i] - 'a'];
            if (s >= 0 && s != t.shape[i]) {
                return fmt::format("index '{}' has size {} in operand {} but {} elsewhere", term[i], t.shape[i],
                                   in.operand_label(k), s);
            }
            s = t.shape[i];
        }
        pending |= t.layout.partial;
    }
    TensorType r;
    r.dtype = in.operands[0]->dtype;
    for (char c : spec->output) {
        if (c < 'a' || c > 'z' || sizes[c - 'a'] < 0) {
            return fmt::format("einsum output \"{}\" names an index no input has", spec->output);
        }
        r.shape.push_back(sizes[c - 'a']);
    }
    std::string error;
    if (!operands_mesh(in, r.mesh, error)) return error;
    if (std::string e = factored_layout(in, r, pending); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

// ---------------------------------------------------------------- data movement

std::string type_broadcast(const RuleInput& in, std::vector<TensorType>& out) {
    const TensorType& x = *in.operands[0];
    const std::vector<int64_t>& shape = in.op.ints;
    if (shape.size() < x.rank()) return fmt::format("cannot broadcast rank {} to rank {}", x.rank(), shape.size());
    size_t off = shape.size() - x.rank();
    for (size_t d = 0; d < x.rank(); ++d) {
        if (x.shape[d] != 1 && x.shape[d] != shape[off + d]) {
            return fmt::format("cannot broadcast [{}] to [{}]", fmt::join(x.shape, ", "), fmt::join(shape, ", "));
        }
    }
    TensorType r = x;
    r.shape = shape;
    if (std::string e = factored_layout(in, r, x.layout.partial); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_slice(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    const TensorType& x = *in.operands[0];
    if (op.ints.size() != 2) return "a slice or pad has [start, size]";
    if (in.operands.size() == 2) {
        if (std::string e = run_time_int(in, 1, "the start"); !e.empty()) return e;
    }
    if (op.dim < 0 || static_cast<size_t>(op.dim) >= x.rank()) return "dim out of range";
    auto d = static_cast<size_t>(op.dim);
    int64_t start = op.ints[0], size = op.ints[1];
    if (op.kind == OpKind::Slice) {
        bool fits = in.operands.size() == 2 ? size >= 1 && size <= x.shape[d] : start >= 0 && size >= 1 && start + size <= x.shape[d];
        if (!fits) return fmt::format("slice [{}, {}) is outside dim {} of size {}", start, start + size, d, x.shape[d]);
    } else if (size < x.shape[d] || (in.operands.size() == 1 && (start < 0 || start + x.shape[d] > size))) {
        return fmt::format("padding dim {} of size {} to {} at {} does not hold it", d, x.shape[d], size, start);
    }
    TensorType r = x;
    r.shape[d] = size;
    if (std::string e = factored_layout(in, r, x.layout.partial); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_concat(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    const TensorType& x = *in.operands[0];
    if (op.dim < 0 || static_cast<size_t>(op.dim) >= x.rank()) return "dim out of range";
    auto d = static_cast<size_t>(op.dim);
    TensorType r = x;
    r.shape[d] = 0;
    for (size_t k = 0; k < in.operands.size(); ++k) {
        const TensorType& t = *in.operands[k];
        bool same = t.rank() == x.rank() && t.dtype == x.dtype && t.layout.partial == x.layout.partial;
        for (size_t i = 0; same && i < t.rank(); ++i) same = i == d || t.shape[i] == x.shape[i];
        if (!same) {
            return fmt::format("operand {} ({}) does not join operand {} ({}) along dim {}", in.operand_label(k),
                               type_text(in, t), in.operand_label(0), type_text(in, x), d);
        }
        r.shape[d] += t.shape[d];
    }
    std::string error;
    if (!operands_mesh(in, r.mesh, error)) return error;
    if (std::string e = factored_layout(in, r, x.layout.partial); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_one_hot(const RuleInput& in, std::vector<TensorType>& out) {
    const TensorType& ids = *in.operands[0];
    if (in.op.ints.size() != 1 || in.op.ints[0] < 1) return "one_hot has its class count";
    if (ids.dtype != DType::I32 && ids.dtype != DType::I64) return "one_hot takes integer ids, found " + type_text(in, ids);
    if (std::string e = pending_free(in, 0, "one_hot needs the summed ids"); !e.empty()) return e;
    TensorType r = ids;
    r.dtype = DType::F32;
    r.shape.push_back(in.op.ints[0]);
    if (std::string e = factored_layout(in, r, 0); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_embedding(const RuleInput& in, std::vector<TensorType>& out) {
    const TensorType& table = *in.operands[0];
    const TensorType& ids = *in.operands[1];
    if (table.rank() != 2) return "an embedding table is [V, D]: " + type_text(in, table);
    if (ids.dtype != DType::I32 && ids.dtype != DType::I64) return "embedding takes integer ids, found " + type_text(in, ids);
    if (std::string e = pending_free(in, 1, "embedding needs the summed ids"); !e.empty()) return e;
    TensorType r;
    r.dtype = table.dtype;
    r.shape = ids.shape;
    r.shape.push_back(table.shape[1]);
    std::string error;
    if (!operands_mesh(in, r.mesh, error)) return error;
    if (std::string e = factored_layout(in, r, table.layout.partial); !e.empty()) return e;
    out.push_back(std::move(r));
    return {};
}

std::string type_place(const RuleInput& in, std::vector<TensorType>& out) {
    const TensorType& x = *in.operands[0];
    TensorType r = x;
    r.mesh = in.hint() ? in.hint()->mesh : -1;
    r.layout = Layout::replicated(x.rank());
    if (!x.layout.is_replicated()) return "place takes and gives replicated values: " + type_text(in, x);
    if ((x.mesh < 0) == (r.mesh < 0)) return "place moves a value onto a mesh or off it";
    out.push_back(std::move(r));
    return {};
}

std::string type_reshape(const RuleInput& in, std::vector<TensorType>& out) {
    const TensorType& x = *in.operands[0];
    const std::vector<int64_t>& shape = in.op.ints;
    int64_t in_total = 1, out_total = 1;
    for (int64_t n : x.shape) in_total *= n;
    for (int64_t n : shape) out_total *= n;
    if (in_total != out_total) {
        return fmt::format("cannot reshape [{}] to [{}]", fmt::join(x.shape, ", "), fmt::join(shape, ", "));
    }
    const Mesh* mesh = mesh_of(in.module, x);
    ReshapeLayouts l = reshape_layouts(x.shape, x.layout, shape, mesh);
    if (mesh && !(l.need == x.layout)) {
        return fmt::format("a reshape to [{}] cannot keep the splits of {}", fmt::join(shape, ", "), type_text(in, x));
    }
    TensorType r = x;
    r.shape = shape;
    r.layout = mesh ? l.out : Layout::replicated(shape.size());
    out.push_back(std::move(r));
    return {};
}

// ---------------------------------------------------------------- collectives

std::string type_collective(const RuleInput& in, std::vector<TensorType>& out) {
    const Op& op = in.op;
    for (size_t k = 0; k < in.operands.size(); ++k) {
        const TensorType& x = *in.operands[k];
        const TensorType* hint = in.hint(k);
        if (x.mesh < 0) return fmt::format("operand {} is not on a mesh: {}", in.operand_label(k), type_text(in, x));
        if (x.mesh != in.operands[0]->mesh) return "combined tensors on different meshes";
        const Mesh& mesh = *mesh_of(in.module, x);
        AxisSet all = mesh.axes.size() >= 64 ? ~AxisSet{0} : axis_bit(mesh.axes.size()) - 1;
        if (op.axes == 0 || (op.axes & ~all) != 0) {
            return fmt::format("axes mask {:#x} is empty or names axes mesh {} does not have", op.axes, mesh.name);
        }
        std::string axes = axes_text(&mesh, op.axes);
        auto check_dim = [&](int32_t d, const char* what) -> std::string {
            if (d < 0 || static_cast<size_t>(d) >= x.rank()) return fmt::format("{} {} is not a dim of {}", what, d, type_text(in, x));
            return {};
        };
        auto k_axes = static_cast<size_t>(popcount(op.axes));
        // The axes a dim gains, minor-most, in the order the result has them where it has
        // exactly `axes` there, else ascending.
        auto gained = [&](size_t d, const AxisList& base) {
            AxisList add;
            if (hint && hint->rank() == x.rank()) {
                const AxisList& to = hint->layout.dims[d];
                if (to.size() == base.size() + k_axes && std::equal(base.begin(), base.end(), to.begin())) {
                    for (size_t i = base.size(); i < to.size(); ++i) add.push_back(to[i]);
                    if (axes_set(add) == op.axes) return add;
                }
            }
            add.clear();
            for (uint8_t a = 0; a < mesh.axes.size(); ++a) {
                if (op.axes & axis_bit(a)) add.push_back(a);
            }
            return add;
        };
        // Dim d without its minor-most `axes`; false when those are not its minor-most axes.
        auto lose = [&](size_t d, AxisList& kept, AxisList& lost) {
            const AxisList& from = x.layout.dims[d];
            if (from.size() < k_axes) return false;
            kept.clear();
            lost.clear();
            for (size_t i = 0; i < from.size(); ++i) (i < from.size() - k_axes ? kept : lost).push_back(from[i]);
            return axes_set(lost) == op.axes;
        };
        TensorType r = x;
        switch (op_rule(op.kind).comm) {
        case CommRule::AllReduce:
        case CommRule::ReduceScatter: {
            if ((x.layout.partial & op.axes) != op.axes) {
                return fmt::format("operand {} is not partial over {}: {}", in.operand_label(k), axes, type_text(in, x));
            }
            r.layout.partial &= ~op.axes;
            if (op_rule(op.kind).comm == CommRule::ReduceScatter) {
                if (std::string e = check_dim(op.dim, "dim"); !e.empty()) return e;
                auto d = static_cast<size_t>(op.dim);
                for (uint8_t a : gained(d, x.layout.dims[d])) r.layout.dims[d].push_back(a);
            }
            break;
        }
        case CommRule::AllGather: {
            if (std::string e = check_dim(op.dim, "dim"); !e.empty()) return e;
            AxisList kept, lost;
            if (!lose(static_cast<size_t>(op.dim), kept, lost)) {
                return fmt::format("dim {} must lose {}, its minor-most axes: {}", op.dim, axes, type_text(in, x));
            }
            r.layout.dims[static_cast<size_t>(op.dim)] = kept;
            break;
        }
        case CommRule::AllToAll: {
            if (std::string e = check_dim(op.dim, "from dim"); !e.empty()) return e;
            if (std::string e = check_dim(op.dim2, "to dim"); !e.empty()) return e;
            if (op.dim == op.dim2) return fmt::format("from and to are the same dim {}", op.dim);
            AxisList kept, lost;
            auto from = static_cast<size_t>(op.dim), to = static_cast<size_t>(op.dim2);
            if (!lose(from, kept, lost)) {
                return fmt::format("dim {} must lose {}, its minor-most axes: {}", op.dim, axes, type_text(in, x));
            }
            r.layout.dims[from] = kept;
            for (uint8_t a : gained(to, x.layout.dims[to])) r.layout.dims[to].push_back(a);
            break;
        }
        case CommRule::LocalSlice: {
            if (((x.layout.split_axes() | x.layout.partial) & op.axes) != 0) {
                return fmt::format("operand {} is not replicated over {}: {}", in.operand_label(k), axes, type_text(in, x));
            }
            if (std::string e = check_dim(op.dim, "dim"); !e.empty()) return e;
            auto d = static_cast<size_t>(op.dim);
            for (uint8_t a : gained(d, x.layout.dims[d])) r.layout.dims[d].push_back(a);
            break;
        }
        case CommRule::MakePartial:
            if (x.layout.partial & op.axes) {
                return fmt::format("operand {} is already partial over {}", in.operand_label(k), axes);
            }
            r.layout.partial |= op.axes;
            // A dim split over the axes becomes whole (the slice is placed in zeros).
            for (AxisList& d : r.layout.dims) {
                AxisList kept;
                for (uint8_t a : d) {
                    if (!(op.axes & axis_bit(a))) kept.push_back(a);
                }
                d = kept;
            }
            break;
        case CommRule::None: return fmt::format("{} is not a collective", op_name(op.kind));
        }
        out.push_back(std::move(r));
    }
    return {};
}

}  // namespace rules

// ---------------------------------------------------------------- reshape layouts

namespace {

// Dims i0..i1 of `in` and o0..o1 of `out` have equal products (one group). When every
// dim of the group is a product of a chain of factors (the sorted partial products
// divide one another), the group is a sequence of factors, each input and output dim a
// run of them (`[8, 6]` -> `[4, 12]` is the factors 4 2 6). A split of an input dim by k
// lies on its leading factor when k divides it; an output dim keeps the split of its
// leading factor; a split on any other factor of an output dim is gathered, and only
// that one (`{0: data, 1: model}` keeps `data` and gathers `model`). False when there is
// no chain.
bool reshape_by_factors(const std::vector<int64_t>& in, size_t i0, size_t i1, const std::vector<int64_t>& out,
                        size_t o0, size_t o1, const Layout& in_layout, const Mesh& mesh, Layout& need,
                        Layout& out_layout) {
    std::vector<int64_t> cuts = {1};
    auto add_cuts = [&](const std::vector<int64_t>& dims, size_t a, size_t b) {
        int64_t p = 1;
        for (size_t k = a; k < b; ++k) {
            p *= dims[k];
            cuts.push_back(p);
        }
    };
    add_cuts(in, i0, i1);
    add_cuts(out, o0, o1);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t k = 1; k < cuts.size(); ++k) {
        if (cuts[k] % cuts[k - 1] != 0) return false;
    }
    // The factor index at which each dim starts (a size-1 dim covers no factor).
    auto first_factor = [&](const std::vector<int64_t>& dims, size_t a, size_t k) {
        int64_t before = 1;
        for (size_t j = a; j < k; ++j) before *= dims[j];
        return static_cast<size_t>(std::find(cuts.begin(), cuts.end(), before) - cuts.begin());
    };
    std::vector<std::pair<size_t, std::pair<AxisList, size_t>>> on_factor;  // factor -> (axes, input dim)
    for (size_t k = i0; k < i1; ++k) {
        if (in_layout.dims[k].empty()) continue;
        size_t f = first_factor(in, i0, k);
        int64_t size = cuts[f + 1] / cuts[f];
        if (size % in_layout.split_factor(mesh, k) != 0) {
            need.dims[k].clear();
            continue;
        }
        on_factor.push_back({f, {in_layout.dims[k], k}});
    }
    std::vector<size_t> leading;
    for (size_t k = o0; k < o1; ++k) {
        if (out[k] == 1) continue;
        size_t f = first_factor(out, o0, k);
        leading.push_back(f);
        for (const auto& [g, split] : on_factor) {
            if (g == f) out_layout.dims[k] = split.first;
        }
    }
    for (const auto& [f, split] : on_factor) {
        if (std::find(leading.begin(), leading.end(), f) == leading.end()) need.dims[split.second].clear();
    }
    return true;
}

}  // namespace

ReshapeLayouts reshape_layouts(const std::vector<int64_t>& in_shape, const Layout& in_layout,
                               const std::vector<int64_t>& shape, const Mesh* mesh) {
    ReshapeLayouts l{in_layout, Layout::replicated(shape.size())};
    l.out.partial = in_layout.partial;
    if (!mesh) return l;
    // Group input and output dims with equal products, left to right.
    size_t i = 0, o = 0;
    while (i < in_shape.size() || o < shape.size()) {
        size_t i0 = i, o0 = o;
        int64_t pi = i < in_shape.size() ? in_shape[i++] : 1;
        int64_t po = o < shape.size() ? shape[o++] : 1;
        while (pi != po) {
            if (pi < po && i < in_shape.size()) pi *= in_shape[i++];
            else if (o < shape.size()) po *= shape[o++];
            else break;
        }
        size_t ni = i - i0, no = o - o0;
        // The outer dims of the group, size-1 dims skipped (they are never split).
        size_t outer_in = i0, outer_out = o0;
        while (outer_in + 1 < i && in_shape[outer_in] == 1) ++outer_in;
        while (outer_out + 1 < o && shape[outer_out] == 1) ++outer_out;
        bool inner_unsplit = true;
        for (size_t k = outer_in + 1; k < i; ++k) inner_unsplit &= in_layout.dims[k].empty();
        if (ni >= 1 && no >= 1 && inner_unsplit && !in_layout.dims[outer_in].empty()) {
            int64_t factor = in_layout.split_factor(*mesh, outer_in);
            if (shape[outer_out] % factor == 0) {
                l.out.dims[outer_out] = in_layout.dims[outer_in];
                continue;
            }
        }
        if (reshape_by_factors(in_shape, i0, i, shape, o0, o, in_layout, *mesh, l.need, l.out)) continue;
        for (size_t k = i0; k < i; ++k) l.need.dims[k].clear();
    }
    return l;
}

}  // namespace meshc::ir

// The GIR verifier: checks the invariants the checker (sema/check/) promises to every
// consumer (printer, explain, the SPMD partitioner): SSA form, valid types and layouts,
// and each op's result type consistent with its operands' under the sharding rules of
// docs/language.md, "Sharding rules". A problem found is a compiler bug; the driver reports it as an
// internal error.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "ir/gir.h"

namespace meshc::ir {
namespace {

using Axes = ir::AxisList;

AxisSet set_of(const Axes& axes) {
    AxisSet set = 0;
    for (uint8_t a : axes) set |= ir::axis_bit(a);
    return set;
}

int popcount(AxisSet set) {
    int n = 0;
    for (; set; set &= set - 1) ++n;
    return n;
}

class FunctionVerifier {
public:
    FunctionVerifier(const Module& module, const Function& f, std::vector<std::string>& problems)
        : module_(module), f_(f), problems_(problems), label_("@" + function_label(f)) {}

    void run() {
        if (f_.names.size() != f_.types.size()) {
            problem(fmt::format("has {} value names for {} values", f_.names.size(), f_.types.size()));
        }
        for (ValueId id = 0; id < f_.types.size(); ++id) check_type(id);
        defined_.assign(f_.types.size(), false);
        for (ValueId p : f_.params) define(p, "parameter");
        for (size_t i = 0; i < f_.ops.size(); ++i) check_op(i, f_.ops[i]);
        for (ValueId r : f_.results) {
            if (r >= f_.types.size() || !defined_[r]) problem(fmt::format("result {} is never defined", value(r)));
        }
    }

private:
    void problem(const std::string& text) { problems_.push_back(label_ + ": " + text); }

    std::string value(ValueId id) const {
        if (id < f_.names.size() && !f_.names[id].empty()) return fmt::format("%{} ({})", id, f_.names[id]);
        return fmt::format("%{}", id);
    }

    std::string type(ValueId id) const { return type_to_string(module_, f_.types[id]); }

    const Mesh* mesh_of(const TensorType& t) const {
        if (t.mesh < 0 || static_cast<size_t>(t.mesh) >= module_.meshes.size()) return nullptr;
        return &module_.meshes[static_cast<size_t>(t.mesh)];
    }

    std::string axes_text(const Mesh* mesh, AxisSet set) const {
        return "{" + (mesh ? mesh->axis_names(set) : std::to_string(set)) + "}";
    }

    // ------------------------------------------------------------ types

    void check_type(ValueId id) {
        const TensorType& t = f_.types[id];
        auto bad = [&](const std::string& what) { problem(fmt::format("{}: {}", value(id), what)); };
        for (int64_t s : t.shape) {
            if (s < 0) bad(fmt::format("negative size {} in the shape", s));
        }
        if (t.layout.dims.size() != t.rank()) {
            bad(fmt::format("layout has {} dims for a tensor of rank {}", t.layout.dims.size(), t.rank()));
            return;
        }
        if (t.mesh < 0) {
            if (t.mesh != -1) bad(fmt::format("invalid mesh index {}", t.mesh));
            if (!t.layout.is_replicated()) bad("split or partial without a mesh");
            return;
        }
        const Mesh* mesh = mesh_of(t);
        if (!mesh) {
            bad(fmt::format("mesh index {} out of range ({} meshes)", t.mesh, module_.meshes.size()));
            return;
        }
        AxisSet used = 0;
        bool axes_ok = true;
        auto use_axis = [&](size_t a) {
            if (a >= mesh->axes.size()) {
                bad(fmt::format("axis #{} is not an axis of mesh {}", a, mesh->name));
                axes_ok = false;
                return;
            }
            if (used & ir::axis_bit(a)) {
                bad(fmt::format("axis {} is used more than once in {}", mesh->axes[a].name, type(id)));
            }
            used |= ir::axis_bit(a);
        };
        for (const Axes& d : t.layout.dims) {
            for (uint8_t a : d) use_axis(a);
        }
        for (size_t a = 0; a < 64; ++a) {
            if (t.layout.partial & ir::axis_bit(a)) use_axis(a);
        }
        if (!axes_ok) return;
        for (size_t d = 0; d < t.rank(); ++d) {
            int64_t factor = t.layout.split_factor(*mesh, d);
            if (factor > 1 && t.shape[d] % factor != 0) {
                bad(fmt::format("dim {} of size {} is split into {} pieces, which does not divide it", d,
                                t.shape[d], factor));
            }
        }
    }

    /// Whether the type of `id` is usable by the op checks (its problems already reported).
    bool sound(ValueId id) const {
        if (id >= f_.types.size()) return false;
        const TensorType& t = f_.types[id];
        if (t.layout.dims.size() != t.rank()) return false;
        if (t.mesh < 0) return t.mesh == -1;
        const Mesh* mesh = mesh_of(t);
        if (!mesh) return false;
        if (mesh->axes.size() < 64 && (t.layout.partial >> mesh->axes.size()) != 0) return false;
        for (const Axes& d : t.layout.dims) {
            for (uint8_t a : d) {
                if (a >= mesh->axes.size()) return false;
            }
        }
        return true;
    }

    void define(ValueId id, std::string_view what) {
        if (id >= f_.types.size()) {
            problem(fmt::format("{} %{} has no type ({} values)", what, id, f_.types.size()));
            return;
        }
        if (defined_[id]) problem(fmt::format("{} is defined more than once", value(id)));
        defined_[id] = true;
    }

    // ------------------------------------------------------------ ops

    void check_op(size_t index, const Op& op) {
        auto where_text = [&] { return fmt::format("op {} ({})", index, op_name(op.kind)); };
        auto bad = [&](const std::string& what) { problem(where_text() + ": " + what); };
        bool operands_ok = true;
        for (ValueId id : op.operands) {
            if (id >= f_.types.size()) {
                bad(fmt::format("operand %{} has no type ({} values)", id, f_.types.size()));
                operands_ok = false;
            } else if (!defined_[id]) {
                bad(fmt::format("operand {} is used before it is defined", value(id)));
            }
        }
        for (const Region& region : op.regions) {
            for (ValueId a : region.args) {
                if (a < f_.types.size()) define(a, "a region argument");
            }
            for (size_t i = 0; i < region.ops.size(); ++i) check_op(i, region.ops[i]);
            for (ValueId y : region.yields) {
                if (y >= f_.types.size() || !defined_[y]) bad(fmt::format("yields {}, which is not defined", value(y)));
            }
        }
        for (ValueId id : op.results) define(id, "an op result");
        bool results_ok = std::all_of(op.results.begin(), op.results.end(),
                                      [&](ValueId id) { return id < f_.types.size(); });
        if (!operands_ok || !results_ok) return;
        if (!arity(op, bad)) return;
        for (ValueId id : op.operands) {
            if (!sound(id)) return;
        }
        for (ValueId id : op.results) {
            if (!sound(id)) return;
        }
        switch (op.kind) {
        case OpKind::Constant: {
            const TensorType& r = f_.types[op.results[0]];
            if (r.rank() != 0 || r.layout.partial) bad("a constant is a scalar: " + type(op.results[0]));
            break;
        }
        case OpKind::Create:
            if (op.create == CreateKind::Permutation) {
                const TensorType& r = f_.types[op.results[0]];
                if (r.rank() != 1 || r.dtype != DType::I64 || r.layout.partial) bad("a permutation is an i64 vector: " + type(op.results[0]));
            }
            if (!op.operands.empty()) {
                if (op.create != CreateKind::RandomNormal && op.create != CreateKind::RandomUniform && op.create != CreateKind::Permutation) {
                    bad("only a random creation takes an operand (its seed)");
                }
                run_time_int(op.operands[0], "the seed", bad);
            }
            break;
        case OpKind::Arg: {
            const TensorType& r = f_.types[op.results[0]];
            if (op.ints.size() != 1 || op.ints[0] < 0 || static_cast<size_t>(op.ints[0]) >= module_.args.size()) {
                bad("not a program argument");
            } else if (r.rank() != 0 || r.mesh >= 0 || r.layout.partial) {
                bad("a program argument is a mesh-free scalar: " + type(op.results[0]));
            }
            break;
        }
        case OpKind::Load:
        case OpKind::Print:
        case OpKind::Save:
            if ((op.kind == OpKind::Load || op.kind == OpKind::Save) && !op.ints.empty() &&
                (op.ints[0] < 0 || static_cast<size_t>(op.ints[0]) >= module_.args.size() ||
                 module_.args[static_cast<size_t>(op.ints[0])].kind != ProgramArg::Path)) {
                bad("the path is not a path argument");
            }
            if (op.kind == OpKind::Load && op.names.size() > 1) bad("a load reads one tensor");
            if (op.kind == OpKind::Save && op.names.empty() && op.operands.size() != 1) bad("a .npy save writes one tensor");
            if (op.kind == OpKind::Save && !op.names.empty() && op.names.size() != op.operands.size()) {
                bad("a .safetensors save names each operand");
            }
            if (op.kind == OpKind::Print && !op.names.empty()) bad("print has no tensor names");
            break;
        case OpKind::Elementwise: check_elementwise(op, bad); break;
        case OpKind::Reduce: check_reduce(op, bad); break;
        case OpKind::Contract: check_contract(op, bad); break;
        case OpKind::AllReduce:
            // Several tensors at once (combined by transform/combine_collectives): each
            // pair is an all_reduce of its own, all over one mesh.
            for (size_t i = 0; i < op.operands.size(); ++i) {
                Op one = op;
                one.operands = {op.operands[i]};
                one.results = {op.results[i]};
                check_collective(one, bad);
                if (f_.types[op.operands[i]].mesh != f_.types[op.operands[0]].mesh) bad("combined tensors on different meshes");
            }
            break;
        case OpKind::ReduceScatter:
        case OpKind::AllGather:
        case OpKind::AllToAll:
        case OpKind::LocalSlice:
        case OpKind::MakePartial: check_collective(op, bad); break;
        case OpKind::Call: check_call(op, bad); break;
        case OpKind::For:
        case OpKind::If:
        case OpKind::Grad: check_structured(op, bad); break;
        case OpKind::Reshape:
        case OpKind::Broadcast:
            if (f_.types[op.results[0]].shape != op.ints) bad("the result shape is not the op's shape");
            break;
        case OpKind::Slice:
        case OpKind::Pad:
        case OpKind::Concat:
            if (op.kind != OpKind::Concat) {
                if (op.ints.size() != 2) bad("a slice or pad has [start, size]");
                if (op.operands.size() == 2) run_time_int(op.operands[1], "the start", bad);
            }
            if (op.dim < 0 || static_cast<size_t>(op.dim) >= f_.types[op.results[0]].rank()) {
                bad("dim out of range");
            } else if (!f_.types[op.results[0]].layout.dims[static_cast<size_t>(op.dim)].empty()) {
                bad("the sliced or joined dim must be unsplit");
            }
            break;
        case OpKind::OneHot:
        case OpKind::Embedding: break;
        case OpKind::Place: {
            const TensorType& in = f_.types[op.operands[0]];
            const TensorType& out = f_.types[op.results[0]];
            if (in.shape != out.shape || in.dtype != out.dtype) bad("place changes the shape or element type");
            if ((in.mesh < 0) == (out.mesh < 0)) bad("place moves a value onto a mesh or off it");
            if (!in.layout.is_replicated() || !out.layout.is_replicated()) bad("place takes and gives replicated values");
            break;
        }
        }
    }

    // A run-time integer operand (a seed, a slice start): an integer scalar, not pending.
    template <typename Bad>
    void run_time_int(ValueId v, const char* what, Bad& bad) {
        const TensorType& t = f_.types[v];
        if (t.rank() != 0 || t.layout.partial || (t.dtype != DType::I64 && t.dtype != DType::I32)) {
            bad(fmt::format("{} must be an integer scalar, found {}", what, type(v)));
        }
    }

    // for / if / grad: yields and results agree in number and type.
    template <typename Bad>
    void check_structured(const Op& op, Bad& bad) {
        size_t carried = op.kind == OpKind::For ? op.operands.size() - 2 : op.results.size();
        if (op.kind == OpKind::For) {
            if (op.regions.size() != 1 || op.regions[0].args.size() != carried + 1) {
                bad("a for has one region whose arguments are the index and the carried values");
                return;
            }
            for (size_t i = 0; i < carried; ++i) {
                if (!(f_.types[op.operands[2 + i]] == f_.types[op.regions[0].args[1 + i]])) {
                    bad(fmt::format("carried value {} enters as {} but the body takes {}", i,
                                    type(op.operands[2 + i]), type(op.regions[0].args[1 + i])));
                }
            }
        }
        if (op.kind == OpKind::If && op.regions.size() != 2) bad("an if has two regions");
        for (const Region& r : op.regions) {
            if (r.yields.size() != op.results.size()) {
                bad(fmt::format("a region yields {} values for {} results", r.yields.size(), op.results.size()));
                continue;
            }
            for (size_t i = 0; i < r.yields.size(); ++i) {
                if (r.yields[i] < f_.types.size() && !(f_.types[r.yields[i]] == f_.types[op.results[i]])) {
                    bad(fmt::format("yields {} as result {} of type {}", type(r.yields[i]), i, type(op.results[i])));
                }
            }
        }
    }

    template <typename Bad>
    bool arity(const Op& op, Bad& bad) {
        auto expect = [&](size_t lo, size_t hi, size_t results) {
            if (op.operands.size() < lo || op.operands.size() > hi) {
                bad(lo == hi ? fmt::format("has {} operands, expected {}", op.operands.size(), lo)
                             : fmt::format("has {} operands, expected {} to {}", op.operands.size(), lo, hi));
                return false;
            }
            if (op.results.size() != results) {
                bad(fmt::format("has {} results, expected {}", op.results.size(), results));
                return false;
            }
            return true;
        };
        // The arity is the op's row of op_rules.def; element-wise ops by their function.
        if (op.kind == OpKind::Elementwise) {
            size_t n = elementwise_arity(op.ew);
            return expect(n, n, 1);
        }
        const OpRule& rule = op_rule(op.kind);
        size_t hi = rule.max_operands < 0 ? SIZE_MAX : static_cast<size_t>(rule.max_operands);
        if (rule.results == -2) {
            if (op.kind == OpKind::Call || op.kind == OpKind::Grad) return true;  // checked against the callee
            if (op.kind == OpKind::For) return expect(2, SIZE_MAX, op.operands.size() - 2);
            return expect(static_cast<size_t>(rule.min_operands), hi, op.results.size());
        }
        size_t results = rule.results == -1 ? op.operands.size() : static_cast<size_t>(rule.results);
        return expect(static_cast<size_t>(rule.min_operands), hi, results);
        return true;
    }

    static size_t elementwise_arity(Ew ew) {
        switch (ew) {
        case Ew::Neg: case Ew::Not: case Ew::Exp: case Ew::Log: case Ew::Sqrt: case Ew::Rsqrt:
        case Ew::Tanh: case Ew::Cos: case Ew::Sin: case Ew::Sigmoid: case Ew::Relu: case Ew::Gelu: case Ew::Abs: case Ew::Cast:
            return 1;
        case Ew::Select: return 3;
        default: return 2;
        }
    }

    /// Mesh agreement of an op's placed values: each placed operand is on the result's mesh.
    template <typename Bad>
    bool same_mesh(const Op& op, Bad& bad) {
        const TensorType& r = f_.types[op.results[0]];
        for (ValueId id : op.operands) {
            const TensorType& t = f_.types[id];
            if (t.mesh >= 0 && t.mesh != r.mesh) {
                bad(fmt::format("operand {} is on mesh #{}, the result on mesh #{}", value(id), t.mesh, r.mesh));
                return false;
            }
        }
        return true;
    }

    template <typename Bad>
    void check_elementwise(const Op& op, Bad& bad) {
        ValueId rid = op.results[0];
        const TensorType& r = f_.types[rid];
        // NumPy broadcasting, trailing alignment.
        size_t rank = 0;
        for (ValueId id : op.operands) rank = std::max(rank, f_.types[id].rank());
        std::vector<int64_t> shape(rank, 1);
        for (ValueId id : op.operands) {
            const TensorType& t = f_.types[id];
            for (size_t i = 0; i < t.rank(); ++i) {
                int64_t& s = shape[rank - t.rank() + i];
                int64_t o = t.shape[i];
                if (o != 1 && s != 1 && o != s) {
                    bad(fmt::format("operand shapes do not broadcast ({})", value(id)));
                    return;
                }
                if (o != 1) s = o;
            }
        }
        if (shape != r.shape) {
            bad(fmt::format("result shape [{}] is not the broadcast shape [{}]", fmt::join(r.shape, ", "),
                            fmt::join(shape, ", ")));
            return;
        }
        bool logical = op.ew == Ew::Eq || op.ew == Ew::Ne || op.ew == Ew::Lt || op.ew == Ew::Le || op.ew == Ew::Gt ||
                       op.ew == Ew::Ge || op.ew == Ew::And || op.ew == Ew::Or || op.ew == Ew::Not;
        if (logical && r.dtype != DType::Bool) {
            bad(fmt::format("a comparison's result must be bool, not {}", dtype_name(r.dtype)));
            return;
        }
        if (!same_mesh(op, bad)) return;
        const Mesh* mesh = mesh_of(r);
        // Splits agree (rule 5): an operand's dim of full size is split like the result's.
        for (ValueId id : op.operands) {
            const TensorType& t = f_.types[id];
            if (t.mesh < 0) continue;
            for (size_t i = 0; i < t.rank(); ++i) {
                size_t d = rank - t.rank() + i;
                bool full = t.shape[i] == r.shape[d];
                if (full ? t.layout.dims[i] != r.layout.dims[d] : !t.layout.dims[i].empty()) {
                    bad(fmt::format("operand {} is split differently from the result in dim {}", value(id), d));
                }
            }
        }
        // Partial values (rule 2).
        auto partial = [&](size_t i) { return f_.types[op.operands[i]].layout.partial; };
        AxisSet expected = 0;
        bool ok = true;
        switch (op.ew) {
        case Ew::Add:
        case Ew::Sub:
            expected = partial(0);
            ok = partial(1) == partial(0);
            break;
        case Ew::Mul:
            expected = partial(0) | partial(1);
            ok = partial(0) == 0 || partial(1) == 0;
            break;
        case Ew::Div:
            expected = partial(0);
            ok = partial(1) == 0;
            break;
        case Ew::Neg:
        case Ew::Cast: expected = partial(0); break;
        default:
            for (size_t i = 0; i < op.operands.size(); ++i) ok = ok && partial(i) == 0;
            break;
        }
        if (!ok) {
            bad(fmt::format("operands of {} with these pending sums need a reduction first", ew_name(op.ew)));
        } else if (r.layout.partial != expected) {
            bad(fmt::format("result {} should be partial over {}: {}", value(rid), axes_text(mesh, expected),
                            type(rid)));
        }
    }

    template <typename Bad>
    void check_reduce(const Op& op, Bad& bad) {
        const TensorType& x = f_.types[op.operands[0]];
        ValueId rid = op.results[0];
        const TensorType& r = f_.types[rid];
        // No dims listed: every dim (`sum(x)` without `axis:`).
        std::vector<bool> reduced(x.rank(), op.ints.empty());
        for (int64_t d : op.ints) {
            if (d < 0 || static_cast<size_t>(d) >= x.rank() || reduced[static_cast<size_t>(d)]) {
                bad(fmt::format("invalid reduced dims [{}] for rank {}", fmt::join(op.ints, ", "), x.rank()));
                return;
            }
            reduced[static_cast<size_t>(d)] = true;
        }
        if (!same_mesh(op, bad)) return;
        // The result drops the reduced dims, or keeps them with size 1 (keepdims).
        TensorType dropped = r, kept = r;
        dropped.shape.clear();
        dropped.layout.dims.clear();
        kept.shape = x.shape;
        kept.layout.dims = x.layout.dims;
        AxisSet summed = 0;
        for (size_t d = 0; d < x.rank(); ++d) {
            if (reduced[d]) {
                summed |= set_of(x.layout.dims[d]);
                kept.shape[d] = 1;
                kept.layout.dims[d].clear();
            } else {
                dropped.shape.push_back(x.shape[d]);
                dropped.layout.dims.push_back(x.layout.dims[d]);
            }
        }
        if (r.shape != dropped.shape && r.shape != kept.shape) {
            bad(fmt::format("result shape [{}] does not follow from reducing [{}] over dims [{}]",
                            fmt::join(r.shape, ", "), fmt::join(x.shape, ", "), fmt::join(op.ints, ", ")));
            return;
        }
        const auto& dims = r.shape == dropped.shape ? dropped.layout.dims : kept.layout.dims;
        if (r.layout.dims != dims) bad(fmt::format("result {} is split unlike the operand's kept dims", value(rid)));
        if (op.reduce == ReduceKind::Max && x.layout.partial) {
            bad("max over a value with a pending sum needs a reduction first");
        }
        AxisSet expected = x.layout.partial | summed;
        if (r.layout.partial != expected) {
            bad(fmt::format("result {} should be partial over {}: {}", value(rid), axes_text(mesh_of(r), expected),
                            type(rid)));
        }
    }

    template <typename Bad>
    void check_contract(const Op& op, Bad& bad) {
        const std::string& spec = op.text;
        size_t arrow = spec.find("->");
        if (arrow == std::string::npos) {
            bad(fmt::format("einsum spec \"{}\" has no '->'", spec));
            return;
        }
        std::vector<std::string> terms;
        std::string lhs = spec.substr(0, arrow);
        for (size_t start = 0;;) {
            size_t comma = lhs.find(',', start);
            terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        std::string out = spec.substr(arrow + 2);
        if (terms.size() != op.operands.size()) {
            bad(fmt::format("einsum spec \"{}\" has {} inputs for {} operands", spec, terms.size(), op.operands.size()));
            return;
        }
        ValueId rid = op.results[0];
        const TensorType& r = f_.types[rid];
        struct Letter {
            int64_t size = -1;
            const Axes* split = nullptr;
            bool in_output = false;
        };
        Letter letters[26];
        auto visit = [&](const std::string& term, const TensorType& t, const std::string& who) {
            if (term.size() != t.rank()) {
                bad(fmt::format("einsum term \"{}\" does not match the rank {} of {}", term, t.rank(), who));
                return false;
            }
            for (size_t i = 0; i < term.size(); ++i) {
                if (term[i] < 'a' || term[i] > 'z') {
                    bad(fmt::format("einsum spec \"{}\" has a character other than a-z", spec));
                    return false;
                }
                Letter& l = letters[term[i] - 'a'];
                if (l.size >= 0 && l.size != t.shape[i]) {
                    bad(fmt::format("index '{}' has size {} in {} but {} elsewhere", term[i], t.shape[i], who,
                                    l.size));
                    return false;
                }
                l.size = t.shape[i];
                if (t.mesh < 0) continue;
                if (l.split && *l.split != t.layout.dims[i]) {
                    bad(fmt::format("index '{}' is split differently in {}", term[i], who));
                }
                if (!l.split) l.split = &t.layout.dims[i];
            }
            return true;
        };
        AxisSet pending = 0;
        for (size_t k = 0; k < terms.size(); ++k) {
            const TensorType& t = f_.types[op.operands[k]];
            if (!visit(terms[k], t, value(op.operands[k]))) return;
            pending |= t.layout.partial;
            if (t.dtype != r.dtype) bad(fmt::format("operand {} has another element type than the result", value(op.operands[k])));
        }
        for (char c : out) {
            if (c < 'a' || c > 'z' || letters[c - 'a'].size < 0) {
                bad(fmt::format("einsum output \"{}\" names an index no input has", out));
                return;
            }
            letters[c - 'a'].in_output = true;
        }
        if (!same_mesh(op, bad)) return;
        if (!visit(out, r, "the result " + value(rid))) return;
        for (const Letter& l : letters) {
            if (l.size >= 0 && !l.in_output && l.split) pending |= set_of(*l.split);
        }
        if (r.layout.partial != pending) {
            bad(fmt::format("result {} should be partial over {}: {}", value(rid), axes_text(mesh_of(r), pending),
                            type(rid)));
        }
    }

    template <typename Bad>
    void check_call(const Op& op, Bad& bad) {
        if (op.callee < 0 || static_cast<size_t>(op.callee) >= module_.functions.size()) {
            bad(fmt::format("callee #{} is not a function of the module", op.callee));
            return;
        }
        const Function& callee = module_.functions[static_cast<size_t>(op.callee)];
        std::string name = "@" + function_label(callee);
        if (op.operands.size() != callee.params.size() || op.results.size() != callee.results.size()) {
            bad(fmt::format("{} takes {} arguments and returns {} results; the call has {} and {}", name,
                            callee.params.size(), callee.results.size(), op.operands.size(), op.results.size()));
            return;
        }
        auto compare = [&](const std::vector<ValueId>& mine, const std::vector<ValueId>& theirs, const char* what) {
            for (size_t i = 0; i < mine.size(); ++i) {
                ValueId other = theirs[i];
                if (other >= callee.types.size()) continue;  // reported in the callee
                if (f_.types[mine[i]] != callee.types[other]) {
                    bad(fmt::format("{} {} {} has type {}, but {} expects {}", what, i, value(mine[i]), type(mine[i]),
                                    name, type_to_string(module_, callee.types[other])));
                }
            }
        };
        compare(op.operands, callee.params, "argument");
        compare(op.results, callee.results, "result");
    }

    /// docs/language.md, "The coercion table"; the op's axes are one group.
    template <typename Bad>
    void check_collective(const Op& op, Bad& bad) {
        ValueId xid = op.operands[0], rid = op.results[0];
        const TensorType& x = f_.types[xid];
        const TensorType& r = f_.types[rid];
        if (x.mesh < 0 || r.mesh != x.mesh) {
            bad(fmt::format("operand and result must be on one mesh: {} -> {}", type(xid), type(rid)));
            return;
        }
        if (x.dtype != r.dtype || x.shape != r.shape) {
            bad(fmt::format("changes the element type or global shape: {} -> {}", type(xid), type(rid)));
            return;
        }
        const Mesh& mesh = *mesh_of(x);
        AxisSet all = mesh.axes.size() >= 64 ? ~AxisSet{0} : ir::axis_bit(mesh.axes.size()) - 1;
        if (op.axes == 0 || (op.axes & ~all) != 0) {
            bad(fmt::format("axes mask {:#x} is empty or names axes mesh {} does not have", op.axes, mesh.name));
            return;
        }
        std::string axes = axes_text(&mesh, op.axes);
        auto check_dim = [&](int32_t d, const char* what) {
            if (d < 0 || static_cast<size_t>(d) >= x.rank()) {
                bad(fmt::format("{} {} is not a dim of {}", what, d, type(xid)));
                return false;
            }
            return true;
        };
        // Dim `d` of the result: dim `d` of the operand with `axes` appended (as minor-most).
        auto gains = [&](size_t d) {
            const Axes& from = x.layout.dims[d];
            const Axes& to = r.layout.dims[d];
            size_t k = static_cast<size_t>(popcount(op.axes));
            return to.size() == from.size() + k && std::equal(from.begin(), from.end(), to.begin()) &&
                   set_of(Axes(to.end() - static_cast<std::ptrdiff_t>(k), to.end())) == op.axes;
        };
        // Dim `d` of the result: dim `d` of the operand without its minor-most `axes`.
        auto loses = [&](size_t d) {
            const Axes& from = x.layout.dims[d];
            const Axes& to = r.layout.dims[d];
            size_t k = static_cast<size_t>(popcount(op.axes));
            return from.size() == to.size() + k && std::equal(to.begin(), to.end(), from.begin()) &&
                   set_of(Axes(from.end() - static_cast<std::ptrdiff_t>(k), from.end())) == op.axes;
        };
        auto others_same = [&](int32_t a, int32_t b) {
            for (size_t d = 0; d < x.rank(); ++d) {
                if (static_cast<int32_t>(d) == a || static_cast<int32_t>(d) == b) continue;
                if (x.layout.dims[d] != r.layout.dims[d]) {
                    bad(fmt::format("changes the split of dim {}: {} -> {}", d, type(xid), type(rid)));
                    return false;
                }
            }
            return true;
        };
        auto transition = [&]() { return fmt::format("{} -> {}", type(xid), type(rid)); };
        switch (op.kind) {
        case OpKind::AllReduce:
        case OpKind::ReduceScatter:
            if ((x.layout.partial & op.axes) != op.axes) {
                bad(fmt::format("operand {} is not partial over {}: {}", value(xid), axes, type(xid)));
                return;
            }
            if (r.layout.partial != (x.layout.partial & ~op.axes)) {
                bad(fmt::format("result must keep the other pending sums and drop {}: {}", axes, transition()));
            }
            if (op.kind == OpKind::AllReduce) {
                others_same(-1, -1);
            } else if (check_dim(op.dim, "dim") && others_same(op.dim, -1) &&
                       !gains(static_cast<size_t>(op.dim))) {
                bad(fmt::format("dim {} must gain {} as its minor-most axes: {}", op.dim, axes, transition()));
            }
            break;
        case OpKind::AllGather:
            if (r.layout.partial != x.layout.partial) bad("changes the pending sums: " + transition());
            if (check_dim(op.dim, "dim") && others_same(op.dim, -1) && !loses(static_cast<size_t>(op.dim))) {
                bad(fmt::format("dim {} must lose {}, its minor-most axes: {}", op.dim, axes, transition()));
            }
            break;
        case OpKind::AllToAll:
            if (r.layout.partial != x.layout.partial) bad("changes the pending sums: " + transition());
            if (!check_dim(op.dim, "from dim") || !check_dim(op.dim2, "to dim")) return;
            if (op.dim == op.dim2) {
                bad(fmt::format("from and to are the same dim {}", op.dim));
                return;
            }
            if (!others_same(op.dim, op.dim2)) return;
            if (!loses(static_cast<size_t>(op.dim))) {
                bad(fmt::format("dim {} must lose {}, its minor-most axes: {}", op.dim, axes, transition()));
            }
            if (!gains(static_cast<size_t>(op.dim2))) {
                bad(fmt::format("dim {} must gain {} as its minor-most axes: {}", op.dim2, axes, transition()));
            }
            break;
        case OpKind::LocalSlice:
            if (((x.layout.split_axes() | x.layout.partial) & op.axes) != 0) {
                bad(fmt::format("operand {} is not replicated over {}: {}", value(xid), axes, type(xid)));
                return;
            }
            if (r.layout.partial != x.layout.partial) bad("changes the pending sums: " + transition());
            if (check_dim(op.dim, "dim") && others_same(op.dim, -1) && !gains(static_cast<size_t>(op.dim))) {
                bad(fmt::format("dim {} must gain {} as its minor-most axes: {}", op.dim, axes, transition()));
            }
            break;
        case OpKind::MakePartial: {
            if (x.layout.partial & op.axes) {
                bad(fmt::format("operand {} is already partial over {}", value(xid), axes));
                return;
            }
            if (r.layout.partial != (x.layout.partial | op.axes)) {
                bad(fmt::format("result must be partial over {} too: {}", axes, transition()));
            }
            // A dim split over the axes becomes whole (the slice is placed in zeros).
            for (size_t d = 0; d < x.rank(); ++d) {
                Axes expected;
                for (uint8_t a : x.layout.dims[d]) {
                    if (!(op.axes & ir::axis_bit(a))) expected.push_back(a);
                }
                if (r.layout.dims[d] != expected) {
                    bad(fmt::format("dim {} must keep only its axes outside {}: {}", d, axes, transition()));
                }
            }
            break;
        }
        default: break;
        }
    }

    const Module& module_;
    const Function& f_;
    std::vector<std::string>& problems_;
    std::string label_;
    std::vector<bool> defined_;
};

}  // namespace

std::vector<std::string> verify_function(const Module& module, const Function& function) {
    std::vector<std::string> problems;
    FunctionVerifier(module, function, problems).run();
    return problems;
}

std::vector<std::string> verify_module(const Module& module) {
    std::vector<std::string> problems;
    for (const Mesh& mesh : module.meshes) {
        if (mesh.axes.size() > ir::kMaxMeshAxes) {
            problems.push_back(fmt::format("mesh {} has {} axes (at most {})", mesh.name, mesh.axes.size(),
                                           ir::kMaxMeshAxes));
        }
        for (const ir::MeshAxis& axis : mesh.axes) {
            if (axis.size < 1) problems.push_back(fmt::format("mesh {}: axis {} has size {}", mesh.name, axis.name, axis.size));
        }
    }
    for (const Function& f : module.functions) FunctionVerifier(module, f, problems).run();
    return problems;
}

}  // namespace meshc::ir

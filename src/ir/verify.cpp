// The GIR verifier: checks the invariants the checker (sema/check/) promises to every
// consumer (printer, explain, the SPMD partitioner): SSA form, valid types and layouts,
// and each op's result type consistent with its operands' under the sharding rules of
// docs/language.md, "Sharding rules". A problem found is a compiler bug; the driver reports it as an
// internal error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "ir/gir.h"
#include "ir/op_rules.h"

namespace meshc::ir {
namespace {

using Axes = ir::AxisList;

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
        if (std::string arity = check_arity(op); !arity.empty()) {
            bad(arity);
            return;
        }
        for (ValueId id : op.operands) {
            if (!sound(id)) return;
        }
        for (ValueId id : op.results) {
            if (!sound(id)) return;
        }
        // The op's type rule (ir/op_rules.h) gives its result types; they must be these.
        RuleInput in{module_, op, {}, {}, {}};
        for (ValueId id : op.operands) in.operands.push_back(&f_.types[id]);
        for (ValueId id : op.results) in.results.push_back(&f_.types[id]);
        std::vector<TensorType> expected;
        if (!apply_type_rule(in, expected).empty()) {
            // Again with the values named, for the message (valid GIR never gets here).
            for (ValueId id : op.operands) in.labels.push_back(value(id));
            for (ValueId id : op.results) in.labels.push_back(value(id));
            bad(apply_type_rule(in, expected));
            return;
        }
        for (size_t i = 0; i < op.results.size() && i < expected.size(); ++i) compare(op.results[i], expected[i], bad);
        // What the rule leaves to the structure: callees and regions.
        if (op.kind == OpKind::Call) check_call(op, bad);
        if (op.kind == OpKind::For || op.kind == OpKind::If || op.kind == OpKind::Grad) check_structured(op, bad);
    }

    /// A result's type against the one its op's rule gives.
    template <typename Bad>
    void compare(ValueId id, const TensorType& want, Bad& bad) {
        const TensorType& t = f_.types[id];
        if (t == want) return;
        if (t.shape != want.shape) {
            bad(fmt::format("result {} has shape [{}], but the rule gives [{}]", value(id), fmt::join(t.shape, ", "),
                            fmt::join(want.shape, ", ")));
        } else if (t.dtype != want.dtype) {
            bad(fmt::format("result {} is {}, but the rule gives {}", value(id), dtype_name(t.dtype), dtype_name(want.dtype)));
        } else if (t.mesh != want.mesh) {
            bad(fmt::format("result {} is on mesh #{}, but the rule puts it on mesh #{}", value(id), t.mesh, want.mesh));
        } else if (t.layout.partial != want.layout.partial) {
            bad(fmt::format("result {} should be partial over {}: {}", value(id), axes_text(mesh_of(t), want.layout.partial),
                            type(id)));
        } else {
            bad(fmt::format("result {} is split as {}, but the rule gives {}", value(id), type(id),
                            type_to_string(module_, want)));
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

// Each GIR op's rules, in one table (op_rules.def, one row per op of ops.def; element-wise
// functions: ew.def): arity, type and shape rule, sharding rule in Shardy's factor style,
// how the cost model charges it, its adjoint family and its local meaning. The rules are
// pure functions of the operand types and the op's typed attributes. Read by the verifier
// (every op's result types must be what its rule gives), the checker and autodiff (which
// build result types with `infer_result`), the cost model (compute_cost.cpp), the lints
// and `meshc explain`. docs/adding-a-feature.md says what a new op touches.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/gir.h"

namespace meshc::ir {

/// Which adjoint differentiates an op: the families autodiff implements.
enum class AdjointRule : uint8_t {
    None, Identity, Elementwise, Reduce, Contract, Reshape, Broadcast, Slice, Concat, Embedding, Branch, Flattened, Expanded
};
std::string_view adjoint_rule_name(AdjointRule rule);

/// How the cost model charges one run of an op on one device (compute_cost.cpp).
enum class CostRule : uint8_t {
    None,         // no compute: communication (charged by the α-β model), structure, I/O
    Contraction,  // 2 · the product of every factor's local extent, at the matmul rate
    Pointwise,    // result elements · flops per element (ew.def; 1 for one_hot)
    Reduction,    // one flop per operand element
    Creation,     // writes the piece (random kinds: about 20 flops an element)
    Lookup,       // reads the rows it returns and the ids, writes the result
    Copy,         // reads what is kept, writes the result
};

/// Which coercion of docs/language.md's coercion table an op is (op_rules.def's comm
/// column): switches over the collectives go over this, not over every OpKind.
enum class CommRule : uint8_t { None, AllReduce, ReduceScatter, AllGather, AllToAll, LocalSlice, MakePartial };

/// How an element-wise function passes pending sums on (ew.def).
enum class EwPending : uint8_t { Sum, Keep, Product, Quotient, Whole };
/// What an element-wise function's result element type is (ew.def).
enum class EwResult : uint8_t { Operand, Bool, Target };
/// Which element types an element-wise function is a function of (ew.def).
enum class EwDomain : uint8_t { Float, Any };

struct EwRule {
    std::string_view name;
    int operands;
    EwPending pending;
    EwResult result;
    double flops;  // per element
    EwDomain domain;
};
const EwRule& ew_rule(Ew ew);
/// The element-wise function printed `name` (`tanh`), if there is one.
std::optional<Ew> ew_named(std::string_view name);

/// What an op's rules see: the module (meshes, functions), the op (its attributes) and
/// its operands' types. `results`, where given, are the types the op's results have (the
/// verifier) or should have (a builder's hints): they settle what the operands leave open
/// (a broadcast's new dims' splits, a creation's type, the mesh a `place` moves onto).
struct RuleInput {
    const Module& module;
    const Op& op;
    std::vector<const TensorType*> operands;
    std::vector<const TensorType*> results;
    /// How messages name the operands and then the results (`%5 (h)`); empty: by position.
    std::vector<std::string> labels;

    std::string operand_label(size_t k) const;
    std::string result_label(size_t i) const;
    const TensorType* hint(size_t i = 0) const { return i < results.size() ? results[i] : nullptr; }
};

/// One factor of an op's iteration space (Shardy's sharding rule): an index every operand
/// and the result dim it maps to agree on. Splitting a factor over mesh axes splits each
/// of those dims over them; each device then computes its piece with no communication.
enum class FactorKind : uint8_t {
    Pass,       // maps to a result dim (or to none, for a size-1 result dim): split alike everywhere
    Sum,        // summed away (a contraction index, a reduced dim, a table's rows): a split leaves the result pending over its axes
    Whole,      // must stay unsplit (a sliced, padded or joined dim)
};
struct Factor {
    int64_t size = 1;
    FactorKind kind = FactorKind::Pass;
    std::vector<int> operand_dims;  // per operand: the dim it maps to, -1 for none
    int result_dim = -1;            // -1: none
    char name = 0;                  // an einsum letter, for messages
};
struct OpFactors {
    bool defined = false;  // false: the op is not described by factors (reshape, collectives, structure)
    std::vector<Factor> factors;
};

/// An op's type rule: the types of its results, or why it has none ("" when it has).
using TypeRule = std::string (*)(const RuleInput& in, std::vector<TensorType>& results);
/// An op's factors (OpFactors::defined false where it has none).
using FactorRule = OpFactors (*)(const RuleInput& in);

/// An op's row of op_rules.def.
struct OpRule {
    int min_operands;
    int max_operands;  // -1: any number
    int results;       // -1: as many as operands; -2: checked elsewhere (calls, regions)
    AdjointRule adjoint;
    CostRule cost;
    CommRule comm;
    TypeRule type_rule;
    FactorRule factors;
    std::string_view local_meaning;
};
const OpRule& op_rule(OpKind kind);

/// The op's arity against its row (element-wise: its function's); "" when it fits.
std::string check_arity(const Op& op);

/// The result types `op`'s rule gives (its arity checked first); "" or why none.
std::string apply_type_rule(const RuleInput& in, std::vector<TensorType>& results);

/// The one result type of a single-result op built by the checker or autodiff, from its
/// operands' types (and `hint`, for what they leave open). A rule that rejects the
/// operands is a compiler bug: it is reported as an internal error.
TensorType infer_result(const Module& module, const Op& op, const std::vector<const TensorType*>& operands,
                        const TensorType* hint = nullptr);

/// The factors of `op` over `in`'s operand types (and its result's, for result-only factors).
OpFactors op_factors(const RuleInput& in);

/// What a reshape keeps of its operand's splits (docs/language.md, "Sharding rules", rule
/// 4): `need`, the layout the operand must have first (the splits it cannot keep gathered),
/// and `out`, the result's. A split dim factored into n1..nk keeps its axes on n1 when
/// they divide it; merged dims keep the outer dim's axes when the inner ones are unsplit;
/// other chains of factors keep the split of each output dim's leading factor.
struct ReshapeLayouts {
    Layout need;
    Layout out;
};
ReshapeLayouts reshape_layouts(const std::vector<int64_t>& in_shape, const Layout& in_layout,
                               const std::vector<int64_t>& out_shape, const Mesh* mesh);

}  // namespace meshc::ir

// The op rule table (op_rules.def), the element-wise table (ew.def), arity checks and the
// entry points that apply an op's rules; see op_rules.h. The rules themselves are in
// rules_types.cpp (type, shape and sharding) and rules_factors.cpp (factors).
#include "ir/op_rules.h"

#include <fmt/format.h>

#include <iterator>

#include "ir/rules_internal.h"
#include "support/diagnostics.h"

namespace meshc::ir {
namespace {

// One row per op, in ops.def's order (checked below at compile time).
constexpr OpRule kRules[] = {
#define MESHC_RULE(name, lo, hi, results, adjoint, cost, comm, type_rule, factors, meaning) \
    {lo, hi, results, AdjointRule::adjoint, CostRule::cost, CommRule::comm, rules::type_rule, rules::factors, meaning},
#include "ir/op_rules.def"
#undef MESHC_RULE
};

constexpr OpKind kRuleOrder[] = {
#define MESHC_RULE(name, lo, hi, results, adjoint, cost, comm, type_rule, factors, meaning) OpKind::name,
#include "ir/op_rules.def"
#undef MESHC_RULE
};

constexpr OpKind kOpOrder[] = {
#define MESHC_OP(name, text) OpKind::name,
#include "ir/ops.def"
#undef MESHC_OP
};

constexpr bool same_order() {
    if (std::size(kRuleOrder) != std::size(kOpOrder)) return false;
    for (size_t i = 0; i < std::size(kOpOrder); ++i) {
        if (kRuleOrder[i] != kOpOrder[i]) return false;
    }
    return true;
}
static_assert(same_order(), "op_rules.def has one row per op of ops.def, in the same order");

constexpr EwRule kEwRules[] = {
#define MESHC_EW(name, text, operands, pending, result, flops, domain) \
    {text, operands, EwPending::pending, EwResult::result, flops, EwDomain::domain},
#include "ir/ew.def"
#undef MESHC_EW
};

}  // namespace

const OpRule& op_rule(OpKind kind) { return kRules[static_cast<size_t>(kind)]; }

const EwRule& ew_rule(Ew ew) { return kEwRules[static_cast<size_t>(ew)]; }

std::string_view ew_name(Ew ew) { return ew_rule(ew).name; }

std::optional<Ew> ew_named(std::string_view name) {
    for (size_t i = 0; i < std::size(kEwRules); ++i) {
        if (kEwRules[i].name == name) return static_cast<Ew>(i);
    }
    return std::nullopt;
}

std::string_view adjoint_rule_name(AdjointRule rule) {
    switch (rule) {
    case AdjointRule::None: return "none";
    case AdjointRule::Identity: return "identity";
    case AdjointRule::Elementwise: return "elementwise";
    case AdjointRule::Reduce: return "reduce";
    case AdjointRule::Contract: return "contract";
    case AdjointRule::Reshape: return "reshape";
    case AdjointRule::Broadcast: return "broadcast";
    case AdjointRule::Slice: return "slice";
    case AdjointRule::Concat: return "concat";
    case AdjointRule::Embedding: return "embedding";
    case AdjointRule::Branch: return "branch";
    case AdjointRule::Flattened: return "flattened";
    case AdjointRule::Expanded: return "expanded";
    }
    return "?";
}

std::string check_arity(const Op& op) {
    auto expect = [&](size_t lo, size_t hi, size_t results) -> std::string {
        if (op.operands.size() < lo || op.operands.size() > hi) {
            return lo == hi ? fmt::format("has {} operands, expected {}", op.operands.size(), lo)
                            : fmt::format("has {} operands, expected {} to {}", op.operands.size(), lo, hi);
        }
        if (op.results.size() != results) return fmt::format("has {} results, expected {}", op.results.size(), results);
        return {};
    };
    if (op.kind == OpKind::Elementwise) {
        auto n = static_cast<size_t>(ew_rule(op.ew).operands);
        return expect(n, n, 1);
    }
    const OpRule& rule = op_rule(op.kind);
    size_t lo = static_cast<size_t>(rule.min_operands);
    size_t hi = rule.max_operands < 0 ? SIZE_MAX : static_cast<size_t>(rule.max_operands);
    if (rule.results == -2) {
        if (op.kind == OpKind::For && op.operands.size() >= 2) return expect(lo, hi, op.operands.size() - 2);
        return expect(lo, hi, op.results.size());  // calls and grads: against the callee; if: its regions
    }
    return expect(lo, hi, rule.results == -1 ? op.operands.size() : static_cast<size_t>(rule.results));
}

std::string apply_type_rule(const RuleInput& in, std::vector<TensorType>& results) {
    results.clear();
    if (std::string arity = check_arity(in.op); !arity.empty()) return arity;
    return op_rule(in.op.kind).type_rule(in, results);
}

TensorType infer_result(const Module& module, const Op& op, const std::vector<const TensorType*>& operands,
                        const TensorType* hint) {
    RuleInput in{module, op, operands, {}};
    if (hint) in.results.push_back(hint);
    std::vector<TensorType> results;
    std::string error = op_rule(op.kind).type_rule(in, results);
    MESHC_ASSERT(error.empty() && results.size() == 1,
                 fmt::format("the rule of {} rejects the operands it was built with: {}", op_name(op.kind), error));
    return std::move(results[0]);
}

OpFactors op_factors(const RuleInput& in) { return op_rule(in.op.kind).factors(in); }

}  // namespace meshc::ir

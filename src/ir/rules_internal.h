// The rule functions op_rules.def names, and the helpers they share. Only the rule files
// (op_rules.cpp, rules_types.cpp, rules_factors.cpp) include this.
#pragma once

#include <string>
#include <vector>

#include "ir/op_rules.h"

namespace meshc::ir::rules {

// Type rules (rules_types.cpp).
std::string type_constant(const RuleInput& in, std::vector<TensorType>& out);
std::string type_create(const RuleInput& in, std::vector<TensorType>& out);
std::string type_load(const RuleInput& in, std::vector<TensorType>& out);
std::string type_arg(const RuleInput& in, std::vector<TensorType>& out);
std::string type_elementwise(const RuleInput& in, std::vector<TensorType>& out);
std::string type_reduce(const RuleInput& in, std::vector<TensorType>& out);
std::string type_contract(const RuleInput& in, std::vector<TensorType>& out);
std::string type_collective(const RuleInput& in, std::vector<TensorType>& out);
std::string type_place(const RuleInput& in, std::vector<TensorType>& out);
std::string type_reshape(const RuleInput& in, std::vector<TensorType>& out);
std::string type_broadcast(const RuleInput& in, std::vector<TensorType>& out);
std::string type_slice(const RuleInput& in, std::vector<TensorType>& out);
std::string type_concat(const RuleInput& in, std::vector<TensorType>& out);
std::string type_one_hot(const RuleInput& in, std::vector<TensorType>& out);
std::string type_embedding(const RuleInput& in, std::vector<TensorType>& out);
std::string type_structural(const RuleInput& in, std::vector<TensorType>& out);
std::string type_io(const RuleInput& in, std::vector<TensorType>& out);

// Factor rules (rules_factors.cpp).
OpFactors no_factors(const RuleInput& in);
OpFactors factors_elementwise(const RuleInput& in);
OpFactors factors_reduce(const RuleInput& in);
OpFactors factors_contract(const RuleInput& in);
OpFactors factors_broadcast(const RuleInput& in);
OpFactors factors_slice(const RuleInput& in);
OpFactors factors_concat(const RuleInput& in);
OpFactors factors_one_hot(const RuleInput& in);
OpFactors factors_embedding(const RuleInput& in);

// Shared helpers.
AxisSet axes_set(const AxisList& axes);
const Mesh* mesh_of(const Module& module, const TensorType& t);
/// NumPy broadcasting of the operands' shapes (trailing alignment); false where they do not broadcast.
bool broadcast_shape(const RuleInput& in, std::vector<int64_t>& shape);

}  // namespace meshc::ir::rules

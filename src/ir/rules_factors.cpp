// The factors of each op (Shardy's sharding rules): which dims of the operands and the
// result are one index of the op's iteration space, and which indices are summed away or
// must stay unsplit. rules_types.cpp derives every factored op's result layout and
// pending sums from them; the cost model counts a contraction's flops over them.
#include <algorithm>
#include <string>

#include "ir/einsum.h"
#include "ir/rules_internal.h"

namespace meshc::ir::rules {
namespace {

Factor factor(int64_t size, FactorKind kind, size_t operands) {
    Factor f;
    f.size = size;
    f.kind = kind;
    f.operand_dims.assign(operands, -1);
    return f;
}

}  // namespace

bool broadcast_shape(const RuleInput& in, std::vector<int64_t>& shape) {
    size_t rank = 0;
    for (const TensorType* t : in.operands) rank = std::max(rank, t->rank());
    shape.assign(rank, 1);
    for (const TensorType* t : in.operands) {
        for (size_t i = 0; i < t->rank(); ++i) {
            int64_t& s = shape[rank - t->rank() + i];
            int64_t o = t->shape[i];
            if (o != 1 && s != 1 && o != s) return false;
            if (o != 1) s = o;
        }
    }
    return true;
}

OpFactors no_factors(const RuleInput&) { return {}; }

OpFactors factors_elementwise(const RuleInput& in) {
    OpFactors out;
    std::vector<int64_t> shape;
    if (!broadcast_shape(in, shape)) return out;
    out.defined = true;
    size_t n = in.operands.size();
    for (size_t d = 0; d < shape.size(); ++d) {
        Factor f = factor(shape[d], FactorKind::Pass, n);
        f.result_dim = static_cast<int>(d);
        for (size_t k = 0; k < n; ++k) {
            const TensorType& t = *in.operands[k];
            size_t off = shape.size() - t.rank();
            if (d >= off && t.shape[d - off] == shape[d]) f.operand_dims[k] = static_cast<int>(d - off);
        }
        out.factors.push_back(std::move(f));
    }
    return out;
}

OpFactors factors_reduce(const RuleInput& in) {
    OpFactors out;
    const TensorType& x = *in.operands[0];
    const Op& op = in.op;
    std::vector<bool> reduced(x.rank(), op.ints.empty());
    for (int64_t d : op.ints) {
        if (d < 0 || static_cast<size_t>(d) >= x.rank()) return out;
        reduced[static_cast<size_t>(d)] = true;
    }
    out.defined = true;
    int kept = 0;
    for (size_t d = 0; d < x.rank(); ++d) {
        // A reduced split dim leaves a pending sum (sum, mean), or a pending max that the
        // checker completes at once with an all_reduce(max).
        Factor f = factor(x.shape[d], reduced[d] ? FactorKind::Sum : FactorKind::Pass, 1);
        f.operand_dims[0] = static_cast<int>(d);
        if (!reduced[d]) f.result_dim = op.keep_dims ? static_cast<int>(d) : kept++;
        out.factors.push_back(std::move(f));
    }
    return out;
}

OpFactors factors_contract(const RuleInput& in) {
    OpFactors out;
    auto spec = parse_einsum(in.op.text);
    if (!spec || spec->inputs.size() != in.operands.size()) return out;
    int64_t sizes[26];
    std::fill(std::begin(sizes), std::end(sizes), -1);
    bool in_output[26] = {};
    for (size_t k = 0; k < spec->inputs.size(); ++k) {
        const std::string& term = spec->inputs[k];
        if (term.size() != in.operands[k]->rank()) return out;
        for (size_t i = 0; i < term.size(); ++i) {
            if (term[i] < 'a' || term[i] > 'z') return out;
            int64_t& s = sizes[term[i] - 'a'];
            if (s >= 0 && s != in.operands[k]->shape[i]) return out;
            s = in.operands[k]->shape[i];
        }
    }
    for (char c : spec->output) {
        if (c < 'a' || c > 'z' || sizes[c - 'a'] < 0 || in_output[c - 'a']) return out;
        in_output[c - 'a'] = true;
    }
    out.defined = true;
    for (int letter = 0; letter < 26; ++letter) {
        if (sizes[letter] < 0) continue;
        char c = static_cast<char>('a' + letter);
        Factor f = factor(sizes[letter], in_output[letter] ? FactorKind::Pass : FactorKind::Sum, in.operands.size());
        f.name = c;
        for (size_t k = 0; k < spec->inputs.size(); ++k) {
            size_t at = spec->inputs[k].find(c);
            if (at != std::string::npos) f.operand_dims[k] = static_cast<int>(at);
        }
        size_t at = spec->output.find(c);
        if (at != std::string::npos) f.result_dim = static_cast<int>(at);
        out.factors.push_back(std::move(f));
    }
    return out;
}

OpFactors factors_broadcast(const RuleInput& in) {
    OpFactors out;
    const TensorType& x = *in.operands[0];
    const std::vector<int64_t>& shape = in.op.ints;
    if (shape.size() < x.rank()) return out;
    out.defined = true;
    size_t off = shape.size() - x.rank();
    for (size_t d = 0; d < shape.size(); ++d) {
        // New and expanded dims are the result's alone (their split is the result's choice).
        Factor f = factor(shape[d], FactorKind::Pass, 1);
        f.result_dim = static_cast<int>(d);
        if (d >= off && x.shape[d - off] == shape[d]) f.operand_dims[0] = static_cast<int>(d - off);
        out.factors.push_back(std::move(f));
    }
    return out;
}

OpFactors factors_slice(const RuleInput& in) {
    OpFactors out;
    const TensorType& x = *in.operands[0];
    if (in.op.dim < 0 || static_cast<size_t>(in.op.dim) >= x.rank()) return out;
    out.defined = true;
    for (size_t d = 0; d < x.rank(); ++d) {
        bool cut = static_cast<int32_t>(d) == in.op.dim;
        Factor f = factor(x.shape[d], cut ? FactorKind::Whole : FactorKind::Pass, in.operands.size());
        f.operand_dims[0] = static_cast<int>(d);  // operand 1, a run-time start, is a scalar
        f.result_dim = static_cast<int>(d);
        out.factors.push_back(std::move(f));
    }
    return out;
}

OpFactors factors_concat(const RuleInput& in) {
    OpFactors out;
    const TensorType& x = *in.operands[0];
    if (in.op.dim < 0 || static_cast<size_t>(in.op.dim) >= x.rank()) return out;
    for (const TensorType* t : in.operands) {
        if (t->rank() != x.rank()) return out;
    }
    out.defined = true;
    for (size_t d = 0; d < x.rank(); ++d) {
        bool joined = static_cast<int32_t>(d) == in.op.dim;
        Factor f = factor(x.shape[d], joined ? FactorKind::Whole : FactorKind::Pass, in.operands.size());
        for (size_t k = 0; k < in.operands.size(); ++k) f.operand_dims[k] = static_cast<int>(d);
        f.result_dim = static_cast<int>(d);
        out.factors.push_back(std::move(f));
    }
    return out;
}

OpFactors factors_one_hot(const RuleInput& in) {
    OpFactors out;
    const TensorType& ids = *in.operands[0];
    if (in.op.ints.size() != 1) return out;
    out.defined = true;
    for (size_t d = 0; d < ids.rank(); ++d) {
        Factor f = factor(ids.shape[d], FactorKind::Pass, 1);
        f.operand_dims[0] = static_cast<int>(d);
        f.result_dim = static_cast<int>(d);
        out.factors.push_back(std::move(f));
    }
    Factor classes = factor(in.op.ints[0], FactorKind::Pass, 1);  // the result's alone
    classes.result_dim = static_cast<int>(ids.rank());
    out.factors.push_back(std::move(classes));
    return out;
}

OpFactors factors_embedding(const RuleInput& in) {
    OpFactors out;
    const TensorType& table = *in.operands[0];
    const TensorType& ids = *in.operands[1];
    if (table.rank() != 2) return out;
    out.defined = true;
    // A table split over its rows: each device looks up its rows, zeros for the others,
    // so the result is a pending sum over those axes.
    Factor rows = factor(table.shape[0], FactorKind::Sum, 2);
    rows.operand_dims[0] = 0;
    out.factors.push_back(std::move(rows));
    for (size_t d = 0; d < ids.rank(); ++d) {
        Factor f = factor(ids.shape[d], FactorKind::Pass, 2);
        f.operand_dims[1] = static_cast<int>(d);
        f.result_dim = static_cast<int>(d);
        out.factors.push_back(std::move(f));
    }
    Factor width = factor(table.shape[1], FactorKind::Pass, 2);
    width.operand_dims[0] = 1;
    width.result_dim = static_cast<int>(ids.rank());
    out.factors.push_back(std::move(width));
    return out;
}

}  // namespace meshc::ir::rules

// Einsum specs as carried by GIR `contract` ops ("bd,dh->bh"): the one parser of their
// text. Consumed by the verifier, the partitioner, code generation and autodiff.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshc::ir {

struct Einsum {
    std::vector<std::string> inputs;  // one index string per operand
    std::string output;

    /// "a,b->c" again.
    std::string text() const;
};

/// Splits "bd,dh->bh"; nullopt when there is no "->". Letters are not checked.
std::optional<Einsum> parse_einsum(std::string_view spec);

}  // namespace meshc::ir

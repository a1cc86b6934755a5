// Einsum specs; see einsum.h.
#include "ir/einsum.h"

namespace meshc::ir {

std::string Einsum::text() const {
    std::string out;
    for (size_t i = 0; i < inputs.size(); ++i) out += (i ? "," : "") + inputs[i];
    return out + "->" + output;
}

std::optional<Einsum> parse_einsum(std::string_view spec) {
    size_t arrow = spec.find("->");
    if (arrow == std::string_view::npos) return std::nullopt;
    Einsum e;
    std::string_view lhs = spec.substr(0, arrow);
    for (size_t start = 0;;) {
        size_t comma = lhs.find(',', start);
        e.inputs.emplace_back(lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    e.output = std::string(spec.substr(arrow + 2));
    return e;
}

}  // namespace meshc::ir

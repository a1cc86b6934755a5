// `meshc explain`: the report of a checked module's layouts and collectives, as text for
// people and as JSON (ARCHITECTURE.md) for tools. Input: the GIR from sema/infer.cpp;
// output: a stream. Costs come from the cost model (cost_model.h).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

#include "ir/gir.h"
#include "sema/mesh.h"

namespace meshc::sema {

/// A communicating op of GIR as the cost model sees it.
struct CollectiveInfo {
    CollectiveKind kind;
    AxisSet axes;
    /// b of LANGUAGE.md section 6: the per-device buffer on the unsplit side (the input of
    /// all_reduce and reduce_scatter, the output of all_gather, either side of all_to_all),
    /// with splits over other axes applied.
    int64_t buffer_bytes = 0;
    CollectiveCost cost;
};

/// The kind, buffer and cost of an all_reduce, reduce_scatter, all_gather or all_to_all
/// of `function`; nullopt for every other op (local slices and make_partial are free) and
/// for ops whose types the verifier would reject.
std::optional<CollectiveInfo> collective_info(const ir::Module& module, const ir::Function& function,
                                              const ir::Op& op);

/// Per function instance: each value's layout, each collective with its buffer and cost,
/// and the free coercions. `only_fn` non-empty: only the instances of that source function.
void explain_text(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn);
/// `{"functions":[{"name","instance":{…},"collectives":[{"kind","op","axes":[…],"dtype",
/// "shape":[…],"bytes","cost_s","line","col"}]}]}`, keys in that order, indented by 2.
void explain_json(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn);

}  // namespace meshc::sema

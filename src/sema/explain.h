// `meshc explain`: the report of a checked module's layouts and collectives, as text for
// people and as JSON (docs/architecture.md) for tools. Input: the GIR from sema/check/;
// output: a stream. Costs come from the cost model (cost_model.h).
#pragma once

#include <functional>
#include <map>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/gir.h"
#include "sema/mesh.h"

namespace meshc::sema {

/// A communicating op of GIR as the cost model sees it.
struct CollectiveInfo {
    CollectiveKind kind;
    AxisSet axes;
    /// b of docs/language.md, "Sharding rules": the per-device buffer on the unsplit side (the input of
    /// all_reduce and reduce_scatter, the output of all_gather, either side of all_to_all),
    /// with splits over other axes applied.
    int64_t buffer_bytes = 0;
    CollectiveCost cost;
};

/// The kind, buffer and cost of an all_reduce, reduce_scatter, all_gather or all_to_all
/// of `function`; nullopt for every other op (local slices and make_partial are free) and
/// for ops whose types the verifier would reject.
/// Constant values of a function (loop bounds), any nesting.
std::map<ir::ValueId, double> constants_of(const ir::Function& f);
/// Calls fn(op, times) for every op of `ops` (nested ones too), where `times` is how often
/// it runs per run of the function: the product of the enclosing loops' trip counts (a
/// loop whose bounds are not constants counts once, and `exact` becomes false).
void for_each_counted(const std::vector<ir::Op>& ops, const std::map<ir::ValueId, double>& constants, double times,
                      bool& exact, const std::function<void(const ir::Op&, double)>& fn);

std::optional<CollectiveInfo> collective_info(const ir::Module& module, const ir::Function& function,
                                              const ir::Op& op);

/// Whole-program facts for explain: how often each function instance runs per run of
/// `main` (call sites times enclosing loop trip counts; 0: not reached), whether that
/// count is exact (every loop bound on the way a constant), and each instance's peak
/// bytes of live tensors per device (values live from their op to their last use; a
/// call adds the callee's peak). Indexed like module.functions.
/// What is live at an instance's peak, per device: `state` (the instance's arguments
/// and the values a loop carries from one iteration to the next: parameters and
/// optimizer state in a training loop), `saved` (forward values of a derived function
/// that its backward ops read: saved activations), `temporaries` (everything else,
/// including the results of the op at the peak). A call's callee adds its own saved
/// values and temporaries.
struct MemoryBreakdown {
    int64_t state = 0;
    int64_t saved = 0;
    int64_t temporaries = 0;
    int64_t total() const { return state + saved + temporaries; }
};

struct ProgramFacts {
    std::vector<double> runs;
    std::vector<bool> exact;
    std::vector<int64_t> peak_bytes;
    std::vector<MemoryBreakdown> peak_parts;  // peak_bytes[i] == peak_parts[i].total()
    int32_t main = -1;
};
ProgramFacts analyse_program(const ir::Module& module);

/// One run of a function instance: its collectives (each counted as often as its loops
/// run it), the bytes each device sends, their cost; the backward ones (autodiff's).
struct FunctionTotals {
    double collectives = 0;
    double bytes_sent = 0;
    double seconds = 0;  // communication: the collectives' α-β cost
    /// Compute (ir/compute_cost.h): every op's roofline time on the module's device
    /// model, its flops and the bytes it touches, per device.
    double compute_seconds = 0;
    double flops = 0;
    double compute_bytes = 0;
    /// The modelled time of one run: compute plus communication (not overlapped).
    double cost_seconds() const { return compute_seconds + seconds; }
    double backward_collectives = 0;
    double backward_bytes_sent = 0;
    bool exact = true;
};
FunctionTotals function_totals(const ir::Module& module, const ir::Function& f);

/// Per function instance: each value's layout, each collective with its buffer and cost,
/// and the free coercions. `only_fn` non-empty: only the instances of that source function.
/// Locations in `main_file` are `LINE:COL`, those in other files `FILE:LINE:COL`.
void explain_text(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn, FileId main_file = 0);
/// `{"functions":[{"name","instance":{…},"collectives":[{"kind","op","axes":[…],"dtype",
/// "shape":[…],"bytes","cost_s","line","col"}]}]}`, keys in that order, indented by 2.
/// A location outside `main_file` has a "file" key before "line".
void explain_json(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn, FileId main_file = 0);

}  // namespace meshc::sema

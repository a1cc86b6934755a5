// Device models: the compute rates, memory bandwidth and memory size of one device of a
// mesh, for the compute and memory side of the cost model (ir/compute_cost.h). A module
// carries one (ir::Module::device), set by `--device-model` (docs/cli.md); the built-in
// profiles and their figures are in docs/language.md, "Cost model".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/dtype.h"

namespace meshc::ir {

/// A device's rates. Contractions run at the matmul rate of their element type; every
/// other op at the vector rate; every op moves its bytes at the memory bandwidth. An op's
/// time is max(flops / rate, bytes / bandwidth): each device does its own piece, so work
/// that a layout leaves replicated is charged on every device that repeats it.
struct DeviceModel {
    std::string name = "cpu";
    double matmul_f64 = 1e11;   // FLOP/s of a contraction, per element type
    double matmul_f32 = 2e11;
    double matmul_f16 = 2e11;   // f16 and bf16
    double matmul_int = 5e10;   // integer and bool contractions
    double vector_flops = 5e10; // element-wise, reductions, everything else
    double memory_bandwidth = 2e10;  // bytes per second to and from the device's memory
    /// Bytes of memory per device (0: not known). `--memory` is the budget checked; this
    /// is what the profile's device has.
    double memory_bytes = 0;

    double matmul_rate(DType t) const;
};

/// The built-in profiles, by name: `cpu` (the default: one AVX-512 server socket's
/// share), `h100` and `h200` (SXM, dense tensor-core rates). nullopt for another name.
std::optional<DeviceModel> device_profile(std::string_view name);
/// Names of the built-in profiles, for messages and --help.
std::vector<std::string_view> device_profile_names();

}  // namespace meshc::ir

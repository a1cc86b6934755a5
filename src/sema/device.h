// `--device-model NAME|FILE.json`: the device model of the cost model's compute side
// (ir/device_model.h) from a built-in profile's name or a JSON file (docs/cli.md,
// "Device models"). A bad name or file is E0708.
#pragma once

#include <optional>
#include <string>

#include "ir/device_model.h"
#include "support/diagnostics.h"

namespace meshc::sema {

std::optional<ir::DeviceModel> device_model_of(const std::string& spec, DiagnosticEngine& diags);

}  // namespace meshc::sema

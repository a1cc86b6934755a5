// Device models from the command line; see device.h.
#include "sema/device.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace meshc::sema {

std::optional<ir::DeviceModel> device_model_of(const std::string& spec, DiagnosticEngine& diags) {
    if (auto profile = ir::device_profile(spec)) return profile;
    bool looks_like_file = spec.find('/') != std::string::npos || spec.find('.') != std::string::npos;
    if (!looks_like_file) {
        diags.emit(DiagCode::E0708, {},
                   fmt::format("`--device-model {}`: no such profile (the profiles: {}; or a .json file)", spec,
                               fmt::join(ir::device_profile_names(), ", ")));
        return std::nullopt;
    }
    std::ifstream in(spec, std::ios::binary);
    if (!in) {
        diags.emit(DiagCode::E0708, {}, fmt::format("`--device-model {}`: cannot read the file", spec));
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
        diags.emit(DiagCode::E0708, {}, fmt::format("`--device-model {}`: not a JSON object", spec));
        return std::nullopt;
    }
    ir::DeviceModel model = *ir::device_profile("cpu");
    if (auto base = doc.find("base"); base != doc.end()) {
        auto profile = base->is_string() ? ir::device_profile(base->get<std::string>()) : std::nullopt;
        if (!profile) {
            diags.emit(DiagCode::E0708, {},
                       fmt::format("`--device-model {}`: \"base\" must name a profile ({})", spec,
                                   fmt::join(ir::device_profile_names(), ", ")));
            return std::nullopt;
        }
        model = *profile;
    }
    model.name = spec;
    struct Field {
        const char* key;
        double* value;
        bool may_be_zero;
    };
    const Field fields[] = {
        {"matmul_f64", &model.matmul_f64, false},   {"matmul_f32", &model.matmul_f32, false},
        {"matmul_f16", &model.matmul_f16, false},   {"matmul_int", &model.matmul_int, false},
        {"vector_flops", &model.vector_flops, false}, {"memory_bandwidth", &model.memory_bandwidth, false},
        {"memory_bytes", &model.memory_bytes, true},
    };
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        if (it.key() == "base") continue;
        if (it.key() == "name") {
            if (!it->is_string()) {
                diags.emit(DiagCode::E0708, {}, fmt::format("`--device-model {}`: \"name\" must be a string", spec));
                return std::nullopt;
            }
            model.name = it->get<std::string>();
            continue;
        }
        const Field* field = nullptr;
        for (const Field& f : fields) {
            if (it.key() == f.key) field = &f;
        }
        if (!field) {
            std::vector<std::string> keys{"base", "name"};
            for (const Field& f : fields) keys.push_back(f.key);
            diags.emit(DiagCode::E0708, {},
                       fmt::format("`--device-model {}`: unknown key \"{}\" (the keys: {})", spec, it.key(),
                                   fmt::join(keys, ", ")));
            return std::nullopt;
        }
        double v = it->is_number() ? it->get<double>() : -1;
        if (!(v > 0 || (v == 0 && field->may_be_zero)) || !std::isfinite(v)) {
            diags.emit(DiagCode::E0708, {},
                       fmt::format("`--device-model {}`: \"{}\" must be a {} number", spec, field->key,
                                   field->may_be_zero ? "non-negative" : "positive"));
            return std::nullopt;
        }
        *field->value = v;
    }
    return model;
}

}  // namespace meshc::sema

// The on-disk cache of `with auto` answers; see cache.h.
#include "autopar/cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

namespace meshc::autopar {

namespace {

std::string canonical_path(const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : p.string();
}

}  // namespace

std::optional<ChosenLayouts> load_cached(const std::string& file, const SourceManager& sources) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("chosen") || !j["chosen"].is_object()) return std::nullopt;
    std::map<std::string, std::string_view> texts;
    for (FileId f = 0; f < sources.file_count(); ++f) texts[canonical_path(sources.path(f))] = sources.text(f);
    ChosenLayouts out;
    for (const auto& [path, sites] : j["chosen"].items()) {
        auto t = texts.find(path);
        if (t == texts.end() || !sites.is_object()) return std::nullopt;
        for (const auto& [offset, layout] : sites.items()) {
            if (!layout.is_string() || offset.empty() || offset.size() > 10 ||
                offset.find_first_not_of("0123456789") != std::string::npos) {
                return std::nullopt;
            }
            uint64_t at = std::stoull(offset);
            if (at + 4 > t->second.size() || t->second.substr(at, 4) != "auto") return std::nullopt;
            out[path][static_cast<uint32_t>(at)] = layout.get<std::string>();
        }
    }
    if (out.empty()) return std::nullopt;
    return out;
}

void store_cached(const std::string& file, const ChosenLayouts& chosen) {
    nlohmann::json j;
    j["chosen"] = nlohmann::json::object();
    for (const auto& [path, sites] : chosen) {
        nlohmann::json s = nlohmann::json::object();
        for (const auto& [offset, layout] : sites) s[std::to_string(offset)] = layout;
        j["chosen"][path] = std::move(s);
    }
    const std::string tmp = file + ".tmp" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << j.dump() << "\n";
        out.close();
        if (!out) {
            std::remove(tmp.c_str());
            return;
        }
    }
    if (std::rename(tmp.c_str(), file.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace meshc::autopar

#include "sema/rebind.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace meshc::sema {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t start = 0;
    while (true) {
        size_t at = s.find(sep, start);
        out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
        if (at == std::string_view::npos) break;
        start = at + 1;
    }
    return out;
}

}  // namespace

void rebind_meshes(Program& program, const std::vector<std::string>& specs, DiagnosticEngine& diags) {
    for (const std::string& spec : specs) {
        auto eq = spec.find('=');
        std::string_view name = std::string_view(spec).substr(0, eq);
        if (eq == std::string::npos || name.empty() || eq + 1 == spec.size()) {
            diags.emit(DiagCode::E0705, {}, fmt::format("`--mesh {}`: expected NAME=axis:size,... (e.g. `Pod=data:1,model:1`)", spec));
            continue;
        }
        ast::Item* mesh = nullptr;
        std::vector<std::string> declared;
        for (const auto& module : program.modules) {
            for (const ast::Item* item : module->items) {
                if (item->kind != ast::ItemKind::Mesh) continue;
                declared.emplace_back(item->name.name);
                // The one mutation of the AST after parsing (see rebind.h).
                if (item->name.name == name) mesh = const_cast<ast::Item*>(item);
            }
        }
        if (!mesh) {
            diags.emit(DiagCode::E0705, {},
                       fmt::format("`--mesh {}`: the program declares no mesh `{}`{}", spec, name,
                                   declared.empty() ? std::string(" (it declares none)")
                                                    : fmt::format(" (it declares {})", fmt::join(declared, ", "))));
            continue;
        }
        std::vector<std::string_view> seen;
        for (std::string_view binding : split(std::string_view(spec).substr(eq + 1), ',')) {
            auto colon = binding.find(':');
            std::string_view axis = binding.substr(0, colon);
            if (std::find(seen.begin(), seen.end(), axis) != seen.end()) {
                diags.emit(DiagCode::E0705, mesh->span, fmt::format("`--mesh {}`: axis `{}` is given twice", spec, axis));
                continue;
            }
            seen.push_back(axis);
            int64_t size = 0;
            bool ok = colon != std::string_view::npos;
            if (ok) {
                std::string_view digits = binding.substr(colon + 1);
                auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
                ok = ec == std::errc() && end == digits.data() + digits.size() && size >= 1;
            }
            if (!ok) {
                diags.emit(DiagCode::E0705, mesh->span,
                           fmt::format("`--mesh {}`: `{}` is not `axis:size` with a size of at least 1", spec, binding));
                continue;
            }
            ast::MeshAxisDecl* found = nullptr;
            std::vector<std::string> axes;
            for (ast::MeshAxisDecl& decl : mesh->axes) {
                axes.emplace_back(decl.name.name);
                if (decl.name.name == axis) found = &decl;
            }
            if (!found) {
                diags.emit(DiagCode::E0705, mesh->span,
                           fmt::format("`--mesh {}`: mesh `{}` has no axis `{}` (its axes: {})", spec, name, axis, fmt::join(axes, ", ")));
                continue;
            }
            found->size = size;
        }
    }
}

void rebind_links(Program& program, const std::vector<std::string>& specs, DiagnosticEngine& diags) {
    for (const std::string& spec : specs) {
        auto eq = spec.find('=');
        auto dot = spec.find('.');
        auto usage = [&](std::string why) {
            diags.emit(DiagCode::E0705, {},
                       fmt::format("`--link {}`: {}; expected NAME.axis=latency:SECONDS,bandwidth:BYTES_PER_SECOND "
                                   "(e.g. `Pod.data=latency:2e-5,bandwidth:2.5e10`)",
                                   spec, why));
        };
        if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq) {
            usage("no mesh and axis before `=`");
            continue;
        }
        std::string_view name = std::string_view(spec).substr(0, dot);
        std::string_view axis = std::string_view(spec).substr(dot + 1, eq - dot - 1);
        ast::MeshAxisDecl* found = nullptr;
        bool mesh_found = false;
        for (const auto& module : program.modules) {
            for (const ast::Item* item : module->items) {
                if (item->kind != ast::ItemKind::Mesh || item->name.name != name) continue;
                mesh_found = true;
                for (const ast::MeshAxisDecl& decl : item->axes) {
                    // The AST's one mutation after parsing (see rebind.h).
                    if (decl.name.name == axis) found = const_cast<ast::MeshAxisDecl*>(&decl);
                }
            }
        }
        if (!found) {
            usage(mesh_found ? fmt::format("mesh `{}` has no axis `{}`", name, axis)
                             : fmt::format("the program declares no mesh `{}`", name));
            continue;
        }
        for (std::string_view binding : split(std::string_view(spec).substr(eq + 1), ',')) {
            auto colon = binding.find(':');
            std::string_view key = binding.substr(0, colon);
            double value = 0;
            bool ok = colon != std::string_view::npos && (key == "latency" || key == "bandwidth");
            if (ok) {
                std::string digits(binding.substr(colon + 1));
                char* end = nullptr;
                value = std::strtod(digits.c_str(), &end);
                ok = !digits.empty() && end == digits.c_str() + digits.size() && std::isfinite(value) &&
                     (key == "latency" ? value >= 0 : value > 0);
            }
            if (!ok) {
                usage(fmt::format("`{}` is not `latency:SECONDS` (at least 0) or `bandwidth:BYTES_PER_SECOND` "
                                  "(positive)",
                                  binding));
                continue;
            }
            // The key must outlive the AST: a literal.
            std::string_view stable = key == "latency" ? std::string_view("latency") : std::string_view("bandwidth");
            auto it = std::find_if(found->link.begin(), found->link.end(),
                                   [&](const ast::MeshAxisDecl::LinkProp& p) { return p.key.name == stable; });
            if (it != found->link.end()) {
                it->value = value;
            } else {
                ast::MeshAxisDecl::LinkProp prop;
                prop.key.name = stable;
                prop.key.span = found->span;
                prop.value = value;
                prop.span = found->span;
                found->link.push_back(prop);
            }
        }
    }
}

}  // namespace meshc::sema

// Meshes from their declarations; see mesh.h.
#include "sema/mesh.h"

namespace meshc::sema {

Mesh mesh_from_item(const ast::Item& item) {
    Mesh mesh;
    mesh.name = std::string(item.name.name);
    for (const ast::MeshAxisDecl& decl : item.axes) {
        MeshAxis axis;
        axis.name = std::string(decl.name.name);
        axis.size = decl.size;
        for (const auto& prop : decl.link) {
            if (prop.key.name == "latency") axis.latency = prop.value;
            if (prop.key.name == "bandwidth") axis.bandwidth = prop.value;
        }
        mesh.axes.push_back(std::move(axis));
    }
    return mesh;
}

}  // namespace meshc::sema

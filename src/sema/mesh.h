// Meshes as the checker builds them from `mesh` items; the vocabulary itself (Mesh,
// Layout, AxisList, AxisSet) is ir/layout.h, named here in sema's namespace.
#pragma once

#include "ir/cost_model.h"
#include "sema/mesh.h"
#include "ir/layout.h"
#include "syntax/ast.h"

namespace meshc::sema {

using ir::AxisList;
using ir::AxisSet;
using ir::axis_bit;
using ir::collective_cost;
using ir::collective_name;
using ir::CollectiveCost;
using ir::CollectiveKind;
using ir::group_link;
using ir::kDefaultBandwidth;
using ir::kDefaultLatency;
using ir::kMaxMeshAxes;
using ir::Layout;
using ir::layout_to_string;
using ir::Link;
using ir::Mesh;
using ir::MeshAxis;

/// A concrete mesh from its declaration (name resolution has checked it: distinct axes,
/// sizes >= 1, known link properties).
Mesh mesh_from_item(const ast::Item& item);

}  // namespace meshc::sema

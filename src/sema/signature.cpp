// See signature.h.
#include "sema/signature.h"

namespace meshc::sema {

using namespace meshc::ast;

bool has_size_variables(const Item& fn, const Module& module) {
    if (!fn.generics.empty()) return true;
    auto is_mesh = [&](std::string_view name) {
        for (const Item* item : module.items) {
            if (item->kind == ItemKind::Mesh && item->name.name == name) return true;
        }
        return false;
    };
    bool found = false;
    auto visit_dim = [&](auto& self, const Dim& d) -> void {
        if (d.kind == DimKind::Var && !is_mesh(d.name.name)) found = true;
        if (d.kind == DimKind::Binary) {
            self(self, *d.lhs);
            self(self, *d.rhs);
        }
    };
    auto visit_type = [&](auto& self, const Type& t) -> void {
        for (const Dim* d : t.shape) visit_dim(visit_dim, *d);
        for (const Dim* d : t.args) visit_dim(visit_dim, *d);
        for (const Type* e : t.elements) self(self, *e);
    };
    for (const Param& p : fn.params) visit_type(visit_type, *p.type);
    if (fn.result) visit_type(visit_type, *fn.result);
    return found;
}

bool compare(CmpOp op, int64_t a, int64_t b) {
    switch (op) {
    case CmpOp::Eq: return a == b;
    case CmpOp::Ne: return a != b;
    case CmpOp::Lt: return a < b;
    case CmpOp::Le: return a <= b;
    case CmpOp::Gt: return a > b;
    case CmpOp::Ge: return a >= b;
    }
    return false;
}

}  // namespace meshc::sema

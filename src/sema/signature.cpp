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
    for_each_signature_part(fn, [&](const Dim& d) {
        if (d.kind == DimKind::Var && !is_mesh(d.name.name)) found = true;
    });
    return found;
}

void for_each_signature_part(const Item& fn, const std::function<void(const Dim&)>& on_dim,
                             const std::function<void(const Type&)>& on_type) {
    std::function<void(const Dim&)> visit_dim = [&](const Dim& d) {
        on_dim(d);
        if (d.kind == DimKind::Binary) {
            visit_dim(*d.lhs);
            visit_dim(*d.rhs);
        }
    };
    std::function<void(const Type&)> visit_type = [&](const Type& t) {
        if (on_type) on_type(t);
        for (const Dim* d : t.shape) visit_dim(*d);
        for (const Dim* d : t.args) visit_dim(*d);
        for (const Type* e : t.elements) visit_type(*e);
    };
    for (const Param& p : fn.params) visit_type(*p.type);
    if (fn.result) visit_type(*fn.result);
}

bool compare(ast::CmpOp op, int64_t a, int64_t b) {
    switch (op) {
    case ast::CmpOp::Eq: return a == b;
    case ast::CmpOp::Ne: return a != b;
    case ast::CmpOp::Lt: return a < b;
    case ast::CmpOp::Le: return a <= b;
    case ast::CmpOp::Gt: return a > b;
    case ast::CmpOp::Ge: return a >= b;
    }
    return false;
}

}  // namespace meshc::sema

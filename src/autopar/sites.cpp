// find_sites: every `with auto` of a program's own modules, and its candidate layouts.
#include <filesystem>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "autopar/shard.h"

namespace meshc::autopar {

namespace {

using ast::Type;

std::string canonical_path(const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : p.string();
}

struct AxisInfo {
    std::string name;
    int64_t size = 1;
};

// The axes a type `on MESH` can split over: the declared mesh's, or (a mesh parameter)
// those of every declared mesh, each once; axes of size 1 split nothing and are left out.
std::vector<AxisInfo> axes_for(const sema::Program& program, const Type& t) {
    std::vector<AxisInfo> all;
    auto add = [&](const ast::MeshAxisDecl& a) {
        for (AxisInfo& x : all) {
            if (x.name == a.name.name) {
                x.size = std::max(x.size, a.size);
                return;
            }
        }
        all.push_back({std::string(a.name.name), a.size});
    };
    bool declared = false;
    for (const auto& module : program.modules) {
        for (const ast::Item* item : module->items) {
            if (item->kind == ast::ItemKind::Mesh && t.mesh && item->name.name == t.mesh->name) {
                for (const ast::MeshAxisDecl& a : item->axes) add(a);
                declared = true;
            }
        }
    }
    if (!declared) {
        for (const auto& module : program.modules) {
            for (const ast::Item* item : module->items) {
                if (item->kind == ast::ItemKind::Mesh) {
                    for (const ast::MeshAxisDecl& a : item->axes) add(a);
                }
            }
        }
    }
    std::vector<AxisInfo> out;
    for (const AxisInfo& a : all) {
        if (a.size > 1) out.push_back(a);
    }
    return out;
}

// `_`, `{}`, then every assignment of each axis to a dim or to none (several axes on one
// dim in the mesh's order, the first the major factor).
std::vector<std::string> candidates_for(const sema::Program& program, const Type& t, bool value_layout) {
    std::vector<std::string> out;
    if (value_layout) out.push_back("_");
    out.push_back("{}");
    std::vector<AxisInfo> axes = axes_for(program, t);
    const size_t rank = t.shape.size();
    if (rank == 0 || axes.empty()) return out;
    std::vector<std::string> keys;
    for (size_t i = 0; i < rank; ++i) {
        const ast::Dim& d = *t.shape[i];
        int uses = 0;
        if (d.kind == ast::DimKind::Var) {
            for (const ast::Dim* e : t.shape) uses += e->kind == ast::DimKind::Var && e->name.name == d.name.name;
        }
        keys.push_back(uses == 1 ? std::string(d.name.name) : std::to_string(i));
    }
    constexpr size_t kMaxCandidates = 128;
    std::vector<size_t> pick(axes.size(), 0);  // 0: none, k: dim k-1
    while (true) {
        size_t i = 0;
        while (i < pick.size() && ++pick[i] > rank) pick[i++] = 0;
        if (i == pick.size()) break;
        std::string text = "{";
        bool first = true;
        for (size_t dim = 0; dim < rank; ++dim) {
            std::vector<std::string> on;
            for (size_t a = 0; a < axes.size(); ++a) {
                if (pick[a] == dim + 1) on.push_back(axes[a].name);
            }
            if (on.empty()) continue;
            text += first ? "" : ", ";
            first = false;
            text += keys[dim] + ": ";
            if (on.size() == 1) {
                text += on[0];
            } else {
                text += "(" + fmt::format("{}", fmt::join(on, ", ")) + ")";
            }
        }
        text += "}";
        out.push_back(std::move(text));
        if (out.size() >= kMaxCandidates) break;
    }
    return out;
}

class Finder {
public:
    Finder(const SourceManager& sources, const sema::Program& program, std::vector<Site>& out)
        : sources_(sources), program_(program), out_(out) {}

    void module(const ast::Module& m) {
        path_ = sources_.path(m.file);
        canonical_ = canonical_path(path_);
        file_ = m.file;
        for (const ast::Item* item : m.items) {
            if (item->kind == ast::ItemKind::Struct) {
                for (const ast::Param& f : item->fields) {
                    type(f.type, [&] { return fmt::format("field `{}` of `{}`", f.name.name, item->name.name); }, false);
                }
            } else if (item->kind == ast::ItemKind::Fn) {
                fn_ = std::string(item->name.name);
                for (const ast::Param& p : item->params) {
                    type(p.type, [&] { return fmt::format("parameter `{}` of `{}`", p.name.name, fn_); }, true);
                }
                type(item->result, [&] { return fmt::format("the result of `{}`", fn_); }, true);
                if (item->body) block(*item->body);
            }
        }
    }

private:
    /// `what` names the site; made only for a site (a program without `auto` pays for
    /// walking its types, not for naming them).
    void type(const Type* t, const std::function<std::string()>& what, bool value_layout) {
        if (!t) return;
        if (t->kind == ast::TypeKind::Tuple) {
            for (size_t i = 0; i < t->elements.size(); ++i) {
                type(t->elements[i], [&] { return fmt::format("{} (element {})", what(), i); }, value_layout);
            }
            return;
        }
        if (t->kind != ast::TypeKind::Tensor || !t->auto_layout || !t->mesh) return;
        Site s;
        s.path = path_;
        s.canonical = canonical_;
        s.file = file_;
        s.begin = t->auto_span.begin;
        s.end = t->auto_span.end;
        s.span = t->auto_span;
        s.what = what();
        s.allows_value_layout = value_layout;
        s.candidates = candidates_for(program_, *t, value_layout);
        out_.push_back(std::move(s));
    }

    void block(const ast::Block& b) {
        for (const ast::Stmt* s : b.stmts) stmt(*s);
        if (b.tail) expr(*b.tail);
    }

    void stmt(const ast::Stmt& s) {
        switch (s.kind) {
        case ast::StmtKind::Let: {
            type(s.type, [&] {
                std::string name = s.pattern && s.pattern->kind == ast::PatternKind::Name
                                       ? std::string(s.pattern->name.name) : std::string("(...)");
                return fmt::format("`let {}` in `{}`", name, fn_);
            }, true);
            break;
        }
        case ast::StmtKind::Var: type(s.type, [&] { return fmt::format("`var {}` in `{}`", s.name.name, fn_); }, true); break;
        case ast::StmtKind::For:
        case ast::StmtKind::Assign:
        case ast::StmtKind::Return:
        case ast::StmtKind::Expr:
        case ast::StmtKind::Empty: break;
        }
        if (s.value) expr(*s.value);
        if (s.body) block(*s.body);
    }

    // Blocks inside expressions (`if`) hold statements too.
    void expr(const ast::Expr& e) {
        if (e.lhs) expr(*e.lhs);
        if (e.rhs) expr(*e.rhs);
        for (const ast::Arg& a : e.args) expr(*a.value);
        for (const ast::Expr* x : e.elements) expr(*x);
        for (const ast::FieldInit& f : e.fields) expr(*f.value);
        if (e.cond) expr(*e.cond);
        if (e.then_block) block(*e.then_block);
        if (e.else_block) block(*e.else_block);
        if (e.else_if) expr(*e.else_if);
    }

    const SourceManager& sources_;
    const sema::Program& program_;
    std::vector<Site>& out_;
    std::string path_, canonical_, fn_;
    FileId file_ = kNoFile;
};

}  // namespace

std::vector<Site> find_sites(const SourceManager& sources, const sema::Program& program,
                             const std::string& stdlib_dir) {
    std::vector<Site> out;
    Finder finder(sources, program, out);
    std::string std_root = stdlib_dir.empty() ? std::string() : canonical_path(stdlib_dir);
    for (const auto& m : program.modules) {
        if (m->file == kNoFile) continue;
        std::string path = canonical_path(sources.path(m->file));
        if (!std_root.empty() && path.compare(0, std_root.size(), std_root) == 0) continue;
        finder.module(*m);
    }
    return out;
}

}  // namespace meshc::autopar

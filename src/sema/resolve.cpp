// Name resolution; see resolve.h. One Resolver per module; the recursion check runs
// over the whole program's call graph afterwards.
#include "sema/resolve.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/layout.h"
#include "sema/builtins.h"

namespace meshc::sema {

namespace {

using namespace meshc::ast;

enum class GlobalKind : uint8_t { Fn, Struct, Mesh, Module, Builtin };

struct Global {
    GlobalKind kind;
    const Item* item = nullptr;  // Fn, Struct, Mesh, Module (the import)
    size_t module = 0;           // Module: index in Program::modules
    Builtin builtin = Builtin::Count;
};

std::string_view global_kind_name(GlobalKind k) {
    switch (k) {
    case GlobalKind::Fn: return "function";
    case GlobalKind::Struct: return "struct";
    case GlobalKind::Mesh: return "mesh";
    case GlobalKind::Module: return "module";
    case GlobalKind::Builtin: return "built-in function";
    }
    return "name";
}

// Edit distance where swapping two adjacent characters is one edit, like inserting,
// deleting or replacing one (optimal string alignment): `valeu` is one edit from `value`.
// Bounded: any distance above `limit` is reported as `limit + 1`, computed only on the
// band of cells within `limit` of the diagonal and given up as soon as a whole row is
// past the limit, so a comparison costs O(min(|a|, |b|) * limit), not O(|a| * |b|).
size_t edit_distance(std::string_view a, std::string_view b, size_t limit) {
    const size_t over = limit + 1;
    if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return over;
    std::vector<size_t> before(b.size() + 1, over), prev(b.size() + 1, over), row(b.size() + 1, over);
    for (size_t j = 0; j <= std::min(b.size(), limit); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t lo = i > limit ? i - limit : 1;
        size_t hi = std::min(b.size(), i + limit);
        // Cells next to the band read as past the limit (the rest are never read).
        row[0] = i <= limit ? i : over;
        row[lo - 1] = lo > 1 ? over : row[0];
        if (hi < b.size()) row[hi + 1] = over;
        size_t row_min = row[0];
        for (size_t j = lo; j <= hi; ++j) {
            size_t d = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d = std::min(d, before[j - 2] + 1);
            row[j] = std::min(d, over);
            row_min = std::min(row_min, row[j]);
        }
        if (row_min > limit) return over;
        before.swap(prev);
        prev.swap(row);
    }
    return std::min(prev[b.size()], over);
}

// Names longer than this get no suggestion: nobody misspells a 200-character name, and
// the comparisons stay cheap whatever the input.
constexpr size_t kMaxSuggestedNameLength = 128;

// Best match for `name` among `candidates`, if close enough to suggest.
std::optional<std::string_view> closest(std::string_view name,
                                        const std::vector<std::string_view>& candidates) {
    if (name.size() > kMaxSuggestedNameLength) return std::nullopt;
    std::optional<std::string_view> best;
    size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
    for (std::string_view c : candidates) {
        size_t d = edit_distance(name, c, best_distance - 1);
        if (d < best_distance && d < name.size() && d < c.size()) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

// Call graph edges for the recursion check: caller -> (callee, call span).
using CallGraph = std::map<const Item*, std::vector<std::pair<const Item*, Span>>>;

enum class LocalKind : uint8_t { Param, Let, Var, Loop };

struct Local {
    LocalKind kind;
    Span span;
};

// What a mesh name in a type refers to.
struct MeshRef {
    bool found = false;
    const Item* concrete = nullptr;  // null for a generic `M: Mesh`
};

// How size variables in a type are treated.
enum class DimMode : uint8_t {
    Signature,  // free variables are generalized implicitly
    Declared,   // only declared generics / signature variables (struct fields, bodies, where)
};

class Resolver {
public:
    Resolver(const SourceManager& sources, const Program& program, size_t module_index,
             DiagnosticEngine& diags, CallGraph& calls, NameIndex* index)
        : program_(program), module_(*program.modules[module_index]),
          diags_(diags), calls_(calls), index_(index) {}

    void run() {
        recovered_.insert(module_.recovered_names.begin(), module_.recovered_names.end());
        collect_globals();
        for (const Item* item : module_.items) check_item(*item);
    }

private:
    // ------------------------------------------------------------ globals

    void collect_globals() {
        for (const Item* item : module_.items) {
            Global g{GlobalKind::Fn, item};
            switch (item->kind) {
            case ItemKind::Fn: g.kind = GlobalKind::Fn; break;
            case ItemKind::Struct: g.kind = GlobalKind::Struct; break;
            case ItemKind::Mesh: g.kind = GlobalKind::Mesh; break;
            case ItemKind::Import: {
                auto target = program_.import_targets.find(item);
                if (target == program_.import_targets.end()) {
                    unresolved_imports_.insert(item->name.name);
                    continue;  // reported by the loader
                }
                g.kind = GlobalKind::Module;
                g.module = target->second;
                break;
            }
            }
            std::string_view name = item->name.name;
            Builtin b = find_builtin(name);
            if (b != Builtin::Count) {
                diags_.emit(DiagCode::E0202, item->name.span,
                            fmt::format("`{}` is already defined as a built-in function", name))
                    .note("item names share one namespace with the built-ins; choose another name");
                continue;
            }
            auto [it, inserted] = globals_.emplace(name, g);
            record(item->name.span, item->name.span, global_symbol(g.kind));
            if (g.kind == GlobalKind::Mesh) {
                for (const MeshAxisDecl& a : item->axes) record(a.name.span, a.name.span, SymbolKind::MeshAxis);
            } else if (g.kind == GlobalKind::Struct) {
                for (const Param& f : item->fields) record(f.name.span, f.name.span, SymbolKind::Field);
            }
            if (!inserted) {
                diags_.emit(DiagCode::E0202, item->name.span,
                            fmt::format("`{}` is defined more than once", name))
                    .note(fmt::format("the first definition, a {}, is here",
                                      global_kind_name(it->second.kind)),
                          it->second.item->name.span);
            }
        }
    }

    std::optional<Global> lookup_global(std::string_view name) const {
        if (auto it = globals_.find(name); it != globals_.end()) return it->second;
        Builtin b = find_builtin(name);
        if (b != Builtin::Count) return Global{GlobalKind::Builtin, nullptr, 0, b};
        return std::nullopt;
    }

    // ------------------------------------------------------------ items

    void check_attributes(const Item& item) {
        for (const Attribute& a : item.attrs) {
            if (a.name.name != "explicit_comm" && a.name.name != "checkpoint") {
                diags_.emit(DiagCode::E0211, a.span,
                            fmt::format("unknown attribute `@{}`", a.name.name))
                    .note("the attributes are: `@explicit_comm` and `@checkpoint` (on functions)");
            } else if (item.kind != ItemKind::Fn) {
                diags_.emit(DiagCode::E0211, a.span,
                            fmt::format("`@{}` applies only to functions", a.name.name));
            }
        }
    }

    void check_item(const Item& item) {
        check_attributes(item);
        switch (item.kind) {
        case ItemKind::Import: break;
        case ItemKind::Mesh: check_mesh(item); break;
        case ItemKind::Struct: check_struct(item); break;
        case ItemKind::Fn: check_fn(item); break;
        }
    }

    void check_mesh(const Item& mesh) {
        if (mesh.axes.size() > ir::kMaxMeshAxes) {
            const MeshAxisDecl& extra = mesh.axes[ir::kMaxMeshAxes];
            diags_.emit(DiagCode::E0302, extra.span.to(mesh.axes.back().span),
                        fmt::format("mesh `{}` has {} axes; a mesh has at most {}", mesh.name.name,
                                    mesh.axes.size(), ir::kMaxMeshAxes))
                .note("merge axes that are always used together into one");
        }
        std::map<std::string_view, Span> axes;
        int64_t devices = 1;
        bool overflowed = false;
        for (const MeshAxisDecl& axis : mesh.axes) {
            if (!overflowed && axis.size >= 1 && __builtin_mul_overflow(devices, axis.size, &devices)) {
                overflowed = true;
                diags_.emit(DiagCode::E0302, axis.size_span,
                            fmt::format("mesh `{}` has more devices than fit in 64 bits (more than 2^63 - 1): "
                                        "the product of its axis sizes overflows at axis `{}` of size {}",
                                        mesh.name.name, axis.name.name, axis.size));
            }
            auto [it, inserted] = axes.emplace(axis.name.name, axis.name.span);
            if (!inserted) {
                diags_.emit(DiagCode::E0204, axis.name.span,
                            fmt::format("mesh `{}` declares axis `{}` twice", mesh.name.name,
                                        axis.name.name))
                    .note("first declared here", it->second);
            }
            if (axis.size < 1) {
                diags_.emit(DiagCode::E0302, axis.size_span,
                            fmt::format("mesh axis `{}` has size {}; sizes must be at least 1",
                                        axis.name.name, axis.size));
            }
            std::map<std::string_view, Span> keys;
            for (const auto& prop : axis.link) {
                if (prop.key.name != "latency" && prop.key.name != "bandwidth") {
                    diags_.emit(DiagCode::E0208, prop.key.span,
                                fmt::format("unknown link property `{}`", prop.key.name))
                        .note("a link has `latency` (seconds) and `bandwidth` (bytes/s)");
                    continue;
                }
                if (auto [first, inserted] = keys.emplace(prop.key.name, prop.key.span); !inserted) {
                    diags_.emit(DiagCode::E0204, prop.key.span,
                                fmt::format("link property `{}` given twice", prop.key.name))
                        .note("first given here", first->second);
                }
                bool bad = prop.key.name == "latency" ? prop.value < 0 : prop.value <= 0;
                if (bad) {
                    diags_.emit(DiagCode::E0302, prop.span,
                                fmt::format("{} must be {}, found {}", prop.key.name,
                                            prop.key.name == "latency" ? "at least 0" : "positive",
                                            prop.value));
                }
            }
        }
    }

    struct FnScope {
        std::map<std::string_view, Span> size_vars;
        std::map<std::string_view, Span> mesh_params;
        std::map<std::string_view, Span> type_params;  // `P: Params`
        std::map<std::string_view, Span> dtype_params;  // `T: Float`
        std::vector<std::unordered_map<std::string_view, Local>> locals;
        const Item* item = nullptr;
    };

    void declare_generics(const std::vector<GenericParam>& generics, FnScope& scope) {
        for (const GenericParam& g : generics) {
            bool is_mesh = false;
            bool is_type = false;
            bool is_dtype = false;
            bool unknown_kind = false;
            if (g.kind) {
                if (g.kind->name == "Mesh") {
                    is_mesh = true;
                } else if (g.kind->name == "Params") {
                    is_type = true;
                } else if (g.kind->name == "Float") {
                    is_dtype = true;
                } else if (g.kind->name != "Dim") {
                    unknown_kind = true;
                    diags_.emit(DiagCode::E0207, g.kind->span,
                                fmt::format("unknown kind `{}` for generic parameter `{}`",
                                            g.kind->name, g.name.name))
                        .note("a generic parameter is a mesh (`M: Mesh`), a size (`B` or `B: Dim`), "
                              "a parameter type (`P: Params`) or a float element type (`T: Float`)");
                }
            }
            const std::map<std::string_view, Span>* declared = nullptr;
            for (const auto* m : {&scope.size_vars, &scope.mesh_params, &scope.type_params, &scope.dtype_params}) {
                if (!declared && m->count(g.name.name)) declared = m;
            }
            if (declared) {
                diags_.emit(DiagCode::E0204, g.name.span,
                            fmt::format("generic parameter `{}` declared twice", g.name.name))
                    .note("first declared here", declared->at(g.name.name));
                continue;
            }
            if (is_dtype) {
                scope.dtype_params.emplace(g.name.name, g.name.span);
                record(g.name.span, g.name.span, SymbolKind::ElementType);
                continue;
            }
            if (is_type) {
                scope.type_params.emplace(g.name.name, g.name.span);
                record(g.name.span, g.name.span, SymbolKind::TypeParameter);
                continue;
            }
            // A parameter of unknown kind is accepted both as a mesh and as a size, so
            // that its uses are not reported again (no cascade).
            if (is_mesh || unknown_kind) scope.mesh_params.emplace(g.name.name, g.name.span);
            if (!is_mesh) scope.size_vars.emplace(g.name.name, g.name.span);
            record(g.name.span, g.name.span, is_mesh ? SymbolKind::MeshParameter : SymbolKind::SizeVariable);
        }
    }

    void check_struct(const Item& item) {
        FnScope scope;
        scope.item = &item;
        declare_generics(item.generics, scope);
        std::map<std::string_view, Span> fields;
        for (const Param& f : item.fields) {
            auto [it, inserted] = fields.emplace(f.name.name, f.name.span);
            if (!inserted) {
                diags_.emit(DiagCode::E0204, f.name.span,
                            fmt::format("struct `{}` has two fields named `{}`", item.name.name,
                                        f.name.name))
                    .note("the first is here", it->second);
            }
            resolve_type(*f.type, scope, DimMode::Declared, /*in_struct=*/true);
        }
    }

    void check_fn(const Item& item) {
        FnScope scope;
        scope.item = &item;
        declare_generics(item.generics, scope);
        scope.locals.emplace_back();
        for (const Param& p : item.params) {
            resolve_type(*p.type, scope, DimMode::Signature);
            auto [it, inserted] = scope.locals.back().emplace(p.name.name, Local{LocalKind::Param, p.name.span});
            record(p.name.span, p.name.span, SymbolKind::Parameter);
            if (!inserted) {
                diags_.emit(DiagCode::E0204, p.name.span,
                            fmt::format("function `{}` has two parameters named `{}`",
                                        item.name.name, p.name.name))
                    .note("the first is here", it->second.span);
            }
        }
        if (item.result) resolve_type(*item.result, scope, DimMode::Signature);
        for (const Constraint& c : item.where) {
            resolve_dim(*c.lhs, scope, DimMode::Declared);
            resolve_dim(*c.rhs, scope, DimMode::Declared);
        }
        resolve_block(*item.body, scope);
    }

    // ------------------------------------------------------------ types

    MeshRef lookup_mesh(const Ident& name, const FnScope& scope, bool report) {
        if (auto param = scope.mesh_params.find(name.name); param != scope.mesh_params.end()) {
            record(name.span, param->second, SymbolKind::MeshParameter);
            return MeshRef{true, nullptr};
        }
        auto g = lookup_global(name.name);
        if (g && g->kind == GlobalKind::Mesh) {
            record(name.span, g->item->name.span, SymbolKind::Mesh);
            return MeshRef{true, g->item};
        }
        if (report && !g && recovered_.count(name.name)) report = false;
        if (report) {
            auto& d = diags_.emit(DiagCode::E0203, name.span,
                                  fmt::format("`{}` is not a declared mesh", name.name));
            if (scope.size_vars.count(name.name)) {
                d.note(fmt::format("`{}` is a size variable", name.name));
            } else if (g) {
                d.note(fmt::format("`{}` is a {}", name.name, global_kind_name(g->kind)));
            }
            d.note("a mesh is a `mesh` item or a generic parameter `M: Mesh`");
        }
        return MeshRef{};
    }

    static const MeshAxisDecl* find_axis(const Item& mesh, std::string_view axis) {
        for (const MeshAxisDecl& a : mesh.axes) {
            if (a.name.name == axis) return &a;
        }
        return nullptr;
    }

    void unknown_axis(const Item& mesh, const Ident& axis) {
        std::vector<std::string_view> names;
        for (const MeshAxisDecl& a : mesh.axes) names.push_back(a.name.name);
        auto& d = diags_.emit(DiagCode::E0401, axis.span,
                              fmt::format("mesh `{}` has no axis `{}`", mesh.name.name, axis.name));
        if (auto best = closest(axis.name, names)) d.note(fmt::format("did you mean `{}`?", *best));
        d.note(fmt::format("`{}` is declared here", mesh.name.name), mesh.name.span);
    }

    void resolve_dim(const Dim& dim, FnScope& scope, DimMode mode) {
        switch (dim.kind) {
        case DimKind::Int: return;
        case DimKind::Binary:
            resolve_dim(*dim.lhs, scope, mode);
            resolve_dim(*dim.rhs, scope, mode);
            return;
        case DimKind::Axis: {
            MeshRef mesh = lookup_mesh(dim.name, scope, true);
            if (mesh.concrete && !find_axis(*mesh.concrete, dim.axis.name)) {
                unknown_axis(*mesh.concrete, dim.axis);
            } else if (mesh.concrete) {
                record(dim.axis.span, find_axis(*mesh.concrete, dim.axis.name)->name.span, SymbolKind::MeshAxis);
            }
            return;
        }
        case DimKind::Var: {
            std::string_view name = dim.name.name;
            if (auto var = scope.size_vars.find(name); var != scope.size_vars.end()) {
                record(dim.name.span, var->second, SymbolKind::SizeVariable);
                return;
            }
            if (auto tp = scope.type_params.find(name); tp != scope.type_params.end()) {
                diags_.emit(DiagCode::E0209, dim.span,
                            fmt::format("`{}` is a parameter type (`{}: Params`), not a size", name, name))
                    .note("declared here", tp->second);
                return;
            }
            if (auto dp = scope.dtype_params.find(name); dp != scope.dtype_params.end()) {
                diags_.emit(DiagCode::E0209, dim.span,
                            fmt::format("`{}` is an element type (`{}: Float`), not a size", name, name))
                    .note("declared here", dp->second);
                return;
            }
            if (scope.mesh_params.count(name) ||
                (lookup_global(name) && lookup_global(name)->kind == GlobalKind::Mesh)) {
                diags_.emit(DiagCode::E0209, dim.span,
                            fmt::format("`{}` is a mesh, not a size", name))
                    .note(fmt::format("the size of one of its axes is written `{}.axis`", name));
                return;
            }
            if (mode == DimMode::Signature) {
                scope.size_vars.emplace(name, dim.span);  // implicitly generalized
                record(dim.name.span, dim.span, SymbolKind::SizeVariable);
                return;
            }
            auto& d = diags_.emit(DiagCode::E0201, dim.span,
                                  fmt::format("unknown size variable `{}`", name));
            if (scope.item && scope.item->kind == ItemKind::Struct) {
                d.note(fmt::format("a struct's size variables are declared in its generic "
                                   "parameters: `struct {}[..., {}]`",
                                   scope.item->name.name, name));
            } else {
                d.note("sizes here must be the signature's size variables, `Mesh.axis` sizes "
                       "or integers");
            }
            return;
        }
        }
    }

    void resolve_type(const Type& type, FnScope& scope, DimMode mode, bool in_struct = false) {
        switch (type.kind) {
        case TypeKind::Scalar: return;
        case TypeKind::Tuple:
            for (const Type* e : type.elements) resolve_type(*e, scope, mode, in_struct);
            return;
        case TypeKind::Named: resolve_named_type(type, scope, mode); return;
        case TypeKind::Tensor: break;
        }
        if (type.dtype_var) resolve_dtype_var(*type.dtype_var, scope);
        for (const Dim* d : type.shape) resolve_dim(*d, scope, mode);
        MeshRef mesh;
        if (type.mesh) mesh = lookup_mesh(*type.mesh, scope, true);
        if (!type.mesh && (type.layout || type.partial || type.any_layout)) {
            Span at = type.layout ? type.layout->span : type.partial ? type.partial_span : type.span;
            diags_.emit(DiagCode::E0404, at,
                        "a layout names mesh axes, but this tensor type has no mesh")
                .note("add `on M` before `with` or `partial`");
            return;
        }
        if (type.auto_layout && type.partial) {
            diags_.emit(DiagCode::E0404, type.partial_span,
                        "`with auto` is a layout the compiler chooses, with no pending sum; it has no `partial`")
                .note("drop `partial`, or write the layout (`with {...} partial {...}`)");
            return;
        }
        if (type.any_layout && type.partial) {
            diags_.emit(DiagCode::E0404, type.partial_span,
                        "`with _` takes the value's layout with its pending sums completed; it has no `partial`")
                .note("write the layout (`with {...} partial {...}`), or drop `partial`");
            return;
        }
        std::map<std::string_view, Span> used_axes;
        auto use_axis = [&](const Ident& axis) {
            if (mesh.concrete && !find_axis(*mesh.concrete, axis.name)) {
                unknown_axis(*mesh.concrete, axis);
                return;
            }
            if (mesh.concrete) record(axis.span, find_axis(*mesh.concrete, axis.name)->name.span, SymbolKind::MeshAxis);
            auto [it, inserted] = used_axes.emplace(axis.name, axis.span);
            if (!inserted) {
                diags_.emit(DiagCode::E0402, axis.span,
                            fmt::format("mesh axis `{}` is used twice in one type", axis.name))
                    .note("first used here", it->second)
                    .note("a mesh axis can split one dim, or be partial, but only once");
            }
        };
        if (type.layout) {
            std::map<size_t, Span> keyed;
            for (const LayoutEntry& e : type.layout->entries) {
                if (e.key_name) {
                    if (auto var = scope.size_vars.find(e.key_name->name); var != scope.size_vars.end()) {
                        record(e.key_name->span, var->second, SymbolKind::SizeVariable);
                    }
                }
                std::optional<size_t> position = layout_key_position(type, e);
                if (position) {
                    auto [it, inserted] = keyed.emplace(*position, e.key_span);
                    if (!inserted) {
                        diags_.emit(DiagCode::E0403, e.key_span,
                                    fmt::format("dim {} appears twice in the layout", *position))
                            .note("first here", it->second)
                            .note("to split one dim over several axes write `{B: (data, model)}`");
                    }
                }
                for (const Ident& axis : e.axes) use_axis(axis);
            }
        }
        if (type.partial) {
            for (const Ident& axis : *type.partial) use_axis(axis);
        }
    }

    // The dim a layout entry names, or nullopt after reporting E0403.
    std::optional<size_t> layout_key_position(const Type& type, const LayoutEntry& e) {
        if (!e.key_name) {
            if (e.key_pos >= 0 && static_cast<size_t>(e.key_pos) < type.shape.size()) {
                return static_cast<size_t>(e.key_pos);
            }
            diags_.emit(DiagCode::E0403, e.key_span,
                        fmt::format("layout key {} is out of range for a tensor of rank {}",
                                    e.key_pos, type.shape.size()));
            return std::nullopt;
        }
        std::vector<size_t> matches;
        for (size_t i = 0; i < type.shape.size(); ++i) {
            const Dim* d = type.shape[i];
            if (d->kind == DimKind::Var && d->name.name == e.key_name->name) matches.push_back(i);
        }
        if (matches.size() == 1) return matches[0];
        if (matches.empty()) {
            diags_.emit(DiagCode::E0403, e.key_span,
                        fmt::format("layout key `{}` is not a dim of the shape", e.key_name->name))
                .note("a layout key is a size variable that occurs once in the shape, or a "
                      "dim position such as `0`");
        } else {
            diags_.emit(DiagCode::E0403, e.key_span,
                        fmt::format("layout key `{}` is ambiguous: it names {} dims",
                                    e.key_name->name, matches.size()))
                .note(fmt::format("key the dim by position instead, e.g. `{{{}: {}}}`", matches[0],
                                  e.axes.empty() ? "axis" : e.axes[0].name));
        }
        return std::nullopt;
    }

    static bool is_recovered(const Module& module, std::string_view name) {
        return std::find(module.recovered_names.begin(), module.recovered_names.end(), name) !=
               module.recovered_names.end();
    }

    const Item* find_item(const Module& module, std::string_view name) const {
        for (const Item* item : module.items) {
            if (item->kind != ItemKind::Import && item->name.name == name) return item;
        }
        return nullptr;
    }

    // The element type `T` of `Tensor T [...]`: a `T: Float` generic parameter.
    void resolve_dtype_var(const Ident& name, FnScope& scope) {
        if (auto it = scope.dtype_params.find(name.name); it != scope.dtype_params.end()) {
            record(name.span, it->second, SymbolKind::ElementType);
            return;
        }
        diags_.emit(DiagCode::E0201, name.span, fmt::format("unknown element type `{}`", name.name))
            .note("an element type is f16, bf16, f32, f64, i32, i64 or bool, or a generic parameter "
                  "declared `T: Float` in the function's or struct's `[...]`");
    }

    void resolve_named_type(const Type& type, FnScope& scope, DimMode mode) {
        if (!type.module) {
            if (auto it = scope.dtype_params.find(type.name.name); it != scope.dtype_params.end()) {
                // `T` alone: a scalar of the generic element type.
                record(type.name.span, it->second, SymbolKind::ElementType);
                if (!type.args.empty()) {
                    diags_.emit(DiagCode::E0303, type.span,
                                fmt::format("`{}` is an element type (`{}: Float`): it takes no generic arguments",
                                            type.name.name, type.name.name));
                }
                return;
            }
            if (auto tp = scope.type_params.find(type.name.name); tp != scope.type_params.end()) {
                record(type.name.span, tp->second, SymbolKind::TypeParameter);
                if (!type.args.empty()) {
                    diags_.emit(DiagCode::E0303, type.span,
                                fmt::format("`{}` is a parameter type (`{}: Params`): it takes no generic arguments",
                                            type.name.name, type.name.name));
                }
                return;
            }
        }
        if (resolve_struct_type(type, scope, mode) || mode != DimMode::Signature) return;
        // The struct was reported; its arguments are not checked against it, but their
        // size variables are still declared by the signature, so that the body and the
        // `where` clause do not report them again (no cascade).
        for (const Dim* arg : type.args) declare_size_vars(*arg, scope);
    }

    void declare_size_vars(const Dim& dim, FnScope& scope) {
        if (dim.kind == DimKind::Binary) {
            declare_size_vars(*dim.lhs, scope);
            declare_size_vars(*dim.rhs, scope);
        } else if (dim.kind == DimKind::Var && !scope.mesh_params.count(dim.name.name)) {
            auto g = lookup_global(dim.name.name);
            if (!g || g->kind != GlobalKind::Mesh) scope.size_vars.emplace(dim.name.name, dim.span);
        }
    }

    // Resolves a struct type and checks its arguments; false after reporting that the
    // struct is unknown, not a struct, or given the wrong number of arguments.
    bool resolve_struct_type(const Type& type, FnScope& scope, DimMode mode) {
        const Item* target = nullptr;
        if (type.module) {
            auto g = lookup_global(type.module->name);
            if (!g || g->kind != GlobalKind::Module) {
                if (unresolved_imports_.count(type.module->name)) return false;
                diags_.emit(DiagCode::E0201, type.module->span,
                            fmt::format("unknown module `{}`", type.module->name))
                    .note(fmt::format("import it first: `import std.{};`", type.module->name));
                return false;
            }
            record(type.module->span, g->item->name.span, SymbolKind::Module);
            target = find_item(*program_.modules[g->module], type.name.name);
            if (!target && is_recovered(*program_.modules[g->module], type.name.name)) return false;
            if (!target) {
                diags_.emit(DiagCode::E0201, type.name.span,
                            fmt::format("module `{}` has no item `{}`", type.module->name,
                                        type.name.name));
                return false;
            }
        } else {
            auto g = lookup_global(type.name.name);
            if (!g) {
                unknown_name(type.name, "type", scope);
                return false;
            }
            target = g->item;
        }
        if (!target || target->kind != ItemKind::Struct) {
            auto& d = diags_.emit(DiagCode::E0209, type.name.span,
                                  fmt::format("`{}` is not a type", type.name.name));
            if (target && target->kind == ItemKind::Mesh) {
                d.note("a mesh goes after `on` in a tensor type: `Tensor f32 [N] on " +
                       std::string(type.name.name) + "`");
            }
            return false;
        }
        record(type.name.span, target->name.span, SymbolKind::Struct);
        if (type.args.size() != target->generics.size()) {
            diags_.emit(DiagCode::E0303, type.span,
                        fmt::format("struct `{}` takes {} generic argument{}, found {}",
                                    target->name.name, target->generics.size(),
                                    target->generics.size() == 1 ? "" : "s", type.args.size()))
                .note("declared here", target->name.span);
            return false;
        }
        for (size_t i = 0; i < type.args.size(); ++i) {
            const Dim& arg = *type.args[i];
            const GenericParam& param = target->generics[i];
            bool wants_mesh = param.kind && param.kind->name == "Mesh";
            bool wants_type = param.kind && param.kind->name == "Params";
            bool wants_dtype = param.kind && param.kind->name == "Float";
            if (wants_dtype) {
                static constexpr std::string_view kFloats[] = {"f16", "bf16", "f32", "f64"};
                bool keyword = arg.kind == DimKind::Var &&
                               std::find(std::begin(kFloats), std::end(kFloats), arg.name.name) != std::end(kFloats);
                auto dp = arg.kind == DimKind::Var ? scope.dtype_params.find(arg.name.name) : scope.dtype_params.end();
                if (dp != scope.dtype_params.end()) {
                    record(arg.span, dp->second, SymbolKind::ElementType);
                } else if (!keyword) {
                    diags_.emit(DiagCode::E0209, arg.span,
                                fmt::format("generic parameter `{}` of `{}` is a float element type; pass f16, bf16, "
                                            "f32, f64 or a `T: Float` parameter",
                                            param.name.name, target->name.name))
                        .note("declared here", param.name.span);
                }
            } else if (wants_type) {
                auto tp = arg.kind == DimKind::Var ? scope.type_params.find(arg.name.name) : scope.type_params.end();
                if (tp == scope.type_params.end()) {
                    diags_.emit(DiagCode::E0209, arg.span,
                                fmt::format("generic parameter `{}` of `{}` is a parameter type; pass a "
                                            "`Params` parameter of this function",
                                            param.name.name, target->name.name))
                        .note("to name a concrete state type, let inference give it: `let s = init(p);`");
                } else {
                    record(arg.span, tp->second, SymbolKind::TypeParameter);
                }
            } else if (wants_mesh) {
                if (arg.kind != DimKind::Var) {
                    diags_.emit(DiagCode::E0209, arg.span,
                                fmt::format("generic parameter `{}` of `{}` is a mesh; found a size",
                                            param.name.name, target->name.name));
                } else {
                    lookup_mesh(arg.name, scope, true);
                }
            } else {
                resolve_dim(arg, scope, mode);
            }
        }
        return true;
    }

    // ------------------------------------------------------------ expressions

    std::vector<std::string_view> visible_names(const FnScope& scope) const {
        std::vector<std::string_view> names;
        for (const auto& level : scope.locals) {
            for (const auto& [name, local] : level) names.push_back(name);
        }
        for (const auto& [name, span] : scope.size_vars) names.push_back(name);
        for (const auto& [name, g] : globals_) names.push_back(name);
        for (size_t i = 0; i < static_cast<size_t>(Builtin::Count); ++i) {
            names.push_back(builtin_info(static_cast<Builtin>(i)).name);
        }
        return names;
    }

    void unknown_name(const Ident& name, std::string_view what, const FnScope& scope) {
        // The import, or the declaration that failed to parse, was reported already.
        if (unresolved_imports_.count(name.name) || recovered_.count(name.name)) return;
        auto& d = diags_.emit(DiagCode::E0201, name.span,
                              fmt::format("unknown {} `{}`", what, name.name));
        if (auto best = closest(name.name, visible_names(scope))) {
            d.note(fmt::format("did you mean `{}`?", *best));
        }
    }

    const Local* lookup_local(const FnScope& scope, std::string_view name) const {
        for (auto it = scope.locals.rbegin(); it != scope.locals.rend(); ++it) {
            if (auto found = it->find(name); found != it->end()) return &found->second;
        }
        return nullptr;
    }

    // Where an expression stands, for the forms allowed only as arguments.
    struct Position {
        Builtin callee = Builtin::Count;  // a built-in whose direct argument this is
        bool is_argument = false;
        size_t index = 0;                 // positional index
        bool named = false;
    };

    void note_call(const Item* callee, Span span, const FnScope& scope) {
        if (callee && callee->kind == ItemKind::Fn && scope.item) {
            calls_[scope.item].emplace_back(callee, span);
        }
    }

    void resolve_name_expr(const Expr& e, FnScope& scope) {
        std::string_view name = e.name.name;
        if (const Local* local = lookup_local(scope, name)) {
            record(e.name.span, local->span, local_symbol(local->kind));
            return;
        }
        if (auto var = scope.size_vars.find(name); var != scope.size_vars.end()) {
            record(e.name.span, var->second, SymbolKind::SizeVariable);
            return;  // a size used as an i64 value
        }
        if (auto dp = scope.dtype_params.find(name); dp != scope.dtype_params.end()) {
            record(e.name.span, dp->second, SymbolKind::ElementType);
            return;  // an element type, as in `cast(x, T)` (the checker says where one fits)
        }
        if (scope.mesh_params.count(name)) {
            diags_.emit(DiagCode::E0209, e.span, fmt::format("mesh `{}` is not a value", name))
                .note(fmt::format("the size of one of its axes is `{}.axis`", name));
            return;
        }
        auto g = lookup_global(name);
        if (!g) {
            unknown_name(e.name, "name", scope);
            return;
        }
        if (g->item) record(e.name.span, g->item->name.span, global_symbol(g->kind));
        switch (g->kind) {
        case GlobalKind::Fn: note_call(g->item, e.span, scope); return;
        case GlobalKind::Builtin: return;
        case GlobalKind::Struct:
            diags_.emit(DiagCode::E0209, e.span, fmt::format("struct `{}` is not a value", name))
                .note(fmt::format("build one with a struct literal: `{} {{ field: value, ... }}`", name));
            return;
        case GlobalKind::Mesh:
            diags_.emit(DiagCode::E0209, e.span, fmt::format("mesh `{}` is not a value", name))
                .note(fmt::format("the size of one of its axes is `{}.axis`", name));
            return;
        case GlobalKind::Module:
            diags_.emit(DiagCode::E0209, e.span, fmt::format("module `{}` is not a value", name))
                .note(fmt::format("use one of its items: `{}.item`", name));
            return;
        }
    }

    // `nn.linear`, `M.data`: a field whose base is a module or mesh name.
    bool resolve_qualified(const Expr& e, FnScope& scope) {
        const Expr& base = *e.lhs;
        if (base.kind != ExprKind::Name) return false;
        std::string_view name = base.name.name;
        if (lookup_local(scope, name) || scope.size_vars.count(name)) return false;
        if (auto param = scope.mesh_params.find(name); param != scope.mesh_params.end()) {
            record(base.name.span, param->second, SymbolKind::MeshParameter);
            return true;  // axis of a generic mesh
        }
        auto g = lookup_global(name);
        if (!g) {
            if (unresolved_imports_.count(name)) return true;
            return false;
        }
        if (g->item && (g->kind == GlobalKind::Mesh || g->kind == GlobalKind::Module)) {
            record(base.name.span, g->item->name.span, global_symbol(g->kind));
        }
        if (g->kind == GlobalKind::Mesh) {
            if (const MeshAxisDecl* axis = find_axis(*g->item, e.name.name)) {
                record(e.name.span, axis->name.span, SymbolKind::MeshAxis);
            } else {
                unknown_axis(*g->item, e.name);
            }
            return true;
        }
        if (g->kind == GlobalKind::Module) {
            const Module& target = *program_.modules[g->module];
            const Item* item = find_item(target, e.name.name);
            if (item) {
                record(e.name.span, item->name.span,
                       item->kind == ItemKind::Fn ? SymbolKind::Function
                       : item->kind == ItemKind::Struct ? SymbolKind::Struct : SymbolKind::Mesh);
            }
            if (!item && is_recovered(target, e.name.name)) return true;
            if (!item) {
                std::vector<std::string_view> names;
                for (const Item* it : target.items) {
                    if (it->kind != ItemKind::Import) names.push_back(it->name.name);
                }
                auto& d = diags_.emit(DiagCode::E0201, e.name.span,
                                      fmt::format("module `{}` has no item `{}`", name, e.name.name));
                if (auto best = closest(e.name.name, names)) d.note(fmt::format("did you mean `{}`?", *best));
            } else if (item->kind == ItemKind::Fn) {
                note_call(item, e.span, scope);
            } else {
                diags_.emit(DiagCode::E0209, e.span,
                            fmt::format("{} `{}.{}` is not a value",
                                        item->kind == ItemKind::Struct ? "struct" : "mesh", name,
                                        e.name.name));
            }
            return true;
        }
        return false;
    }

    // The built-in a callee names, if it is a plain built-in name not shadowed by a local.
    Builtin callee_builtin(const Expr& callee, const FnScope& scope) const {
        if (callee.kind != ExprKind::Name) return Builtin::Count;
        if (lookup_local(scope, callee.name.name) || globals_.count(callee.name.name)) {
            return Builtin::Count;
        }
        return find_builtin(callee.name.name);
    }

    // Whether a callee that is not a built-in resolves to something (an unknown name
    // was reported already; calling it a user function would mislead).
    bool callee_is_known(const Expr& callee, const FnScope& scope) const {
        if (callee.kind != ExprKind::Name) return true;
        std::string_view name = callee.name.name;
        return lookup_local(scope, name) || scope.size_vars.count(name) ||
               scope.mesh_params.count(name) || lookup_global(name);
    }

    static bool is_deferred_name_arg(const Expr& value) {
        // `axis: D`, `over: model`, `over: (data, model)`: looked up among the operand's
        // dims and its mesh's axes by type inference, not in scope.
        if (value.kind == ExprKind::Name) return true;
        if (value.kind == ExprKind::Tuple) {
            return std::all_of(value.elements.begin(), value.elements.end(),
                               [](const Expr* x) { return x->kind == ExprKind::Name; });
        }
        return false;
    }

    void check_position(const Expr& e, const Position& pos) {
        auto reject = [&](std::string what, std::string where) {
            diags_.emit(DiagCode::E0306, e.span, fmt::format("{} is not allowed here", what))
                .note(std::move(where));
        };
        switch (e.kind) {
        case ExprKind::LayoutLit: {
            bool ok = pos.callee == Builtin::reshard && !pos.named && pos.index == 1;
            if (!ok) reject("a layout literal", "a layout literal `{d: axis}` is only the second argument of `reshard`");
            return;
        }
        case ExprKind::StringLit: {
            bool ok = pos.callee == Builtin::print || pos.callee == Builtin::load ||
                      pos.callee == Builtin::save || pos.callee == Builtin::einsum || pos.callee == Builtin::arg;
            if (!ok) reject("a string literal", "strings are only arguments of `print`, `load`, `save`, `einsum` and `arg`");
            return;
        }
        case ExprKind::List:
            if (pos.callee == Builtin::Count) {
                reject("a list literal", "list literals `[a, b]` are only arguments of built-ins (shapes, permutations, `concat`)");
            }
            return;
        case ExprKind::DTypeName:
            if (pos.callee == Builtin::Count) {
                reject("an element type", "element types are only arguments of built-ins, as in `cast(x, f16)`");
            }
            return;
        default: return;
        }
    }

    void resolve_expr(const Expr& e, FnScope& scope) { resolve_expr(e, scope, Position{}); }

    void resolve_expr(const Expr& e, FnScope& scope, const Position& pos) {
        check_position(e, pos);
        switch (e.kind) {
        case ExprKind::IntLit:
        case ExprKind::FloatLit:
        case ExprKind::BoolLit:
        case ExprKind::StringLit:
        case ExprKind::DTypeName:
        case ExprKind::LayoutLit: return;
        case ExprKind::Name: resolve_name_expr(e, scope); return;
        case ExprKind::Unary: resolve_expr(*e.lhs, scope); return;
        case ExprKind::Binary:
            resolve_expr(*e.lhs, scope);
            resolve_expr(*e.rhs, scope);
            return;
        case ExprKind::Field:
            if (!resolve_qualified(e, scope)) resolve_expr(*e.lhs, scope);
            return;
        case ExprKind::Tuple:
        case ExprKind::List:
            for (const Expr* x : e.elements) resolve_expr(*x, scope);
            return;
        case ExprKind::Call: resolve_call(e, scope); return;
        case ExprKind::StructLit: resolve_struct_literal(e, scope); return;
        case ExprKind::If: {
            resolve_expr(*e.cond, scope);
            resolve_block(*e.then_block, scope);
            if (e.else_block) resolve_block(*e.else_block, scope);
            if (e.else_if) resolve_expr(*e.else_if, scope);
            return;
        }
        }
    }

    void resolve_call(const Expr& e, FnScope& scope) {
        resolve_expr(*e.lhs, scope);
        Builtin builtin = callee_builtin(*e.lhs, scope);
        std::map<std::string_view, Span> labels;
        size_t positional = 0;
        bool reported_named = false;
        for (const Arg& arg : e.args) {
            Position pos{builtin, true, positional, arg.label.has_value()};
            if (arg.label) {
                if (builtin == Builtin::Count && !reported_named && callee_is_known(*e.lhs, scope)) {
                    reported_named = true;
                    diags_.emit(DiagCode::E0304, arg.label->span,
                                fmt::format("named argument `{}` in a call of a user function",
                                            arg.label->name))
                        .note("named arguments are for built-in functions only; pass it by position");
                }
                auto [it, inserted] = labels.emplace(arg.label->name, arg.label->span);
                if (!inserted) {
                    diags_.emit(DiagCode::E0204, arg.label->span,
                                fmt::format("argument `{}` given twice", arg.label->name))
                        .note("first given here", it->second);
                }
                if (builtin != Builtin::Count && is_deferred_name_arg(*arg.value)) continue;
            } else {
                ++positional;
            }
            resolve_expr(*arg.value, scope, pos);
        }
    }

    void resolve_struct_literal(const Expr& e, FnScope& scope) {
        auto g = lookup_global(e.name.name);
        if (!g) {
            unknown_name(e.name, "struct", scope);
            for (const FieldInit& f : e.fields) resolve_expr(*f.value, scope);
            return;
        }
        if (g->kind != GlobalKind::Struct) {
            diags_.emit(DiagCode::E0209, e.name.span,
                        fmt::format("`{}` is a {}, not a struct", e.name.name,
                                    global_kind_name(g->kind)));
            for (const FieldInit& f : e.fields) resolve_expr(*f.value, scope);
            return;
        }
        const Item& s = *g->item;
        record(e.name.span, s.name.span, SymbolKind::Struct);
        for (const FieldInit& f : e.fields) {
            for (const Param& p : s.fields) {
                if (p.name.name == f.name.name) record(f.name.span, p.name.span, SymbolKind::Field);
            }
        }
        std::map<std::string_view, Span> given;
        std::set<std::string_view> suggested;  // fields suggested for misspelt ones
        for (const FieldInit& f : e.fields) {
            resolve_expr(*f.value, scope);
            auto [it, inserted] = given.emplace(f.name.name, f.name.span);
            if (!inserted) {
                diags_.emit(DiagCode::E0204, f.name.span,
                            fmt::format("field `{}` given twice", f.name.name))
                    .note("first given here", it->second);
                continue;
            }
            bool known = std::any_of(s.fields.begin(), s.fields.end(),
                                     [&](const Param& p) { return p.name.name == f.name.name; });
            if (!known) {
                std::vector<std::string_view> names;
                for (const Param& p : s.fields) names.push_back(p.name.name);
                auto& d = diags_.emit(DiagCode::E0201, f.name.span,
                                      fmt::format("struct `{}` has no field `{}`", s.name.name,
                                                  f.name.name));
                if (auto best = closest(f.name.name, names)) {
                    d.note(fmt::format("did you mean `{}`?", *best));
                    suggested.insert(*best);
                }
            }
        }
        std::vector<std::string_view> missing;
        for (const Param& p : s.fields) {
            // A misspelt field is reported once, as unknown, not again as missing.
            if (!given.count(p.name.name) && !suggested.count(p.name.name)) missing.push_back(p.name.name);
        }
        if (!missing.empty()) {
            std::string list;
            for (std::string_view m : missing) list += (list.empty() ? "`" : ", `") + std::string(m) + "`";
            diags_.emit(DiagCode::E0305, e.name.span,
                        fmt::format("struct literal of `{}` is missing field{} {}", s.name.name,
                                    missing.size() == 1 ? "" : "s", list))
                .note("declared here", s.name.span);
        }
    }

    // ------------------------------------------------------------ statements

    void bind_pattern(const Pattern& p, FnScope& scope, std::map<std::string_view, Span>& seen) {
        switch (p.kind) {
        case PatternKind::Wildcard: return;
        case PatternKind::Tuple:
            for (const Pattern* e : p.elements) bind_pattern(*e, scope, seen);
            return;
        case PatternKind::Name: {
            auto [it, inserted] = seen.emplace(p.name.name, p.name.span);
            if (!inserted) {
                diags_.emit(DiagCode::E0204, p.name.span,
                            fmt::format("`{}` is bound twice in one pattern", p.name.name))
                    .note("first bound here", it->second);
                return;
            }
            scope.locals.back()[p.name.name] = Local{LocalKind::Let, p.name.span};
            record(p.name.span, p.name.span, SymbolKind::Variable);
            return;
        }
        }
    }

    void check_assign_target(const Expr& target, FnScope& scope) {
        const Expr* root = &target;
        while (root->kind == ExprKind::Field) root = root->lhs;
        if (root->kind != ExprKind::Name) {
            diags_.emit(DiagCode::E0206, target.span, "cannot assign to this expression")
                .note("the left side of `=` is a `var` variable or a field of one");
            return;
        }
        const Local* local = lookup_local(scope, root->name.name);
        if (!local) {
            // Not resolve_expr on a global: naming a function there would record a call.
            if (lookup_global(root->name.name) || scope.size_vars.count(root->name.name) ||
                scope.mesh_params.count(root->name.name)) {
                diags_.emit(DiagCode::E0206, target.span,
                            fmt::format("cannot assign to `{}`: it is not a variable", root->name.name));
            } else {
                resolve_expr(target, scope);  // reports the unknown name
            }
            return;
        }
        record(root->name.span, local->span, local_symbol(local->kind));
        if (local->kind != LocalKind::Var) {
            std::string_view what = local->kind == LocalKind::Param ? "a parameter"
                                    : local->kind == LocalKind::Loop ? "a loop variable"
                                                                     : "a `let` binding";
            diags_.emit(DiagCode::E0206, target.span,
                        fmt::format("cannot assign to `{}`: it is {}", root->name.name, what))
                .note("declared here", local->span)
                .note(fmt::format("declare it with `var {} = ...;` to make it mutable", root->name.name));
            return;
        }
        if (target.kind == ExprKind::Field) resolve_expr(target, scope);
    }

    void resolve_block(const Block& block, FnScope& scope) {
        scope.locals.emplace_back();
        for (const Stmt* s : block.stmts) resolve_stmt(*s, scope);
        if (block.tail) resolve_expr(*block.tail, scope);
        scope.locals.pop_back();
    }

    void resolve_stmt(const Stmt& s, FnScope& scope) {
        switch (s.kind) {
        case StmtKind::Let: {
            resolve_expr(*s.value, scope);
            if (s.type) resolve_type(*s.type, scope, DimMode::Declared);
            std::map<std::string_view, Span> seen;
            bind_pattern(*s.pattern, scope, seen);
            return;
        }
        case StmtKind::Var:
            resolve_expr(*s.value, scope);
            if (s.type) resolve_type(*s.type, scope, DimMode::Declared);
            scope.locals.back()[s.name.name] = Local{LocalKind::Var, s.name.span};
            record(s.name.span, s.name.span, SymbolKind::Variable);
            return;
        case StmtKind::Assign:
            resolve_expr(*s.value, scope);
            check_assign_target(*s.target, scope);
            return;
        case StmtKind::For:
            resolve_expr(*s.range_begin, scope);
            resolve_expr(*s.range_end, scope);
            scope.locals.emplace_back();
            scope.locals.back()[s.name.name] = Local{LocalKind::Loop, s.name.span};
            record(s.name.span, s.name.span, SymbolKind::LoopVariable);
            resolve_block(*s.body, scope);
            scope.locals.pop_back();
            return;
        case StmtKind::Return:
            if (s.value) resolve_expr(*s.value, scope);
            return;
        case StmtKind::Expr: resolve_expr(*s.value, scope); return;
        case StmtKind::Empty: return;
        }
    }

    // For the language server (name_index.h): a resolved name's use and declaration.
    void record(Span use, Span def, SymbolKind kind) {
        if (index_) index_->add(use, def, kind);
    }
    static SymbolKind local_symbol(LocalKind k) {
        switch (k) {
        case LocalKind::Param: return SymbolKind::Parameter;
        case LocalKind::Loop: return SymbolKind::LoopVariable;
        case LocalKind::Let:
        case LocalKind::Var: return SymbolKind::Variable;
        }
        return SymbolKind::Variable;
    }
    static SymbolKind global_symbol(GlobalKind k) {
        switch (k) {
        case GlobalKind::Fn: return SymbolKind::Function;
        case GlobalKind::Struct: return SymbolKind::Struct;
        case GlobalKind::Mesh: return SymbolKind::Mesh;
        case GlobalKind::Module:
        case GlobalKind::Builtin: return SymbolKind::Module;
        }
        return SymbolKind::Module;
    }

    const Program& program_;
    const Module& module_;
    DiagnosticEngine& diags_;
    CallGraph& calls_;
    NameIndex* index_ = nullptr;
    std::unordered_map<std::string_view, Global> globals_;
    std::set<std::string_view> unresolved_imports_;
    std::set<std::string_view> recovered_;  // declared by code that failed to parse
};

// Reports each cycle of the call graph once (Tarjan's strongly connected components).
void check_recursion(const Program& program, const CallGraph& calls, DiagnosticEngine& diags) {
    std::map<const Item*, int> index, low;
    std::set<const Item*> on_stack;
    std::vector<const Item*> stack;
    int counter = 0;
    std::vector<std::vector<const Item*>> components;

    // Iterative DFS to keep deep call chains off the native stack.
    std::vector<const Item*> order;
    for (const auto& m : program.modules) {
        for (const Item* item : m->items) {
            if (item->kind == ItemKind::Fn) order.push_back(item);
        }
    }
    static const std::vector<std::pair<const Item*, Span>> kNoEdges;
    auto edges = [&](const Item* f) -> const std::vector<std::pair<const Item*, Span>>& {
        auto it = calls.find(f);
        return it == calls.end() ? kNoEdges : it->second;
    };
    for (const Item* root : order) {
        if (index.count(root)) continue;
        std::vector<std::pair<const Item*, size_t>> work{{root, 0}};
        index[root] = low[root] = counter++;
        stack.push_back(root);
        on_stack.insert(root);
        while (!work.empty()) {
            auto& [f, next] = work.back();
            const auto& out = edges(f);
            if (next < out.size()) {
                const Item* g = out[next++].first;
                if (!index.count(g)) {
                    index[g] = low[g] = counter++;
                    stack.push_back(g);
                    on_stack.insert(g);
                    work.push_back({g, 0});
                } else if (on_stack.count(g)) {
                    low[f] = std::min(low[f], index[g]);
                }
                continue;
            }
            if (low[f] == index[f]) {
                std::vector<const Item*> component;
                while (true) {
                    const Item* x = stack.back();
                    stack.pop_back();
                    on_stack.erase(x);
                    component.push_back(x);
                    if (x == f) break;
                }
                components.push_back(std::move(component));
            }
            const Item* done = f;
            work.pop_back();
            if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
        }
    }
    for (auto& component : components) {
        std::set<const Item*> members(component.begin(), component.end());
        // Order members by source position for a deterministic report.
        std::sort(component.begin(), component.end(), [](const Item* a, const Item* b) {
            if (a->span.file != b->span.file) return a->span.file < b->span.file;
            return a->span.begin < b->span.begin;
        });
        const Item* first = component.front();
        std::vector<std::pair<const Item*, Span>> cycle_calls;
        for (const Item* f : component) {
            for (const auto& [callee, span] : edges(f)) {
                if (members.count(callee)) cycle_calls.push_back({callee, span});
            }
        }
        if (cycle_calls.empty()) continue;  // a single function that does not call itself
        std::string message;
        if (component.size() == 1) {
            message = fmt::format("function `{}` calls itself", first->name.name);
        } else {
            std::string names;
            for (const Item* f : component) names += (names.empty() ? "`" : ", `") + std::string(f->name.name) + "`";
            message = fmt::format("functions {} call each other", names);
        }
        auto& d = diags.emit(DiagCode::E0301, first->name.span, message);
        for (const auto& [callee, span] : cycle_calls) {
            d.note(fmt::format("calls `{}` here", callee->name.name), span);
        }
        d.note("recursion is not supported: write the repetition as a `for` loop");
    }
}

}  // namespace

std::optional<std::string_view> closest_name(std::string_view name,
                                             const std::vector<std::string_view>& candidates) {
    return closest(name, candidates);
}

void resolve_program(const SourceManager& sources, const Program& program,
                     DiagnosticEngine& diags, NameIndex* index) {
    CallGraph calls;
    for (size_t i = 0; i < program.modules.size(); ++i) {
        Resolver(sources, program, i, diags, calls, index).run();
    }
    check_recursion(program, calls, diags);
}

}  // namespace meshc::sema

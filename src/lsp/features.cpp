// The language server's answers from one Analysis; see features.h. Types and layouts
// come from the checked GIR (ops carry their source spans), names from the resolver's
// index, collectives' bytes and costs from sema/explain's collective_info.
#include "lsp/features.h"

#include <algorithm>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sema/builtins.h"
#include "sema/effects.h"
#include "sema/explain.h"
#include "syntax/lexer.h"

namespace meshc::lsp {

namespace {

bool contains(Span outer, Span inner) {
    return outer.valid() && inner.valid() && outer.file == inner.file && outer.begin <= inner.begin &&
           inner.end <= outer.end;
}

bool covers(Span span, FileId file, uint32_t offset) {
    return span.valid() && span.file == file && span.begin <= offset &&
           (offset < span.end || (offset == span.end && span.begin == span.end));
}

bool same(Span a, Span b) { return a.file == b.file && a.begin == b.begin && a.end == b.end; }

std::string seconds(double s) {
    if (s < 1e-3) return fmt::format("{:.3f} us", s * 1e6);
    if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.3f} s", s);
}

// ------------------------------------------------------------------ the AST

struct AstFacts {
    struct Binding {
        const ast::Stmt* stmt;  // Let or Var
        const ast::Item* fn;
    };
    std::vector<Binding> bindings;
    std::set<std::pair<uint32_t, uint32_t>> expr_spans;  // root file: every tensor-valued expression
};

void walk_block(const ast::Block* b, const ast::Item* fn, AstFacts& facts, FileId root);

void walk_expr(const ast::Expr* e, const ast::Item* fn, AstFacts& facts, FileId root) {
    if (!e) return;
    // Tuples and struct literals are not one tensor: no `reshard` can wrap them.
    if (e->span.file == root && e->kind != ast::ExprKind::Tuple && e->kind != ast::ExprKind::StructLit) {
        facts.expr_spans.insert({e->span.begin, e->span.end});
    }
    walk_expr(e->lhs, fn, facts, root);
    walk_expr(e->rhs, fn, facts, root);
    for (const ast::Arg& arg : e->args) walk_expr(arg.value, fn, facts, root);
    for (const ast::Expr* x : e->elements) walk_expr(x, fn, facts, root);
    for (const ast::FieldInit& f : e->fields) walk_expr(f.value, fn, facts, root);
    walk_expr(e->cond, fn, facts, root);
    walk_block(e->then_block, fn, facts, root);
    walk_block(e->else_block, fn, facts, root);
    walk_expr(e->else_if, fn, facts, root);
}

void walk_block(const ast::Block* b, const ast::Item* fn, AstFacts& facts, FileId root) {
    if (!b) return;
    for (const ast::Stmt* s : b->stmts) {
        if (s->kind == ast::StmtKind::Let || s->kind == ast::StmtKind::Var) facts.bindings.push_back({s, fn});
        walk_expr(s->value, fn, facts, root);
        walk_expr(s->target, fn, facts, root);
        walk_expr(s->range_begin, fn, facts, root);
        walk_expr(s->range_end, fn, facts, root);
        walk_block(s->body, fn, facts, root);
    }
    walk_expr(b->tail, fn, facts, root);
}

AstFacts ast_facts(const Analysis& a) {
    AstFacts facts;
    if (!a.program || a.program->modules.empty()) return facts;
    for (const ast::Item* item : a.program->modules.front()->items) {
        if (item->kind == ast::ItemKind::Fn) walk_block(item->body, item, facts, a.root);
    }
    return facts;
}

void pattern_names(const ast::Pattern* p, std::vector<const ast::Ident*>& out) {
    if (!p) return;
    if (p->kind == ast::PatternKind::Name) out.push_back(&p->name);
    for (const ast::Pattern* e : p->elements) pattern_names(e, out);
}

// ------------------------------------------------------------------ the GIR

bool source_function(const ir::Function& f) { return f.derived.empty(); }

/// The op defining each value of `f` (parameters and region arguments have none).
std::vector<const ir::Op*> defining_ops(const ir::Function& f) {
    std::vector<const ir::Op*> def(f.types.size(), nullptr);
    ir::for_each_op(f.ops, [&](const ir::Op& op) {
        for (ir::ValueId r : op.results) {
            if (r < def.size()) def[r] = &op;
        }
    });
    return def;
}

std::string type_of(const ir::Module& m, const ir::Function& f, ir::ValueId v) {
    if (v >= f.types.size()) return "?";
    return ir::type_to_string(m, f.types[v]);
}

std::string collective_text(const ir::Module& m, const ir::Function& f, const ir::Op& op,
                            const sema::CollectiveInfo& info, const SourceManager& sources) {
    std::string what(ir::op_name(op.kind));
    if (op.kind == ir::OpKind::AllReduce || op.kind == ir::OpKind::ReduceScatter) {
        what += " ";
        what += ir::reduce_name(op.reduce);
    }
    const ir::Mesh* mesh = nullptr;
    std::string shape;
    for (ir::ValueId v : op.operands) {  // an all_reduce may carry several tensors
        if (v >= f.types.size()) continue;
        const ir::TensorType& t = f.types[v];
        if (!mesh) mesh = m.mesh(t.mesh);
        shape += fmt::format("{}{} [{}]", shape.empty() ? "" : ", ", dtype_name(t.dtype), fmt::join(t.shape, ", "));
    }
    what += " over (" + (mesh ? mesh->axis_names(op.axes) : std::string("?")) + ")";
    if (op.kind == ir::OpKind::ReduceScatter || op.kind == ir::OpKind::AllGather) what += fmt::format(" dim {}", op.dim);
    if (op.kind == ir::OpKind::AllToAll) what += fmt::format(" dim {} -> {}", op.dim, op.dim2);
    std::string where;
    if (op.span.valid() && op.span.file < sources.file_count()) {
        LineCol lc = sources.line_col(op.span.file, op.span.begin);
        where = fmt::format(" at {}:{}", lc.line, lc.col);
    }
    std::string why = !op.inserted ? "written" : op.reason.empty() ? "inserted" : "inserted: " + op.reason;
    return fmt::format("`{}` of {}: {} bytes per device, sends {:.0f} bytes, {}{} ({}){}", what, shape,
                       info.buffer_bytes, info.cost.bytes_sent, seconds(info.cost.seconds), where, why,
                       op.backward ? " [backward]" : "");
}

/// The collectives of `ops` (nested ones too) selected by `keep`, one markdown line each.
template <typename Keep>
std::vector<std::string> collectives_in(const Analysis& a, const ir::Function& f, const std::vector<ir::Op>& ops,
                                        Keep&& keep, double* total_seconds = nullptr) {
    std::vector<std::string> lines;
    ir::for_each_op(ops, [&](const ir::Op& op) {
        if (!keep(op)) return;
        auto info = sema::collective_info(*a.gir, f, op);
        if (!info) return;
        if (total_seconds) *total_seconds += info->cost.seconds;
        lines.push_back("- " + collective_text(*a.gir, f, op, *info, a.sources));
    });
    return lines;
}

/// The collectives a call runs: those of the callee instance.
std::vector<std::string> call_collectives(const Analysis& a, const ir::Op& call, double* total) {
    if (call.kind != ir::OpKind::Call || call.callee < 0 || static_cast<size_t>(call.callee) >= a.gir->functions.size()) {
        return {};
    }
    const ir::Function& callee = a.gir->functions[static_cast<size_t>(call.callee)];
    return collectives_in(a, callee, callee.ops, [](const ir::Op&) { return true; }, total);
}

void append_collectives(std::string& md, const std::string& title, std::vector<std::string> lines, double total) {
    if (lines.empty()) return;
    size_t n = lines.size();
    constexpr size_t kMax = 24;
    if (lines.size() > kMax) {
        lines.resize(kMax);
        lines.push_back(fmt::format("- ... and {} more", n - kMax));
    }
    md += fmt::format("\n\n**{}**: {} collective{}, {}\n\n{}", title, n, n == 1 ? "" : "s", seconds(total),
                      fmt::join(lines, "\n"));
}

/// Distinct strings in first-seen order, each with the instances that gave it.
struct PerInstance {
    std::vector<std::pair<std::string, std::vector<std::string>>> entries;
    void add(const std::string& text, const std::string& label) {
        for (auto& [t, labels] : entries) {
            if (t == text) {
                labels.push_back(label);
                return;
            }
        }
        entries.push_back({text, {label}});
    }
    std::string markdown() const {
        std::string md;
        for (const auto& [text, labels] : entries) {
            if (!md.empty()) md += "\n";
            md += "```mesh\n" + text + "\n```";
            if (entries.size() > 1) md += fmt::format("\nin `{}`", fmt::join(labels, "`, `"));
        }
        return md;
    }
};

// ------------------------------------------------------------------ names

const sema::NameRef* ref_at(const Analysis& a, uint32_t offset) {
    // The position just after a name counts too, after any name that holds it.
    const sema::NameRef* best = nullptr;
    auto score = [&](const sema::NameRef& r) { return std::make_pair(offset == r.use.end, r.use.end - r.use.begin); };
    for (const sema::NameRef& r : a.names.refs) {
        if (r.use.file != a.root || offset < r.use.begin || offset > r.use.end) continue;
        if (!best || score(r) < score(*best)) best = &r;
    }
    return best;
}

const ast::Item* item_named_at(const Analysis& a, Span def) {
    for (const auto& m : a.program->modules) {
        for (const ast::Item* item : m->items) {
            if (same(item->name.span, def)) return item;
        }
    }
    return nullptr;
}

std::string trimmed(std::string_view text) {
    size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return "";
    size_t e = text.find_last_not_of(" \t\r\n");
    return std::string(text.substr(b, e - b + 1));
}

std::string item_header(const Analysis& a, const ast::Item& item) {
    std::string_view file = a.sources.text(item.span.file);
    uint32_t end = item.span.end;
    if (item.kind == ast::ItemKind::Fn && item.body) end = item.body->span.begin;
    std::string text = trimmed(file.substr(item.span.begin, end - item.span.begin));
    // At most 30 lines.
    size_t lines = 0, at = 0;
    while ((at = text.find('\n', at)) != std::string::npos) {
        if (++lines == 30) {
            text = text.substr(0, at) + "\n...";
            break;
        }
        ++at;
    }
    return text;
}

std::string doc_of(const ast::Item& item) {
    std::string doc;
    for (std::string_view line : item.doc) doc += (doc.empty() ? "" : "\n") + trimmed(line);
    return doc.empty() ? "" : "\n\n" + doc;
}

/// The binding statement (let/var) declaring `def`, if any.
const AstFacts::Binding* binding_of(const AstFacts& facts, Span def) {
    for (const AstFacts::Binding& b : facts.bindings) {
        if (b.stmt->kind == ast::StmtKind::Var ? same(b.stmt->name.span, def) : contains(b.stmt->pattern->span, def)) {
            return &b;
        }
    }
    return nullptr;
}

/// The GIR value of a local declared at `def` named `name` in instance `f`: the last
/// value of that name made inside its let/var statement, the parameter of that name,
/// else the first value of that name.
std::optional<ir::ValueId> local_value(const ir::Function& f, const std::vector<const ir::Op*>& defs,
                                       const AstFacts::Binding* binding, std::string_view name) {
    std::optional<ir::ValueId> found;
    if (binding) {
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            if (!contains(binding->stmt->span, op.span)) return;
            for (ir::ValueId r : op.results) {
                if (r < f.names.size() && f.names[r] == name) found = r;
            }
        });
        if (found) return found;
    }
    for (ir::ValueId p : f.params) {
        if (p < f.names.size() && f.names[p] == name) return p;
    }
    for (ir::ValueId v = 0; v < f.names.size(); ++v) {
        if (f.names[v] == name) return v;
    }
    (void)defs;
    return std::nullopt;
}

/// The leaves of an aggregate (struct or tuple) named `name`: the values named `name.…`
/// (`p.w1`, `pair.0.b`) that its binding statement defines, or the parameters so named.
std::vector<ir::ValueId> leaf_values(const ir::Function& f, const AstFacts::Binding* binding, std::string_view name) {
    std::vector<ir::ValueId> leaves;
    auto is_leaf = [&](ir::ValueId v) {
        return v < f.names.size() && f.names[v].size() > name.size() && f.names[v].compare(0, name.size(), name) == 0 &&
               f.names[v][name.size()] == '.';
    };
    if (binding) {
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            if (!contains(binding->stmt->span, op.span)) return;
            for (ir::ValueId r : op.results) {
                if (is_leaf(r) && std::find(leaves.begin(), leaves.end(), r) == leaves.end()) leaves.push_back(r);
            }
        });
        if (!leaves.empty()) return leaves;
    }
    for (ir::ValueId p : f.params) {
        if (is_leaf(p)) leaves.push_back(p);
    }
    return leaves;
}

std::string symbol_word(sema::SymbolKind k) {
    switch (k) {
    case sema::SymbolKind::Function: return "function";
    case sema::SymbolKind::Struct: return "struct";
    case sema::SymbolKind::Field: return "field";
    case sema::SymbolKind::Mesh: return "mesh";
    case sema::SymbolKind::MeshAxis: return "mesh axis";
    case sema::SymbolKind::Module: return "module";
    case sema::SymbolKind::Parameter: return "parameter";
    case sema::SymbolKind::Variable: return "variable";
    case sema::SymbolKind::LoopVariable: return "loop variable";
    case sema::SymbolKind::SizeVariable: return "size variable";
    case sema::SymbolKind::MeshParameter: return "mesh parameter";
    case sema::SymbolKind::TypeParameter: return "parameter type (`Params`)";
    case sema::SymbolKind::ElementType: return "element type (`Float`)";
    }
    return "name";
}

/// Non-derived instances whose function contains `span`.
std::vector<const ir::Function*> instances_around(const Analysis& a, Span span) {
    std::vector<const ir::Function*> out;
    if (!a.gir) return out;
    if (a.function_extents.size() != a.gir->functions.size()) {
        std::map<std::tuple<FileId, uint32_t, uint32_t>, Span> items;
        for (const auto& m : a.program->modules) {
            for (const ast::Item* item : m->items) items[{item->name.span.file, item->name.span.begin, item->name.span.end}] = item->span;
        }
        a.function_extents.clear();
        for (const ir::Function& f : a.gir->functions) {
            auto it = items.find({f.span.file, f.span.begin, f.span.end});
            a.function_extents.push_back(it == items.end() ? f.span : it->second);
        }
    }
    for (size_t i = 0; i < a.gir->functions.size(); ++i) {
        const ir::Function& f = a.gir->functions[i];
        if (source_function(f) && contains(a.function_extents[i], span)) out.push_back(&f);
    }
    return out;
}

// The innermost GIR ops (in source functions) whose span holds `offset`.
struct OpGroup {
    Span span;
    std::vector<std::pair<const ir::Function*, const ir::Op*>> ops;  // every instance's, in order
};

OpGroup innermost_ops(const Analysis& a, uint32_t offset) {
    OpGroup g;
    if (!a.gir) return g;
    for (const ir::Function& f : a.gir->functions) {
        if (!source_function(f)) continue;
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            if (op.backward || !covers(op.span, a.root, offset) || op.span.end == op.span.begin) return;
            if (!g.span.valid() || op.span.end - op.span.begin < g.span.end - g.span.begin) {
                g.span = op.span;
                g.ops.clear();
            }
            if (same(op.span, g.span)) g.ops.push_back({&f, &op});
        });
    }
    return g;
}

bool communicates(ir::OpKind k) {
    return k == ir::OpKind::AllReduce || k == ir::OpKind::ReduceScatter || k == ir::OpKind::AllGather ||
           k == ir::OpKind::AllToAll;
}

std::string hover_ops(const Analysis& a, const OpGroup& g) {
    PerInstance types;
    std::vector<std::string> lines;
    double total = 0;
    std::vector<std::string> call_lines;
    double call_total = 0;
    std::set<const ir::Function*> callees_seen;
    std::map<const ir::Function*, std::vector<const ir::Op*>> by_fn;
    for (auto [f, op] : g.ops) by_fn[f].push_back(op);
    for (const ir::Function& f : a.gir->functions) {
        auto it = by_fn.find(&f);
        if (it == by_fn.end()) continue;
        const ir::Op* value = nullptr;
        const ir::Op* coerced = nullptr;
        for (const ir::Op* op : it->second) {
            if (op->inserted) {
                coerced = op;
            } else {
                value = op;
            }
            if (op->kind == ir::OpKind::Call) {
                const ir::Function* callee = op->callee >= 0 ? &a.gir->functions[static_cast<size_t>(op->callee)] : nullptr;
                if (callee && callees_seen.insert(callee).second) {
                    auto more = call_collectives(a, *op, &call_total);
                    call_lines.insert(call_lines.end(), more.begin(), more.end());
                }
            }
        }
        std::string text;
        auto results = [&](const ir::Op* op) {
            std::vector<std::string> r;
            for (ir::ValueId v : op->results) r.push_back(type_of(*a.gir, f, v));
            return r.empty() ? std::string("()") : fmt::format("{}", fmt::join(r, ",\n"));
        };
        if (value) text = results(value);
        if (coerced) text += (text.empty() ? "" : "\n") + std::string("// after the inserted coercion:\n") + results(coerced);
        if (!text.empty()) types.add(text, ir::function_label(f));
        for (const ir::Op* op : it->second) {
            if (!communicates(op->kind)) continue;
            auto info = sema::collective_info(*a.gir, f, *op);
            if (!info) continue;
            total += info->cost.seconds;
            lines.push_back("- " + collective_text(*a.gir, f, *op, *info, a.sources));
        }
    }
    // Backward collectives autodiff made for this construct (in derived functions).
    for (const ir::Function& f : a.gir->functions) {
        if (source_function(f)) continue;
        auto more = collectives_in(a, f, f.ops, [&](const ir::Op& op) { return op.backward && same(op.span, g.span); }, &total);
        lines.insert(lines.end(), more.begin(), more.end());
    }
    std::string md = types.markdown();
    append_collectives(md, "communication here", lines, total);
    append_collectives(md, "communication inside the call", call_lines, call_total);
    return md;
}

}  // namespace

// ------------------------------------------------------------------ Positions

const LineIndex& Positions::index(FileId file) {
    auto& slot = indexes_[file];
    if (!slot) slot = std::make_unique<LineIndex>(a_.sources.text(file), utf16_);
    return *slot;
}

json Positions::range(Span span) {
    if (!span.valid() || span.file >= a_.sources.file_count()) {
        return json{{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}};
    }
    return index(span.file).range(span.begin, span.end);
}

std::string Positions::uri(FileId file) const { return path_to_uri(canonical_path(a_.sources.path(file))); }

json Positions::location(Span span) { return json{{"uri", uri(span.file)}, {"range", range(span)}}; }

// ------------------------------------------------------------------ diagnostics

json diagnostics_json(const Analysis& a, Positions& pos) {
    json out = json::array();
    auto severity = [](Severity s) { return s == Severity::Error ? 1 : s == Severity::Warning ? 2 : 3; };
    // A diagnostic in an imported file is shown at the import that brings the file in.
    auto in_root = [&](Span span, std::string& prefix) -> Span {
        if (span.valid() && span.file == a.root) return span;
        if (!span.valid() || !a.program || a.program->modules.empty()) return Span{a.root, 0, 0};
        LineCol lc = a.sources.line_col(span.file, span.begin);
        prefix = fmt::format("in {}:{}:{}: ", a.sources.path(span.file), lc.line, lc.col);
        const ast::Item* first_import = nullptr;
        for (const ast::Item* item : a.program->modules.front()->items) {
            if (item->kind != ast::ItemKind::Import) continue;
            if (!first_import) first_import = item;
            auto t = a.program->import_targets.find(item);
            if (t != a.program->import_targets.end() && a.program->modules[t->second]->file == span.file) return item->span;
        }
        return first_import ? first_import->span : Span{a.root, 0, 0};
    };
    for (const Diagnostic& d : a.diags.sorted()) {
        std::string prefix;
        Span at = in_root(d.span, prefix);
        // An error in another file that this file's code instantiated: shown at the
        // outermost call in this file.
        if (!(d.span.valid() && d.span.file == a.root)) {
            for (const DiagNote& n : d.notes) {
                if (n.instantiation && n.span.valid() && n.span.file == a.root) at = n.span;
            }
        }
        json j;
        j["range"] = pos.range(at);
        j["severity"] = severity(d.severity);
        j["code"] = std::string(diag_code_info(d.code).name);
        j["source"] = "meshc";
        std::string message = prefix + d.message;
        json related = json::array();
        for (const DiagNote& n : d.notes) {
            if (!n.span.valid()) message += "\n= note: " + n.message;
            related.push_back({{"location", pos.location(n.span.valid() ? n.span : d.span.valid() ? d.span : at)},
                               {"message", n.message}});
        }
        j["message"] = message;
        if (!related.empty()) j["relatedInformation"] = related;
        out.push_back(std::move(j));
    }
    if (!a.internal_error.empty()) {
        out.push_back({{"range", pos.range(Span{a.root, 0, 0})},
                       {"severity", 1},
                       {"source", "meshc"},
                       {"message", "internal compiler error: " + a.internal_error}});
    }
    return out;
}

// ------------------------------------------------------------------ hover

namespace {

// The solved `with auto` site of the root file overlapping [begin, end], if any.
const AutoSite* auto_site_at(const Analysis& a, uint32_t begin, uint32_t end) {
    if (a.root == kNoFile) return nullptr;
    const std::string root = canonical_path(a.sources.path(a.root));
    for (const AutoSite& s : a.auto_sites) {
        if (s.canonical == root && s.begin <= end && begin <= s.end) return &s;
    }
    return nullptr;
}

}  // namespace

json hover(const Analysis& a, Positions& pos, uint32_t offset) {
    if (!a.program || a.program->modules.empty()) return nullptr;
    std::string md;
    Span range;
    if (const AutoSite* site = auto_site_at(a, offset, offset)) {
        md = fmt::format("{}: `auto` → `with {}`\n\n{}\n\n---\n\n{}", site->what, site->layout, site->why, a.auto_plan);
        range = Span{a.root, site->begin, site->end};
    } else if (const sema::NameRef* ref = ref_at(a, offset)) {
        range = ref->use;
        std::string name(a.sources.text(ref->use));
        switch (ref->kind) {
        case sema::SymbolKind::Parameter:
        case sema::SymbolKind::Variable:
        case sema::SymbolKind::LoopVariable: {
            AstFacts facts = ast_facts(a);
            const AstFacts::Binding* binding = binding_of(facts, ref->def);
            PerInstance types;
            std::vector<std::string> lines;
            double total = 0;
            for (const ir::Function* f : instances_around(a, ref->def)) {
                auto defs = defining_ops(*f);
                const char* word = symbol_word(ref->kind) == "parameter" ? "param"
                                   : binding && binding->stmt->kind == ast::StmtKind::Var ? "var"
                                   : ref->kind == sema::SymbolKind::LoopVariable ? "for" : "let";
                if (auto v = local_value(*f, defs, binding, name)) {
                    types.add(fmt::format("{} {}: {}", word, name, type_of(*a.gir, *f, *v)), ir::function_label(*f));
                } else if (auto leaves = leaf_values(*f, binding, name); !leaves.empty()) {
                    // A struct or tuple value: each leaf by its path.
                    std::string text = fmt::format("{} {}: {} leaves", word, name, leaves.size());
                    for (ir::ValueId l : leaves) text += fmt::format("\n  {}: {}", f->names[l], type_of(*a.gir, *f, l));
                    types.add(text, ir::function_label(*f));
                }
                // An annotated `let`: the coercions its annotation asked for.
                if (binding && binding->stmt->type && ref->declaration) {
                    auto more = collectives_in(a, *f, f->ops, [&](const ir::Op& op) {
                        return !op.backward && contains(binding->stmt->span, op.span);
                    }, &total);
                    lines.insert(lines.end(), more.begin(), more.end());
                }
            }
            md = types.entries.empty() ? fmt::format("{} `{}`", symbol_word(ref->kind), name) : types.markdown();
            append_collectives(md, "communication in this `let`", lines, total);
            break;
        }
        case sema::SymbolKind::SizeVariable:
        case sema::SymbolKind::TypeParameter:
        case sema::SymbolKind::ElementType:
        case sema::SymbolKind::MeshParameter: {
            md = fmt::format("{} `{}`", symbol_word(ref->kind), name);
            std::set<std::string> values;
            for (const ir::Function* f : instances_around(a, ref->use)) {
                if (auto it = f->instance.find(name); it != f->instance.end()) values.insert(fmt::format("{} = {}", name, it->second));
                if (auto it = f->mesh_instance.find(name); it != f->mesh_instance.end()) values.insert(fmt::format("{} = {}", name, it->second));
                if (auto it = f->dtype_instance.find(name); it != f->dtype_instance.end()) values.insert(fmt::format("{} = {}", name, it->second));
            }
            if (!values.empty()) md += fmt::format(": `{}` in this function's instances", fmt::join(values, "`, `"));
            break;
        }
        case sema::SymbolKind::MeshAxis: {
            for (const auto& m : a.program->modules) {
                for (const ast::Item* item : m->items) {
                    if (item->kind != ast::ItemKind::Mesh) continue;
                    for (const ast::MeshAxisDecl& axis : item->axes) {
                        if (!same(axis.name.span, ref->def)) continue;
                        md = fmt::format("mesh axis `{}` of `{}`: size {}\n```mesh\n{}\n```", name, item->name.name, axis.size,
                                         item_header(a, *item));
                    }
                }
            }
            break;
        }
        case sema::SymbolKind::Field:
            md = fmt::format("field `{}`", name);
            break;
        case sema::SymbolKind::Function:
        case sema::SymbolKind::Struct:
        case sema::SymbolKind::Mesh:
        case sema::SymbolKind::Module: {
            const ast::Item* item = item_named_at(a, ref->def);
            if (!item) break;
            if (item->kind == ast::ItemKind::Import) {
                auto t = a.program->import_targets.find(item);
                md = fmt::format("module `{}`", name);
                if (t != a.program->import_targets.end()) {
                    md += fmt::format(": `{}`", canonical_path(a.sources.path(a.program->modules[t->second]->file)));
                }
                break;
            }
            md = "```mesh\n" + item_header(a, *item) + "\n```" + doc_of(*item);
            if (item->kind == ast::ItemKind::Fn && a.gir) {
                std::vector<std::string> lines;
                std::vector<sema::CommEffect> effects = sema::infer_effects(*a.gir);
                for (size_t i = 0; i < a.gir->functions.size(); ++i) {
                    const ir::Function& f = a.gir->functions[i];
                    if (f.name != item->name.name || !contains(item->span, f.span)) continue;
                    sema::FunctionTotals t = sema::function_totals(*a.gir, f);
                    // Its effect (docs/language.md, "Effects"), callees included.
                    lines.push_back(fmt::format("- `{}`{}: {:g} collective{}, {:.0f} bytes sent per device, {}; effect `{}`",
                                                ir::function_label(f), f.derived.empty() ? "" : " (" + f.derived + ")",
                                                t.collectives, t.collectives == 1 ? "" : "s", t.bytes_sent,
                                                seconds(t.seconds), sema::effect_to_string(effects[i])));
                }
                if (!lines.empty()) md += fmt::format("\n\n**instances**\n\n{}", fmt::join(lines, "\n"));
                // On a call: the collectives the call runs.
                OpGroup g = innermost_ops(a, offset);
                bool is_call = !g.ops.empty() && std::any_of(g.ops.begin(), g.ops.end(), [](auto& p) {
                    return p.second->kind == ir::OpKind::Call;
                });
                if (is_call) {
                    md += "\n\n---\n\n**this call**\n\n" + hover_ops(a, g);
                }
            }
            break;
        }
        }
    } else {
        OpGroup g = innermost_ops(a, offset);
        if (g.ops.empty()) return nullptr;
        range = g.span;
        md = hover_ops(a, g);
    }
    if (md.empty()) return nullptr;
    return json{{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", pos.range(range)}};
}

// ------------------------------------------------------------------ definition, references

json definition(const Analysis& a, Positions& pos, uint32_t offset) {
    if (!a.program || a.program->modules.empty()) return nullptr;
    const sema::NameRef* ref = ref_at(a, offset);
    if (ref && ref->kind == sema::SymbolKind::Module && ref->declaration) {
        // The alias an import declares: the module's file.
        const ast::Item* item = item_named_at(a, ref->def);
        auto target = item ? a.program->import_targets.find(item) : a.program->import_targets.end();
        if (target != a.program->import_targets.end()) {
            return json::array({pos.location(Span{a.program->modules[target->second]->file, 0, 0})});
        }
    }
    if (ref) return json::array({pos.location(ref->def)});
    // The path of an import: the module's file.
    for (const ast::Item* item : a.program->modules.front()->items) {
        if (item->kind != ast::ItemKind::Import || item->path.empty()) continue;
        Span path = item->path.front().span.to(item->path.back().span);
        auto target = a.program->import_targets.find(item);
        if (!covers(path, a.root, offset) && !(path.valid() && offset == path.end)) continue;
        if (target == a.program->import_targets.end()) return nullptr;
        FileId file = a.program->modules[target->second]->file;
        return json::array({pos.location(Span{file, 0, 0})});
    }
    return nullptr;
}

json references(const Analysis& a, Positions& pos, uint32_t offset, bool include_declaration) {
    const sema::NameRef* ref = ref_at(a, offset);
    json out = json::array();
    if (!ref) return out;
    Span def = ref->def;
    std::set<std::tuple<FileId, uint32_t, uint32_t>> seen;
    if (include_declaration) {
        seen.insert({def.file, def.begin, def.end});
        out.push_back(pos.location(def));
    }
    for (const sema::NameRef& r : a.names.refs) {
        if (!same(r.def, def) || r.declaration) continue;
        if (!seen.insert({r.use.file, r.use.begin, r.use.end}).second) continue;
        out.push_back(pos.location(r.use));
    }
    return out;
}

// ------------------------------------------------------------------ symbols

json document_symbols(const Analysis& a, Positions& pos) {
    json out = json::array();
    if (!a.program || a.program->modules.empty()) return out;
    auto symbol = [&](std::string name, int kind, Span full, Span selection, std::string detail = {}) {
        json s{{"name", name.empty() ? "?" : name}, {"kind", kind}, {"range", pos.range(full)},
               {"selectionRange", pos.range(contains(full, selection) ? selection : full)}};
        if (!detail.empty()) s["detail"] = detail;
        return s;
    };
    for (const ast::Item* item : a.program->modules.front()->items) {
        switch (item->kind) {
        case ast::ItemKind::Import: {
            std::string path;
            for (const ast::Ident& p : item->path) path += (path.empty() ? "" : ".") + std::string(p.name);
            out.push_back(symbol(std::string(item->name.name), 2, item->span, item->name.span, path));
            break;
        }
        case ast::ItemKind::Mesh: {
            json s = symbol(std::string(item->name.name), 3, item->span, item->name.span, "mesh");
            s["children"] = json::array();
            for (const ast::MeshAxisDecl& axis : item->axes) {
                s["children"].push_back(symbol(std::string(axis.name.name), 22, axis.span, axis.name.span,
                                               fmt::format("{}", axis.size)));
            }
            out.push_back(std::move(s));
            break;
        }
        case ast::ItemKind::Struct: {
            json s = symbol(std::string(item->name.name), 23, item->span, item->name.span);
            s["children"] = json::array();
            for (const ast::Param& f : item->fields) {
                s["children"].push_back(symbol(std::string(f.name.name), 8, f.span, f.name.span,
                                               f.type ? std::string(a.sources.text(f.type->span)) : ""));
            }
            out.push_back(std::move(s));
            break;
        }
        case ast::ItemKind::Fn: {
            std::string header = item_header(a, *item);
            std::string detail;
            bool space = false;
            for (char c : header.substr(header.find('(') == std::string::npos ? 0 : header.find('('))) {
                if (c == '\n' || c == ' ' || c == '\t' || c == '\r') {
                    space = true;
                    continue;
                }
                if (space && !detail.empty()) detail += ' ';
                space = false;
                detail += c;
            }
            json s = symbol(std::string(item->name.name), 12, item->span, item->name.span, detail);
            s["children"] = json::array();
            for (const ast::Param& p : item->params) {
                s["children"].push_back(symbol(std::string(p.name.name), 13, p.span, p.name.span,
                                               p.type ? std::string(a.sources.text(p.type->span)) : ""));
            }
            out.push_back(std::move(s));
            break;
        }
        }
    }
    return out;
}

// ------------------------------------------------------------------ inlay hints

json inlay_hints(const Analysis& a, Positions& pos, uint32_t begin, uint32_t end) {
    json out = json::array();
    if (!a.gir) return out;
    AstFacts facts = ast_facts(a);
    std::map<const ir::Function*, std::vector<const ir::Op*>> defs;
    for (const AstFacts::Binding& b : facts.bindings) {
        if (b.stmt->type || b.stmt->span.end < begin || b.stmt->span.begin > end) continue;
        std::vector<const ast::Ident*> names;
        if (b.stmt->kind == ast::StmtKind::Var) {
            names.push_back(&b.stmt->name);
        } else {
            pattern_names(b.stmt->pattern, names);
        }
        for (const ast::Ident* name : names) {
            std::set<std::string> types;
            for (const ir::Function* f : instances_around(a, b.stmt->span)) {
                auto& d = defs[f];
                if (d.empty()) d = defining_ops(*f);
                if (auto v = local_value(*f, d, &b, name->name)) types.insert(type_of(*a.gir, *f, *v));
            }
            if (types.empty()) continue;
            std::string label = ": " + *types.begin();
            if (types.size() > 1) label += fmt::format(" (+{} other instance types)", types.size() - 1);
            out.push_back({{"position", pos.index(a.root).position(name->span.end)},
                           {"label", label},
                           {"kind", 1},
                           {"paddingLeft", false},
                           {"paddingRight", true}});
        }
    }
    return out;
}

// ------------------------------------------------------------------ semantic tokens

namespace {

enum TokenType { TNamespace, TType, TStruct, TTypeParameter, TParameter, TVariable, TProperty, TEnumMember, TFunction,
                 TKeyword, TComment, TString, TNumber, TOperator };

}  // namespace

json semantic_tokens_legend() {
    return json{{"tokenTypes", {"namespace", "type", "struct", "typeParameter", "parameter", "variable", "property",
                                "enumMember", "function", "keyword", "comment", "string", "number", "operator"}},
                {"tokenModifiers", {"declaration", "defaultLibrary"}}};
}

json semantic_tokens(const Analysis& a, Positions& pos) {
    json data = json::array();
    if (a.root == kNoFile) return json{{"data", data}};
    std::map<uint32_t, const sema::NameRef*> by_begin;
    for (const sema::NameRef& r : a.names.refs) {
        if (r.use.file == a.root) by_begin[r.use.begin] = &r;
    }
    DiagnosticEngine scratch;
    std::vector<syntax::Token> tokens = syntax::lex(a.sources, a.root, scratch);
    std::string_view text = a.sources.text(a.root);
    const LineIndex& index = pos.index(a.root);
    uint32_t prev_line = 0, prev_char = 0;
    auto emit = [&](uint32_t begin, uint32_t end, int type, int modifiers) {
        auto [line, character] = index.line_character(begin);
        uint32_t length = index.length(begin, end);
        if (length == 0) return;
        data.push_back(line - prev_line);
        data.push_back(line == prev_line ? character - prev_char : character);
        data.push_back(length);
        data.push_back(type);
        data.push_back(modifiers);
        prev_line = line;
        prev_char = character;
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
        const syntax::Token& t = tokens[i];
        using K = syntax::TokenKind;
        switch (t.kind) {
        case K::Eof:
        case K::Error: break;
        case K::Ident: {
            auto it = by_begin.find(t.begin);
            int type = -1, mods = 0;
            if (it != by_begin.end()) {
                const sema::NameRef& r = *it->second;
                mods = r.declaration ? 1 : 0;
                switch (r.kind) {
                case sema::SymbolKind::Function: type = TFunction; break;
                case sema::SymbolKind::Struct: type = TStruct; break;
                case sema::SymbolKind::Field: type = TProperty; break;
                case sema::SymbolKind::Mesh:
                case sema::SymbolKind::Module: type = TNamespace; break;
                case sema::SymbolKind::MeshAxis: type = TEnumMember; break;
                case sema::SymbolKind::Parameter: type = TParameter; break;
                case sema::SymbolKind::Variable:
                case sema::SymbolKind::LoopVariable: type = TVariable; break;
                case sema::SymbolKind::SizeVariable:
                case sema::SymbolKind::TypeParameter:
                case sema::SymbolKind::ElementType:
                case sema::SymbolKind::MeshParameter: type = TTypeParameter; break;
                }
            } else if (i + 1 < tokens.size() && tokens[i + 1].kind == K::LParen &&
                       sema::find_builtin(text.substr(t.begin, t.end - t.begin)) != sema::Builtin::Count) {
                type = TFunction;
                mods = 2;
            }
            if (type >= 0) emit(t.begin, t.end, type, mods);
            break;
        }
        case K::IntLit:
        case K::FloatLit: emit(t.begin, t.end, TNumber, 0); break;
        case K::StringLit: emit(t.begin, t.end, TString, 0); break;
        case K::DocComment: emit(t.begin, t.end, TComment, 0); break;
        default:
            if (syntax::is_dtype_keyword(t.kind) || t.kind == K::KwTensor) {
                emit(t.begin, t.end, TType, 0);
            } else if (token_spelling(t.kind).size() > 2 && std::isalpha(static_cast<unsigned char>(token_spelling(t.kind)[1]))) {
                emit(t.begin, t.end, TKeyword, 0);
            }
            break;
        }
    }
    return json{{"data", data}};
}

// ------------------------------------------------------------------ code actions

json code_actions(const Analysis& a, Positions& pos, const std::string& uri, uint32_t begin, uint32_t end) {
    json out = json::array();
    if (a.root == kNoFile || !a.program) return out;
    AstFacts facts = ast_facts(a);
    std::string_view text = a.sources.text(a.root);
    std::set<std::pair<uint32_t, uint32_t>> offered;
    auto overlaps = [&](Span s) { return s.valid() && s.file == a.root && s.begin <= end && begin <= s.end; };
    auto offer = [&](Span span, const std::string& layout, const std::string& why, json diagnostic) {
        // `reshard` names a layout without `partial`: a pending sum kept is not expressible.
        if (layout.find("partial") != std::string::npos) return;
        if (!facts.expr_spans.count({span.begin, span.end}) || !offered.insert({span.begin, span.end}).second) return;
        std::string expr(text.substr(span.begin, span.end - span.begin));
        std::string replacement = fmt::format("reshard({}, {})", expr, layout);
        json action{{"title", fmt::format("Make this communication explicit: reshard(..., {})", layout)},
                    {"kind", "quickfix"},
                    {"edit", {{"changes", {{uri, json::array({{{"range", pos.range(span)}, {"newText", replacement}}})}}}}}};
        if (!why.empty()) action["title"] = action["title"].get<std::string>() + " (" + why + ")";
        if (!diagnostic.is_null()) {
            action["diagnostics"] = json::array({diagnostic});
            action["isPreferred"] = true;
        }
        out.push_back(std::move(action));
    };
    // `with auto`: write the solved layout in.
    const std::string root = canonical_path(a.sources.path(a.root));
    for (const AutoSite& site : a.auto_sites) {
        if (site.canonical != root || site.begin > end || begin > site.end) continue;
        out.push_back(json{{"title", fmt::format("Write the solved layout: with {}", site.layout)},
                           {"kind", "quickfix"},
                           {"edit", {{"changes", {{uri, json::array({{{"range", pos.range(Span{a.root, site.begin, site.end})},
                                                                      {"newText", site.layout}}})}}}}}});
    }
    // E0406 (strict communication): its note names the value converted and the layout
    // (`reshard(y, {0: data})`). The action wraps that value where the construct uses it
    // (every use of the name inside the diagnostic's span), never the construct itself,
    // whose value is not the one converted; a value without a name there gets no action.
    static const std::regex kReshard("`reshard\\(([^,`]*), (.*)\\)` \\(or");
    json diagnostics = diagnostics_json(a, pos);
    size_t k = 0;
    for (const Diagnostic& d : a.diags.sorted()) {
        json dj = k < diagnostics.size() ? diagnostics[k] : json();
        ++k;
        if (d.code != DiagCode::E0406 || !overlaps(d.span)) continue;
        for (const DiagNote& n : d.notes) {
            std::smatch m;
            if (!std::regex_search(n.message, m, kReshard)) continue;
            const std::string name = m[1].str(), layout = m[2].str();
            if (layout.find("partial") != std::string::npos) continue;
            json edits = json::array();
            if (name == "<the value>") {
                // A temporary: the construct's own value when the conversion is of its
                // result (to the function's result type, or to an annotation).
                bool of_result = std::any_of(d.notes.begin(), d.notes.end(), [](const DiagNote& w) {
                    return w.message.rfind("why: the result type of", 0) == 0 || w.message.rfind("why: the annotation", 0) == 0;
                });
                if (of_result && facts.expr_spans.count({d.span.begin, d.span.end})) {
                    std::string expr(text.substr(d.span.begin, d.span.end - d.span.begin));
                    edits.push_back({{"range", pos.range(d.span)}, {"newText", fmt::format("reshard({}, {})", expr, layout)}});
                }
            }
            for (const auto& [b, e] : facts.expr_spans) {
                if (b < d.span.begin || e > d.span.end || text.substr(b, e - b) != name) continue;
                edits.push_back({{"range", pos.range(Span{a.root, b, e})},
                                 {"newText", fmt::format("reshard({}, {})", name, layout)}});
            }
            if (edits.empty() || !offered.insert({d.span.begin, d.span.end}).second) continue;
            json action{{"title", fmt::format("Make this communication explicit: reshard({}, {})",
                                              name == "<the value>" ? "..." : name, layout)},
                        {"kind", "quickfix"},
                        {"edit", {{"changes", {{uri, edits}}}}}};
            if (!dj.is_null()) {
                action["diagnostics"] = json::array({dj});
                action["isPreferred"] = true;
            }
            out.push_back(std::move(action));
        }
    }
    // Collectives the checker inserted: the layout the coercion ends in.
    if (a.gir) {
        for (const ir::Function& f : a.gir->functions) {
            if (!source_function(f)) continue;
            std::map<std::pair<uint32_t, uint32_t>, std::pair<const ir::Op*, bool>> last;  // span -> last coercion, communicates
            ir::for_each_op(f.ops, [&](const ir::Op& op) {
                if (!op.inserted || op.backward || !overlaps(op.span)) return;
                if (op.kind != ir::OpKind::LocalSlice && !communicates(op.kind) && op.kind != ir::OpKind::MakePartial) return;
                auto& slot = last[{op.span.begin, op.span.end}];
                bool comm = communicates(op.kind) && sema::collective_info(*a.gir, f, op).has_value();
                slot = {&op, slot.second || comm};
            });
            auto defs = defining_ops(f);
            // The value a coercion chain starts from: wrapping the construct is right only
            // when that value is the construct's own (a conversion of its result).
            auto origin = [&](const ir::Op* op) {
                while (op && op->inserted && !op->operands.empty() && op->operands[0] < defs.size() &&
                       defs[op->operands[0]] && defs[op->operands[0]]->inserted) {
                    op = defs[op->operands[0]];
                }
                if (!op || op->operands.empty() || op->operands[0] >= defs.size()) return static_cast<const ir::Op*>(nullptr);
                return defs[op->operands[0]];
            };
            for (const auto& [span, entry] : last) {
                const auto& [op, comm] = entry;
                if (!comm || op->results.empty() || op->results[0] >= f.types.size()) continue;
                const ir::Op* from = origin(op);
                if (!from || from->span.begin != op->span.begin || from->span.end != op->span.end) continue;
                const ir::TensorType& t = f.types[op->results[0]];
                const ir::Mesh* mesh = a.gir->mesh(t.mesh);
                if (!mesh) continue;
                offer(op->span, ir::layout_to_string(t.layout, *mesh), op->reason, nullptr);
            }
        }
    }
    return out;
}

}  // namespace meshc::lsp

// AST printer; see ast_printer.h.
#include "syntax/ast_printer.h"

#include <ostream>
#include <string>

#include <fmt/format.h>

namespace meshc::ast {

std::string_view cmp_op_spelling(CmpOp op) {
    switch (op) {
    case CmpOp::Eq: return "==";
    case CmpOp::Ne: return "!=";
    case CmpOp::Lt: return "<";
    case CmpOp::Le: return "<=";
    case CmpOp::Gt: return ">";
    case CmpOp::Ge: return ">=";
    }
    return "?";
}

std::string_view binary_op_spelling(BinaryOp op) {
    switch (op) {
    case BinaryOp::Or: return "||";
    case BinaryOp::And: return "&&";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::Mod: return "%";
    case BinaryOp::MatMul: return "@";
    }
    return "?";
}

}  // namespace meshc::ast

namespace meshc::syntax {

using namespace meshc::ast;

namespace {

std::string_view dim_op_spelling(DimOp op) {
    switch (op) {
    case DimOp::Add: return "+";
    case DimOp::Sub: return "-";
    case DimOp::Mul: return "*";
    case DimOp::Div: return "/";
    case DimOp::Mod: return "%";
    }
    return "?";
}

std::string join_idents(const std::vector<Ident>& ids, std::string_view sep = ", ") {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += sep;
        out += ids[i].name;
    }
    return out;
}

std::string layout_to_string(const Layout& layout) {
    std::string out = "{";
    for (size_t i = 0; i < layout.entries.size(); ++i) {
        const LayoutEntry& e = layout.entries[i];
        if (i) out += ", ";
        out += e.key_name ? std::string(e.key_name->name) : std::to_string(e.key_pos);
        out += ": ";
        if (e.axes.size() == 1) {
            out += e.axes[0].name;
        } else {
            // Appended piece by piece: `"(" + std::string` trips GCC 12's -Wrestrict
            // false positive at -O3.
            out += '(';
            out += join_idents(e.axes);
            out += ')';
        }
    }
    return out + "}";
}

std::string format_double(double v) { return fmt::format("{}", v); }

class Printer {
public:
    Printer(std::ostream& out, const SourceManager& sources) : out_(out), sources_(sources) {}

    void module(const Module& m) {
        out_ << "Module " << sources_.path(m.file) << "\n";
        for (const Item* item : m.items) this->item(*item, 1);
    }

private:
    std::string at(Span span) const {
        LineCol lc = sources_.line_col(span.file, span.begin);
        return fmt::format("@{}:{}", lc.line, lc.col);
    }
    void line(int depth, const std::string& text, Span span) {
        out_ << std::string(static_cast<size_t>(depth) * 2, ' ') << text << " " << at(span)
             << "\n";
    }

    void item(const Item& it, int d) {
        for (std::string_view doc : it.doc) {
            out_ << std::string(static_cast<size_t>(d) * 2, ' ') << "Doc \"" << doc << "\"\n";
        }
        for (const Attribute& a : it.attrs) line(d, fmt::format("Attribute @{}", a.name.name), a.span);
        switch (it.kind) {
        case ItemKind::Import: {
            std::string path;
            for (size_t i = 0; i < it.path.size(); ++i) {
                if (i) path += ".";
                path += it.path[i].name;
            }
            line(d, fmt::format("Import {} as {}", path, it.name.name), it.span);
            break;
        }
        case ItemKind::Mesh: {
            line(d, fmt::format("Mesh {}", it.name.name), it.span);
            for (const MeshAxisDecl& a : it.axes) {
                std::string link;
                for (const auto& p : a.link) {
                    link += fmt::format("{}{}: {}", link.empty() ? " {" : ", ", p.key.name,
                                        format_double(p.value));
                }
                if (!link.empty()) link += "}";
                line(d + 1, fmt::format("Axis {}: {}{}", a.name.name, a.size, link), a.span);
            }
            break;
        }
        case ItemKind::Struct: {
            line(d, fmt::format("Struct {}", it.name.name), it.span);
            generics(it.generics, d + 1);
            for (const Param& f : it.fields) {
                line(d + 1, fmt::format("Field {}: {}", f.name.name, type_to_string(*f.type)), f.span);
            }
            break;
        }
        case ItemKind::Fn: {
            line(d, fmt::format("Fn {}", it.name.name), it.span);
            generics(it.generics, d + 1);
            for (const Param& p : it.params) {
                line(d + 1, fmt::format("Param {}: {}", p.name.name, type_to_string(*p.type)), p.span);
            }
            if (it.result) line(d + 1, "Result " + type_to_string(*it.result), it.result->span);
            if (it.effect.declared) {
                std::string e = it.effect.nocomm ? "nocomm" : "comm(";
                for (size_t i = 0; i < it.effect.axes.size(); ++i) {
                    const EffectAxis& a = it.effect.axes[i];
                    e += (i ? ", " : "") + std::string(a.axis.name);
                    if (a.bound) e += " <= " + dim_to_string(*a.bound);
                }
                if (!it.effect.nocomm) e += ")";
                line(d + 1, "Effect " + e, it.effect.span);
            }
            for (const Constraint& c : it.where) {
                line(d + 1, fmt::format("Where {} {} {}", dim_to_string(*c.lhs),
                                        cmp_op_spelling(c.op), dim_to_string(*c.rhs)), c.span);
            }
            block(*it.body, d + 1);
            break;
        }
        }
    }

    void generics(const std::vector<GenericParam>& gs, int d) {
        for (const GenericParam& g : gs) {
            line(d, fmt::format("Generic {}{}", g.name.name,
                                g.kind ? fmt::format(": {}", g.kind->name) : std::string()),
                 g.span);
        }
    }

    void block(const Block& b, int d) {
        line(d, "Block", b.span);
        for (const Stmt* s : b.stmts) stmt(*s, d + 1);
        if (b.tail) {
            line(d + 1, "Tail", b.tail->span);
            expr(*b.tail, d + 2);
        }
    }

    void pattern(const Pattern& p, int d) {
        switch (p.kind) {
        case PatternKind::Name: line(d, fmt::format("PatName {}", p.name.name), p.span); break;
        case PatternKind::Wildcard: line(d, "PatWildcard", p.span); break;
        case PatternKind::Tuple:
            line(d, "PatTuple", p.span);
            for (const Pattern* e : p.elements) pattern(*e, d + 1);
            break;
        }
    }

    void stmt(const Stmt& s, int d) {
        switch (s.kind) {
        case StmtKind::Let:
            line(d, s.type ? "Let: " + type_to_string(*s.type) : std::string("Let"), s.span);
            pattern(*s.pattern, d + 1);
            expr(*s.value, d + 1);
            break;
        case StmtKind::Var:
            line(d, fmt::format("Var {}{}", s.name.name,
                                s.type ? ": " + type_to_string(*s.type) : std::string()),
                 s.span);
            expr(*s.value, d + 1);
            break;
        case StmtKind::Assign:
            line(d, "Assign", s.span);
            expr(*s.target, d + 1);
            expr(*s.value, d + 1);
            break;
        case StmtKind::For:
            line(d, fmt::format("For {}", s.name.name), s.span);
            expr(*s.range_begin, d + 1);
            expr(*s.range_end, d + 1);
            block(*s.body, d + 1);
            break;
        case StmtKind::Return:
            line(d, "Return", s.span);
            if (s.value) expr(*s.value, d + 1);
            break;
        case StmtKind::Expr:
            line(d, "ExprStmt", s.span);
            expr(*s.value, d + 1);
            break;
        case StmtKind::Empty: line(d, "Empty", s.span); break;
        }
    }

    void expr(const Expr& e, int d) {
        switch (e.kind) {
        case ExprKind::IntLit: line(d, fmt::format("Int {}", e.int_value), e.span); break;
        case ExprKind::FloatLit:
            line(d, fmt::format("Float {}", format_double(e.float_value)), e.span);
            break;
        case ExprKind::BoolLit: line(d, fmt::format("Bool {}", e.bool_value), e.span); break;
        case ExprKind::StringLit: {
            std::string escaped;
            for (char c : e.string_value) {
                if (c == '\n') escaped += "\\n";
                else if (c == '"' || c == '\\') { escaped += '\\'; escaped += c; }
                else escaped += c;
            }
            line(d, fmt::format("String \"{}\"", escaped), e.span);
            break;
        }
        case ExprKind::DTypeName: line(d, fmt::format("DType {}", dtype_name(e.dtype)), e.span); break;
        case ExprKind::Name: line(d, fmt::format("Name {}", e.name.name), e.span); break;
        case ExprKind::Unary:
            line(d, fmt::format("Unary {}", e.unary_op == UnaryOp::Neg ? "-" : "!"), e.span);
            expr(*e.lhs, d + 1);
            break;
        case ExprKind::Binary:
            line(d, fmt::format("Binary {}", binary_op_spelling(e.binary_op)), e.span);
            expr(*e.lhs, d + 1);
            expr(*e.rhs, d + 1);
            break;
        case ExprKind::Call:
            line(d, "Call", e.span);
            expr(*e.lhs, d + 1);
            for (const Arg& a : e.args) {
                if (a.label) {
                    line(d + 1, fmt::format("NamedArg {}", a.label->name), a.span);
                    expr(*a.value, d + 2);
                } else {
                    expr(*a.value, d + 1);
                }
            }
            break;
        case ExprKind::Field:
            line(d, fmt::format("Field .{}", e.name.name), e.span);
            expr(*e.lhs, d + 1);
            break;
        case ExprKind::Tuple:
            line(d, "Tuple", e.span);
            for (const Expr* x : e.elements) expr(*x, d + 1);
            break;
        case ExprKind::List:
            line(d, "List", e.span);
            for (const Expr* x : e.elements) expr(*x, d + 1);
            break;
        case ExprKind::LayoutLit: line(d, "Layout " + layout_to_string(*e.layout), e.span); break;
        case ExprKind::StructLit:
            line(d, fmt::format("StructLit {}", e.name.name), e.span);
            for (const FieldInit& f : e.fields) {
                line(d + 1, fmt::format("FieldInit {}", f.name.name), f.name.span);
                expr(*f.value, d + 2);
            }
            break;
        case ExprKind::If:
            line(d, "If", e.span);
            expr(*e.cond, d + 1);
            block(*e.then_block, d + 1);
            if (e.else_block) block(*e.else_block, d + 1);
            if (e.else_if) expr(*e.else_if, d + 1);
            break;
        }
    }

    std::ostream& out_;
    const SourceManager& sources_;
};

}  // namespace

std::string dim_to_string(const Dim& dim) {
    switch (dim.kind) {
    case DimKind::Int: return std::to_string(dim.value);
    case DimKind::Var: return std::string(dim.name.name);
    case DimKind::Axis: return fmt::format("{}.{}", dim.name.name, dim.axis.name);
    case DimKind::Binary:
        return fmt::format("({} {} {})", dim_to_string(*dim.lhs), dim_op_spelling(dim.op),
                           dim_to_string(*dim.rhs));
    }
    return "?";
}

std::string type_to_string(const Type& type) {
    switch (type.kind) {
    case TypeKind::Scalar: return std::string(dtype_name(type.dtype));
    case TypeKind::Tensor: {
        std::string out = fmt::format("Tensor {} [", type.dtype_var ? type.dtype_var->name : dtype_name(type.dtype));
        for (size_t i = 0; i < type.shape.size(); ++i) {
            if (i) out += ", ";
            out += dim_to_string(*type.shape[i]);
        }
        out += "]";
        if (type.mesh) out += fmt::format(" on {}", type.mesh->name);
        if (type.layout) out += " with " + layout_to_string(*type.layout);
        if (type.auto_layout) {
            out += " with auto";
        } else if (type.any_layout) {
            out += " with _";
        }
        if (type.partial) out += " partial {" + join_idents(*type.partial) + "}";
        return out;
    }
    case TypeKind::Tuple: {
        std::string out = "(";
        for (size_t i = 0; i < type.elements.size(); ++i) {
            if (i) out += ", ";
            out += type_to_string(*type.elements[i]);
        }
        if (type.elements.size() == 1) out += ",";
        return out + ")";
    }
    case TypeKind::Named: {
        std::string out = type.module ? fmt::format("{}.{}", type.module->name, type.name.name)
                                      : std::string(type.name.name);
        if (!type.args.empty()) {
            out += "[";
            for (size_t i = 0; i < type.args.size(); ++i) {
                if (i) out += ", ";
                out += dim_to_string(*type.args[i]);
            }
            out += "]";
        }
        return out;
    }
    }
    return "?";
}

void print_ast(std::ostream& out, const SourceManager& sources, const Module& module) {
    Printer(out, sources).module(module);
}

}  // namespace meshc::syntax

// Recursive-descent parser with precedence climbing and error recovery; see parser.h.
//
// Recovery: a parse function that fails reports one diagnostic and returns nullptr; its
// callers return nullptr at once until a statement (in a block) or an item (at top level)
// catches it and skips tokens to the next boundary. Errors at a token just after a
// lexical error, or at a token that already has an error, are not reported (no cascades).
#include "syntax/parser_impl.h"

namespace meshc::syntax {
namespace detail {

using namespace meshc::ast;

const Item* Parser::parse_item() {
    Item item;
    uint32_t begin = tok().begin;
    if (auto it = docs_.find(pos_); it != docs_.end()) item.doc = it->second;
    while (at(TokenKind::At)) {
        uint32_t at_begin = tok().begin;
        bump();
        auto name = expect_ident("an attribute name after `@`");
        if (!name) return nullptr;
        item.attrs.push_back(Attribute{*name, span_from(at_begin)});
    }
    bool ok = false;
    switch (kind()) {
    case TokenKind::KwImport: ok = parse_import(item); break;
    case TokenKind::KwMesh: ok = parse_mesh(item); break;
    case TokenKind::KwStruct: ok = parse_struct(item); break;
    case TokenKind::KwFn: ok = parse_fn(item); break;
    default: {
        Diagnostic* d = expected("an item (`fn`, `struct`, `mesh` or `import`)");
        if (d && (at(TokenKind::KwLet) || at(TokenKind::KwVar))) {
            d->note("statements belong inside a function body");
        }
        if (d && at(TokenKind::LParen) && !item.attrs.empty() && pos_ > 0 &&
            tokens_[pos_ - 1].end == item.attrs.back().span.end) {
            d->note("attributes take no arguments: `@explicit_comm`");
        }
        // `name(...)` or `name[...]` where an item starts: most likely an item that
        // lost its keyword; uses of the name are not reported again.
        if (at(TokenKind::Ident) && (peek_tok(1).kind == TokenKind::LParen ||
                                     peek_tok(1).kind == TokenKind::LBracket)) {
            module_->recovered_names.push_back(token_text(tok()));
        }
        return nullptr;
    }
    }
    if (!ok) {
        // The item exists, broken: uses of its name are not unknown names.
        if (!item.name.name.empty()) module_->recovered_names.push_back(item.name.name);
        return nullptr;
    }
    item.span = span_from(begin);
    return module_->make(std::move(item));
}

bool Parser::parse_import(Item& item) {
    item.kind = ItemKind::Import;
    bump();
    auto first = expect_ident("a module name after `import`");
    if (!first) return false;
    item.path.push_back(*first);
    while (eat(TokenKind::Dot)) {
        auto part = expect_ident("a module name after `.`");
        if (!part) return false;
        item.path.push_back(*part);
    }
    item.name = item.path.back();
    if (eat(TokenKind::KwAs)) {
        auto alias = expect_ident("a name after `as`");
        if (!alias) return false;
        item.name = *alias;
        item.has_alias = true;
    }
    return expect(TokenKind::Semi, "after the import");
}

bool Parser::parse_mesh(Item& item) {
    item.kind = ItemKind::Mesh;
    bump();
    auto name = expect_ident("a mesh name after `mesh`");
    if (!name) return false;
    item.name = *name;
    if (!expect(TokenKind::Assign, "after the mesh name")) return false;
    if (!expect(TokenKind::LBracket, "to start the mesh's axes")) return false;
    if (at(TokenKind::RBracket)) {
        expected("a mesh axis (`name: size`)");
        return false;
    }
    bool ok = comma_list(TokenKind::RBracket, "the mesh's axes", [&] {
        MeshAxisDecl axis;
        uint32_t begin = tok().begin;
        auto axis_name = expect_ident("a mesh axis name");
        if (!axis_name) return false;
        axis.name = *axis_name;
        if (!expect(TokenKind::Colon, "after the axis name")) return false;
        if (!at(TokenKind::IntLit)) {
            expected("the axis size (an integer)");
            return false;
        }
        axis.size = int_literal_value(token_text(tok()));
        axis.size_span = tok_span();
        bump();
        if (eat(TokenKind::LBrace)) {
            if (at(TokenKind::RBrace)) {
                expected("a link property (`latency` or `bandwidth`)");
                return false;
            }
            bool props = comma_list(TokenKind::RBrace, "the link properties", [&] {
                uint32_t prop_begin = tok().begin;
                auto key = expect_ident("a link property (`latency` or `bandwidth`)");
                if (!key) return false;
                if (!expect(TokenKind::Colon, "after the property name")) return false;
                double value = 0;
                if (at(TokenKind::IntLit)) {
                    value = static_cast<double>(int_literal_value(token_text(tok())));
                } else if (at(TokenKind::FloatLit)) {
                    value = float_literal_value(token_text(tok()));
                } else {
                    expected("a number");
                    return false;
                }
                bump();
                axis.link.push_back({*key, value, span_from(prop_begin)});
                return true;
            });
            if (!props) return false;
        }
        axis.span = span_from(begin);
        item.axes.push_back(std::move(axis));
        return true;
    });
    if (!ok) return false;
    return expect(TokenKind::Semi, "after the mesh declaration");
}

bool Parser::parse_generics(std::vector<GenericParam>& out) {
    if (!eat(TokenKind::LBracket)) return true;
    if (at(TokenKind::RBracket)) {
        expected("a generic parameter");
        return false;
    }
    return comma_list(TokenKind::RBracket, "the generic parameters", [&] {
        uint32_t begin = tok().begin;
        auto name = expect_ident("a generic parameter name");
        if (!name) return false;
        GenericParam g{*name, std::nullopt, {}};
        if (eat(TokenKind::Colon)) {
            auto k = expect_ident("`Mesh` or `Dim`");
            if (!k) return false;
            g.kind = *k;
        }
        g.span = span_from(begin);
        out.push_back(g);
        return true;
    });
}

bool Parser::parse_named_types(std::vector<Param>& out, TokenKind close, std::string_view what) {
    return comma_list(close, what, [&] {
        uint32_t begin = tok().begin;
        auto name = expect_ident("a name");
        if (!name) return false;
        if (!expect(TokenKind::Colon, "and a type after the name")) return false;
        const Type* type = parse_type();
        if (!type) return false;
        out.push_back(Param{*name, type, span_from(begin)});
        return true;
    });
}

bool Parser::parse_struct(Item& item) {
    item.kind = ItemKind::Struct;
    bump();
    auto name = expect_ident("a struct name after `struct`");
    if (!name) return false;
    item.name = *name;
    if (!parse_generics(item.generics)) return false;
    if (!expect(TokenKind::LBrace, "to start the struct's fields")) return false;
    return parse_named_types(item.fields, TokenKind::RBrace, "the struct's fields");
}

bool Parser::parse_effect(Effect& effect) {
    uint32_t begin = tok().begin;
    bump();  // `!`
    effect.declared = true;
    auto word = expect_ident("`nocomm` or `comm(...)` after `!` (the function's communication effect)");
    if (!word) return false;
    if (word->name == "nocomm") {
        effect.nocomm = true;
    } else if (word->name == "comm") {
        if (!expect(TokenKind::LParen, "after `comm`: the axes it may communicate over, `comm(model)`")) return false;
        bool ok = comma_list(TokenKind::RParen, "the axes of `comm(...)`", [&] {
            auto axis = expect_ident("a mesh axis");
            if (!axis) return false;
            EffectAxis e{*axis, nullptr};
            if (cmp_op_of(kind()) == CmpOp::Le) {
                bump();
                e.bound = parse_dim();
                if (!e.bound) return false;
            }
            effect.axes.push_back(e);
            return true;
        });
        if (!ok) return false;
        if (effect.axes.empty()) {
            diags_.emit(DiagCode::E0104, span_from(begin), "`comm()` names no axis")
                .note("a function that does not communicate is `! nocomm`");
            return false;
        }
    } else {
        diags_.emit(DiagCode::E0104, word->span,
                    fmt::format("expected `nocomm` or `comm(...)` after `!`, found `{}`", word->name))
            .note("a communication effect: `! nocomm`, `! comm(model)`, `! comm(model <= 4 * B * D)`");
        last_error_pos_ = pos_;
        return false;
    }
    effect.span = span_from(begin);
    return true;
}

bool Parser::parse_fn(Item& item) {
    item.kind = ItemKind::Fn;
    bump();
    auto name = expect_ident("a function name after `fn`");
    if (!name) return false;
    item.name = *name;
    if (!parse_generics(item.generics)) return false;
    if (!expect(TokenKind::LParen, "to start the parameters")) return false;
    if (!parse_named_types(item.params, TokenKind::RParen, "the parameters")) return false;
    if (eat(TokenKind::Arrow)) {
        item.result = parse_type();
        if (!item.result) return false;
    }
    if (at(TokenKind::Bang) && !parse_effect(item.effect)) return false;
    if (eat(TokenKind::KwWhere)) {
        if (at(TokenKind::LBrace)) {
            expected("a constraint after `where`");
            return false;
        }
        while (!at(TokenKind::LBrace)) {
            uint32_t begin = tok().begin;
            const Dim* lhs = parse_dim();
            if (!lhs) return false;
            auto op = cmp_op_of(kind());
            if (!op) {
                expected("a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)");
                return false;
            }
            bump();
            const Dim* rhs = parse_dim();
            if (!rhs) return false;
            if (cmp_op_of(kind())) {
                diags_.emit(DiagCode::E0109, tok_span(), "comparison operators cannot be chained")
                    .note("write one constraint per comparison: `where a < b, b < c`");
                last_error_pos_ = pos_ + 1;
                return false;
            }
            item.where.push_back(Constraint{lhs, *op, rhs, span_from(begin)});
            if (!eat(TokenKind::Comma)) break;
        }
    }
    if (!at(TokenKind::LBrace)) {
        expected("`{` to start the function body");
        return false;
    }
    item.body = parse_block();
    return item.body != nullptr;
}

const Dim* Parser::parse_dim() { return parse_dim_sum(); }

const Dim* Parser::make_dim_binary(DimOp op, const Dim* lhs, const Dim* rhs, uint32_t begin) {
    Dim d{DimKind::Binary, span_from(begin)};
    d.op = op;
    d.lhs = lhs;
    d.rhs = rhs;
    return module_->make(d);
}

const Dim* Parser::parse_dim_sum() {
    uint32_t begin = tok().begin;
    const Dim* lhs = parse_dim_product();
    while (lhs && (at(TokenKind::Plus) || at(TokenKind::Minus))) {
        DimOp op = at(TokenKind::Plus) ? DimOp::Add : DimOp::Sub;
        bump();
        const Dim* rhs = parse_dim_product();
        if (!rhs) return nullptr;
        lhs = make_dim_binary(op, lhs, rhs, begin);
    }
    return lhs;
}

const Dim* Parser::parse_dim_product() {
    uint32_t begin = tok().begin;
    const Dim* lhs = parse_dim_atom();
    while (lhs && (at(TokenKind::Star) || at(TokenKind::Slash) || at(TokenKind::Percent))) {
        DimOp op = at(TokenKind::Star) ? DimOp::Mul : at(TokenKind::Slash) ? DimOp::Div
                                                                            : DimOp::Mod;
        bump();
        const Dim* rhs = parse_dim_atom();
        if (!rhs) return nullptr;
        lhs = make_dim_binary(op, lhs, rhs, begin);
    }
    return lhs;
}

const Dim* Parser::parse_dim_atom() {
    DepthGuard guard(*this);
    if (!guard.ok) return nullptr;
    uint32_t begin = tok().begin;
    if (at(TokenKind::IntLit)) {
        Dim d{DimKind::Int, tok_span()};
        d.value = int_literal_value(token_text(tok()));
        bump();
        return module_->make(d);
    }
    if (at(TokenKind::Ident)) {
        Ident name = ident_here();
        bump();
        if (eat(TokenKind::Dot)) {
            auto axis = expect_ident("a mesh axis name after `.`");
            if (!axis) return nullptr;
            Dim d{DimKind::Axis, span_from(begin)};
            d.name = name;
            d.axis = *axis;
            return module_->make(d);
        }
        Dim d{DimKind::Var, name.span};
        d.name = name;
        return module_->make(d);
    }
    if (eat(TokenKind::LParen)) {
        const Dim* inner = parse_dim();
        if (!inner) return nullptr;
        if (!expect(TokenKind::RParen, "to close the parenthesised size")) return nullptr;
        return inner;
    }
    expected("a size (an integer, a size variable or `Mesh.axis`)");
    return nullptr;
}

bool Parser::parse_dim_list(std::vector<const Dim*>& out, std::string_view what) {
    return comma_list(TokenKind::RBracket, what, [&] {
        const Dim* d = parse_dim();
        if (!d) return false;
        out.push_back(d);
        return true;
    });
}

void Parser::read_chosen_layout(Type& t, const std::string& text) {
    if (text == "_") {
        t.auto_layout = false;
        return;
    }
    std::string_view v(text);
    if (v.size() < 2 || v.front() != '{' || v.back() != '}') return;
    v = v.substr(1, v.size() - 2);
    auto trim = [](std::string_view x) {
        while (!x.empty() && x.front() == ' ') x.remove_prefix(1);
        while (!x.empty() && x.back() == ' ') x.remove_suffix(1);
        return x;
    };
    auto is_name = [](std::string_view x) {
        if (x.empty() || !(std::isalpha(static_cast<unsigned char>(x[0])) || x[0] == '_')) return false;
        return std::all_of(x.begin(), x.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    };
    Layout layout;
    layout.span = t.auto_span;
    while (!trim(v).empty()) {
        v = trim(v);
        size_t colon = v.find(':');
        if (colon == std::string_view::npos) return;
        std::string_view key = trim(v.substr(0, colon));
        v = trim(v.substr(colon + 1));
        std::string_view axes;
        if (!v.empty() && v.front() == '(') {
            size_t close = v.find(')');
            if (close == std::string_view::npos) return;
            axes = v.substr(1, close - 1);
            v = v.substr(close + 1);
        } else {
            size_t comma = v.find(',');
            axes = v.substr(0, comma);
            v = comma == std::string_view::npos ? std::string_view() : v.substr(comma);
        }
        v = trim(v);
        if (!v.empty()) {
            if (v.front() != ',') return;
            v.remove_prefix(1);
        }
        LayoutEntry e;
        e.span = e.key_span = t.auto_span;
        if (is_name(key)) {
            e.key_name = Ident{key, t.auto_span};
        } else if (!key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                   key.size() < 10) {
            e.key_pos = std::stoll(std::string(key));
        } else {
            return;
        }
        while (!trim(axes).empty()) {
            axes = trim(axes);
            size_t comma = axes.find(',');
            std::string_view axis = trim(axes.substr(0, comma));
            if (!is_name(axis)) return;
            e.axes.push_back(Ident{axis, t.auto_span});
            axes = comma == std::string_view::npos ? std::string_view() : axes.substr(comma + 1);
        }
        if (e.axes.empty()) return;
        layout.entries.push_back(std::move(e));
    }
    t.layout = std::move(layout);
    t.auto_layout = t.any_layout = false;
}

const Layout* Parser::parse_layout() {
    Layout layout;
    uint32_t begin = tok().begin;
    if (!expect(TokenKind::LBrace, "to start the layout")) return nullptr;
    bool ok = comma_list(TokenKind::RBrace, "the layout", [&] {
        LayoutEntry e;
        uint32_t entry_begin = tok().begin;
        if (at(TokenKind::Ident)) {
            e.key_name = ident_here();
        } else if (at(TokenKind::IntLit)) {
            e.key_pos = int_literal_value(token_text(tok()));
            // Out of int64 range (E0105): the entry is left out of the layout rather
            // than reported again as a position out of range.
            if (!int_literal_fits(token_text(tok()))) e.key_pos = -1;
        } else {
            expected("a dim (its size-variable name or its position)");
            return false;
        }
        e.key_span = tok_span();
        bump();
        if (!expect(TokenKind::Colon, "after the dim")) return false;
        if (eat(TokenKind::LParen)) {
            if (at(TokenKind::RParen)) {
                expected("a mesh axis");
                return false;
            }
            bool axes_ok = comma_list(TokenKind::RParen, "the list of mesh axes", [&] {
                auto axis = expect_ident("a mesh axis");
                if (!axis) return false;
                e.axes.push_back(*axis);
                return true;
            });
            if (!axes_ok) return false;
        } else {
            auto axis = expect_ident("a mesh axis or a parenthesised list of axes");
            if (!axis) return false;
            e.axes.push_back(*axis);
        }
        e.span = span_from(entry_begin);
        if (e.key_name || e.key_pos >= 0) layout.entries.push_back(std::move(e));
        return true;
    });
    if (!ok) return nullptr;
    layout.span = span_from(begin);
    return module_->make(std::move(layout));
}

const Type* Parser::parse_type() {
    DepthGuard guard(*this);
    if (!guard.ok) return nullptr;
    uint32_t begin = tok().begin;
    if (is_dtype_keyword(kind())) {
        Type t{TypeKind::Scalar, tok_span()};
        t.dtype = dtype_of(kind());
        bump();
        return module_->make(std::move(t));
    }
    if (eat(TokenKind::KwTensor)) {
        Type t{TypeKind::Tensor, {}};
        if (at(TokenKind::Ident)) {
            t.dtype_var = ident_here();  // `Tensor T [...]`, T a generic element type (`T: Float`)
            bump();
        } else if (!is_dtype_keyword(kind())) {
            expected("an element type (`f32`, `bf16`, `i64`, ..., or a generic `T: Float`) after `Tensor`");
            return nullptr;
        } else {
            t.dtype = dtype_of(kind());
            bump();
        }
        if (!expect(TokenKind::LBracket, "to start the shape")) return nullptr;
        if (!parse_dim_list(t.shape, "the shape")) return nullptr;
        if (eat(TokenKind::KwOn)) {
            auto mesh = expect_ident("a mesh name after `on`");
            if (!mesh) return nullptr;
            t.mesh = *mesh;
        }
        if (eat(TokenKind::KwWith)) {
            if (eat(TokenKind::Underscore)) {
                t.any_layout = true;  // `with _`: whatever layout the value has
                goto after_layout;
            }
            if (at(TokenKind::KwAuto)) {
                // `with auto`: chosen by the layout solver; read as `_` until then.
                t.auto_span = tok_span();
                bump();
                t.auto_layout = t.any_layout = true;
                if (chosen_) {
                    if (auto it = chosen_->find(t.auto_span.begin); it != chosen_->end()) {
                        read_chosen_layout(t, it->second);
                    }
                }
                goto after_layout;
            }
            const Layout* layout = parse_layout();
            if (!layout) return nullptr;
            t.layout = *layout;
        }
    after_layout:
        if (at(TokenKind::KwPartial)) {
            uint32_t partial_begin = tok().begin;
            bump();
            if (!expect(TokenKind::LBrace, "to start the set of partial axes")) return nullptr;
            std::vector<Ident> axes;
            bool ok = comma_list(TokenKind::RBrace, "the partial axes", [&] {
                auto axis = expect_ident("a mesh axis");
                if (!axis) return false;
                axes.push_back(*axis);
                return true;
            });
            if (!ok) return nullptr;
            t.partial = std::move(axes);
            t.partial_span = span_from(partial_begin);
        }
        if (at(TokenKind::KwOn) || at(TokenKind::KwWith) || at(TokenKind::KwPartial)) {
            // Nothing else may follow a type with these keywords: they are out of order.
            Diagnostic* d = expected("the end of the tensor type");
            if (d) d->note("the parts of a tensor type come in the order `Tensor f32 [dims] on M with {...} partial {...}`");
            return nullptr;
        }
        t.span = span_from(begin);
        return module_->make(std::move(t));
    }
    if (eat(TokenKind::LParen)) {
        if (at(TokenKind::RParen)) {
            Diagnostic* d = expected("a type");
            if (d) d->note("there is no unit type `()`; a function that returns nothing has no `->`");
            return nullptr;
        }
        const Type* first = parse_type();
        if (!first) return nullptr;
        if (eat(TokenKind::RParen)) return first;
        if (!expect(TokenKind::Comma, "or `)` in the tuple type")) return nullptr;
        Type t{TypeKind::Tuple, {}};
        t.elements.push_back(first);
        bool ok = comma_list(TokenKind::RParen, "the tuple type", [&] {
            const Type* e = parse_type();
            if (!e) return false;
            t.elements.push_back(e);
            return true;
        });
        if (!ok) return nullptr;
        t.span = span_from(begin);
        return module_->make(std::move(t));
    }
    if (at(TokenKind::Ident)) {
        Type t{TypeKind::Named, {}};
        t.name = ident_here();
        bump();
        if (eat(TokenKind::Dot)) {
            t.module = t.name;
            auto name = expect_ident("a type name after `.`");
            if (!name) return nullptr;
            t.name = *name;
        }
        if (eat(TokenKind::LBracket)) {
            if (at(TokenKind::RBracket)) {
                expected("a generic argument");
                return nullptr;
            }
            // Sizes, meshes, parameter types, and element types (`Mats[bf16, M, 4]`: an
            // element type keyword is read as a name, resolved against a `T: Float`).
            bool ok = comma_list(TokenKind::RBracket, "the generic arguments", [&] {
                if (is_dtype_keyword(kind())) {
                    Dim d{DimKind::Var, tok_span()};
                    d.name = ident_here();
                    bump();
                    t.args.push_back(module_->make(d));
                    return true;
                }
                const Dim* d = parse_dim();
                if (!d) return false;
                t.args.push_back(d);
                return true;
            });
            if (!ok) return nullptr;
        }
        t.span = span_from(begin);
        return module_->make(std::move(t));
    }
    expected("a type");
    return nullptr;
}

}  // namespace detail



std::unique_ptr<ast::Module> parse_file(const SourceManager& sources, FileId file,
                                        DiagnosticEngine& diags, const AutoLayouts* chosen) {
    return detail::Parser(sources, file, diags, chosen).run();
}

}  // namespace meshc::syntax

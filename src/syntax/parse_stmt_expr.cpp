// The parser's statements, patterns and expressions (precedence climbing); the class
// and the recovery rules: parser_impl.h, parser.cpp.
#include "syntax/parser_impl.h"

namespace meshc::syntax::detail {

using namespace meshc::ast;

const Block* Parser::parse_block() {
    DepthGuard guard(*this);
    if (!guard.ok) return nullptr;
    uint32_t begin = tok().begin;
    Span open = tok_span();
    if (!expect(TokenKind::LBrace)) return nullptr;
    Block block;
    while (!at(TokenKind::RBrace)) {
        if (at(TokenKind::Eof) ||
            ((is_item_keyword(kind()) || at(TokenKind::At)) && at_line_start())) {
            Diagnostic* d = expected("`}`");
            if (d) d->note("to close this `{`", open);
            return nullptr;
        }
        size_t start = pos_;
        if (is_item_keyword(kind()) && peek_tok(1).kind == TokenKind::Ident) {
            // An indented item inside a body: nested, not a missing `}` before it.
            Diagnostic* d = error_here(fmt::format("{} items are allowed only at the top level",
                                                   token_spelling(kind())));
            if (d) d->note("move it out of the function body");
            if (!parse_item()) sync_stmt(start);
            if (pos_ == start) bump();  // progress, whatever the recovery did
            continue;
        }
        bool ok = parse_stmt(block);
        if (!ok) {
            sync_stmt(start);
            if (pos_ == start) bump();  // progress, whatever the recovery did
            continue;
        }
    }
    bump();
    block.span = span_from(begin);
    return module_->make(std::move(block));
}

bool Parser::at_line_start() const {
    uint32_t b = tok().begin;
    return b == 0 || text_[b - 1] == '\n';
}

const Stmt* Parser::make_expr_stmt(const Expr* e) {
    Stmt s{StmtKind::Expr, e->span};
    s.value = e;
    return module_->make(std::move(s));
}

bool Parser::parse_stmt(Block& block) {
    uint32_t begin = tok().begin;
    switch (kind()) {
    case TokenKind::Semi: {
        bump();
        block.stmts.push_back(module_->make(Stmt{StmtKind::Empty, span_from(begin)}));
        return true;
    }
    case TokenKind::KwLet: {
        bump();
        Stmt s{StmtKind::Let, {}};
        s.pattern = parse_pattern();
        if (!s.pattern) return false;
        bool ok = true;
        if (eat(TokenKind::Colon)) {
            s.type = parse_type();
            ok = s.type != nullptr;
        }
        ok = ok && expect(TokenKind::Assign, "in the `let` statement");
        if (ok) s.value = parse_expr(false);
        if (!s.value) {
            recover_pattern_names(*s.pattern);
            return false;
        }
        return end_stmt(block, std::move(s), begin, "after the `let` statement");
    }
    case TokenKind::KwVar: {
        bump();
        Stmt s{StmtKind::Var, {}};
        auto name = expect_ident("a variable name after `var`");
        if (!name) return false;
        s.name = *name;
        bool ok = true;
        if (eat(TokenKind::Colon)) {
            s.type = parse_type();
            ok = s.type != nullptr;
        }
        ok = ok && expect(TokenKind::Assign, "in the `var` statement");
        if (ok) s.value = parse_expr(false);
        if (!s.value) {
            module_->recovered_names.push_back(s.name.name);
            return false;
        }
        return end_stmt(block, std::move(s), begin, "after the `var` statement");
    }
    case TokenKind::KwFor: {
        bump();
        Stmt s{StmtKind::For, {}};
        auto name = expect_ident("a loop variable after `for`");
        if (!name) return false;
        s.name = *name;
        if (!expect(TokenKind::KwIn, "after the loop variable")) return false;
        s.range_begin = parse_expr(true);
        if (!s.range_begin) return false;
        if (!expect(TokenKind::DotDot, "in the range (`start..end`)")) return false;
        s.range_end = parse_expr(true);
        if (!s.range_end) return false;
        if (!at(TokenKind::LBrace)) {
            expected("`{` to start the loop body");
            return false;
        }
        s.body = parse_block();
        if (!s.body) return false;
        s.span = span_from(begin);
        block.stmts.push_back(module_->make(std::move(s)));
        return true;
    }
    case TokenKind::KwReturn: {
        bump();
        Stmt s{StmtKind::Return, {}};
        if (!at(TokenKind::Semi)) {
            s.value = parse_expr(false);
            if (!s.value) return false;
        }
        if (!expect(TokenKind::Semi, "after `return`")) return false;
        s.span = span_from(begin);
        block.stmts.push_back(module_->make(std::move(s)));
        return true;
    }
    case TokenKind::KwIf: {
        const Expr* e = parse_if();
        if (!e) return false;
        if (at(TokenKind::RBrace) && (e->else_block || e->else_if)) {
            block.tail = e;
        } else {
            block.stmts.push_back(make_expr_stmt(e));
        }
        return true;
    }
    default: break;
    }
    const Expr* e = parse_expr(false);
    if (!e) return false;
    if (eat(TokenKind::Assign)) {
        Stmt s{StmtKind::Assign, {}};
        s.target = e;
        s.value = parse_expr(false);
        if (!s.value) return false;
        if (at(TokenKind::Assign)) {
            Diagnostic* d = expected("`;` after the assignment");
            if (d) d->note("an assignment is a statement, not a value: `a = b = c` is not allowed");
            return false;
        }
        if (!expect(TokenKind::Semi, "after the assignment")) return false;
        s.span = span_from(begin);
        block.stmts.push_back(module_->make(std::move(s)));
        return true;
    }
    if (eat(TokenKind::Semi)) {
        Stmt s{StmtKind::Expr, span_from(begin)};
        s.value = e;
        block.stmts.push_back(module_->make(std::move(s)));
        return true;
    }
    if (at(TokenKind::RBrace)) {
        block.tail = e;
        return true;
    }
    expect(TokenKind::Semi, "or `}` after the expression");
    return false;
}

bool Parser::end_stmt(Block& block, Stmt s, uint32_t begin, std::string_view context) {
    bool ok = expect(TokenKind::Semi, context);
    s.span = span_from(begin);
    block.stmts.push_back(module_->make(std::move(s)));
    return ok;
}

void Parser::recover_pattern_names(const Pattern& p) {
    if (p.kind == PatternKind::Name) module_->recovered_names.push_back(p.name.name);
    for (const Pattern* e : p.elements) recover_pattern_names(*e);
}

const Pattern* Parser::parse_pattern() {
    DepthGuard guard(*this);
    if (!guard.ok) return nullptr;
    uint32_t begin = tok().begin;
    if (at(TokenKind::Ident)) {
        Pattern p{PatternKind::Name, tok_span()};
        p.name = ident_here();
        bump();
        return module_->make(std::move(p));
    }
    if (eat(TokenKind::Underscore)) {
        return module_->make(Pattern{PatternKind::Wildcard, span_from(begin)});
    }
    if (eat(TokenKind::LParen)) {
        const Pattern* first = parse_pattern();
        if (!first) return nullptr;
        if (eat(TokenKind::RParen)) return first;
        if (!expect(TokenKind::Comma, "or `)` in the tuple pattern")) return nullptr;
        Pattern p{PatternKind::Tuple, {}};
        p.elements.push_back(first);
        bool ok = comma_list(TokenKind::RParen, "the tuple pattern", [&] {
            const Pattern* e = parse_pattern();
            if (!e) return false;
            p.elements.push_back(e);
            return true;
        });
        if (!ok) return nullptr;
        p.span = span_from(begin);
        return module_->make(std::move(p));
    }
    Diagnostic* d = expected("a pattern (a name, `_` or a tuple pattern)");
    if (d && is_keyword_token(kind())) {
        d->note(fmt::format("{} is a reserved word", token_spelling(kind())));
    }
    return nullptr;
}

const Expr* Parser::parse_expr(bool no_struct) {
    DepthGuard guard(*this);
    if (!guard.ok) return nullptr;
    return parse_binary(1, no_struct);
}

const Expr* Parser::parse_binary(int min_prec, bool no_struct) {
    uint32_t begin = tok().begin;
    const Expr* lhs = parse_unary(no_struct);
    if (!lhs) return nullptr;
    bool lhs_is_comparison = false;
    bool chain_reported = false;
    while (true) {
        auto info = binary_op_of(kind());
        if (!info || info->prec < min_prec) break;
        Span op_span = tok_span();
        if (info->prec == 3 && lhs_is_comparison && !chain_reported) {
            auto& d = diags_.emit(DiagCode::E0109, op_span,
                                  "comparison operators cannot be chained");
            d.note("write `a < b && b < c`, or parenthesise one comparison");
            last_error_pos_ = pos_ + 1;
            chain_reported = true;  // once per chain: `a < b < c < d` is one error
        }
        bump();
        const Expr* rhs = parse_binary(info->prec + 1, no_struct);
        if (!rhs) return nullptr;
        Expr e{ExprKind::Binary, span_from(begin)};
        e.binary_op = info->op;
        e.op_span = op_span;
        e.lhs = lhs;
        e.rhs = rhs;
        e.height = 1 + std::max(lhs->height, rhs->height);
        if (!check_height(&e)) return nullptr;
        lhs = module_->make(std::move(e));
        lhs_is_comparison = info->prec == 3;
    }
    return lhs;
}

const Expr* Parser::parse_unary(bool no_struct) {
    if (at(TokenKind::Minus) || at(TokenKind::Bang)) {
        DepthGuard guard(*this);
        if (!guard.ok) return nullptr;
        Span op_span = tok_span();
        UnaryOp op = at(TokenKind::Minus) ? UnaryOp::Neg : UnaryOp::Not;
        bump();
        const Expr* operand = parse_unary(no_struct);
        if (!operand) return nullptr;
        Expr e{ExprKind::Unary, span_from(op_span.begin)};
        e.unary_op = op;
        e.op_span = op_span;
        e.lhs = operand;
        e.height = operand->height + 1;
        return module_->make(std::move(e));
    }
    return parse_postfix(no_struct);
}

const Expr* Parser::parse_postfix(bool no_struct) {
    uint32_t begin = tok().begin;
    const Expr* e = parse_primary(no_struct);
    while (e) {
        if (at(TokenKind::LParen)) {
            bump();
            Expr call{ExprKind::Call, {}};
            call.lhs = e;
            if (!parse_args(call.args)) return nullptr;
            call.span = span_from(begin);
            call.height = e->height + 1;
            for (const Arg& a : call.args) call.height = std::max(call.height, a.value->height + 1);
            if (!check_height(&call)) return nullptr;
            e = module_->make(std::move(call));
        } else if (at(TokenKind::Dot)) {
            bump();
            auto field = expect_ident("a field name after `.`");
            if (!field) return nullptr;
            Expr f{ExprKind::Field, span_from(begin)};
            f.lhs = e;
            f.name = *field;
            f.height = e->height + 1;
            if (!check_height(&f)) return nullptr;
            e = module_->make(std::move(f));
        } else {
            break;
        }
    }
    return e;
}

bool Parser::parse_args(std::vector<Arg>& args) {
    bool seen_named = false;
    return comma_list(TokenKind::RParen, "the arguments", [&] {
        uint32_t begin = tok().begin;
        Arg arg{std::nullopt, nullptr, {}};
        if (at(TokenKind::Ident) && peek_tok(1).kind == TokenKind::Colon) {
            arg.label = ident_here();
            bump();
            bump();
            arg.value = parse_expr(false);
            if (!arg.value) return false;
            seen_named = true;
        } else {
            if (at(TokenKind::LBrace)) {
                const Layout* layout = parse_layout();
                if (!layout) return false;
                Expr e{ExprKind::LayoutLit, layout->span};
                e.layout = layout;
                arg.value = module_->make(std::move(e));
            } else {
                arg.value = parse_expr(false);
                if (!arg.value) return false;
            }
            if (seen_named) {
                diags_.emit(DiagCode::E0110, span_from(begin),
                            "positional argument after a named argument")
                    .note("write every positional argument before the named ones");
            }
        }
        arg.span = span_from(begin);
        args.push_back(arg);
        return true;
    });
}

const Expr* Parser::parse_primary(bool no_struct) {
    uint32_t begin = tok().begin;
    switch (kind()) {
    case TokenKind::IntLit: {
        Expr e{ExprKind::IntLit, tok_span()};
        e.int_value = int_literal_value(token_text(tok()));
        bump();
        return module_->make(std::move(e));
    }
    case TokenKind::FloatLit: {
        Expr e{ExprKind::FloatLit, tok_span()};
        e.float_value = float_literal_value(token_text(tok()));
        bump();
        return module_->make(std::move(e));
    }
    case TokenKind::StringLit: {
        Expr e{ExprKind::StringLit, tok_span()};
        e.string_value = string_literal_value(token_text(tok()));
        bump();
        return module_->make(std::move(e));
    }
    case TokenKind::KwTrue:
    case TokenKind::KwFalse: {
        Expr e{ExprKind::BoolLit, tok_span()};
        e.bool_value = at(TokenKind::KwTrue);
        bump();
        return module_->make(std::move(e));
    }
    case TokenKind::Ident: {
        Ident name = ident_here();
        bump();
        if (!no_struct && at(TokenKind::LBrace)) return parse_struct_literal(name);
        Expr e{ExprKind::Name, name.span};
        e.name = name;
        return module_->make(std::move(e));
    }
    case TokenKind::LParen: {
        // No DepthGuard here or for `[` and struct literals: the parse_expr inside
        // counts the level, so that `((1))` is two levels of nesting, not four.
        bump();
        if (at(TokenKind::RParen)) {
            Diagnostic* d = expected("an expression");
            if (d) d->note("there is no unit value `()`");
            return nullptr;
        }
        const Expr* first = parse_expr(false);
        if (!first) return nullptr;
        if (eat(TokenKind::RParen)) return first;
        if (!expect(TokenKind::Comma, "or `)`")) return nullptr;
        Expr t{ExprKind::Tuple, {}};
        t.elements.push_back(first);
        bool ok = comma_list(TokenKind::RParen, "the tuple", [&] {
            const Expr* e = parse_expr(false);
            if (!e) return false;
            t.elements.push_back(e);
            return true;
        });
        if (!ok) return nullptr;
        t.span = span_from(begin);
        for (const Expr* e : t.elements) t.height = std::max(t.height, e->height + 1);
        return module_->make(std::move(t));
    }
    case TokenKind::LBracket: {
        bump();
        Expr l{ExprKind::List, {}};
        bool ok = comma_list(TokenKind::RBracket, "the list", [&] {
            const Expr* e = parse_expr(false);
            if (!e) return false;
            l.elements.push_back(e);
            return true;
        });
        if (!ok) return nullptr;
        l.span = span_from(begin);
        for (const Expr* e : l.elements) l.height = std::max(l.height, e->height + 1);
        return module_->make(std::move(l));
    }
    case TokenKind::KwIf: return parse_if();
    default: break;
    }
    if (is_dtype_keyword(kind())) {
        Expr e{ExprKind::DTypeName, tok_span()};
        e.dtype = dtype_of(kind());
        bump();
        return module_->make(std::move(e));
    }
    Diagnostic* d = expected("an expression");
    if (d && at(TokenKind::LBrace)) {
        d->note("a bare `{ ... }` block is not an expression; layout literals `{d: axis}` "
                "are only call arguments");
    }
    // `x += 1` lexes as `x`, `+`, `=`: the `=` right after an operator.
    if (d && at(TokenKind::Assign) && pos_ > 0 && tokens_[pos_ - 1].end == tok().begin &&
        binary_op_of(tokens_[pos_ - 1].kind)) {
        d->note(fmt::format("there is no compound assignment `{}=`; write `a = a {} b`",
                            token_text(tokens_[pos_ - 1]), token_text(tokens_[pos_ - 1])));
    }
    return nullptr;
}

const Expr* Parser::parse_struct_literal(Ident name) {
    bump();  // `{`
    Expr e{ExprKind::StructLit, {}};
    e.name = name;
    bool ok = comma_list(TokenKind::RBrace, "the struct literal", [&] {
        auto field = expect_ident("a field name");
        if (!field) return false;
        if (!expect(TokenKind::Colon, "after the field name")) return false;
        const Expr* value = parse_expr(false);
        if (!value) return false;
        e.fields.push_back(FieldInit{*field, value});
        e.height = std::max(e.height, value->height + 1);
        return true;
    });
    if (!ok) return nullptr;
    e.span = span_from(name.span.begin);
    return module_->make(std::move(e));
}

const Expr* Parser::parse_if() {
    DepthGuard guard(*this);
    if (!guard.ok) return nullptr;
    uint32_t begin = tok().begin;
    bump();  // `if`
    Expr e{ExprKind::If, {}};
    e.cond = parse_expr(true);
    if (!e.cond) return nullptr;
    if (!at(TokenKind::LBrace)) {
        expected("`{` after the condition");
        return nullptr;
    }
    e.then_block = parse_block();
    if (!e.then_block) return nullptr;
    if (eat(TokenKind::KwElse)) {
        if (at(TokenKind::KwIf)) {
            e.else_if = parse_if();
            if (!e.else_if) return nullptr;
        } else if (at(TokenKind::LBrace)) {
            e.else_block = parse_block();
            if (!e.else_block) return nullptr;
        } else {
            expected("`{` or `if` after `else`");
            return nullptr;
        }
    }
    e.span = span_from(begin);
    return module_->make(std::move(e));
}

}  // namespace meshc::syntax::detail

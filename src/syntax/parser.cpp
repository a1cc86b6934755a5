// Recursive-descent parser with precedence climbing and error recovery; see parser.h.
//
// Recovery: a parse function that fails reports one diagnostic and returns nullptr; its
// callers return nullptr at once until a statement (in a block) or an item (at top level)
// catches it and skips tokens to the next boundary. Errors at a token just after a
// lexical error, or at a token that already has an error, are not reported (no cascades).
#include "syntax/parser.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "syntax/lexer.h"

namespace meshc::syntax {

namespace {

using namespace meshc::ast;

DType dtype_of(TokenKind kind) {
    switch (kind) {
    case TokenKind::KwBool: return DType::Bool;
    case TokenKind::KwI32: return DType::I32;
    case TokenKind::KwI64: return DType::I64;
    case TokenKind::KwF16: return DType::F16;
    case TokenKind::KwBF16: return DType::BF16;
    case TokenKind::KwF32: return DType::F32;
    case TokenKind::KwF64: return DType::F64;
    default: return DType::F32;
    }
}

bool is_item_keyword(TokenKind k) {
    return k == TokenKind::KwFn || k == TokenKind::KwStruct || k == TokenKind::KwMesh ||
           k == TokenKind::KwImport;
}

std::optional<CmpOp> cmp_op_of(TokenKind k) {
    switch (k) {
    case TokenKind::EqEq: return CmpOp::Eq;
    case TokenKind::NotEq: return CmpOp::Ne;
    case TokenKind::Lt: return CmpOp::Lt;
    case TokenKind::LtEq: return CmpOp::Le;
    case TokenKind::Gt: return CmpOp::Gt;
    case TokenKind::GtEq: return CmpOp::Ge;
    default: return std::nullopt;
    }
}

struct BinOpInfo {
    BinaryOp op;
    int prec;  // 1 `||`, 2 `&&`, 3 comparisons, 4 `+ -`, 5 `* / % @`
};

std::optional<BinOpInfo> binary_op_of(TokenKind k) {
    switch (k) {
    case TokenKind::OrOr: return BinOpInfo{BinaryOp::Or, 1};
    case TokenKind::AndAnd: return BinOpInfo{BinaryOp::And, 2};
    case TokenKind::EqEq: return BinOpInfo{BinaryOp::Eq, 3};
    case TokenKind::NotEq: return BinOpInfo{BinaryOp::Ne, 3};
    case TokenKind::Lt: return BinOpInfo{BinaryOp::Lt, 3};
    case TokenKind::LtEq: return BinOpInfo{BinaryOp::Le, 3};
    case TokenKind::Gt: return BinOpInfo{BinaryOp::Gt, 3};
    case TokenKind::GtEq: return BinOpInfo{BinaryOp::Ge, 3};
    case TokenKind::Plus: return BinOpInfo{BinaryOp::Add, 4};
    case TokenKind::Minus: return BinOpInfo{BinaryOp::Sub, 4};
    case TokenKind::Star: return BinOpInfo{BinaryOp::Mul, 5};
    case TokenKind::Slash: return BinOpInfo{BinaryOp::Div, 5};
    case TokenKind::Percent: return BinOpInfo{BinaryOp::Mod, 5};
    case TokenKind::At: return BinOpInfo{BinaryOp::MatMul, 5};
    default: return std::nullopt;
    }
}

class Parser {
public:
    Parser(const SourceManager& sources, FileId file, DiagnosticEngine& diags, const AutoLayouts* chosen)
        : file_(file), text_(sources.text(file)), diags_(diags), chosen_(chosen) {
        module_ = std::make_unique<Module>();
        module_->file = file;
        filter_tokens(lex(sources, file, diags));
    }

    std::unique_ptr<Module> run() {
        while (!at(TokenKind::Eof)) {
            size_t start = pos_;
            const Item* item = parse_item();
            if (item) {
                module_->items.push_back(item);
            } else {
                sync_item(start);
            }
        }
        return std::move(module_);
    }

private:
    // ------------------------------------------------------------ tokens

    // Drops error markers and doc comments from the stream. Doc comments that stand
    // before an item (at nesting depth 0) are kept aside for that item; others are E0106.
    void filter_tokens(std::vector<Token> raw) {
        tokens_.reserve(raw.size());
        int depth = 0;
        bool marker = false;
        size_t i = 0;
        while (i < raw.size()) {
            const Token& t = raw[i];
            if (t.kind == TokenKind::Error) {
                marker = true;
                ++i;
                continue;
            }
            if (t.kind == TokenKind::DocComment) {
                size_t first = i;
                std::vector<std::string_view> lines;
                while (i < raw.size() && (raw[i].kind == TokenKind::DocComment ||
                                          raw[i].kind == TokenKind::Error)) {
                    if (raw[i].kind == TokenKind::DocComment) {
                        std::string_view line = token_text(raw[i]).substr(3);
                        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
                        lines.push_back(line);
                    } else {
                        marker = true;
                    }
                    ++i;
                }
                TokenKind next = i < raw.size() ? raw[i].kind : TokenKind::Eof;
                // Not `depth == 0 &&`: after an unclosed bracket every later doc comment
                // would be reported (a cascade); a nested item is reported by the parser.
                bool before_item = is_item_keyword(next) || next == TokenKind::At;
                // `item := DOC_COMMENT* attr* ...`: a doc comment after `@name` is misplaced.
                size_t n = tokens_.size();
                bool after_attr = n >= 2 && tokens_[n - 1].kind == TokenKind::Ident &&
                                  tokens_[n - 2].kind == TokenKind::At;
                if (before_item && after_attr) {
                    Span span{file_, raw[first].begin, raw[first].end};
                    diags_.emit(DiagCode::E0106, span, "doc comment after an attribute")
                        .note("write the `///` lines before the item's attributes");
                } else if (before_item) {
                    docs_[tokens_.size()] = std::move(lines);
                } else if (depth == 0 && next == TokenKind::Ident) {
                    // Before `name ...` at the top level: the parser reports the broken item
                    // there (one error, not two).
                } else {
                    Span span{file_, raw[first].begin, raw[first].end};
                    auto& d = diags_.emit(DiagCode::E0106, span,
                                          depth == 0 ? "doc comment is not followed by an item"
                                                     : "doc comment inside a declaration");
                    d.note("`///` documents the item after it; use `//` for an ordinary comment");
                }
                continue;
            }
            switch (t.kind) {
            case TokenKind::LParen:
            case TokenKind::LBracket:
            case TokenKind::LBrace: ++depth; break;
            case TokenKind::RParen:
            case TokenKind::RBracket:
            case TokenKind::RBrace:
                if (depth > 0) --depth;
                break;
            default: break;
            }
            tokens_.push_back(t);
            after_lex_error_.push_back(marker);
            marker = false;
            ++i;
        }
    }

    std::string_view token_text(const Token& t) const {
        return text_.substr(t.begin, t.end - t.begin);
    }
    const Token& tok() const { return tokens_[pos_]; }
    const Token& peek_tok(size_t ahead) const {
        size_t i = pos_ + ahead;
        return i < tokens_.size() ? tokens_[i] : tokens_.back();
    }
    TokenKind kind() const { return tokens_[pos_].kind; }
    bool at(TokenKind k) const { return kind() == k; }
    Span tok_span() const { return Span{file_, tok().begin, tok().end}; }
    Span span_from(uint32_t begin) const {
        uint32_t end = pos_ > 0 ? tokens_[pos_ - 1].end : begin;
        if (end < begin) end = begin;
        return Span{file_, begin, end};
    }
    void bump() {
        if (pos_ + 1 < tokens_.size()) ++pos_;
    }
    bool eat(TokenKind k) {
        if (!at(k)) return false;
        bump();
        return true;
    }
    Ident ident_here() const { return Ident{token_text(tok()), tok_span()}; }

    std::string describe_current() const {
        switch (kind()) {
        case TokenKind::Ident: return fmt::format("identifier `{}`", token_text(tok()));
        case TokenKind::IntLit:
        case TokenKind::FloatLit: return fmt::format("number `{}`", token_text(tok()));
        case TokenKind::StringLit: return "string literal";
        default: return std::string(token_spelling(kind()));
        }
    }

    // Reports a syntax error at the current token unless one was already reported
    // here or the token follows a lexical error. Returns the diagnostic or nullptr.
    Diagnostic* error_here(std::string message, std::optional<Span> where = std::nullopt) {
        if (pos_ + 1 == last_error_pos_ || after_lex_error_[pos_]) return nullptr;
        last_error_pos_ = pos_ + 1;
        return &diags_.emit(DiagCode::E0104, where ? *where : tok_span(), std::move(message));
    }

    Diagnostic* expected(std::string_view what, std::optional<Span> where = std::nullopt) {
        return error_here(fmt::format("expected {}, found {}", what, describe_current()), where);
    }

    bool expect(TokenKind k, std::string_view context = {}) {
        if (eat(k)) return true;
        std::string what(token_spelling(k));
        if (!context.empty()) what = fmt::format("{} {}", what, context);
        // A missing `;` belongs just after the previous token; when the next token is on
        // a later line, point there rather than at the next statement.
        std::optional<Span> where;
        if (k == TokenKind::Semi && pos_ > 0) {
            uint32_t prev_end = tokens_[pos_ - 1].end;
            if (text_.substr(prev_end, tok().begin - prev_end).find('\n') != std::string_view::npos) {
                where = Span{file_, prev_end, prev_end};
            }
        }
        expected(what, where);
        return false;
    }

    std::optional<Ident> expect_ident(std::string_view what) {
        if (!at(TokenKind::Ident)) {
            Diagnostic* d = expected(what);
            if (d && is_keyword_token(kind())) {
                d->note(fmt::format("{} is a reserved word", token_spelling(kind())));
            }
            return std::nullopt;
        }
        Ident id = ident_here();
        bump();
        return id;
    }

    static bool is_keyword_token(TokenKind k) {
        switch (k) {
#define MESHC_TOKEN(name, spelling)
#define MESHC_KEYWORD(name, text) case TokenKind::name:
#include "syntax/token_kinds.def"
            return true;
        default: return false;
        }
    }

    // ------------------------------------------------------------ nesting guard

    struct DepthGuard {
        Parser& p;
        bool ok;
        explicit DepthGuard(Parser& parser) : p(parser), ok(++parser.depth_ <= kMaxNestingDepth) {
            if (!ok && !p.depth_reported_) {
                p.depth_reported_ = true;
                p.diags_.emit(DiagCode::E0107, p.tok_span(),
                              fmt::format("nesting deeper than {} levels", kMaxNestingDepth))
                    .note("split the expression or type into smaller parts");
            }
        }
        ~DepthGuard() { --p.depth_; }
    };

    bool check_height(Expr* e) {
        if (e->height <= kMaxExprHeight) return true;
        if (!depth_reported_) {
            depth_reported_ = true;
            diags_.emit(DiagCode::E0107, e->span,
                        fmt::format("expression nested deeper than {} levels", kMaxExprHeight))
                .note("split the expression with `let`");
        }
        return false;
    }

    // ------------------------------------------------------------ recovery

    // Whether an item keyword here looks like the start of an item: it begins a line, or
    // a name follows it (`fn f`, `import std`), unlike a misplaced word such as a field
    // named `mesh` (`mesh: f32`) or `[M: mesh]`.
    bool item_keyword_starts_item() const {
        return at_line_start() || peek_tok(1).kind == TokenKind::Ident;
    }

    // Whether the current token is an item keyword, just reported as unexpected, that is a
    // misplaced word rather than the start of the next item: recovery must not restart
    // there.
    bool at_misplaced_item_keyword() const {
        return is_item_keyword(kind()) && pos_ + 1 == last_error_pos_ && !item_keyword_starts_item();
    }

    // Skips to the next item start: an item keyword, `@` or a doc comment outside the
    // brackets that the broken item opened. An item keyword inside them (a field named
    // `import`) is an item start only when it looks like one (the broken item left a
    // bracket open, and the next item follows).
    void sync_item(size_t start) {
        if (pos_ == start || at_misplaced_item_keyword()) bump();
        int depth = 0;
        for (size_t i = start; i < pos_; ++i) depth = std::max(0, depth + bracket_delta(tokens_[i].kind));
        while (!at(TokenKind::Eof)) {
            TokenKind k = kind();
            if (is_item_keyword(k) && (depth == 0 || item_keyword_starts_item())) return;
            if (depth == 0 && (k == TokenKind::At || docs_.count(pos_))) return;
            depth = std::max(0, depth + bracket_delta(k));
            bump();
        }
    }

    static int bracket_delta(TokenKind k) {
        switch (k) {
        case TokenKind::LParen:
        case TokenKind::LBracket:
        case TokenKind::LBrace: return 1;
        case TokenKind::RParen:
        case TokenKind::RBracket:
        case TokenKind::RBrace: return -1;
        default: return 0;
        }
    }

    // Skips to the end of the current statement: past a `;` at depth 0, or before a `}`
    // closing the block, a statement keyword, or an item keyword. Braces that the failed
    // statement opened and left open (`with {B: }`, `S { a: 1;`) count as depth 0: their
    // `}` closes them, not the block, and a `;` inside them still ends the statement.
    void sync_stmt(size_t start) {
        bool moved = pos_ != start;
        if (at_misplaced_item_keyword() || at_misplaced_statement_keyword()) {
            bump();
            moved = true;
        }
        int open = 0;
        for (size_t i = start; i < pos_; ++i) {
            if (tokens_[i].kind == TokenKind::LBrace) ++open;
            if (tokens_[i].kind == TokenKind::RBrace && open > 0) --open;
        }
        int depth = open;
        while (!at(TokenKind::Eof)) {
            TokenKind k = kind();
            if (is_item_keyword(k)) return;
            if (depth <= open) {
                if (k == TokenKind::Semi) {
                    bump();
                    return;
                }
                if (k == TokenKind::RBrace && depth == 0) return;
                if (moved && is_statement_keyword(k)) return;
            }
            depth = std::max(0, depth + bracket_delta(k));
            bump();
            moved = true;
        }
    }

    static bool is_statement_keyword(TokenKind k) {
        return k == TokenKind::KwLet || k == TokenKind::KwVar || k == TokenKind::KwFor ||
               k == TokenKind::KwReturn || k == TokenKind::KwIf;
    }

    // A statement keyword just reported as unexpected that does not start its line
    // (`let var = ...`): a misplaced word, not the start of the next statement.
    bool at_misplaced_statement_keyword() const {
        if (!is_statement_keyword(kind()) || pos_ + 1 != last_error_pos_) return false;
        size_t b = tok().begin;
        while (b > 0 && (text_[b - 1] == ' ' || text_[b - 1] == '\t')) --b;
        return b > 0 && text_[b - 1] != '\n';
    }

    // ------------------------------------------------------------ lists

    // Parses `elem (, elem)* ,?` up to `close` (consumed). The opening token is already
    // consumed. Returns false after reporting an error.
    template <typename F>
    bool comma_list(TokenKind close, std::string_view what, F&& elem) {
        while (!at(close)) {
            if (!elem()) return false;
            if (eat(TokenKind::Comma)) continue;
            if (at(close)) break;
            expected(fmt::format("`,` or {} in {}", token_spelling(close), what));
            return false;
        }
        bump();
        return true;
    }

    // ------------------------------------------------------------ items

    const Item* parse_item() {
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

    bool parse_import(Item& item) {
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

    bool parse_mesh(Item& item) {
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

    bool parse_generics(std::vector<GenericParam>& out) {
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

    bool parse_named_types(std::vector<Param>& out, TokenKind close, std::string_view what) {
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

    bool parse_struct(Item& item) {
        item.kind = ItemKind::Struct;
        bump();
        auto name = expect_ident("a struct name after `struct`");
        if (!name) return false;
        item.name = *name;
        if (!parse_generics(item.generics)) return false;
        if (!expect(TokenKind::LBrace, "to start the struct's fields")) return false;
        return parse_named_types(item.fields, TokenKind::RBrace, "the struct's fields");
    }

    /// `! nocomm` or `! comm(axis [<= dim], ...)`; `nocomm` and `comm` are names here only.
    bool parse_effect(Effect& effect) {
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

    bool parse_fn(Item& item) {
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

    // ------------------------------------------------------------ dims and types

    const Dim* parse_dim() { return parse_dim_sum(); }

    // `begin`: where the left operand starts, which may be a `(` before lhs->span.
    const Dim* make_dim_binary(DimOp op, const Dim* lhs, const Dim* rhs, uint32_t begin) {
        Dim d{DimKind::Binary, span_from(begin)};
        d.op = op;
        d.lhs = lhs;
        d.rhs = rhs;
        return module_->make(d);
    }

    const Dim* parse_dim_sum() {
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

    const Dim* parse_dim_product() {
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

    const Dim* parse_dim_atom() {
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

    bool parse_dim_list(std::vector<const Dim*>& out, std::string_view what) {
        return comma_list(TokenKind::RBracket, what, [&] {
            const Dim* d = parse_dim();
            if (!d) return false;
            out.push_back(d);
            return true;
        });
    }

    // The solver's layout text for a `with auto` (see AutoLayouts): `_`, or `{KEY: AXIS,
    // KEY: (AXIS, AXIS), ...}` with KEY a name or a position. Names point into `text`.
    void read_chosen_layout(Type& t, const std::string& text) {
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

    const Layout* parse_layout() {
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

    const Type* parse_type() {
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

    // ------------------------------------------------------------ statements

    const Block* parse_block() {
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

    // Whether the current token starts its line at column 1 (an item or attribute there
    // is taken to start a new item: the block before it lacks its `}`).
    bool at_line_start() const {
        uint32_t b = tok().begin;
        return b == 0 || text_[b - 1] == '\n';
    }

    const Stmt* make_expr_stmt(const Expr* e) {
        Stmt s{StmtKind::Expr, e->span};
        s.value = e;
        return module_->make(std::move(s));
    }

    // Parses one statement into `block` (or its tail). Returns false after an error.
    bool parse_stmt(Block& block) {
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

    // Ends a `let` or `var` statement and adds it to `block`. Without the `;`, the error
    // is reported and the statement is kept all the same: it is complete, and dropping
    // it would make the name it binds unknown further on (a cascade).
    bool end_stmt(Block& block, Stmt s, uint32_t begin, std::string_view context) {
        bool ok = expect(TokenKind::Semi, context);
        s.span = span_from(begin);
        block.stmts.push_back(module_->make(std::move(s)));
        return ok;
    }

    // A `let` that failed after its pattern: its names are known to exist.
    void recover_pattern_names(const Pattern& p) {
        if (p.kind == PatternKind::Name) module_->recovered_names.push_back(p.name.name);
        for (const Pattern* e : p.elements) recover_pattern_names(*e);
    }

    const Pattern* parse_pattern() {
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

    // ------------------------------------------------------------ expressions

    // `no_struct`: a struct literal may not appear at the top level (if conditions and
    // for ranges), so that `if c { ... }` never reads `c { ... }` as a struct literal.
    const Expr* parse_expr(bool no_struct) {
        DepthGuard guard(*this);
        if (!guard.ok) return nullptr;
        return parse_binary(1, no_struct);
    }

    // Spans run from the first token of the left operand to the last token consumed, so
    // they cover parentheses around an operand (a parenthesised expression is its inner
    // node, whose span excludes them).
    const Expr* parse_binary(int min_prec, bool no_struct) {
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

    const Expr* parse_unary(bool no_struct) {
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

    const Expr* parse_postfix(bool no_struct) {
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

    bool parse_args(std::vector<Arg>& args) {
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

    const Expr* parse_primary(bool no_struct) {
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

    const Expr* parse_struct_literal(Ident name) {
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

    const Expr* parse_if() {
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

    FileId file_;
    std::string_view text_;
    DiagnosticEngine& diags_;
    const AutoLayouts* chosen_ = nullptr;
    std::unique_ptr<Module> module_;
    std::vector<Token> tokens_;
    std::vector<bool> after_lex_error_;
    std::unordered_map<size_t, std::vector<std::string_view>> docs_;
    size_t pos_ = 0;
    size_t last_error_pos_ = 0;  // 1 + index of the token with the last syntax error
    int depth_ = 0;
    bool depth_reported_ = false;
};

}  // namespace

std::unique_ptr<ast::Module> parse_file(const SourceManager& sources, FileId file,
                                        DiagnosticEngine& diags, const AutoLayouts* chosen) {
    return Parser(sources, file, diags, chosen).run();
}

}  // namespace meshc::syntax

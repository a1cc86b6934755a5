// The parser's class, shared by the files that define its parts (src/syntax/parser.h is
// the interface): parser.cpp (tokens, items, dims and types), parse_stmt_expr.cpp
// (statements, patterns and expressions). Internal to src/syntax/.
#pragma once

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "syntax/lexer.h"
#include "syntax/parser.h"

namespace meshc::syntax::detail {


using namespace meshc::ast;

inline DType dtype_of(TokenKind kind) {
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

inline bool is_item_keyword(TokenKind k) {
    return k == TokenKind::KwFn || k == TokenKind::KwStruct || k == TokenKind::KwMesh ||
           k == TokenKind::KwImport;
}

inline std::optional<CmpOp> cmp_op_of(TokenKind k) {
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

inline std::optional<BinOpInfo> binary_op_of(TokenKind k) {
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
    const Item* parse_item();
    bool parse_import(Item& item);
    bool parse_mesh(Item& item);
    bool parse_generics(std::vector<GenericParam>& out);
    bool parse_named_types(std::vector<Param>& out, TokenKind close, std::string_view what);
    bool parse_struct(Item& item);
    /// `! nocomm` or `! comm(axis [<= dim], ...)`; `nocomm` and `comm` are names here only.
    bool parse_effect(Effect& effect);
    bool parse_fn(Item& item);
    // ------------------------------------------------------------ dims and types
    const Dim* parse_dim();
    // `begin`: where the left operand starts, which may be a `(` before lhs->span.
    const Dim* make_dim_binary(DimOp op, const Dim* lhs, const Dim* rhs, uint32_t begin);
    const Dim* parse_dim_sum();
    const Dim* parse_dim_product();
    const Dim* parse_dim_atom();
    bool parse_dim_list(std::vector<const Dim*>& out, std::string_view what);
    // The solver's layout text for a `with auto` (see AutoLayouts): `_`, or `{KEY: AXIS,
    // KEY: (AXIS, AXIS), ...}` with KEY a name or a position. Names point into `text`.
    void read_chosen_layout(Type& t, const std::string& text);
    const Layout* parse_layout();
    const Type* parse_type();

    // ------------------------------------------------------------ statements
    const Block* parse_block();
    // Whether the current token starts its line at column 1 (an item or attribute there
    // is taken to start a new item: the block before it lacks its `}`).
    bool at_line_start() const;
    const Stmt* make_expr_stmt(const Expr* e);
    // Parses one statement into `block` (or its tail). Returns false after an error.
    bool parse_stmt(Block& block);
    // Ends a `let` or `var` statement and adds it to `block`. Without the `;`, the error
    // is reported and the statement is kept all the same: it is complete, and dropping
    // it would make the name it binds unknown further on (a cascade).
    bool end_stmt(Block& block, Stmt s, uint32_t begin, std::string_view context);
    // A `let` that failed after its pattern: its names are known to exist.
    void recover_pattern_names(const Pattern& p);
    const Pattern* parse_pattern();
    // ------------------------------------------------------------ expressions
    // `no_struct`: a struct literal may not appear at the top level (if conditions and
    // for ranges), so that `if c { ... }` never reads `c { ... }` as a struct literal.
    const Expr* parse_expr(bool no_struct);
    // Spans run from the first token of the left operand to the last token consumed, so
    // they cover parentheses around an operand (a parenthesised expression is its inner
    // node, whose span excludes them).
    const Expr* parse_binary(int min_prec, bool no_struct);
    const Expr* parse_unary(bool no_struct);
    const Expr* parse_postfix(bool no_struct);
    bool parse_args(std::vector<Arg>& args);
    const Expr* parse_primary(bool no_struct);
    const Expr* parse_struct_literal(Ident name);
    const Expr* parse_if();

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

}  // namespace meshc::syntax::detail

// Hand-written lexer; see lexer.h. Mirrors grammar/lexer.re (the reference lexer):
// the conformance test keeps the two in agreement.
#include "syntax/lexer.h"

#include <cstdlib>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

namespace meshc::syntax {

namespace {

struct Keyword {
    std::string_view text;
    TokenKind kind;
};

constexpr Keyword kKeywords[] = {
#define MESHC_TOKEN(name, spelling)
#define MESHC_KEYWORD(name, text) {text, TokenKind::name},
#include "syntax/token_kinds.def"
};

bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

class Lexer {
public:
    Lexer(const SourceManager& sources, FileId file, DiagnosticEngine& diags)
        : file_(file), text_(sources.text(file)), diags_(diags) {}

    std::vector<Token> run() {
        std::vector<Token> tokens;
        if (text_.size() > kMaxSourceBytes) {
            diags_.emit(DiagCode::E0111, Span{file_, 0, 0},
                        fmt::format("source file is {} bytes; the limit is {} bytes",
                                    text_.size(), kMaxSourceBytes));
            tokens.push_back(Token{TokenKind::Eof, 0, 0});
            return tokens;
        }
        tokens.reserve(text_.size() / 4 + 1);
        // Error tokens stay in the stream as markers: the parser drops them and does not
        // report a syntax error at the token right after one (no cascades).
        while (true) {
            Token t = next();
            if (marker_before_) {
                tokens.push_back(Token{TokenKind::Error, t.begin, t.begin});
                marker_before_ = false;
            }
            tokens.push_back(t);
            if (marker_after_) {
                tokens.push_back(Token{TokenKind::Error, t.end, t.end});
                marker_after_ = false;
            }
            if (t.kind == TokenKind::Eof) break;
        }
        return tokens;
    }

private:
    char peek(size_t ahead = 0) const {
        return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
    }
    bool at_end(size_t ahead = 0) const { return pos_ + ahead >= text_.size(); }
    Span span(size_t begin, size_t end) const {
        return Span{file_, static_cast<uint32_t>(begin), static_cast<uint32_t>(end)};
    }
    Token make(TokenKind kind, size_t begin) const {
        return Token{kind, static_cast<uint32_t>(begin), static_cast<uint32_t>(pos_)};
    }

    // Skips whitespace and ordinary comments. Stops before a doc comment.
    void skip_trivia() {
        while (!at_end()) {
            char c = peek();
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                ++pos_;
            } else if (c == '/' && peek(1) == '/') {
                if (peek(2) == '/' && peek(3) != '/') return;  // doc comment
                while (!at_end() && peek() != '\n') ++pos_;
            } else if (c == '/' && peek(1) == '*') {
                skip_block_comment();
            } else {
                return;
            }
        }
    }

    void skip_block_comment() {
        size_t begin = pos_;
        pos_ += 2;
        int depth = 1;
        while (!at_end()) {
            if (peek() == '/' && peek(1) == '*') {
                pos_ += 2;
                ++depth;
            } else if (peek() == '*' && peek(1) == '/') {
                pos_ += 2;
                if (--depth == 0) return;
            } else {
                ++pos_;
            }
        }
        marker_before_ = true;
        diags_.emit(DiagCode::E0103, span(begin, begin + 2),
                    "unterminated block comment")
            .note("`/* */` comments nest: every `/*` needs its own `*/`");
    }

    Token next() {
        skip_trivia();
        size_t begin = pos_;
        if (at_end()) return make(TokenKind::Eof, begin);
        char c = peek();
        if (c == '/' && peek(1) == '/' && peek(2) == '/') {
            while (!at_end() && peek() != '\n') ++pos_;
            return make(TokenKind::DocComment, begin);
        }
        if (is_ident_start(c)) return identifier(begin);
        if (is_digit(c)) return number(begin);
        if (c == '"') return string(begin);
        ++pos_;
        switch (c) {
        case '(': return make(TokenKind::LParen, begin);
        case ')': return make(TokenKind::RParen, begin);
        case '[': return make(TokenKind::LBracket, begin);
        case ']': return make(TokenKind::RBracket, begin);
        case '{': return make(TokenKind::LBrace, begin);
        case '}': return make(TokenKind::RBrace, begin);
        case ',': return make(TokenKind::Comma, begin);
        case ':': return make(TokenKind::Colon, begin);
        case ';': return make(TokenKind::Semi, begin);
        case '+': return make(TokenKind::Plus, begin);
        case '*': return make(TokenKind::Star, begin);
        case '/': return make(TokenKind::Slash, begin);
        case '%': return make(TokenKind::Percent, begin);
        case '@': return make(TokenKind::At, begin);
        case '.':
            if (peek() == '.') { ++pos_; return make(TokenKind::DotDot, begin); }
            return make(TokenKind::Dot, begin);
        case '-':
            if (peek() == '>') { ++pos_; return make(TokenKind::Arrow, begin); }
            return make(TokenKind::Minus, begin);
        case '=':
            if (peek() == '=') { ++pos_; return make(TokenKind::EqEq, begin); }
            return make(TokenKind::Assign, begin);
        case '!':
            if (peek() == '=') { ++pos_; return make(TokenKind::NotEq, begin); }
            return make(TokenKind::Bang, begin);
        case '<':
            if (peek() == '=') { ++pos_; return make(TokenKind::LtEq, begin); }
            return make(TokenKind::Lt, begin);
        case '>':
            if (peek() == '=') { ++pos_; return make(TokenKind::GtEq, begin); }
            return make(TokenKind::Gt, begin);
        case '&':
            if (peek() == '&') { ++pos_; return make(TokenKind::AndAnd, begin); }
            break;
        case '|':
            if (peek() == '|') { ++pos_; return make(TokenKind::OrOr, begin); }
            break;
        default: break;
        }
        return invalid_character(begin);
    }

    Token invalid_character(size_t begin) {
        // A run of invalid bytes is one diagnostic (a UTF-8 sequence, a stray binary blob).
        pos_ = begin;
        char first = peek();
        size_t end = begin + 1;
        while (end < text_.size() && static_cast<unsigned char>(text_[end]) >= 0x80) ++end;
        if (first == '\'') {
            // A single-quoted string ('x.npy'): one diagnostic for the whole of it, so that
            // its contents are not read as names.
            size_t close = text_.find_first_of("'\n", begin + 1);
            if (close != std::string_view::npos && text_[close] == '\'') end = close + 1;
        }
        pos_ = end;
        std::string shown;
        unsigned char u = static_cast<unsigned char>(first);
        if (u >= 0x20 && u < 0x7f) {
            shown = fmt::format("`{}`", first);
        } else {
            shown = fmt::format("byte 0x{:02x}", u);
        }
        auto& d = diags_.emit(DiagCode::E0101, span(begin, end),
                              fmt::format("invalid character {} in source", shown));
        if (first == '&') d.note("logical and is `&&`");
        if (first == '|') d.note("logical or is `||`");
        if (first == '\'') d.note("string literals are written in double quotes: `\"...\"`");
        if (u >= 0x80) d.note("non-ASCII text is allowed only in comments and strings");
        return make(TokenKind::Error, begin);
    }

    Token identifier(size_t begin) {
        while (!at_end() && is_ident_char(peek())) ++pos_;
        std::string_view word = text_.substr(begin, pos_ - begin);
        if (word == "_") return make(TokenKind::Underscore, begin);
        // Most identifiers are not keywords: a hash lookup instead of comparing with each.
        static const std::unordered_map<std::string_view, TokenKind> kByText = [] {
            std::unordered_map<std::string_view, TokenKind> m;
            for (const Keyword& k : kKeywords) m.emplace(k.text, k.kind);
            return m;
        }();
        if (word.size() <= 7) {
            if (auto it = kByText.find(word); it != kByText.end()) return make(it->second, begin);
        }
        return make(TokenKind::Ident, begin);
    }

    // digits := [0-9]+ ('_' [0-9]+)*
    void digits() {
        while (is_digit(peek())) ++pos_;
        while (peek() == '_' && is_digit(peek(1))) {
            ++pos_;
            while (is_digit(peek())) ++pos_;
        }
    }

    bool exponent_follows() const {
        if (peek() != 'e' && peek() != 'E') return false;
        if (is_digit(peek(1))) return true;
        return (peek(1) == '+' || peek(1) == '-') && is_digit(peek(2));
    }

    void exponent() {
        ++pos_;
        if (peek() == '+' || peek() == '-') ++pos_;
        while (is_digit(peek())) ++pos_;
    }

    Token number(size_t begin) {
        digits();
        bool is_float = false;
        if (peek() == '.' && is_digit(peek(1))) {
            ++pos_;
            digits();
            is_float = true;
        }
        if (exponent_follows()) {
            exponent();
            is_float = true;
        }
        if (is_float) return make(TokenKind::FloatLit, begin);
        std::string_view text = text_.substr(begin, pos_ - begin);
        if (!int_literal_fits(text)) {
            diags_.emit(DiagCode::E0105, span(begin, pos_),
                        fmt::format("integer literal `{}` does not fit in 64 bits", text))
                .note("the largest integer literal is 9223372036854775807");
        }
        return make(TokenKind::IntLit, begin);
    }

    Token string(size_t begin) {
        ++pos_;  // opening quote
        while (true) {
            if (at_end() || peek() == '\n') {
                marker_after_ = true;
                diags_.emit(DiagCode::E0102, span(begin, begin + 1),
                            "unterminated string literal")
                    .note("a string literal must end on the line where it starts");
                return make(TokenKind::StringLit, begin);
            }
            char c = peek();
            if (c == '"') {
                ++pos_;
                return make(TokenKind::StringLit, begin);
            }
            if (c == '\\') {
                char e = peek(1);
                if (e == '"' || e == '\\' || e == 'n') {
                    pos_ += 2;
                    continue;
                }
                if (at_end(1) || e == '\n') {
                    ++pos_;  // the string is unterminated: one error for it, no escape error
                    continue;
                }
                size_t esc_end = pos_ + 2;
                diags_.emit(DiagCode::E0108, span(pos_, esc_end),
                            "invalid escape sequence in string literal")
                    .note("the escapes are `\\\"`, `\\\\` and `\\n`");
                pos_ = esc_end;
                continue;
            }
            ++pos_;
        }
    }

    FileId file_;
    std::string_view text_;
    DiagnosticEngine& diags_;
    size_t pos_ = 0;
    bool marker_before_ = false;  // an error marker goes before the next token
    bool marker_after_ = false;   // ... after the token being lexed
};

}  // namespace

std::string_view token_spelling(TokenKind kind) {
    switch (kind) {
#define MESHC_TOKEN(name, spelling) \
    case TokenKind::name: return spelling;
#include "syntax/token_kinds.def"
    }
    return "token";
}

bool is_dtype_keyword(TokenKind kind) {
    switch (kind) {
#define MESHC_TOKEN(name, spelling)
#define MESHC_KEYWORD(name, text)
#define MESHC_DTYPE(name, text) case TokenKind::name:
#include "syntax/token_kinds.def"
        return true;
    default: return false;
    }
}

std::vector<Token> lex(const SourceManager& sources, FileId file, DiagnosticEngine& diags) {
    return Lexer(sources, file, diags).run();
}

bool int_literal_fits(std::string_view text) {
    uint64_t value = 0;
    for (char ch : text) {
        if (ch == '_') continue;
        uint64_t digit = static_cast<uint64_t>(ch - '0');
        if (value > (static_cast<uint64_t>(INT64_MAX) - digit) / 10) return false;
        value = value * 10 + digit;
    }
    return true;
}

int64_t int_literal_value(std::string_view text) {
    // Too large: reported by the lexer. The largest value keeps later checks (a mesh axis
    // size must be at least 1) from reporting a second error for the same literal.
    if (!int_literal_fits(text)) return INT64_MAX;
    int64_t value = 0;
    for (char c : text) {
        if (c != '_') value = value * 10 + (c - '0');
    }
    return value;
}

double float_literal_value(std::string_view text) {
    std::string clean;
    for (char c : text) {
        if (c != '_') clean.push_back(c);
    }
    return std::strtod(clean.c_str(), nullptr);
}

std::string string_literal_value(std::string_view text) {
    std::string out;
    if (text.size() >= 1) text.remove_prefix(1);
    if (!text.empty() && text.back() == '"') text.remove_suffix(1);
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
            char e = text[++i];
            out.push_back(e == 'n' ? '\n' : e);
        } else {
            out.push_back(text[i]);
        }
    }
    return out;
}

}  // namespace meshc::syntax

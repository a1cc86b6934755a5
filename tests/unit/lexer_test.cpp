// Unit tests for the lexer: token kinds, literal edge cases, comments, errors.
#include <catch2/catch.hpp>

#include "syntax/lexer.h"

using namespace meshc;
using namespace meshc::syntax;

namespace {

struct Lexed {
    std::vector<TokenKind> kinds;
    std::vector<std::string> texts;
    std::vector<std::string> codes;
};

Lexed run(const std::string& text) {
    SourceManager sm;
    DiagnosticEngine diags;
    FileId f = sm.add_file("t.msh", text);
    Lexed out;
    for (const Token& t : lex(sm, f, diags)) {
        if (t.kind == TokenKind::Eof || t.kind == TokenKind::Error) continue;
        out.kinds.push_back(t.kind);
        out.texts.emplace_back(text.substr(t.begin, t.end - t.begin));
    }
    for (const Diagnostic& d : diags.diagnostics()) {
        out.codes.emplace_back(diag_code_info(d.code).name);
    }
    return out;
}

}  // namespace

TEST_CASE("ranges and floats", "[lexer]") {
    auto l = run("0..3 1.5 2e9 3e-4 1.0e+2 1_000 1. .5");
    CHECK(l.texts == std::vector<std::string>{"0", "..", "3", "1.5", "2e9", "3e-4", "1.0e+2",
                                              "1_000", "1", ".", ".", "5"});
    CHECK(l.kinds[3] == TokenKind::FloatLit);
    CHECK(l.kinds[4] == TokenKind::FloatLit);
    CHECK(l.kinds[7] == TokenKind::IntLit);
    CHECK(l.codes.empty());
}

TEST_CASE("literal values", "[lexer]") {
    CHECK(int_literal_value("1_000") == 1000);
    CHECK(int_literal_value("9223372036854775807") == INT64_MAX);
    CHECK(float_literal_value("2.5e9") == 2.5e9);
    CHECK(float_literal_value("1_0.5") == 10.5);
    CHECK(string_literal_value(R"("a\"b\\c\n")") == "a\"b\\c\n");
}

TEST_CASE("keywords, dtypes, identifiers and underscore", "[lexer]") {
    auto l = run("fn Tensor f32 bf16 _ _x x_1 Mesh partial");
    CHECK(l.kinds == std::vector<TokenKind>{TokenKind::KwFn, TokenKind::KwTensor, TokenKind::KwF32,
                                            TokenKind::KwBF16, TokenKind::Underscore,
                                            TokenKind::Ident, TokenKind::Ident, TokenKind::Ident,
                                            TokenKind::KwPartial});
}

TEST_CASE("punctuation uses longest match", "[lexer]") {
    auto l = run("-> == != <= >= && || .. = < > ! @ %");
    CHECK(l.kinds == std::vector<TokenKind>{TokenKind::Arrow, TokenKind::EqEq, TokenKind::NotEq,
                                            TokenKind::LtEq, TokenKind::GtEq, TokenKind::AndAnd,
                                            TokenKind::OrOr, TokenKind::DotDot, TokenKind::Assign,
                                            TokenKind::Lt, TokenKind::Gt, TokenKind::Bang,
                                            TokenKind::At, TokenKind::Percent});
}

TEST_CASE("comments: nested block, line, doc", "[lexer]") {
    auto l = run("a /* x /* y */ z */ b // c\n/// doc\n//// not doc\nd");
    CHECK(l.kinds == std::vector<TokenKind>{TokenKind::Ident, TokenKind::Ident,
                                            TokenKind::DocComment, TokenKind::Ident});
    CHECK(l.codes.empty());
}

TEST_CASE("lexical errors", "[lexer]") {
    CHECK(run("a # b").codes == std::vector<std::string>{"E0101"});
    CHECK(run("a & b").codes == std::vector<std::string>{"E0101"});
    CHECK(run("\"abc\nd").codes == std::vector<std::string>{"E0102"});
    CHECK(run("/* /* */").codes == std::vector<std::string>{"E0103"});
    CHECK(run("9223372036854775808").codes == std::vector<std::string>{"E0105"});
    CHECK(run(R"("a\tb")").codes == std::vector<std::string>{"E0108"});
    CHECK(run("x \xc3\xa9 y").codes == std::vector<std::string>{"E0101"});  // one per UTF-8 run
}

TEST_CASE("oversized file is rejected", "[lexer]") {
    std::string big(kMaxSourceBytes + 1, ' ');
    CHECK(run(big).codes == std::vector<std::string>{"E0111"});
}

// Unit tests for the parser's structure decisions and its error recovery.
#include <catch2/catch.hpp>

#include <sstream>

#include "syntax/ast_printer.h"
#include "syntax/parser.h"

using namespace meshc;

namespace {

struct Parsed {
    std::string ast;
    std::vector<std::string> codes;
};

Parsed parse(const std::string& text) {
    SourceManager sm;
    DiagnosticEngine diags;
    FileId f = sm.add_file("t.msh", text);
    auto module = syntax::parse_file(sm, f, diags);
    std::ostringstream out;
    syntax::print_ast(out, sm, *module);
    Parsed p{out.str(), {}};
    for (const Diagnostic& d : diags.diagnostics()) p.codes.emplace_back(diag_code_info(d.code).name);
    return p;
}

}  // namespace

TEST_CASE("precedence: unary binds tighter than *, * tighter than +", "[parser]") {
    auto p = parse("fn f() { -a * b + c @ d; }");
    CHECK(p.codes.empty());
    auto plus = p.ast.find("Binary +");
    auto mul = p.ast.find("Binary *");
    auto neg = p.ast.find("Unary -");
    auto matmul = p.ast.find("Binary @");
    REQUIRE(plus != std::string::npos);
    CHECK(plus < mul);
    CHECK(mul < neg);
    CHECK(neg < matmul);
}

TEST_CASE("if with else at the end of a block is its value", "[parser]") {
    auto p = parse("fn f() -> f32 { if c { 1.0 } else { 2.0 } }");
    CHECK(p.codes.empty());
    CHECK(p.ast.find("Tail") != std::string::npos);
}

TEST_CASE("struct literal is not read in an if condition", "[parser]") {
    auto p = parse("fn f() { if c { x: 1 } }");
    CHECK(p.codes == std::vector<std::string>{"E0104"});
    auto q = parse("fn f() { if (S { x: 1 }) == y { } }");
    CHECK(q.codes.empty());
}

TEST_CASE("chained comparisons are an error, reported once", "[parser]") {
    CHECK(parse("fn f() { let x = a < b < c; }").codes == std::vector<std::string>{"E0109"});
}

TEST_CASE("recovery: independent errors reported once each", "[parser]") {
    auto p = parse(
        "fn f() {\n"
        "  let x = ;\n"
        "  let y = 1\n"
        "  let z = (2;\n"
        "  let w = 3;\n"
        "}\n"
        "fn g( { }\n"
        "fn h() { }\n");
    CHECK(p.codes == std::vector<std::string>{"E0104", "E0104", "E0104", "E0104"});
    CHECK(p.ast.find("Fn h") != std::string::npos);
    CHECK(p.ast.find("PatName w") != std::string::npos);
}

TEST_CASE("no cascade after a lexical error", "[parser]") {
    CHECK(parse("fn f() { let x = 1 # 2; }").codes == std::vector<std::string>{"E0101"});
    CHECK(parse("fn f() { print(\"abc); }\nfn g() {}").codes.size() <= 2);
}

TEST_CASE("deep nesting gives a diagnostic, not a crash", "[parser]") {
    std::string deep = "fn f() { let x = " + std::string(100000, '(') + "1" +
                       std::string(100000, ')') + "; }";
    CHECK(parse(deep).codes == std::vector<std::string>{"E0107"});
    std::string unary = "fn f() { let x = " + std::string(100000, '-') + "1; }";
    CHECK(parse(unary).codes == std::vector<std::string>{"E0107"});
    std::string chain = "fn f() { let x = 1";
    for (int i = 0; i < 5000; ++i) chain += " + 1";
    chain += "; }";
    CHECK(parse(chain).codes == std::vector<std::string>{"E0107"});
}

TEST_CASE("doc comments only before items", "[parser]") {
    CHECK(parse("/// doc\nfn f() {}").codes.empty());
    CHECK(parse("fn f() {\n/// doc\n}").codes == std::vector<std::string>{"E0106"});
    CHECK(parse("fn f() {}\n/// dangling").codes == std::vector<std::string>{"E0106"});
}

TEST_CASE("named arguments come after positional ones", "[parser]") {
    CHECK(parse("fn f() { g(axis: 1, x); }").codes == std::vector<std::string>{"E0110"});
    CHECK(parse("fn f() { g(x, axis: 1, over: (a, b)); }").codes.empty());
}

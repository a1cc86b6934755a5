// Unit tests for dim expressions in normal form (sema/dims_from_ast.h): equality up to
// commutativity and distribution, exact and floor division, `%` atoms, substitution,
// evaluation, overflow, printing and the conversion from parsed dims.
#include <catch2/catch.hpp>

#include <deque>

#include "sema/dims_from_ast.h"
#include "syntax/ast.h"

using namespace meshc;
using namespace meshc::sema;

namespace {

DimExpr k(int64_t v) { return DimExpr::constant(v); }
DimExpr operator+(const DimExpr& a, const DimExpr& b) { return add(a, b).value(); }
DimExpr operator-(const DimExpr& a, const DimExpr& b) { return sub(a, b).value(); }
DimExpr operator*(const DimExpr& a, const DimExpr& b) { return mul(a, b).value(); }

struct Fixture {
    SymbolTable st;
    DimExpr B = DimExpr::symbol(st.add_size_var("B"));
    DimExpr S = DimExpr::symbol(st.add_size_var("S"));
    DimExpr D = DimExpr::symbol(st.add_size_var("D"));
    DimExpr H = DimExpr::symbol(st.add_size_var("H"));
    DimExpr m = DimExpr::symbol(st.add_axis_size("M", "data"));

    DimExpr div(const DimExpr& a, const DimExpr& b) { return floor_div(a, b, st).value(); }
    DimExpr rem(const DimExpr& a, const DimExpr& b) { return mod(a, b, st).value(); }
    std::string str(const DimExpr& e) { return e.to_string(st); }
    int64_t eval(const DimExpr& e, std::initializer_list<std::pair<DimExpr, int64_t>> values) {
        Assignment a;
        for (const auto& [s, v] : values) a.set(*s.as_symbol(), v);
        return evaluate(e, st, a).value();
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "products and sums are commutative and distribute", "[dim]") {
    CHECK(S * D == D * S);
    CHECK((S * D).hash() == (D * S).hash());
    CHECK(k(2) * (B + k(1)) == k(2) * B + k(2));
    CHECK((B + S) * (B - S) == B * B - S * S);
    CHECK(B + S + D == D + (S + B));
    CHECK(B - B == k(0));
    CHECK((B - B).is_zero());
    CHECK((B - B).constant_value() == 0);
    CHECK(!(B + k(1)).is_constant());
    CHECK((k(3) * k(4)).constant_value() == 12);
    CHECK((B * B * S).degree() == 3);
    CHECK((k(4) * B + k(6) * S).content() == 2);
    CHECK(B.as_symbol().has_value());
    CHECK(!(k(2) * B).as_symbol().has_value());
}

TEST_CASE_METHOD(Fixture, "printing is canonical and independent of interning order", "[dim]") {
    CHECK(str(k(2) * B * S + D) == "2*B*S + D");
    CHECK(str(D + S * B * k(2)) == "2*B*S + D");
    CHECK(str(B * B) == "B*B");
    CHECK(str(k(0)) == "0");
    CHECK(str(k(-3)) == "-3");
    CHECK(str(k(0) - B + k(2)) == "-B + 2");
    CHECK(str(B - k(1)) == "B - 1");
    CHECK(str(k(3) * m * B - S) == "3*B*M.data - S");

    // The same expression over symbols created in the opposite order prints the same.
    SymbolTable other;
    DimExpr s2 = DimExpr::symbol(other.add_size_var("S"));
    DimExpr b2 = DimExpr::symbol(other.add_size_var("B"));
    DimExpr d2 = DimExpr::symbol(other.add_size_var("D"));
    CHECK((k(2) * b2 * s2 + d2).to_string(other) == "2*B*S + D");
}

TEST_CASE_METHOD(Fixture, "exact division by constants, monomials and polynomials", "[dim]") {
    CHECK(div(k(2) * B * S, k(2) * S) == B);
    CHECK(div(k(6) * B + k(4), k(2)) == k(3) * B + k(2));
    CHECK(div(B * B - k(1), B - k(1)) == B + k(1));
    CHECK(div(B * S + B * D, S + D) == B);
    CHECK(exact_quotient(B * B - k(1), B + k(1)) == B - k(1));
    CHECK(!exact_quotient(B + k(1), k(2)).has_value());
    CHECK(!exact_quotient(B, S).has_value());
    CHECK(!exact_quotient(B * B + k(1), B + k(1)).has_value());
    CHECK(!exact_quotient(B, k(0)).has_value());
}

TEST_CASE_METHOD(Fixture, "inexact division leaves floor atoms in normal form", "[dim]") {
    DimExpr half = div(B + k(1), k(2));
    CHECK(str(half) == "floor((B + 1) / 2)");
    CHECK(st.is_atom(*half.as_symbol()));
    // Interned: built twice, the same atom.
    CHECK(div(B + k(1), k(2)) == half);
    // The common constant factor is cancelled: floor((2B + 2) / 4) == floor((B + 1) / 2).
    CHECK(div(k(2) * B + k(2), k(4)) == half);
    // Divisible terms leave the floor: floor((2B + 1) / 2) == B.
    CHECK(div(k(2) * B + k(1), k(2)) == B);
    CHECK(div(k(4) * B + k(1), k(2)) == k(2) * B);
    CHECK(str(div(B * m + S, m)) == "B + floor(S / M.data)");
    CHECK(str(div(B, k(2) * m)) == "floor(B / (2*M.data))");
    // A negative divisor: floor(B / -2) == -B + floor(B / 2).
    DimExpr neg = div(B, k(-2));
    for (int64_t b : {1, 2, 3, 7, 8}) CHECK(eval(neg, {{B, b}}) == (b % 2 == 0 ? -b / 2 : -b / 2 - 1));
    // Ground division floors (NumPy).
    CHECK(div(k(7), k(2)) == k(3));
    CHECK(div(k(-7), k(2)) == k(-4));
    CHECK(div(k(7), k(-2)) == k(-4));
}

TEST_CASE_METHOD(Fixture, "mod is decided when ground or divisible, else an atom", "[dim]") {
    CHECK(rem(B * m, m) == k(0));
    CHECK(rem(k(4) * B, k(2)) == k(0));
    CHECK(rem(B, k(1)) == k(0));
    CHECK(rem(k(7), k(3)) == k(1));
    CHECK(rem(k(-7), k(3)) == k(2));   // sign of the divisor
    CHECK(rem(k(7), k(-3)) == k(-2));
    CHECK(str(rem(B, k(2) * m)) == "B % (2*M.data)");
    CHECK(str(rem(k(3) * B + k(5), k(2))) == "(B + 1) % 2");
    CHECK(rem(B + k(4), k(4)) == rem(B, k(4)));
    CHECK(str(rem(k(2) * B, k(4))) == "2*(B % 2)");
    CHECK(str(k(3) * rem(B + k(1), m * S)) == "3*((B + 1) % (M.data*S))");
    // Values agree with the definition a - b*floor(a/b).
    DimExpr r = rem(k(3) * B + k(5), k(2));
    for (int64_t b : {1, 2, 3, 10}) CHECK(eval(r, {{B, b}}) == (3 * b + 5) % 2);
}

TEST_CASE_METHOD(Fixture, "division by zero and overflow are errors, not UB", "[dim]") {
    auto z = floor_div(B, k(0), st);
    REQUIRE(!z.ok());
    CHECK(z.error().kind == DimErrorKind::DivisionByZero);
    CHECK(mod(k(3), k(0), st).error().kind == DimErrorKind::DivisionByZero);

    DimExpr big = k(INT64_MAX);
    CHECK(add(big, k(1)).error().kind == DimErrorKind::Overflow);
    CHECK(mul(big * B, k(2)).error().kind == DimErrorKind::Overflow);
    CHECK(negate(k(INT64_MIN)).error().kind == DimErrorKind::Overflow);
    CHECK(sub(k(INT64_MIN), k(1)).error().kind == DimErrorKind::Overflow);
    CHECK(floor_div(k(INT64_MIN), k(-1), st).error().kind == DimErrorKind::Overflow);
    CHECK(add(big, k(-1)).ok());

    // Evaluation overflows too: B*B*B*B at B = 2^20.
    Assignment a;
    a.set(*B.as_symbol(), int64_t(1) << 20);
    CHECK(evaluate(B * B * B * B, st, a).error().kind == DimErrorKind::Overflow);
    CHECK(evaluate(B * B * B, st, a).value() == int64_t(1) << 60);
    // Unbound symbols and a zero divisor inside an atom.
    CHECK(evaluate(S, st, a).error().kind == DimErrorKind::Unbound);
    DimExpr q = div(B, S - k(1));
    a.set(*S.as_symbol(), 1);
    CHECK(evaluate(q, st, a).error().kind == DimErrorKind::DivisionByZero);
}

TEST_CASE_METHOD(Fixture, "substitution instantiates and re-normalises atoms", "[dim]") {
    DimExpr f = k(2) * B + rem(B, k(4));
    Substitution to_h{{*B.as_symbol(), k(2) * H}};
    DimExpr g = substitute(f, to_h, st).value();
    CHECK(str(g) == "4*H + 2*(H % 2)");
    // Substituting a constant decides the atom.
    Substitution to_6{{*B.as_symbol(), k(6)}};
    CHECK(substitute(f, to_6, st).value() == k(14));
    // Simultaneous: B := S, S := B swaps.
    Substitution swap{{*B.as_symbol(), S}, {*S.as_symbol(), B}};
    CHECK(substitute(k(2) * B + S * S, swap, st).value() == k(2) * S + B * B);
    // Instantiating a divisor: B % M.data with M.data := 4 and B := 8*H is 0.
    Substitution inst{{*m.as_symbol(), k(4)}, {*B.as_symbol(), k(8) * H}};
    CHECK(substitute(rem(B, m), inst, st).value() == k(0));
    // Powers expand: (B + 1)^2.
    CHECK(substitute(B * B, Substitution{{*B.as_symbol(), B + k(1)}}, st).value() ==
          B * B + k(2) * B + k(1));
    // Overflow in a substitution is reported.
    Substitution huge{{*B.as_symbol(), k(INT64_MAX)}};
    CHECK(substitute(B * B, huge, st).error().kind == DimErrorKind::Overflow);
}

TEST_CASE_METHOD(Fixture, "evaluation", "[dim]") {
    DimExpr e = k(2) * B * S + D - div(B, k(3));
    CHECK(eval(e, {{B, 7}, {S, 2}, {D, 5}}) == 2 * 7 * 2 + 5 - 2);
    CHECK(st.leaves(e) == std::vector<SymbolId>{*B.as_symbol(), *S.as_symbol(), *D.as_symbol()});
}

// ---------------------------------------------------------------- from_ast

namespace {

struct AstBuilder {
    std::deque<ast::Dim> nodes;
    uint32_t pos = 0;
    const ast::Dim* make(ast::Dim d) {
        d.span = Span{0, pos, pos + 1};
        ++pos;
        nodes.push_back(d);
        return &nodes.back();
    }
    const ast::Dim* num(int64_t v) {
        ast::Dim d{ast::DimKind::Int, {}};
        d.value = v;
        return make(d);
    }
    const ast::Dim* var(std::string_view n) {
        ast::Dim d{ast::DimKind::Var, {}};
        d.name = ast::Ident{n, {}};
        return make(d);
    }
    const ast::Dim* axis(std::string_view mesh, std::string_view a) {
        ast::Dim d{ast::DimKind::Axis, {}};
        d.name = ast::Ident{mesh, {}};
        d.axis = ast::Ident{a, {}};
        return make(d);
    }
    const ast::Dim* bin(ast::DimOp op, const ast::Dim* l, const ast::Dim* r) {
        ast::Dim d{ast::DimKind::Binary, {}};
        d.op = op;
        d.lhs = l;
        d.rhs = r;
        return make(d);
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "from_ast converts parsed dims through the resolver", "[dim]") {
    AstBuilder a;
    using ast::DimOp;
    // 2*(B + 1) - Pod.data + M.data % 4  with Pod a concrete mesh (data = 4).
    const ast::Dim* d = a.bin(
        DimOp::Add,
        a.bin(DimOp::Sub, a.bin(DimOp::Mul, a.num(2), a.bin(DimOp::Add, a.var("B"), a.num(1))),
              a.axis("Pod", "data")),
        a.bin(DimOp::Mod, a.axis("M", "data"), a.num(4)));
    DimNameResolver resolve = [&](std::string_view name, std::optional<std::string_view> axis) {
        if (!axis && name == "B") return DimBinding::of_symbol(*B.as_symbol());
        if (axis && name == "Pod" && *axis == "data") return DimBinding::of_constant(4);
        if (axis && name == "M" && *axis == "data") return DimBinding::of_symbol(*m.as_symbol());
        return DimBinding::unbound();
    };
    auto e = from_ast(*d, st, resolve);
    REQUIRE(e.ok());
    CHECK(*e == k(2) * B - k(2) + rem(m, k(4)));
    CHECK(str(*e) == "2*B + M.data % 4 - 2");

    // `/` is exact where it can be.
    auto q = from_ast(*a.bin(DimOp::Div, a.bin(DimOp::Mul, a.var("B"), a.num(6)), a.num(3)), st, resolve);
    CHECK(q.value() == k(2) * B);

    // Unknown names and division by zero carry the failing node's span.
    const ast::Dim* unknown = a.var("Q");
    auto u = from_ast(*a.bin(DimOp::Add, a.var("B"), unknown), st, resolve);
    REQUIRE(!u.ok());
    CHECK(u.error().kind == DimErrorKind::Unbound);
    CHECK(u.error().message == "unknown size `Q`");
    CHECK(u.error().span.begin == unknown->span.begin);
    const ast::Dim* zero_div = a.bin(DimOp::Mod, a.var("B"), a.bin(DimOp::Sub, a.num(2), a.num(2)));
    auto z = from_ast(*zero_div, st, resolve);
    REQUIRE(!z.ok());
    CHECK(z.error().kind == DimErrorKind::DivisionByZero);
    CHECK(z.error().span.begin == zero_div->span.begin);
    auto o = from_ast(*a.bin(DimOp::Mul, a.num(INT64_MAX), a.num(2)), st, resolve);
    CHECK(o.error().kind == DimErrorKind::Overflow);
}

TEST_CASE_METHOD(Fixture, "from_ast handles very long chains without deep recursion", "[dim]") {
    AstBuilder a;
    const ast::Dim* d = a.num(1);
    for (int i = 1; i < 200000; ++i) d = a.bin(ast::DimOp::Add, d, a.var("B"));
    DimNameResolver resolve = [&](std::string_view, std::optional<std::string_view>) {
        return DimBinding::of_symbol(*B.as_symbol());
    };
    auto e = from_ast(*d, st, resolve);
    REQUIRE(e.ok());
    CHECK(*e == k(199999) * B + k(1));
}

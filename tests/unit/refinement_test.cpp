// Unit tests for the refinement solver (solver/refinement.h): ground decisions, symbolic
// divisibility without Z3, linear facts through Z3, counterexamples (each one checked
// against the facts and the goal), scopes, and time-outs that end in Unknown.
#include <catch2/catch.hpp>

#include "solver/refinement.h"

using namespace meshc;

using namespace meshc::solver;

namespace {

DimExpr k(int64_t v) { return DimExpr::constant(v); }
DimExpr operator+(const DimExpr& a, const DimExpr& b) { return add(a, b).value(); }
DimExpr operator-(const DimExpr& a, const DimExpr& b) { return sub(a, b).value(); }
DimExpr operator*(const DimExpr& a, const DimExpr& b) { return mul(a, b).value(); }

Constraint divides(const DimExpr& d, const DimExpr& n) { return Constraint::divides(d, n); }
Constraint eq(const DimExpr& a, const DimExpr& b) { return Constraint::compare(a, CmpOp::Eq, b); }
Constraint ge(const DimExpr& a, const DimExpr& b) { return Constraint::compare(a, CmpOp::Ge, b); }
Constraint le(const DimExpr& a, const DimExpr& b) { return Constraint::compare(a, CmpOp::Le, b); }
Constraint lt(const DimExpr& a, const DimExpr& b) { return Constraint::compare(a, CmpOp::Lt, b); }
Constraint ne(const DimExpr& a, const DimExpr& b) { return Constraint::compare(a, CmpOp::Ne, b); }

struct Fixture {
    SymbolTable st;
    DimExpr B = DimExpr::symbol(st.add_size_var("B"));
    DimExpr S = DimExpr::symbol(st.add_size_var("S"));
    DimExpr T = DimExpr::symbol(st.add_size_var("T"));
    DimExpr D = DimExpr::symbol(st.add_size_var("D"));
    DimExpr H = DimExpr::symbol(st.add_size_var("H"));
    DimExpr K = DimExpr::symbol(st.add_size_var("K"));
    DimExpr m = DimExpr::symbol(st.add_axis_size("M", "data"));
    DimExpr n = DimExpr::symbol(st.add_axis_size("M", "model"));
    RefinementSolver solver{st};

    // `a % b == 0` written the way a `where` clause arrives: a comparison with a mod atom.
    Constraint mod_zero(const DimExpr& a, const DimExpr& b) {
        return eq(mod(a, b, st).value(), k(0));
    }

    // A Refuted outcome's counterexample satisfies every fact and violates the goal.
    void check_counterexample(const Constraint& goal, const Outcome& o) {
        REQUIRE(o.refuted());
        Assignment a;
        for (const auto& [s, v] : o.counterexample.values) {
            CHECK(v >= 1);
            a.set(s, v);
        }
        for (const Constraint& f : solver.facts()) {
            auto leaves_f = st.leaves(f.lhs);
            auto leaves_r = st.leaves(f.rhs);
            leaves_f.insert(leaves_f.end(), leaves_r.begin(), leaves_r.end());
            bool in_scope = true;
            for (SymbolId s : leaves_f) in_scope &= a.get(s).has_value();
            if (!in_scope) continue;  // another component; checked by the solver
            INFO(f.to_string(st));
            CHECK(holds(f, st, a).value());
        }
        INFO(goal.to_string(st));
        CHECK_FALSE(holds(goal, st, a).value());
    }

    int64_t value(const Outcome& o, const DimExpr& s) {
        return o.counterexample.value_of(*s.as_symbol()).value_or(-1);
    }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "ground obligations are decided by arithmetic", "[solver]") {
    CHECK(solver.prove(divides(k(4), k(12))).proved());
    Outcome o = solver.prove(mod_zero(k(6), k(4)));
    CHECK(o.refuted());
    CHECK(o.decided_by == DecidedBy::Ground);
    CHECK(o.counterexample.empty());
    CHECK(solver.prove(ge(k(3), k(2))).proved());
    CHECK(solver.prove(lt(k(3), k(2))).refuted());
    CHECK(solver.prove(divides(k(0), k(0))).proved());
    CHECK(solver.prove(divides(k(0), k(5))).refuted());
    CHECK(solver.stats().by_ground == 6);
    CHECK(solver.stats().z3_calls == 0);
}

TEST_CASE_METHOD(Fixture, "constraints print in Mesh syntax", "[solver]") {
    CHECK(divides(k(2) * m, B).to_string(st) == "B % (2*M.data) == 0");
    CHECK(divides(m, B + k(1)).to_string(st) == "(B + 1) % M.data == 0");
    CHECK(mod_zero(B, k(2) * m).to_string(st) == "B % (2*M.data) == 0");
    CHECK(ge(B * S, k(1)).to_string(st) == "B*S >= 1");
}

TEST_CASE_METHOD(Fixture, "B % (2*m) == 0 implies B % m == 0 without Z3", "[solver]") {
    solver.assume(mod_zero(B, k(2) * m));
    Outcome o = solver.prove(mod_zero(B, m));
    CHECK(o.proved());
    CHECK(o.decided_by == DecidedBy::Divisibility);
    CHECK(solver.prove(divides(m, B)).proved());
    CHECK(solver.prove(divides(k(2), B)).proved());
    CHECK(solver.stats().z3_calls == 0);
    // ... but not B % (4*m) == 0: B = 2, M.data = 1.
    Constraint goal = mod_zero(B, k(4) * m);
    Outcome r = solver.prove(goal);
    check_counterexample(goal, r);
    CHECK(r.counterexample.to_string(st) == "B = 2, M.data = 1");
}

TEST_CASE_METHOD(Fixture, "m | B and n | B do not give m*n | B", "[solver]") {
    solver.assume(divides(m, B));
    solver.assume(divides(n, B));
    Constraint goal = divides(m * n, B);
    Outcome o = solver.prove(goal);
    check_counterexample(goal, o);
    CHECK(value(o, m) == 2);
    CHECK(value(o, n) == 2);
    CHECK(value(o, B) == 2);
    CHECK(o.counterexample.to_string(st) == "B = 2, M.data = 2, M.model = 2");
    // Each of them alone does follow.
    CHECK(solver.prove(divides(m, k(3) * B)).proved());
    CHECK(solver.prove(divides(n, B * S)).proved());
}

TEST_CASE_METHOD(Fixture, "m*n | B gives m | B and n | B", "[solver]") {
    solver.assume(divides(m * n, B));
    CHECK(solver.prove(divides(m, B)).proved());
    CHECK(solver.prove(divides(n, B)).proved());
    CHECK(solver.prove(divides(n * m, B)).proved());
    CHECK(solver.prove(divides(m * n, B * S)).proved());
    check_counterexample(divides(m * m, B), solver.prove(divides(m * m, B)));
}

TEST_CASE_METHOD(Fixture, "constant divisors: gcd and lcm", "[solver]") {
    solver.assume(divides(k(4), B));
    CHECK(solver.prove(divides(k(2), B)).proved());
    CHECK(solver.prove(divides(k(4), B)).proved());
    Constraint eight = divides(k(8), B);
    Outcome o = solver.prove(eight);
    check_counterexample(eight, o);
    CHECK(value(o, B) == 4);
    solver.assume(divides(k(6), B));
    CHECK(solver.prove(divides(k(12), B)).proved());  // lcm(4, 6)
    CHECK(solver.prove(divides(k(3), B)).proved());
    check_counterexample(divides(k(24), B), solver.prove(divides(k(24), B)));
    // 3 | 2*S  =>  3 | S (coprime).
    solver.assume(divides(k(3), k(2) * S));
    CHECK(solver.prove(divides(k(3), S)).proved());
}

TEST_CASE_METHOD(Fixture, "lcm of symbolic divisors with the same monomial", "[solver]") {
    solver.assume(divides(k(2) * m, B));
    solver.assume(divides(k(3) * m, B));
    CHECK(solver.prove(divides(k(6) * m, B)).proved());
    // 2 | B and m | B: not 2*m | B (m = 2, B = 2).
    solver.push();
    solver.assume(divides(k(2), S));
    solver.assume(divides(m, S));
    Constraint goal = divides(k(2) * m, S);
    check_counterexample(goal, solver.prove(goal));
    solver.pop();
}

TEST_CASE_METHOD(Fixture, "divisibility is transitive", "[solver]") {
    solver.assume(divides(B, S));
    solver.assume(divides(S, T));
    CHECK(solver.prove(divides(B, T)).proved());
    CHECK(solver.prove(divides(B, k(2) * T + S)).proved());
    check_counterexample(divides(T, B), solver.prove(divides(T, B)));
    // Divisors of divisors: M.data | B and B | S give M.data | S.
    solver.assume(divides(m, B));
    CHECK(solver.prove(divides(m, T)).proved());
    CHECK(solver.prove(divides(m * B, S * T)).proved());
}

TEST_CASE_METHOD(Fixture, "products of divisibilities: 8 | B*S", "[solver]") {
    Constraint goal = divides(k(8), B * S);
    check_counterexample(goal, solver.prove(goal));
    solver.push();
    solver.assume(divides(k(4), B));
    solver.assume(divides(k(2), S));
    CHECK(solver.prove(goal).proved());
    CHECK(solver.prove(divides(k(16), B * S)).refuted());
    solver.pop();
    solver.push();
    solver.assume(divides(k(8), B));
    CHECK(solver.prove(goal).proved());
    solver.pop();
    solver.assume(divides(m, B));
    solver.assume(divides(n, S));
    CHECK(solver.prove(divides(m * n, B * S)).proved());
    CHECK(solver.prove(divides(m * n * k(2), k(2) * B * S)).proved());
}

TEST_CASE_METHOD(Fixture, "sums and cancellation", "[solver]") {
    solver.assume(divides(m, B));
    CHECK(solver.prove(divides(m, k(2) * B + m * S)).proved());
    CHECK(solver.prove(divides(m, B - m)).proved());
    CHECK(solver.prove(divides(k(2) * m, k(2) * B)).proved());
    CHECK(solver.prove(divides(m * S, B * S)).proved());
    Constraint goal = divides(m, B + k(1));
    check_counterexample(goal, solver.prove(goal));
    // 2*m | 2*B as a fact gives m | B.
    solver.assume(divides(k(2) * n, k(2) * S));
    CHECK(solver.prove(divides(n, S)).proved());
}

TEST_CASE_METHOD(Fixture, "instantiating a callee's obligation at a call", "[solver]") {
    // Callee: fn f[X](x: [X] with {X: data}) needs X % M.data == 0 (its own symbol X).
    SymbolId x = st.add_size_var("X");
    Constraint callee = mod_zero(DimExpr::symbol(x), m);
    // Caller knows B % M.data == 0 and calls f with X := 2*B.
    solver.assume(mod_zero(B, m));
    Substitution at_call{{x, k(2) * B}};
    Constraint obligation = eq(substitute(callee.lhs, at_call, st).value(), k(0));
    CHECK(solver.prove(obligation).proved());
    // With X := B + 1 it fails, with a counterexample for the caller's symbols.
    Substitution bad{{x, B + k(1)}};
    Constraint failing = eq(substitute(callee.lhs, bad, st).value(), k(0));
    Outcome o = solver.prove(failing);
    check_counterexample(failing, o);
    CHECK(o.counterexample.to_string(st) == "B = 2, M.data = 2");
}

TEST_CASE_METHOD(Fixture, "concrete mesh sizes are constants", "[solver]") {
    // mesh Pod = [data: 4]: the layout {B: data} gives 4 | B.
    solver.assume(divides(k(8), B));
    CHECK(solver.prove(divides(k(4), B)).proved());
    CHECK(solver.prove(divides(k(4), B + k(4))).proved());
}

TEST_CASE_METHOD(Fixture, "exact floor division: 2*m | D gives m | D / 2", "[solver]") {
    solver.assume(divides(k(2) * m, D));
    DimExpr half = floor_div(D, k(2), st).value();
    CHECK(solver.prove(divides(m, half)).proved());
    CHECK(solver.prove(divides(m, half * S)).proved());
    Constraint goal = divides(k(2) * m, half);
    check_counterexample(goal, solver.prove(goal));
}

TEST_CASE_METHOD(Fixture, "equality facts are substituted", "[solver]") {
    solver.assume(eq(B, k(2) * H));
    CHECK(solver.prove(divides(k(2), B)).proved());
    CHECK(solver.prove(mod_zero(B, k(2))).proved());
    CHECK(solver.prove(ge(B, k(2))).proved());
    solver.assume(eq(D, H * K));
    solver.assume(divides(m, H));
    CHECK(solver.prove(divides(m, D)).proved());
    CHECK(solver.prove(divides(k(2) * m, B)).proved());
    CHECK(solver.prove(ge(D, H)).proved());
    // S == B + 1 decides B < S by normalisation.
    solver.assume(eq(S, B + k(1)));
    Outcome o = solver.prove(lt(B, S));
    CHECK(o.proved());
    CHECK(o.decided_by == DecidedBy::Normalization);
    Constraint bad = eq(S, B);
    check_counterexample(bad, solver.prove(bad));
}

TEST_CASE_METHOD(Fixture, "a goal one fact implies needs no Z3", "[solver]") {
    // The usual case: a caller's `where Q >= 2` passed on to a callee's `where Q >= 2`.
    solver.assume(ge(B, k(2)));
    solver.assume(lt(S, D));
    for (const Constraint& goal : {ge(B, k(2)), ge(B, k(1)), Constraint::compare(B, CmpOp::Gt, k(1)),
                                   ne(B, k(1)), ge(B + T, k(3)), lt(S, D + k(1)), le(S + k(1), D)}) {
        Outcome o = solver.prove(goal);
        CHECK(o.proved());
        CHECK(o.decided_by == DecidedBy::Positivity);
    }
    CHECK(solver.stats().z3_calls == 0);
    // Not implied: the step must not prove these.
    check_counterexample(ge(B, k(3)), solver.prove(ge(B, k(3))));
    check_counterexample(lt(S + k(1), D), solver.prove(lt(S + k(1), D)));
}

TEST_CASE_METHOD(Fixture, "linear facts go to Z3", "[solver]") {
    CHECK(solver.prove(ge(S, k(1))).proved());  // every size is >= 1
    CHECK(solver.prove(ge(B * S, B)).proved());
    Constraint small = le(B, k(3));
    Outcome o = solver.prove(small);
    check_counterexample(small, o);
    CHECK(value(o, B) == 4);

    solver.assume(ge(B, k(6)));
    solver.assume(le(B + S, k(10)));
    CHECK(solver.prove(le(S, k(4))).proved());
    CHECK(solver.prove(ge(k(2) * B + S, k(13))).proved());
    Constraint goal = ge(S, k(2));
    Outcome r = solver.prove(goal);
    check_counterexample(goal, r);
    CHECK(value(r, S) == 1);
    // Divisibility by a constant that needs arithmetic: B % 4 == 2 gives B % 2 == 0.
    solver.assume(eq(mod(T, k(4), st).value(), k(2)));
    CHECK(solver.prove(mod_zero(T, k(2))).proved());
    CHECK(solver.prove(mod_zero(T, k(4))).refuted());
    CHECK(solver.stats().z3_calls > 0);
}

TEST_CASE_METHOD(Fixture, "non-linear comparisons", "[solver]") {
    solver.assume(divides(m, B));
    CHECK(solver.prove(ge(B, m)).proved());  // a positive multiple of m is at least m
    CHECK(solver.prove(ge(B * S * S, S)).proved());
    Constraint goal = ge(B, k(2) * m);
    check_counterexample(goal, solver.prove(goal));
}

TEST_CASE_METHOD(Fixture, "push and pop scope the facts", "[solver]") {
    Constraint goal = divides(k(2), B);
    check_counterexample(goal, solver.prove(goal));
    solver.push();
    CHECK(solver.scope_depth() == 1);
    solver.assume(divides(k(4), B));
    CHECK(solver.prove(goal).proved());
    solver.push();
    solver.assume(eq(B, k(4) * H));
    CHECK(solver.prove(divides(k(4), B)).proved());
    solver.pop();
    CHECK(solver.facts().size() == 1);
    CHECK(solver.prove(goal).proved());
    solver.pop();
    CHECK(solver.scope_depth() == 0);
    CHECK(solver.facts().empty());
    Outcome o = solver.prove(goal);
    check_counterexample(goal, o);
    CHECK(value(o, B) == 1);
}

TEST_CASE_METHOD(Fixture, "contradictory facts", "[solver]") {
    solver.push();
    solver.assume(mod_zero(k(3), k(2)));
    CHECK(solver.facts_contradictory());
    CHECK(solver.prove(divides(k(7), B)).proved());
    solver.pop();
    CHECK_FALSE(solver.facts_contradictory());
    solver.push();
    solver.assume(eq(B, B + k(1)));
    CHECK(solver.facts_contradictory());
    solver.pop();
    solver.push();
    solver.assume(eq(B, k(2)));
    solver.assume(eq(B, k(3)));
    CHECK(solver.facts_contradictory());
    solver.pop();
}

TEST_CASE_METHOD(Fixture, "counterexamples satisfy facts in other components", "[solver]") {
    solver.assume(divides(k(3), T));  // unrelated to the goal, but must still hold
    solver.assume(divides(m, B));
    Constraint goal = divides(k(2), B);
    Outcome o = solver.prove(goal);
    check_counterexample(goal, o);
    CHECK_FALSE(o.counterexample.value_of(*T.as_symbol()).has_value());
    CHECK(o.counterexample.to_string(st) == "B = 1, M.data = 1");
}

TEST_CASE_METHOD(Fixture, "true but unprovable obligations are Unknown, never Refuted", "[solver]") {
    solver.set_time_limit_ms(200);
    // B*(B+1) is always even, but no rule here shows it.
    Outcome o = solver.prove(divides(k(2), B * (B + k(1))));
    CHECK_FALSE(o.refuted());
    // m | B and n | B with gcd(m, n) == 1 would give m*n | B; with m == n + 1 (so
    // coprime) nothing here knows that, and small values have no counterexample.
    solver.assume(divides(m, B));
    solver.assume(divides(n, B));
    solver.assume(eq(m, n + k(1)));
    Outcome p = solver.prove(divides(m * n, B));
    CHECK_FALSE(p.refuted());
}

TEST_CASE_METHOD(Fixture, "a query Z3 cannot finish times out into Unknown", "[solver]") {
    solver.set_time_limit_ms(100);
    // x^3 + y^3 != z^3 for positive integers (Fermat, n = 3): true, and hopeless for Z3.
    Constraint goal = ne(B * B * B + S * S * S, T * T * T);
    Outcome o = solver.prove(goal);
    REQUIRE(o.unknown());
    // The CPU-time budget stops it, before the wall-clock watchdog.
    CHECK(o.reason == "timed out after 100 ms");
    CHECK(solver.stats().z3_timeouts == 1);
    // The solver still works afterwards.
    CHECK(solver.prove(ge(B + S, k(2))).proved());
    CHECK(solver.prove(le(B, k(1))).refuted());
}

TEST_CASE_METHOD(Fixture, "statistics count queries and how they were decided", "[solver]") {
    solver.assume(mod_zero(B, k(2) * m));
    for (int i = 0; i < 10; ++i) CHECK(solver.prove(mod_zero(B, m)).proved());
    const SolverStats& s = solver.stats();
    CHECK(s.queries == 10);
    CHECK(s.proved == 10);
    CHECK(s.by_divisibility == 10);
    CHECK(s.z3_calls == 0);
    solver.reset_stats();
    CHECK(solver.stats().queries == 0);
}

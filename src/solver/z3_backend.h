// The Z3 side of RefinementSolver (refinement.cpp): encodes constraints over dim
// expressions and checks "facts and not goal" with a hard time limit. One z3::context
// per backend (one per compilation); the linear solver is reused with push/pop.
//
// Limits: each check runs on its own thread. Its budget is that thread's CPU time, so
// whether a query is decided hardly depends on how busy the machine is (a parallel test
// run once starved a trivial linear query past a 1 s wall-clock limit); a wall-clock
// limit (a multiple of the budget) is the safety net. At either limit the caller
// interrupts Z3 (Z3_interrupt) and, since Z3 can take seconds to notice on non-linear
// queries (measured: 5.6 s past an 800 ms limit), abandons the check after a grace
// period and continues with a new context, so check() always returns. Z3's own limits
// are not used: its `timeout` parameter starts a scoped_timer that can deadlock in 4.8.12
// (Z3 issues #5370/#5990; reproduced here on a non-linear query), and its `rlimit` is
// hardly counted by the `smt` tactic on non-linear queries (measured: 21,741 units in 3 s).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "solver/refinement.h"

namespace meshc::solver {

class Z3Backend {
public:
    explicit Z3Backend(const SymbolTable& symbols);
    ~Z3Backend();
    Z3Backend(const Z3Backend&) = delete;
    Z3Backend& operator=(const Z3Backend&) = delete;

    struct Result {
        enum class Status : uint8_t { Unsat, Sat, Unknown };
        Status status = Status::Unknown;
        solver::Assignment model;  // Sat: the size variables and axis sizes of the query
        std::string reason;      // Unknown: Z3's reason, or a Z3 error message
        bool timed_out = false;      // Unknown because the wall-clock watchdog fired
        bool out_of_budget = false;  // Unknown because the check used up its CPU budget
        double ms = 0;
    };

    /// Checks facts && !goal, with every size variable and axis size >= 1. Unsat means
    /// the goal follows from the facts. `linear` selects the reused QF_LIA solver
    /// (every constraint must then be linear); otherwise a fresh QF_NIA solver.
    /// `cpu_limit_ms`: the check thread's CPU-time budget; `wall_limit_ms`: the watchdog.
    Result check(const std::vector<const Constraint*>& facts, const Constraint& goal, bool linear,
                 unsigned cpu_limit_ms, unsigned wall_limit_ms);

    /// Linear integer arithmetic: every monomial of degree <= 1, atoms (`a / c`, `a % c`)
    /// only with constant divisors and linear numerators, divisibility only by constants.
    static bool is_linear(const Constraint& c, const SymbolTable& symbols);

    /// Checks that were abandoned (Z3 did not stop within the grace period).
    uint64_t abandoned_count() const { return abandoned_count_; }

    struct Impl;  // a context and its linear solver (z3_backend.cpp)
    struct Job;   // a check in flight (z3_backend.cpp)

private:
    const SymbolTable& symbols_;
    std::shared_ptr<Impl> impl_;  // created lazily; replaced after an abandoned check
    std::vector<std::shared_ptr<Job>> abandoned_;
    uint64_t abandoned_count_ = 0;
};

}  // namespace meshc::solver

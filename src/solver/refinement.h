// Refinement reasoning: facts and obligations over dim expressions (`B % M.data == 0`,
// `S >= 1`, `D == H*K`). The type checker creates one RefinementSolver per compilation,
// assumes a function's `where` clauses and layout divisibilities as facts (in push/pop
// scopes), and asks prove() for each obligation; an outcome that is not Proved becomes
// an E05 diagnostic (with the counterexample when Refuted).
//
// How an obligation is decided, cheapest first (every step is sound; "Proved" is never
// a guess and "Refuted" always carries an assignment that was checked by evaluation):
//   1. ground: no symbols - arithmetic, independent of the facts;
//   2. normalisation: equality facts that define a symbol (`B == 2*H`) are substituted;
//      a goal whose two sides then normalise to the same polynomial is Proved;
//   3. divisibility (`k | n`, also written `n % k == 0`): own monomial/gcd reasoning
//      (solver/divisibility.h), no Z3; `2*m | B` gives `m | B` in microseconds;
//   4. comparisons: a positivity certificate (shift every symbol by 1, all coefficients
//      >= 0), no Z3;
//   5. linear goals: Z3 (QF_LIA, one reused solver) over the linear facts;
//   6. a bounded search for a small counterexample (symbols >= 1) that satisfies every
//      fact and violates the goal (also preferred to a Z3 model: it is smaller);
//   7. non-linear goals: Z3 (simplify, solve-eqs, smt; division as a fresh quotient
//      and remainder) over all facts that share symbols with the goal.
// Steps 5-7 see only the facts connected to the goal through shared symbols; a
// counterexample is completed with values satisfying the other facts.
// Every Z3 call has a budget of CPU time (`time_limit_ms`, the time its own thread
// runs, so a loaded machine does not turn a decidable query into a time-out) and a
// wall-clock watchdog (`wall_factor` x the budget); Z3 is interrupted at either and
// abandoned if it does not stop soon after (z3_backend.h says why Z3's own `timeout` and
// `rlimit` are not used), so prove() never hangs; expiry gives Unknown("timed out ...").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "solver/dim_expr.h"

namespace meshc::solver {

using solver::DimExpr;
using solver::SymbolId;
using solver::SymbolTable;

class Z3Backend;  // solver/z3_backend.h

enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
std::string_view cmp_op_spelling(CmpOp op);

/// `lhs op rhs`, or `divisor | multiple` (multiple % divisor == 0; `0 | n` means n == 0).
struct Constraint {
    enum class Kind : uint8_t { Compare, Divides };
    Kind kind = Kind::Compare;
    CmpOp op = CmpOp::Eq;  // Compare
    DimExpr lhs;           // Compare: left side; Divides: the divisor
    DimExpr rhs;           // Compare: right side; Divides: the multiple

    static Constraint compare(DimExpr lhs, CmpOp op, DimExpr rhs) {
        return Constraint{Kind::Compare, op, std::move(lhs), std::move(rhs)};
    }
    static Constraint divides(DimExpr divisor, DimExpr multiple) {
        return Constraint{Kind::Divides, CmpOp::Eq, std::move(divisor), std::move(multiple)};
    }
    /// Mesh syntax: `B >= 1`, `B % (2*m) == 0`.
    std::string to_string(const SymbolTable& symbols) const;
    friend bool operator==(const Constraint&, const Constraint&) = default;
};

/// Whether the constraint holds under `values` (errors: unbound symbol, overflow, a
/// division by zero inside an atom).
solver::DimResult<bool> holds(const Constraint& c, const SymbolTable& symbols,
                            const solver::Assignment& values);

/// Values of symbols that satisfy every fact and violate the goal.
struct Counterexample {
    std::vector<std::pair<SymbolId, int64_t>> values;  // sorted by name, then id

    std::optional<int64_t> value_of(SymbolId id) const;
    bool empty() const { return values.empty(); }
    /// `B = 4, m = 2`.
    std::string to_string(const SymbolTable& symbols) const;
};

enum class Verdict : uint8_t { Proved, Refuted, Unknown };

/// Which step of the pipeline (see the top of this file) decided an outcome.
enum class DecidedBy : uint8_t { Ground, Normalization, Divisibility, Positivity, Z3, Search, None };
std::string_view decided_by_name(DecidedBy d);

struct Outcome {
    Verdict verdict = Verdict::Unknown;
    DecidedBy decided_by = DecidedBy::None;
    /// Refuted: an assignment of the symbols related to the goal (those sharing a fact
    /// with it), checked by evaluation; empty for a ground goal.
    Counterexample counterexample;
    /// Unknown: why ("timed out after 1000 ms", "Z3 gave up: ..."); Proved/Refuted: a
    /// short note or empty.
    std::string reason;

    bool proved() const { return verdict == Verdict::Proved; }
    bool refuted() const { return verdict == Verdict::Refuted; }
    bool unknown() const { return verdict == Verdict::Unknown; }
};

struct SolverStats {
    uint64_t queries = 0;
    uint64_t proved = 0, refuted = 0, unknown = 0;
    uint64_t by_ground = 0, by_normalization = 0, by_divisibility = 0, by_positivity = 0,
             by_z3 = 0, by_search = 0;
    uint64_t z3_calls = 0;
    uint64_t z3_timeouts = 0;       // Z3 calls that ran out of budget or wall time
    uint64_t z3_abandoned = 0;      // time-outs where Z3 did not stop in the grace period
    double z3_ms = 0;               // wall time inside Z3 check() calls
    double z3_unknown_ms = 0;       // of which in calls that decided nothing (the run budget's)
    uint64_t search_assignments = 0;  // assignments tried by counterexample searches
    double total_ms = 0;            // wall time inside prove()
};

struct SolverOptions {
    /// CPU time per Z3 call (the time the call's thread runs).
    unsigned time_limit_ms = 1000;
    unsigned wall_factor = 10;
    /// Assignments tried per counterexample search (values 1, 2, 3, ... per symbol).
    uint64_t search_budget = 20000;
    /// Time the Z3 calls of this solver that decide nothing (time-outs, Z3 giving up)
    /// may take together (`--solver-budget`, 0: no limit); calls that prove or refute
    /// cost it nothing, so a loaded machine does not spend it. Each call gets at most
    /// what is left; once it is spent, the remaining goals Z3 would be asked about are
    /// Unknown at once ("the solver's budget ... is spent"): a program of many
    /// undecidable clauses is answered in about this time.
    unsigned run_budget_ms = 1500;
};

class RefinementSolver {
public:
    /// `symbols` must outlive the solver; the solver adds atoms to it when it
    /// substitutes. Z3 is started lazily, on the first query that needs it.
    explicit RefinementSolver(SymbolTable& symbols, SolverOptions options = {});
    ~RefinementSolver();
    RefinementSolver(const RefinementSolver&) = delete;
    RefinementSolver& operator=(const RefinementSolver&) = delete;

    /// Adds a fact to the current scope. Every size variable and axis size is >= 1
    /// without being assumed.
    void assume(Constraint fact);
    /// Opens / closes a scope of facts (pop() drops the facts assumed since the push()).
    void push();
    void pop();
    size_t scope_depth() const { return scopes_.size(); }
    const std::vector<Constraint>& facts() const { return facts_; }

    /// True when the facts are contradictory in a way found without Z3 (a ground fact
    /// that is false, or equalities that reduce to `0 == 1`). prove() then answers
    /// Proved for everything (ex falso), so the checker should report this first.
    bool facts_contradictory();

    /// Decides `goal` under the facts in scope; never hangs (see the top of this file).
    Outcome prove(const Constraint& goal);

    void set_time_limit_ms(unsigned ms) { options_.time_limit_ms = ms; }
    void set_run_budget_ms(unsigned ms) { options_.run_budget_ms = ms; }
    unsigned time_limit_ms() const { return options_.time_limit_ms; }
    const SolverStats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

    struct Derived;  // state computed from the facts (solver/refinement.cpp)

private:
    Outcome decide(const Constraint& goal);
    Derived& derived();
    void invalidate();

    SymbolTable& symbols_;
    SolverOptions options_;
    std::vector<Constraint> facts_;
    std::vector<size_t> scopes_;  // facts_.size() at each push()
    std::unique_ptr<Derived> derived_;
    std::unique_ptr<Z3Backend> z3_;
    SolverStats stats_;
};

}  // namespace meshc::solver

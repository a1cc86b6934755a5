// Z3 encoding and time-limited checks; see z3_backend.h.
#include "solver/z3_backend.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <pthread.h>
#include <time.h>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <z3++.h>

namespace meshc::solver {

using solver::DimExpr;
using solver::SymbolId;
using solver::SymbolKind;

namespace {

using Clock = std::chrono::steady_clock;

bool is_linear_expr(const DimExpr& e, const SymbolTable& symbols) {
    for (const solver::Term& t : e.terms()) {
        if (t.monomial.size() > 1) return false;
        if (t.monomial.empty()) continue;
        const solver::Factor& f = t.monomial[0];
        if (f.exponent > 1) return false;
        if (symbols.is_atom(f.symbol)) {
            if (!symbols.atom_denominator(f.symbol).is_constant()) return false;
            if (!is_linear_expr(symbols.atom_numerator(f.symbol), symbols)) return false;
        }
    }
    return true;
}

}  // namespace

// One Z3 context with its reused linear solver. Shared with the thread that runs a
// check, so that an abandoned check keeps it alive until Z3 returns; the backend then
// starts a new one.
struct Z3Backend::Impl {
    const SymbolTable& symbols;  // read only while encoding, on the caller's thread
    z3::context ctx;
    z3::solver linear;
    std::unordered_map<SymbolId, z3::expr> vars;  // size variables and axis sizes
    uint64_t fresh_count = 0;

    explicit Impl(const SymbolTable& s) : symbols(s), ctx(), linear(ctx, "QF_LIA") {}

    z3::expr var(SymbolId id) {
        auto it = vars.find(id);
        if (it != vars.end()) return it->second;
        z3::expr v = ctx.int_const(fmt::format("{}!{}", symbols.name(id), id.index).c_str());
        vars.emplace(id, v);
        return v;
    }

    z3::expr fresh(const char* prefix) {
        return ctx.int_const(fmt::format("{}!{}", prefix, fresh_count++).c_str());
    }
};

namespace {

// Encodes one query. Linear queries use Z3's div and mod (by constants only). Non-linear
// queries never do: Z3 4.8.12 can spend a second without checking for an interrupt in
// its division lemmas (`(B*B + B) mod 2`, measured 1.1 s past a 200 ms limit), so floor
// division, `%` and divisibility become a fresh quotient and remainder with range
// constraints, after which the interrupt is honoured within milliseconds.
class Encoder {
public:
    Encoder(Z3Backend::Impl& z, bool native_division) : z_(z), native_(native_division) {}

    std::vector<SymbolId> leaves;     // size variables and axis sizes used (bounds >= 1)
    std::vector<z3::expr> side;       // definitions of fresh variables

    z3::expr expr(const DimExpr& e) {
        std::optional<z3::expr> sum;
        for (const solver::Term& t : e.terms()) {
            std::optional<z3::expr> product;
            for (const solver::Factor& f : t.monomial) {
                z3::expr base = z_.symbols.is_atom(f.symbol) ? atom(f.symbol) : leaf(f.symbol);
                for (uint32_t i = 0; i < f.exponent; ++i) product = product ? *product * base : base;
            }
            z3::expr coeff = z_.ctx.int_val(t.coeff);
            z3::expr term = !product ? coeff : t.coeff == 1 ? *product : coeff * *product;
            sum = sum ? *sum + term : term;
        }
        return sum ? *sum : z_.ctx.int_val(0);
    }

    z3::expr fact(const Constraint& c) {
        if (c.kind != Constraint::Kind::Divides) return compare(c);
        z3::expr k = expr(c.lhs), n = expr(c.rhs);
        if (auto kc = c.lhs.constant_value(); native_ && kc)  // linear: constant divisors
            return *kc == 0 ? n == 0 : z3::mod(n, k) == 0;
        return n == k * z_.fresh("t");  // k | n <=> n == k*t for some t (k == 0: n == 0)
    }

    z3::expr negated_goal(const Constraint& c) {
        if (c.kind != Constraint::Kind::Divides || (native_ && c.lhs.is_constant()))
            return !fact(c);
        // Not k | n: n == 0*q + n with n != 0, or n == k*q + r with 0 < r < |k|.
        z3::expr k = expr(c.lhs), n = expr(c.rhs);
        z3::expr q = z_.fresh("q"), r = z_.fresh("r");
        if (auto kc = c.lhs.constant_value()) {
            if (*kc == 0) return n != 0;
            int64_t bound = *kc == INT64_MIN ? INT64_MAX : (*kc < 0 ? -*kc : *kc);
            return n == k * q + r && r >= 1 && r < z_.ctx.int_val(bound);
        }
        if (positive_monomial(c.lhs))  // k >= 1: no case split (it costs Z3 dearly)
            return n == k * q + r && r >= 1 && r < k;
        z3::expr abs_k = z3::ite(k >= 0, k, -k);
        return (k == 0 && n != 0) || (k != 0 && n == k * q + r && r >= 1 && r < abs_k);
    }

private:
    // A positive coefficient times size variables and axis sizes: >= 1.
    bool positive_monomial(const DimExpr& e) const {
        if (!e.is_single_term() || e.terms()[0].coeff < 1) return false;
        for (const solver::Factor& f : e.terms()[0].monomial)
            if (!z_.symbols.is_positive(f.symbol)) return false;
        return true;
    }

    z3::expr compare(const Constraint& c) {
        z3::expr l = expr(c.lhs), r = expr(c.rhs);
        switch (c.op) {
        case CmpOp::Eq: return l == r;
        case CmpOp::Ne: return l != r;
        case CmpOp::Lt: return l < r;
        case CmpOp::Le: return l <= r;
        case CmpOp::Gt: return l > r;
        case CmpOp::Ge: return l >= r;
        }
        return l == r;
    }

    z3::expr leaf(SymbolId id) {
        leaves.push_back(id);
        return z_.var(id);
    }

    z3::expr atom(SymbolId id) {
        if (auto it = atoms_.find(id); it != atoms_.end()) return it->second;
        const DimExpr& num = z_.symbols.atom_numerator(id);
        const DimExpr& den = z_.symbols.atom_denominator(id);
        bool floor = z_.symbols.kind(id) == SymbolKind::FloorDiv;
        z3::expr n = expr(num), d = expr(den);
        z3::expr value = z_.ctx.int_val(0);
        if (native_ && den.is_constant() && !den.is_zero()) {
            // Z3's div is floor division for a positive divisor; mod is then the floor mod.
            int64_t c = *den.constant_value();
            z3::expr q = c > 0 ? n / d : (-n) / (-d);
            value = floor ? q : (c > 0 ? z3::mod(n, d) : n - d * q);
        } else {
            // n == d*q + r with r in [0, d) for d > 0 and in (d, 0] for d < 0: q is
            // floor(n / d) and r is n % d with the sign of d (d == 0 is left free; our
            // evaluation rejects such models).
            z3::expr q = z_.fresh("q"), r = z_.fresh("r");
            side.push_back(z3::implies(d != 0, n == d * q + r));
            side.push_back(z3::implies(d > 0, r >= 0 && r < d));
            side.push_back(z3::implies(d < 0, r <= 0 && r > d));
            value = floor ? q : r;
        }
        atoms_.emplace(id, value);
        return value;
    }

    Z3Backend::Impl& z_;
    bool native_;
    std::unordered_map<SymbolId, z3::expr> atoms_;
};

}  // namespace

// A check in flight. Owns every Z3 object of the query, so that if the caller abandons
// it, the thread running it releases them (context last) and nothing else touches them.
struct Z3Backend::Job {
    std::shared_ptr<Z3Backend::Impl> impl;  // first member: destroyed last
    std::optional<z3::solver> own_solver;    // the non-linear query's solver
    z3::solver* solver = nullptr;
    std::optional<Encoder> encoder;
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    z3::check_result result = z3::unknown;
    std::string error;
};

Z3Backend::Z3Backend(const SymbolTable& symbols) : symbols_(symbols) {}

Z3Backend::~Z3Backend() {
    // Give abandoned checks a moment to end before the process may exit under them; a
    // check Z3 never ends (its 4.8.12 timer deadlock) is left behind rather than waited on.
    auto deadline = Clock::now() + std::chrono::seconds(2);
    for (const auto& job : abandoned_) {
        std::unique_lock lock(job->mutex);
        job->cv.wait_until(lock, deadline, [&] { return job->done; });
    }
}

bool Z3Backend::is_linear(const Constraint& c, const SymbolTable& symbols) {
    if (c.kind == Constraint::Kind::Divides && !c.lhs.is_constant()) return false;
    return is_linear_expr(c.lhs, symbols) && is_linear_expr(c.rhs, symbols);
}

Z3Backend::Result Z3Backend::check(const std::vector<const Constraint*>& facts,
                                   const Constraint& goal, bool linear, unsigned cpu_limit_ms,
                                   unsigned wall_limit_ms) {
    Result result;
    auto start = Clock::now();
    if (!impl_) impl_ = std::make_shared<Impl>(symbols_);
    auto job = std::make_shared<Job>();
    job->impl = impl_;
    Impl& z = *impl_;
    bool pushed = false;
    try {
        if (linear) {
            job->solver = &z.linear;
        } else {
            // The `smt` tactic after simplification: no internal `try_for` timers (whose
            // scoped_timer can deadlock in 4.8.12), and much faster here than QF_NIA.
            z3::tactic t = z3::tactic(z.ctx, "simplify") & z3::tactic(z.ctx, "solve-eqs") &
                           z3::tactic(z.ctx, "smt");
            job->own_solver.emplace(t.mk_solver());
            job->solver = &*job->own_solver;
        }
        z3::solver& s = *job->solver;
        if (linear) {
            s.push();
            pushed = true;
        }
        Encoder& enc = job->encoder.emplace(z, linear);
        for (const Constraint* f : facts) s.add(enc.fact(*f));
        s.add(enc.negated_goal(goal));
        for (const z3::expr& e : enc.side) s.add(e);
        std::vector<SymbolId>& leaves = enc.leaves;
        std::sort(leaves.begin(), leaves.end());
        leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
        for (SymbolId id : leaves) s.add(z.var(id) >= 1);
    } catch (const z3::exception& e) {
        result.reason = fmt::format("Z3 error: {}", e.msg());
        impl_.reset();  // its linear solver may be left inside a scope
        result.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        return result;
    }

    // Run the check on its own thread; interrupt it at the limit and, if Z3 does not
    // return soon after (it can take seconds to notice, measured on non-linear queries),
    // abandon it: this call returns by limit + grace whatever Z3 does.
    std::thread worker([job] {
        z3::check_result r = z3::unknown;
        std::string error;
        try {
            r = job->solver->check();
        } catch (const z3::exception& e) {
            error = e.msg();
        }
        std::lock_guard lock(job->mutex);
        job->result = r;
        job->error = std::move(error);
        job->done = true;
        job->cv.notify_all();
    });
    // The budget is the worker's CPU time, so a loaded machine (a parallel test run)
    // does not turn a decidable query into a time-out; the wall limit is a safety net.
    auto limit = std::chrono::milliseconds(wall_limit_ms);
    auto grace = std::chrono::milliseconds(std::clamp(cpu_limit_ms / 2, 20u, 500u));
    clockid_t cpu_clock;
    bool have_cpu_clock = pthread_getcpuclockid(worker.native_handle(), &cpu_clock) == 0;
    bool interrupted = false, out_of_budget = false;
    bool finished = false;
    {
        std::unique_lock lock(job->mutex);
        auto poll = std::chrono::milliseconds(std::clamp(cpu_limit_ms / 20, 1u, 20u));
        while (!finished) {
            finished = job->cv.wait_for(lock, poll, [&] { return job->done; });
            if (finished) break;
            // The worker is alive here: it sets `done` under this lock before it ends.
            timespec ts{};
            if (have_cpu_clock && clock_gettime(cpu_clock, &ts) == 0 &&
                uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000 >= cpu_limit_ms) {
                out_of_budget = true;
                break;
            }
            if (Clock::now() >= start + limit) break;
        }
    }
    if (!finished) {
        z.ctx.interrupt();
        interrupted = true;
        std::unique_lock lock(job->mutex);
        finished = job->cv.wait_for(lock, grace, [&] { return job->done; });
    }
    if (!finished) {
        worker.detach();
        abandoned_.push_back(job);
        impl_.reset();
        ++abandoned_count_;
        result.timed_out = !out_of_budget;
        result.out_of_budget = out_of_budget;
        result.reason = "abandoned after the time limit";
        result.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        return result;
    }
    worker.join();

    z3::solver& s = *job->solver;
    try {
        if (!job->error.empty()) {
            result.reason = fmt::format("Z3 error: {}", job->error);
        } else if (job->result == z3::unsat) {
            result.status = Result::Status::Unsat;
        } else if (job->result == z3::sat) {
            result.status = Result::Status::Sat;
            z3::model m = s.get_model();
            for (SymbolId id : job->encoder->leaves) {
                int64_t v = 0;
                if (m.eval(z.var(id), true).is_numeral_i64(v)) result.model.set(id, v);
            }
        } else {
            result.timed_out = interrupted && !out_of_budget;
            result.out_of_budget = out_of_budget;
            result.reason = s.reason_unknown();
        }
        if (pushed) s.pop();
    } catch (const z3::exception& e) {
        result.status = Result::Status::Unknown;
        result.reason = fmt::format("Z3 error: {}", e.msg());
        impl_.reset();
    }
    result.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return result;
}

}  // namespace meshc::solver

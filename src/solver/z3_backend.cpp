// Z3 encoding and time-limited checks; see z3_backend.h.
#include "solver/z3_backend.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <z3++.h>

namespace meshc::solver {

using sema::DimExpr;
using sema::SymbolId;
using sema::SymbolKind;

namespace {

using Clock = std::chrono::steady_clock;

// Interrupts the context's running check when the deadline passes. Z3_interrupt() only
// affects a check in progress (a stray one afterwards is harmless: it was tested), and
// arm()/disarm() bracket each check.
class Watchdog {
public:
    explicit Watchdog(z3::context& ctx) : ctx_(ctx), thread_([this] { run(); }) {}
    ~Watchdog() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    void arm(unsigned ms) {
        {
            std::lock_guard lock(mutex_);
            armed_ = true;
            fired_ = false;
            deadline_ = Clock::now() + std::chrono::milliseconds(ms);
        }
        cv_.notify_all();
    }
    /// Returns whether the deadline passed during the check.
    bool disarm() {
        std::lock_guard lock(mutex_);
        armed_ = false;
        return fired_;
    }

private:
    void run() {
        std::unique_lock lock(mutex_);
        while (!stop_) {
            if (!armed_) {
                cv_.wait(lock);
                continue;
            }
            if (Clock::now() >= deadline_) {
                fired_ = true;
                armed_ = false;
                ctx_.interrupt();
                continue;
            }
            cv_.wait_until(lock, deadline_);
        }
    }

    z3::context& ctx_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool armed_ = false, fired_ = false, stop_ = false;
    Clock::time_point deadline_;
    std::thread thread_;  // last: started after the other members exist
};

bool is_linear_expr(const DimExpr& e, const SymbolTable& symbols) {
    for (const sema::Term& t : e.terms()) {
        if (t.monomial.size() > 1) return false;
        if (t.monomial.empty()) continue;
        const sema::Factor& f = t.monomial[0];
        if (f.exponent > 1) return false;
        if (symbols.is_atom(f.symbol)) {
            if (!symbols.atom_denominator(f.symbol).is_constant()) return false;
            if (!is_linear_expr(symbols.atom_numerator(f.symbol), symbols)) return false;
        }
    }
    return true;
}

}  // namespace

struct Z3Backend::Impl {
    const SymbolTable& symbols;
    z3::context ctx;
    z3::solver linear;
    Watchdog watchdog;
    std::unordered_map<SymbolId, z3::expr> vars;     // size variables and axis sizes
    struct EncodedAtom {
        z3::expr value;
        std::vector<SymbolId> leaves;
    };
    std::unordered_map<SymbolId, EncodedAtom> atoms;

    explicit Impl(const SymbolTable& s) : symbols(s), ctx(), linear(ctx, "QF_LIA"), watchdog(ctx) {}

    z3::expr var(SymbolId id) {
        auto it = vars.find(id);
        if (it != vars.end()) return it->second;
        z3::expr v = ctx.int_const(fmt::format("{}!{}", symbols.name(id), id.index).c_str());
        vars.emplace(id, v);
        return v;
    }

    // floor(n / d) for any d != 0: Z3's div is floor division for d > 0, and
    // floor(n / d) == floor(-n / -d).
    z3::expr floor_div(const z3::expr& n, const z3::expr& d, std::optional<int64_t> dc) {
        if (dc) return *dc > 0 ? n / d : (-n) / (-d);
        return z3::ite(d > 0, n / d, (-n) / (-d));
    }

    z3::expr encode(const DimExpr& e, std::vector<SymbolId>& leaves) {
        std::optional<z3::expr> sum;
        for (const sema::Term& t : e.terms()) {
            std::optional<z3::expr> product;
            for (const sema::Factor& f : t.monomial) {
                z3::expr base = symbols.is_atom(f.symbol) ? atom(f.symbol, leaves) : leaf(f.symbol, leaves);
                for (uint32_t i = 0; i < f.exponent; ++i) product = product ? *product * base : base;
            }
            z3::expr coeff = ctx.int_val(t.coeff);
            z3::expr term = !product ? coeff : t.coeff == 1 ? *product : coeff * *product;
            sum = sum ? *sum + term : term;
        }
        return sum ? *sum : ctx.int_val(0);
    }

    z3::expr leaf(SymbolId id, std::vector<SymbolId>& leaves) {
        leaves.push_back(id);
        return var(id);
    }

    z3::expr atom(SymbolId id, std::vector<SymbolId>& leaves) {
        auto it = atoms.find(id);
        if (it == atoms.end()) {
            const DimExpr& num = symbols.atom_numerator(id);
            const DimExpr& den = symbols.atom_denominator(id);
            std::vector<SymbolId> inner;
            z3::expr n = encode(num, inner);
            z3::expr d = encode(den, inner);
            std::optional<int64_t> dc = den.constant_value();
            z3::expr value = ctx.int_val(0);
            if (symbols.kind(id) == SymbolKind::FloorDiv) {
                value = floor_div(n, d, dc);
            } else if (dc && *dc > 0) {
                value = z3::mod(n, d);  // SMT-LIB mod is the floor mod for a positive divisor
            } else {
                value = n - d * floor_div(n, d, dc);
            }
            it = atoms.emplace(id, EncodedAtom{value, std::move(inner)}).first;
        }
        // Bounds are asserted for the leaves inside atoms too.
        leaves.insert(leaves.end(), it->second.leaves.begin(), it->second.leaves.end());
        return it->second.value;
    }

    z3::expr encode(const Constraint& c, std::vector<SymbolId>& leaves) {
        z3::expr l = encode(c.lhs, leaves);
        z3::expr r = encode(c.rhs, leaves);
        if (c.kind == Constraint::Kind::Divides) {
            // k | n: n == 0 when k == 0; otherwise n mod k == 0 (SMT-LIB mod is >= 0 and
            // n == k*div(n, k) + mod(n, k), for either sign of k).
            if (auto k = c.lhs.constant_value()) {
                if (*k == 0) return r == 0;
                return z3::mod(r, l) == 0;
            }
            return z3::ite(l == 0, r == 0, z3::mod(r, l) == 0);
        }
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
};

Z3Backend::Z3Backend(const SymbolTable& symbols) : impl_(std::make_unique<Impl>(symbols)) {}
Z3Backend::~Z3Backend() = default;

bool Z3Backend::is_linear(const Constraint& c, const SymbolTable& symbols) {
    if (c.kind == Constraint::Kind::Divides && !c.lhs.is_constant()) return false;
    return is_linear_expr(c.lhs, symbols) && is_linear_expr(c.rhs, symbols);
}

Z3Backend::Result Z3Backend::check(const std::vector<const Constraint*>& facts,
                                   const Constraint& goal, bool linear, unsigned time_limit_ms) {
    Result result;
    Impl& z = *impl_;
    auto start = Clock::now();
    try {
        std::optional<z3::solver> fresh;
        if (!linear) fresh.emplace(z.ctx, "QF_NIA");
        z3::solver& s = linear ? z.linear : *fresh;
        if (linear) s.push();
        std::vector<SymbolId> leaves;
        for (const Constraint* f : facts) s.add(z.encode(*f, leaves));
        s.add(!z.encode(goal, leaves));
        std::sort(leaves.begin(), leaves.end());
        leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
        for (SymbolId id : leaves) s.add(z.var(id) >= 1);

        z.watchdog.arm(time_limit_ms);
        z3::check_result r = s.check();
        bool fired = z.watchdog.disarm();

        if (r == z3::unsat) {
            result.status = Result::Status::Unsat;
        } else if (r == z3::sat) {
            result.status = Result::Status::Sat;
            z3::model m = s.get_model();
            for (SymbolId id : leaves) {
                int64_t v = 0;
                if (m.eval(z.var(id), true).is_numeral_i64(v)) result.model.set(id, v);
            }
        } else {
            result.timed_out = fired;
            result.reason = s.reason_unknown();
        }
        if (linear) s.pop();
    } catch (const z3::exception& e) {
        z.watchdog.disarm();
        result.status = Result::Status::Unknown;
        result.reason = fmt::format("Z3 error: {}", e.msg());
        // The reused solver may be left inside a scope: start it afresh.
        if (linear) z.linear = z3::solver(z.ctx, "QF_LIA");
    }
    result.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return result;
}

}  // namespace meshc::solver

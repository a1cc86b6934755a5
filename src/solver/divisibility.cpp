// Divisibility reasoning over monomials; see divisibility.h for the rules.
#include "solver/divisibility.h"

#include <algorithm>
#include <numeric>

namespace meshc::solver {

using solver::DimExpr;
using solver::Factor;
using solver::Monomial;
using solver::SymbolId;
using solver::Term;

namespace {

constexpr int kMaxRounds = 8;          // closure rounds
constexpr size_t kMaxDivisors = 16;    // known divisors kept per multiple
constexpr int kMaxDepth = 12;          // recursion depth of one proof search
constexpr int kBudget = 2000;          // solve() calls per proves()

bool is_unit(const DimExpr& e) {
    auto c = e.constant_value();
    return c && (*c == 1 || *c == -1);
}

// Divisibility ignores signs: make the leading coefficient positive.
DimExpr positive(const DimExpr& e) {
    if (e.is_zero() || e.terms()[0].coeff > 0) return e;
    auto n = solver::negate(e);
    return n ? std::move(n).value() : e;
}

DimExpr times(const DimExpr& a, const DimExpr& b, bool& ok) {
    auto r = solver::mul(a, b);
    if (!r) {
        ok = false;
        return DimExpr();
    }
    return std::move(r).value();
}

Monomial monomial_gcd(const Monomial& a, const Monomial& b, const solver::SymbolTable* only_positive) {
    Monomial out;
    size_t j = 0;
    for (const Factor& f : a) {
        while (j < b.size() && b[j].symbol < f.symbol) ++j;
        if (j == b.size()) break;
        if (b[j].symbol != f.symbol) continue;
        if (only_positive && !only_positive->is_positive(f.symbol)) continue;
        out.push_back(Factor{f.symbol, std::min(f.exponent, b[j].exponent)});
    }
    return out;
}

int64_t gcd_i64(int64_t a, int64_t b) {
    uint64_t ua = a < 0 ? uint64_t(0) - uint64_t(a) : uint64_t(a);
    uint64_t ub = b < 0 ? uint64_t(0) - uint64_t(b) : uint64_t(b);
    uint64_t g = std::gcd(ua, ub);
    return g > uint64_t(INT64_MAX) ? int64_t(1) << 62 : int64_t(g);
}

// The largest c*m (c: gcd of all coefficients, m: gcd of all monomials) dividing every
// term of a and of b, as a one-term expression. With `only_positive`, m uses only size
// variables and axis sizes, so the factor is non-zero (what cancelling from a fact needs).
DimExpr common_factor(const DimExpr& a, const DimExpr& b, const solver::SymbolTable* only_positive) {
    int64_t c = gcd_i64(a.content(), b.content());
    if (c == 0) c = 1;
    std::optional<Monomial> m;
    for (const DimExpr* e : {&a, &b}) {
        for (const Term& t : e->terms()) {
            m = m ? monomial_gcd(*m, t.monomial, only_positive)
                  : monomial_gcd(t.monomial, t.monomial, only_positive);
        }
    }
    auto r = DimExpr::from_terms({Term{c, m.value_or(Monomial{})}});
    return r ? std::move(r).value() : DimExpr::constant(1);
}

DimExpr divide(const DimExpr& a, const DimExpr& b) {
    auto q = solver::exact_quotient(a, b);
    return q ? *q : a;  // callers divide only by known factors
}

// A common divisor g of k and d (g | k and g | d as polynomials), as large as cheaply
// found: the common constant-and-monomial factor, times k' or d' when one of the
// cofactors divides the other.
DimExpr common_divisor(const DimExpr& k, const DimExpr& d) {
    DimExpr g0 = common_factor(k, d, nullptr);
    DimExpr k1 = divide(k, g0), d1 = divide(d, g0);
    bool ok = true;
    if (solver::exact_quotient(d1, k1)) {
        DimExpr g = times(g0, k1, ok);
        if (ok) return g;
    } else if (solver::exact_quotient(k1, d1)) {
        DimExpr g = times(g0, d1, ok);
        if (ok) return g;
    }
    return g0;
}

// R2: cancels the non-zero common factor; for a constant divisor, also the multiple's
// content (coprime to it once the common factor is gone).
void cancel(DimExpr& k, DimExpr& n, const solver::SymbolTable& symbols) {
    if (k.is_zero() || n.is_zero()) return;
    DimExpr cf = common_factor(k, n, &symbols);
    if (!is_unit(cf)) {
        k = divide(k, cf);
        n = divide(n, cf);
    }
    if (k.is_constant()) {
        int64_t s = n.content();
        if (s > 1) n = divide(n, DimExpr::constant(s));
    }
}

}  // namespace

DivisibilityReasoner::DivisibilityReasoner(const solver::SymbolTable& symbols,
                                           const std::vector<DivisibilityFact>& facts)
    : symbols_(symbols) {
    for (const DivisibilityFact& f : facts) {
        DimExpr k = positive(f.divisor), n = positive(f.multiple);
        // `0 | n` is n == 0 and `k | 0` says nothing: neither is a divisibility fact.
        if (k.is_zero() || n.is_zero() || is_unit(k)) continue;
        cancel(k, n, symbols_);
        if (is_unit(k) || n.is_constant()) continue;  // ground facts were checked by the caller
        auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Entry& e) { return e.multiple == n; });
        if (it == entries_.end()) {
            entries_.push_back(Entry{n, {}});
            it = entries_.end() - 1;
        }
        add_divisor(*it, k);
    }
    for (int round = 0; round < kMaxRounds; ++round) {
        bool changed = false;
        for (size_t i = 0; i < entries_.size(); ++i) {
            std::vector<DimExpr> current = entries_[i].divisors;
            for (const DimExpr& d : current) {
                // R3: d | x, d == q*y, e | y  =>  q*e | d | x.
                for (size_t j = 0; j < entries_.size(); ++j) {
                    auto q = solver::exact_quotient(d, entries_[j].multiple);
                    if (!q) continue;
                    std::vector<DimExpr> es = entries_[j].divisors;
                    for (const DimExpr& e : es) {
                        bool ok = true;
                        DimExpr cand = times(*q, e, ok);
                        if (ok) changed |= add_divisor(entries_[i], cand);
                    }
                }
            }
            // R5: x == c1*m1*t1 == c2*m2*t2; with G == gcd(m1, m2), x/G is an integer
            // divisible by c1 and c2, so lcm(c1, c2)*G | x (if G == 0 then x == 0).
            current = entries_[i].divisors;
            for (size_t a = 0; a < current.size(); ++a) {
                for (size_t b = a + 1; b < current.size(); ++b) {
                    if (!current[a].is_single_term() || !current[b].is_single_term()) continue;
                    const Term& ta = current[a].terms()[0];
                    const Term& tb = current[b].terms()[0];
                    int64_t g = gcd_i64(ta.coeff, tb.coeff);
                    int64_t l = 0;
                    if (__builtin_mul_overflow(ta.coeff / g, tb.coeff, &l)) continue;
                    auto cand = DimExpr::from_terms(
                        {Term{l < 0 ? -l : l, monomial_gcd(ta.monomial, tb.monomial, nullptr)}});
                    if (cand) changed |= add_divisor(entries_[i], std::move(cand).value());
                }
            }
        }
        if (!changed) break;
    }
}

bool DivisibilityReasoner::add_divisor(Entry& entry, DimExpr d) {
    d = positive(d);
    if (d.is_zero() || is_unit(d)) return false;
    for (const DimExpr& e : entry.divisors)
        if (solver::exact_quotient(e, d)) return false;  // d | e: nothing new
    std::erase_if(entry.divisors,
                  [&](const DimExpr& e) { return solver::exact_quotient(d, e).has_value(); });
    if (entry.divisors.size() >= kMaxDivisors) return false;
    entry.divisors.push_back(std::move(d));
    return true;
}

bool DivisibilityReasoner::proves(const DimExpr& divisor, const DimExpr& multiple) const {
    int budget = kBudget;
    return solve(divisor, multiple, 0, budget);
}

bool DivisibilityReasoner::solve(DimExpr k, DimExpr n, int depth, int& budget) const {
    if (--budget < 0 || depth > kMaxDepth) return false;
    k = positive(k);
    n = positive(n);
    if (n.is_zero() || is_unit(k)) return true;
    if (k.is_zero()) return false;
    if (k.is_constant() && n.is_constant()) return *n.constant_value() % *k.constant_value() == 0;
    if (solver::exact_quotient(n, k)) return true;  // R1
    cancel(k, n, symbols_);                        // R2 (an equivalence)
    if (is_unit(k) || n.is_zero()) return true;
    if (solver::exact_quotient(n, k)) return true;

    // R4 with R3: n == x*r for a known multiple x; a common divisor g of k and a known
    // divisor d of x divides x; then k == g*k' divides x*r == n once k' | r.
    for (const Entry& entry : entries_) {
        auto r = solver::exact_quotient(n, entry.multiple);
        if (!r) continue;
        for (const DimExpr& d : entry.divisors) {
            DimExpr g = common_divisor(k, d);
            if (is_unit(g)) continue;
            auto k2 = solver::exact_quotient(k, g);
            if (k2 && solve(*k2, *r, depth + 1, budget)) return true;
        }
    }

    if (n.terms().size() > 1) {
        // R6: k divides every term.
        bool all = true;
        for (const Term& t : n.terms()) {
            auto te = DimExpr::from_terms({t});
            if (!te || !solve(k, *te, depth + 1, budget)) {
                all = false;
                break;
            }
        }
        if (all) return true;
        // R6 with a known multiple x that k divides: k | n - x (or n + x), when that has
        // fewer terms, gives k | n.
        for (const Entry& entry : entries_) {
            if (entry.multiple.terms().size() < 2) continue;
            bool k_divides_x = std::any_of(entry.divisors.begin(), entry.divisors.end(),
                                           [&](const DimExpr& d) {
                                               return solver::exact_quotient(d, k).has_value();
                                           });
            if (!k_divides_x) continue;
            for (bool minus : {true, false}) {
                auto rest = minus ? solver::sub(n, entry.multiple) : solver::add(n, entry.multiple);
                if (rest && rest->terms().size() < n.terms().size() &&
                    solve(k, *rest, depth + 1, budget))
                    return true;
            }
        }
        return false;
    }

    // R7: n == u*r with u == floor(a / b), b a positive constant times a monomial of size
    // variables (so b >= 1). If b | a then a == b*u exactly, and k | u*r <=> k*b | a*r.
    const Term& nt = n.terms()[0];
    for (const Factor& f : nt.monomial) {
        if (symbols_.kind(f.symbol) != solver::SymbolKind::FloorDiv) continue;
        const DimExpr& a = symbols_.atom_numerator(f.symbol);
        const DimExpr& b = symbols_.atom_denominator(f.symbol);
        if (!b.is_single_term() || b.terms()[0].coeff <= 0) continue;
        bool positive_b = std::all_of(b.terms()[0].monomial.begin(), b.terms()[0].monomial.end(),
                                      [&](const Factor& g) { return symbols_.is_positive(g.symbol); });
        if (!positive_b) continue;
        auto r = solver::exact_quotient(n, DimExpr::symbol(f.symbol));
        if (!r) continue;
        bool ok = true;
        DimExpr kb = times(k, b, ok), ar = times(a, *r, ok);
        if (ok && solve(b, a, depth + 1, budget) && solve(kb, ar, depth + 1, budget)) return true;
    }
    return false;
}

std::string DivisibilityReasoner::dump() const {
    std::string out;
    for (const Entry& e : entries_) {
        out += e.multiple.to_string(symbols_) + ":";
        for (size_t i = 0; i < e.divisors.size(); ++i)
            out += (i ? ", " : " ") + e.divisors[i].to_string(symbols_);
        out += "\n";
    }
    return out;
}

}  // namespace meshc::solver

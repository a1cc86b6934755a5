// Dim expressions in normal form; see dim_expr.h. All int64 arithmetic is checked: an
// overflow becomes a DimError, never undefined behaviour.
#include "solver/dim_expr.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include <fmt/format.h>

#include "support/diagnostics.h"

namespace meshc::solver {

namespace {

// ---------------------------------------------------------------- checked integers

bool checked_add(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }
bool checked_sub(int64_t a, int64_t b, int64_t& out) { return !__builtin_sub_overflow(a, b, &out); }
bool checked_mul(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

DimError overflow() {
    return DimError{DimErrorKind::Overflow, "size arithmetic overflows 64-bit integers", {}};
}
DimError division_by_zero() {
    return DimError{DimErrorKind::DivisionByZero, "division of a size by zero", {}};
}

// floor(a / b) and a - b * floor(a / b) for b != 0; false on overflow (INT64_MIN / -1).
bool floor_div_int(int64_t a, int64_t b, int64_t& out) {
    if (b == -1) return checked_sub(0, a, out);
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    out = q;
    return true;
}
int64_t floor_mod_int(int64_t a, int64_t b) {
    if (b == -1 || b == 1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
// |a| without overflow (|INT64_MIN| = 2^63 fits in uint64).
uint64_t abs_u(int64_t a) { return a < 0 ? uint64_t(0) - uint64_t(a) : uint64_t(a); }

// ---------------------------------------------------------------- monomials

uint64_t degree_of(const Monomial& m) {
    uint64_t d = 0;
    for (const Factor& f : m) d += f.exponent;
    return d;
}

// Graded lexicographic order; `greater` is the leading one.
std::strong_ordering compare_monomials(const Monomial& a, const Monomial& b) {
    uint64_t da = degree_of(a), db = degree_of(b);
    if (da != db) return da <=> db;
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        if (a[i].symbol != b[i].symbol) {
            // The monomial with the smaller variable has a positive exponent where the
            // other has 0: it is larger lexicographically.
            return a[i].symbol < b[i].symbol ? std::strong_ordering::greater
                                             : std::strong_ordering::less;
        }
        if (a[i].exponent != b[i].exponent) return a[i].exponent <=> b[i].exponent;
    }
    return a.size() <=> b.size();
}

std::optional<Monomial> multiply_monomials(const Monomial& a, const Monomial& b) {
    Monomial out;
    out.reserve(a.size() + b.size());
    size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
        if (j == b.size() || (i < a.size() && a[i].symbol < b[j].symbol)) {
            out.push_back(a[i++]);
        } else if (i == a.size() || b[j].symbol < a[i].symbol) {
            out.push_back(b[j++]);
        } else {
            uint32_t e = 0;
            if (__builtin_add_overflow(a[i].exponent, b[j].exponent, &e)) return std::nullopt;
            out.push_back(Factor{a[i].symbol, e});
            ++i;
            ++j;
        }
    }
    return out;
}

bool monomial_divides(const Monomial& d, const Monomial& m) {
    size_t j = 0;
    for (const Factor& f : d) {
        while (j < m.size() && m[j].symbol < f.symbol) ++j;
        if (j == m.size() || m[j].symbol != f.symbol || m[j].exponent < f.exponent) return false;
    }
    return true;
}

// m / d, assuming monomial_divides(d, m).
Monomial divide_monomials(const Monomial& m, const Monomial& d) {
    Monomial out;
    size_t j = 0;
    for (const Factor& f : m) {
        uint32_t e = f.exponent;
        if (j < d.size() && d[j].symbol == f.symbol) e -= d[j++].exponent;
        if (e > 0) out.push_back(Factor{f.symbol, e});
    }
    return out;
}

Monomial normalize_monomial(Monomial m, bool& ok) {
    std::sort(m.begin(), m.end(),
              [](const Factor& a, const Factor& b) { return a.symbol < b.symbol; });
    Monomial out;
    for (const Factor& f : m) {
        if (f.exponent == 0) continue;
        if (!out.empty() && out.back().symbol == f.symbol) {
            if (__builtin_add_overflow(out.back().exponent, f.exponent, &out.back().exponent))
                ok = false;
        } else {
            out.push_back(f);
        }
    }
    return out;
}

// ---------------------------------------------------------------- printing helpers

bool needs_product_parens(const SymbolTable& symbols, SymbolId id) {
    return symbols.kind(id) == SymbolKind::Mod;
}

}  // namespace

std::string operand_string(const DimExpr& e, const SymbolTable& symbols, bool tight) {
    std::string text = e.to_string(symbols);
    bool simple;
    if (auto c = e.constant_value()) {
        simple = *c >= 0;
    } else if (auto s = e.as_symbol()) {
        simple = !needs_product_parens(symbols, *s);
    } else {
        simple = !tight && e.is_single_term() && e.terms()[0].coeff > 0 &&
                 !(e.terms()[0].monomial.size() == 1 &&
                   needs_product_parens(symbols, e.terms()[0].monomial[0].symbol));
    }
    return simple ? text : "(" + text + ")";
}

namespace {

DimResult<DimExpr> power(const DimExpr& base, uint32_t exponent) {
    DimExpr result = DimExpr::constant(1);
    DimExpr b = base;
    while (exponent > 0) {
        if (exponent & 1) {
            auto r = mul(result, b);
            if (!r) return r;
            result = std::move(r).value();
        }
        exponent >>= 1;
        if (exponent > 0) {
            auto sq = mul(b, b);
            if (!sq) return sq;
            b = std::move(sq).value();
        }
    }
    return result;
}

// The terms of `a` split by a one-term divisor c*m (c > 0): a == c*m*q + r, where r keeps
// the terms m does not divide and the remainders (in [0, c)) of the coefficients of those
// it does.
struct Split {
    DimExpr quotient;
    DimExpr remainder;
};
DimResult<Split> split_by_term(const DimExpr& a, const Term& divisor) {
    std::vector<Term> q, r;
    int64_t c = divisor.coeff;
    for (const Term& t : a.terms()) {
        if (!monomial_divides(divisor.monomial, t.monomial)) {
            r.push_back(t);
            continue;
        }
        int64_t rem = floor_mod_int(t.coeff, c);
        int64_t quo = 0;
        int64_t diff = 0;
        if (!checked_sub(t.coeff, rem, diff)) return overflow();
        quo = diff / c;
        if (quo != 0) q.push_back(Term{quo, divide_monomials(t.monomial, divisor.monomial)});
        if (rem != 0) r.push_back(Term{rem, t.monomial});
    }
    auto qe = DimExpr::from_terms(std::move(q));
    auto re = DimExpr::from_terms(std::move(r));
    if (!qe || !re) return overflow();
    return Split{std::move(qe).value(), std::move(re).value()};
}

// Divides every coefficient by g (> 0), which divides them all.
DimExpr divide_content(const DimExpr& e, int64_t g) {
    if (g == 1) return e;
    std::vector<Term> terms = e.terms();
    for (Term& t : terms) t.coeff /= g;
    return std::move(DimExpr::from_terms(std::move(terms))).value();
}

int64_t gcd64(int64_t a, int64_t b) {
    uint64_t g = std::gcd(abs_u(a), abs_u(b));
    // 2^63 (INT64_MIN alone) does not fit; 2^62 still divides everything 2^63 divides.
    return g > uint64_t(INT64_MAX) ? int64_t(1) << 62 : int64_t(g);
}

enum class DivKind { Floor, Mod };

// floor(a / b) or a % b, both non-ground, b not dividing a.
DimResult<DimExpr> divide_symbolic(DivKind kind, DimExpr a, DimExpr b, SymbolTable& symbols) {
    // Make the divisor's leading coefficient positive: floor(a / b) == floor(-a / -b),
    // a % b == -((-a) % (-b)).
    bool negate_result = false;
    if (b.terms()[0].coeff < 0) {
        auto na = negate(a), nb = negate(b);
        if (!na || !nb) return overflow();
        a = std::move(na).value();
        b = std::move(nb).value();
        negate_result = kind == DivKind::Mod;
    }
    DimExpr quotient;  // Floor only: the part of the result outside the atom
    DimExpr rest = a;
    if (b.is_single_term()) {
        auto split = split_by_term(a, b.terms()[0]);
        if (!split) return split.error();
        quotient = split->quotient;
        rest = split->remainder;
    }
    DimExpr result;
    if (rest.is_zero()) {
        result = kind == DivKind::Floor ? quotient : DimExpr();
    } else if (rest.is_constant() && b.is_constant()) {
        int64_t r = *rest.constant_value(), d = *b.constant_value();
        if (kind == DivKind::Floor) {
            int64_t q = 0;
            if (!floor_div_int(r, d, q)) return overflow();
            auto sum = add(quotient, DimExpr::constant(q));
            if (!sum) return sum;
            result = std::move(sum).value();
        } else {
            result = DimExpr::constant(floor_mod_int(r, d));
        }
    } else {
        // floor(g*r / g*d) == floor(r / d) and (g*r) % (g*d) == g * (r % d) for g > 0.
        int64_t g = gcd64(rest.content(), b.content());
        DimExpr num = divide_content(rest, g), den = divide_content(b, g);
        SymbolId atom = symbols.intern_atom(
            kind == DivKind::Floor ? SymbolKind::FloorDiv : SymbolKind::Mod, num, den);
        if (kind == DivKind::Floor) {
            auto sum = add(quotient, DimExpr::symbol(atom));
            if (!sum) return sum;
            result = std::move(sum).value();
        } else {
            auto scaled = scale(DimExpr::symbol(atom), g);
            if (!scaled) return scaled;
            result = std::move(scaled).value();
        }
    }
    if (negate_result) return negate(result);
    return result;
}

}  // namespace

// ---------------------------------------------------------------- DimExpr

DimExpr DimExpr::constant(int64_t value) {
    DimExpr e;
    if (value != 0) e.terms_.push_back(Term{value, {}});
    return e;
}

DimExpr DimExpr::symbol(SymbolId id) {
    DimExpr e;
    e.terms_.push_back(Term{1, {Factor{id, 1}}});
    return e;
}

DimResult<DimExpr> DimExpr::from_terms(std::vector<Term> terms) {
    bool ok = true;
    for (Term& t : terms) t.monomial = normalize_monomial(std::move(t.monomial), ok);
    if (!ok) return overflow();
    std::sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) {
        return compare_monomials(a.monomial, b.monomial) > 0;
    });
    DimExpr e;
    for (Term& t : terms) {
        if (!e.terms_.empty() && e.terms_.back().monomial == t.monomial) {
            if (!checked_add(e.terms_.back().coeff, t.coeff, e.terms_.back().coeff))
                return overflow();
        } else {
            if (!e.terms_.empty() && e.terms_.back().coeff == 0) e.terms_.pop_back();
            e.terms_.push_back(std::move(t));
        }
    }
    if (!e.terms_.empty() && e.terms_.back().coeff == 0) e.terms_.pop_back();
    return e;
}

bool DimExpr::is_constant() const {
    return terms_.empty() || (terms_.size() == 1 && terms_[0].monomial.empty());
}

std::optional<int64_t> DimExpr::constant_value() const {
    if (terms_.empty()) return 0;
    if (terms_.size() == 1 && terms_[0].monomial.empty()) return terms_[0].coeff;
    return std::nullopt;
}

std::optional<SymbolId> DimExpr::as_symbol() const {
    if (terms_.size() == 1 && terms_[0].coeff == 1 && terms_[0].monomial.size() == 1 &&
        terms_[0].monomial[0].exponent == 1)
        return terms_[0].monomial[0].symbol;
    return std::nullopt;
}

uint32_t DimExpr::degree() const {
    uint64_t d = 0;
    for (const Term& t : terms_) d = std::max(d, degree_of(t.monomial));
    return d > UINT32_MAX ? UINT32_MAX : uint32_t(d);
}

int64_t DimExpr::content() const {
    uint64_t g = 0;
    for (const Term& t : terms_) g = std::gcd(g, abs_u(t.coeff));
    return g > uint64_t(INT64_MAX) ? int64_t(1) << 62 : int64_t(g);  // see gcd64()
}

std::vector<SymbolId> DimExpr::symbols() const {
    std::vector<SymbolId> out;
    for (const Term& t : terms_)
        for (const Factor& f : t.monomial) out.push_back(f.symbol);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

size_t DimExpr::hash() const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
        h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (const Term& t : terms_) {
        mix(uint64_t(t.coeff));
        for (const Factor& f : t.monomial) mix((uint64_t(f.symbol.index) << 32) | f.exponent);
        mix(0xffffffffull);
    }
    return size_t(h);
}

std::string DimExpr::to_string(const SymbolTable& symbols) const {
    if (terms_.empty()) return "0";
    struct Printed {
        uint64_t degree;
        std::vector<std::pair<const std::string*, Factor>> factors;  // sorted by name
        int64_t coeff;
    };
    std::vector<Printed> printed;
    for (const Term& t : terms_) {
        Printed p{degree_of(t.monomial), {}, t.coeff};
        for (const Factor& f : t.monomial) p.factors.emplace_back(&symbols.name(f.symbol), f);
        std::sort(p.factors.begin(), p.factors.end(), [](const auto& a, const auto& b) {
            if (*a.first != *b.first) return *a.first < *b.first;
            return a.second.symbol < b.second.symbol;
        });
        printed.push_back(std::move(p));
    }
    std::stable_sort(printed.begin(), printed.end(), [](const Printed& a, const Printed& b) {
        if (a.degree != b.degree) return a.degree > b.degree;
        size_t n = std::min(a.factors.size(), b.factors.size());
        for (size_t i = 0; i < n; ++i) {
            if (*a.factors[i].first != *b.factors[i].first)
                return *a.factors[i].first < *b.factors[i].first;
            if (a.factors[i].second.exponent != b.factors[i].second.exponent)
                return a.factors[i].second.exponent > b.factors[i].second.exponent;
            if (a.factors[i].second.symbol != b.factors[i].second.symbol)
                return a.factors[i].second.symbol < b.factors[i].second.symbol;
        }
        return a.factors.size() < b.factors.size();
    });
    std::string out;
    bool first = true;
    for (const Printed& p : printed) {
        bool negative = p.coeff < 0;
        uint64_t magnitude = abs_u(p.coeff);
        if (first) {
            if (negative) out += "-";
        } else {
            out += negative ? " - " : " + ";
        }
        first = false;
        std::string mono;
        size_t count = 0;
        for (const auto& [name, f] : p.factors) count += f.exponent;
        bool product = count > 1 || magnitude != 1;
        for (const auto& [name, f] : p.factors) {
            std::string text = *name;
            if (product && needs_product_parens(symbols, f.symbol)) text = "(" + text + ")";
            for (uint32_t i = 0; i < f.exponent; ++i) {
                if (!mono.empty()) mono += "*";
                mono += text;
            }
        }
        if (mono.empty()) {
            out += fmt::format("{}", magnitude);
        } else if (magnitude == 1) {
            out += mono;
        } else {
            out += fmt::format("{}*{}", magnitude, mono);
        }
    }
    return out;
}

// ---------------------------------------------------------------- SymbolTable

SymbolId SymbolTable::add_size_var(std::string name) {
    entries_.push_back(Entry{SymbolKind::SizeVar, std::move(name), {}, {}});
    return SymbolId{uint32_t(entries_.size() - 1)};
}

SymbolId SymbolTable::add_axis_size(std::string_view mesh, std::string_view axis) {
    entries_.push_back(Entry{SymbolKind::AxisSize, fmt::format("{}.{}", mesh, axis), {}, {}});
    return SymbolId{uint32_t(entries_.size() - 1)};
}

size_t SymbolTable::AtomKeyHash::operator()(const AtomKey& k) const {
    return k.num.hash() * 31 + k.den.hash() * 7 + size_t(k.kind);
}

SymbolId SymbolTable::intern_atom(SymbolKind kind, const DimExpr& num, const DimExpr& den) {
    MESHC_ASSERT(kind == SymbolKind::FloorDiv || kind == SymbolKind::Mod, "not an atom kind");
    AtomKey key{kind, num, den};
    if (auto it = atoms_.find(key); it != atoms_.end()) return it->second;
    std::string name =
        kind == SymbolKind::FloorDiv
            ? fmt::format("floor({} / {})", operand_string(num, *this, false),
                          operand_string(den, *this, true))
            : fmt::format("{} % {}", operand_string(num, *this, false),
                          operand_string(den, *this, true));
    entries_.push_back(Entry{kind, std::move(name), num, den});
    SymbolId id{uint32_t(entries_.size() - 1)};
    atoms_.emplace(std::move(key), id);
    return id;
}

std::vector<SymbolId> SymbolTable::leaves(const DimExpr& e) const {
    std::vector<SymbolId> out;
    std::vector<SymbolId> work = e.symbols();
    std::unordered_set<SymbolId> seen;
    while (!work.empty()) {
        SymbolId id = work.back();
        work.pop_back();
        if (!seen.insert(id).second) continue;
        if (!is_atom(id)) {
            out.push_back(id);
            continue;
        }
        for (SymbolId s : atom_numerator(id).symbols()) work.push_back(s);
        for (SymbolId s : atom_denominator(id).symbols()) work.push_back(s);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// ---------------------------------------------------------------- arithmetic

DimResult<DimExpr> add(const DimExpr& a, const DimExpr& b) {
    std::vector<Term> terms = a.terms();
    terms.insert(terms.end(), b.terms().begin(), b.terms().end());
    return DimExpr::from_terms(std::move(terms));
}

DimResult<DimExpr> sub(const DimExpr& a, const DimExpr& b) {
    auto nb = negate(b);
    if (!nb) return nb;
    return add(a, *nb);
}

DimResult<DimExpr> scale(const DimExpr& a, int64_t factor) {
    if (factor == 0) return DimExpr();
    std::vector<Term> terms = a.terms();
    for (Term& t : terms)
        if (!checked_mul(t.coeff, factor, t.coeff)) return overflow();
    return DimExpr::from_terms(std::move(terms));
}

DimResult<DimExpr> negate(const DimExpr& a) { return scale(a, -1); }

DimResult<DimExpr> mul(const DimExpr& a, const DimExpr& b) {
    std::vector<Term> terms;
    terms.reserve(a.terms().size() * b.terms().size());
    for (const Term& x : a.terms()) {
        for (const Term& y : b.terms()) {
            Term t;
            if (!checked_mul(x.coeff, y.coeff, t.coeff)) return overflow();
            auto m = multiply_monomials(x.monomial, y.monomial);
            if (!m) return overflow();
            t.monomial = std::move(*m);
            terms.push_back(std::move(t));
        }
    }
    return DimExpr::from_terms(std::move(terms));
}

std::optional<DimExpr> exact_quotient(const DimExpr& a, const DimExpr& b) {
    if (b.is_zero()) return std::nullopt;
    if (a.is_zero()) return DimExpr();
    if (b.is_single_term()) {
        const Term& d = b.terms()[0];
        std::vector<Term> q;
        for (const Term& t : a.terms()) {
            if (!monomial_divides(d.monomial, t.monomial)) return std::nullopt;
            if (d.coeff == -1) {
                int64_t c = 0;
                if (!checked_sub(0, t.coeff, c)) return std::nullopt;
                q.push_back(Term{c, divide_monomials(t.monomial, d.monomial)});
                continue;
            }
            if (t.coeff % d.coeff != 0) return std::nullopt;
            q.push_back(Term{t.coeff / d.coeff, divide_monomials(t.monomial, d.monomial)});
        }
        auto e = DimExpr::from_terms(std::move(q));
        if (!e) return std::nullopt;
        return std::move(e).value();
    }
    // Long division by the leading term. Under a monomial order the leading term of an
    // exact multiple q*b is lt(q)*lt(b), so a step that cannot divide proves b does not
    // divide a (over the rationals with integral quotient).
    const Term& lead = b.terms()[0];
    std::vector<Term> quotient;
    DimExpr rest = a;
    for (int steps = 0; !rest.is_zero(); ++steps) {
        if (steps > 4096) return std::nullopt;
        const Term& r = rest.terms()[0];
        if (!monomial_divides(lead.monomial, r.monomial)) return std::nullopt;
        if (lead.coeff == -1 ? r.coeff == INT64_MIN : r.coeff % lead.coeff != 0)
            return std::nullopt;
        Term t{r.coeff / lead.coeff, divide_monomials(r.monomial, lead.monomial)};
        auto tb = mul(DimExpr::from_terms({t}).value(), b);
        if (!tb) return std::nullopt;
        auto next = sub(rest, *tb);
        if (!next) return std::nullopt;
        rest = std::move(next).value();
        quotient.push_back(std::move(t));
    }
    auto q = DimExpr::from_terms(std::move(quotient));
    if (!q) return std::nullopt;
    return std::move(q).value();
}

DimResult<DimExpr> floor_div(const DimExpr& a, const DimExpr& b, SymbolTable& symbols) {
    if (b.is_zero()) return division_by_zero();
    if (a.is_constant() && b.is_constant()) {
        int64_t q = 0;
        if (!floor_div_int(*a.constant_value(), *b.constant_value(), q)) return overflow();
        return DimExpr::constant(q);
    }
    if (auto q = exact_quotient(a, b)) return *q;
    return divide_symbolic(DivKind::Floor, a, b, symbols);
}

DimResult<DimExpr> mod(const DimExpr& a, const DimExpr& b, SymbolTable& symbols) {
    if (b.is_zero()) return division_by_zero();
    if (a.is_constant() && b.is_constant())
        return DimExpr::constant(floor_mod_int(*a.constant_value(), *b.constant_value()));
    if (exact_quotient(a, b)) return DimExpr();
    return divide_symbolic(DivKind::Mod, a, b, symbols);
}

DimResult<DimExpr> substitute(const DimExpr& e, const Substitution& subst, SymbolTable& symbols) {
    std::unordered_map<SymbolId, DimExpr> memo;
    // Atoms nest only finitely (an atom's operands were built before it), so this
    // recursion is bounded by the nesting depth of the expression itself.
    // The polynomial with every symbol replaced by its value (atoms rebuilt).
    std::function<DimResult<DimExpr>(SymbolId)> value_of;
    auto go = [&](const DimExpr& x) -> DimResult<DimExpr> {
        DimExpr acc;
        for (const Term& t : x.terms()) {
            DimExpr prod = DimExpr::constant(t.coeff);
            for (const Factor& f : t.monomial) {
                auto v = value_of(f.symbol);
                if (!v) return v;
                auto p = power(*v, f.exponent);
                if (!p) return p;
                auto m = mul(prod, *p);
                if (!m) return m;
                prod = std::move(m).value();
            }
            auto s = add(acc, prod);
            if (!s) return s;
            acc = std::move(s).value();
        }
        return acc;
    };
    value_of = [&](SymbolId id) -> DimResult<DimExpr> {
        if (auto it = subst.find(id); it != subst.end()) return it->second;
        if (!symbols.is_atom(id)) return DimExpr::symbol(id);
        if (auto it = memo.find(id); it != memo.end()) return it->second;
        // Copies: interning a new atom may reallocate the table's storage.
        DimExpr num = symbols.atom_numerator(id), den = symbols.atom_denominator(id);
        SymbolKind kind = symbols.kind(id);
        auto n2 = go(num);
        if (!n2) return n2;
        auto d2 = go(den);
        if (!d2) return d2;
        DimResult<DimExpr> r = (*n2 == num && *d2 == den) ? DimResult<DimExpr>(DimExpr::symbol(id))
                               : kind == SymbolKind::FloorDiv ? floor_div(*n2, *d2, symbols)
                                                              : mod(*n2, *d2, symbols);
        if (r) memo.emplace(id, *r);
        return r;
    };
    return go(e);
}

// ---------------------------------------------------------------- evaluation

void Assignment::set(SymbolId id, int64_t value) {
    if (id.index >= values_.size()) values_.resize(id.index + 1);
    values_[id.index] = value;
}

DimResult<int64_t> evaluate(const DimExpr& e, const SymbolTable& symbols, const Assignment& values) {
    int64_t total = 0;
    for (const Term& t : e.terms()) {
        int64_t prod = t.coeff;
        for (const Factor& f : t.monomial) {
            int64_t v = 0;
            if (symbols.is_atom(f.symbol)) {
                auto n = evaluate(symbols.atom_numerator(f.symbol), symbols, values);
                if (!n) return n;
                auto d = evaluate(symbols.atom_denominator(f.symbol), symbols, values);
                if (!d) return d;
                if (*d == 0) return division_by_zero();
                if (symbols.kind(f.symbol) == SymbolKind::FloorDiv) {
                    if (!floor_div_int(*n, *d, v)) return overflow();
                } else {
                    v = floor_mod_int(*n, *d);
                }
            } else if (auto given = values.get(f.symbol)) {
                v = *given;
            } else {
                return DimError{DimErrorKind::Unbound,
                                fmt::format("no value for `{}`", symbols.name(f.symbol)),
                                {}};
            }
            for (uint32_t i = 0; i < f.exponent; ++i) {
                if (!checked_mul(prod, v, prod)) return overflow();
                if (prod == 0) break;
            }
        }
        if (!checked_add(total, prod, total)) return overflow();
    }
    return total;
}

// ---------------------------------------------------------------- from the AST

}  // namespace meshc::solver

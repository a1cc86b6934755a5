// RefinementSolver: facts in scopes, and the decision pipeline described in
// refinement.h. Divisibility reasoning lives in divisibility.cpp, the Z3 encoding in
// z3_backend.cpp.
#include "solver/refinement.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "solver/divisibility.h"
#include "solver/z3_backend.h"
#include "support/diagnostics.h"

namespace meshc::solver {

using solver::Assignment;
using solver::DimResult;
using solver::Substitution;
using solver::SymbolKind;
using solver::Term;

// ---------------------------------------------------------------- constraints

std::string_view cmp_op_spelling(CmpOp op) {
    switch (op) {
    case CmpOp::Eq: return "==";
    case CmpOp::Ne: return "!=";
    case CmpOp::Lt: return "<";
    case CmpOp::Le: return "<=";
    case CmpOp::Gt: return ">";
    case CmpOp::Ge: return ">=";
    }
    return "?";
}

std::string_view decided_by_name(DecidedBy d) {
    switch (d) {
    case DecidedBy::Ground: return "ground";
    case DecidedBy::Normalization: return "normalization";
    case DecidedBy::Divisibility: return "divisibility";
    case DecidedBy::Positivity: return "positivity";
    case DecidedBy::Z3: return "z3";
    case DecidedBy::Search: return "search";
    case DecidedBy::None: return "none";
    }
    return "?";
}

std::string Constraint::to_string(const SymbolTable& symbols) const {
    if (kind == Kind::Divides) {
        return fmt::format("{} % {} == 0", solver::operand_string(rhs, symbols, false),
                           solver::operand_string(lhs, symbols, true));
    }
    return fmt::format("{} {} {}", lhs.to_string(symbols), cmp_op_spelling(op),
                       rhs.to_string(symbols));
}

DimResult<bool> holds(const Constraint& c, const SymbolTable& symbols, const Assignment& values) {
    auto l = solver::evaluate(c.lhs, symbols, values);
    if (!l) return l.error();
    auto r = solver::evaluate(c.rhs, symbols, values);
    if (!r) return r.error();
    if (c.kind == Constraint::Kind::Divides) {
        int64_t k = *l, n = *r;
        if (k == 0) return n == 0;
        if (k == 1 || k == -1) return true;
        return n % k == 0;
    }
    switch (c.op) {
    case CmpOp::Eq: return *l == *r;
    case CmpOp::Ne: return *l != *r;
    case CmpOp::Lt: return *l < *r;
    case CmpOp::Le: return *l <= *r;
    case CmpOp::Gt: return *l > *r;
    case CmpOp::Ge: return *l >= *r;
    }
    return false;
}

std::optional<int64_t> Counterexample::value_of(SymbolId id) const {
    for (const auto& [s, v] : values)
        if (s == id) return v;
    return std::nullopt;
}

std::string Counterexample::to_string(const SymbolTable& symbols) const {
    std::string out;
    for (const auto& [s, v] : values) {
        if (!out.empty()) out += ", ";
        out += fmt::format("{} = {}", symbols.name(s), v);
    }
    return out;
}

// ---------------------------------------------------------------- derived state

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<SymbolId> constraint_leaves(const Constraint& c, const SymbolTable& symbols) {
    std::vector<SymbolId> out = symbols.leaves(c.lhs);
    std::vector<SymbolId> r = symbols.leaves(c.rhs);
    out.insert(out.end(), r.begin(), r.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

// `a % b == 0` (any `lhs == rhs` whose difference is c * (a % b), c != 0) as b | a.
std::optional<DivisibilityFact> as_divisibility(const Constraint& c, const SymbolTable& symbols) {
    if (c.kind == Constraint::Kind::Divides) return DivisibilityFact{c.lhs, c.rhs};
    if (c.op != CmpOp::Eq) return std::nullopt;
    auto p = solver::sub(c.lhs, c.rhs);
    if (!p || !p->is_single_term()) return std::nullopt;
    const Term& t = p->terms()[0];
    if (t.monomial.size() != 1 || t.monomial[0].exponent != 1) return std::nullopt;
    SymbolId atom = t.monomial[0].symbol;
    if (symbols.kind(atom) != SymbolKind::Mod) return std::nullopt;
    return DivisibilityFact{symbols.atom_denominator(atom), symbols.atom_numerator(atom)};
}

class UnionFind {
public:
    uint32_t find(uint32_t x) {
        auto it = parent_.find(x);
        if (it == parent_.end()) {
            parent_.emplace(x, x);
            return x;
        }
        if (it->second == x) return x;
        uint32_t root = find(it->second);
        parent_[x] = root;
        return root;
    }
    void unite(uint32_t a, uint32_t b) {
        a = find(a);
        b = find(b);
        if (a != b) parent_[std::max(a, b)] = std::min(a, b);
    }

private:
    std::unordered_map<uint32_t, uint32_t> parent_;
};

// The assignment values tried per symbol, smallest first (highly composite numbers
// beyond 12, where divisibility counterexamples live).
constexpr int64_t kSearchValues[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                     16, 24, 32, 48, 64, 96, 128};

struct SearchSpace {
    std::vector<SymbolId> free;                               // enumerated
    std::vector<std::pair<SymbolId, const DimExpr*>> computed;  // eliminated by equalities
    std::vector<const Constraint*> must_hold;
    const Constraint* must_fail = nullptr;
};

// Enumerates assignments of the free symbols in order of their largest value, so the
// first one found is small. Every candidate is checked by evaluation.
std::optional<Assignment> bounded_search(const SearchSpace& space, const SymbolTable& symbols,
                                         uint64_t budget, uint64_t& tried) {
    Assignment a;
    auto accept = [&]() -> bool {
        ++tried;
        for (const auto& [id, e] : space.computed) {
            auto v = solver::evaluate(*e, symbols, a);
            if (!v || *v < 1) return false;
            a.set(id, *v);
        }
        for (const Constraint* f : space.must_hold) {
            auto h = holds(*f, symbols, a);
            if (!h || !*h) return false;
        }
        if (space.must_fail) {
            auto h = holds(*space.must_fail, symbols, a);
            return h.ok() && !*h;
        }
        return true;
    };
    size_t n = space.free.size();
    if (n == 0) return accept() ? std::optional<Assignment>(a) : std::nullopt;
    uint64_t steps = 0;
    constexpr size_t kLevels = std::size(kSearchValues);
    for (size_t level = 0; level < kLevels; ++level) {
        std::vector<size_t> idx(n, 0);
        while (true) {
            if (++steps > budget) return std::nullopt;
            if (*std::max_element(idx.begin(), idx.end()) == level) {
                for (size_t i = 0; i < n; ++i) a.set(space.free[i], kSearchValues[idx[i]]);
                if (accept()) return a;
            }
            size_t i = 0;
            while (i < n && idx[i] == level) idx[i++] = 0;
            if (i == n) break;
            ++idx[i];
        }
    }
    return std::nullopt;
}

bool nonnegative_for_positive_symbols(const DimExpr& q, SymbolTable& symbols) {
    // q(x) >= 0 for all x >= 1 if q(y + 1) has no negative coefficient (y >= 0).
    Substitution shift;
    for (SymbolId s : q.symbols()) {
        if (symbols.is_atom(s)) return false;
        auto e = solver::add(DimExpr::symbol(s), DimExpr::constant(1));
        shift.emplace(s, std::move(e).value());
    }
    auto shifted = solver::substitute(q, shift, symbols);
    if (!shifted) return false;
    return std::all_of(shifted->terms().begin(), shifted->terms().end(),
                       [](const Term& t) { return t.coeff >= 0; });
}

bool compare_constant(int64_t p, CmpOp op) {  // p op 0
    switch (op) {
    case CmpOp::Eq: return p == 0;
    case CmpOp::Ne: return p != 0;
    case CmpOp::Lt: return p < 0;
    case CmpOp::Le: return p <= 0;
    case CmpOp::Gt: return p > 0;
    case CmpOp::Ge: return p >= 0;
    }
    return false;
}

}  // namespace

struct RefinementSolver::Derived {
    bool contradictory = false;
    Substitution subst;                   // symbols defined by equality facts
    std::vector<SymbolId> eliminated;     // subst's keys, in order
    std::unique_ptr<DivisibilityReasoner> divisibility;
    // Facts grouped by the symbols they share: a counterexample is searched in the
    // goal's component and completed with a witness of every other component.
    std::unordered_map<SymbolId, uint32_t> component_of;
    std::vector<std::vector<size_t>> component_facts;
    std::vector<std::vector<SymbolId>> component_leaves;
    std::vector<int8_t> witness_state;  // 0: not tried, 1: found, -1: none found
    std::vector<Assignment> witness;
};

namespace {

// Turns an equality fact (already substituted) into a definition x := e when some
// symbol x occurs only in one term, as +-x; adds it to `d` (composing with earlier ones).
// Otherwise a two-term equality t1 == -t2 still gives t1 | t2 and t2 | t1.
void orient_equality(DimExpr p, RefinementSolver::Derived& d, SymbolTable& symbols,
                     std::vector<DivisibilityFact>& div_facts) {
    if (p.is_zero()) return;
    if (p.is_constant()) {
        d.contradictory = true;
        return;
    }
    int64_t g = p.content();
    if (g > 1) p = *solver::exact_quotient(p, DimExpr::constant(g));
    std::optional<size_t> best;
    for (size_t i = 0; i < p.terms().size(); ++i) {
        const Term& t = p.terms()[i];
        if (t.coeff != 1 && t.coeff != -1) continue;
        if (t.monomial.size() != 1 || t.monomial[0].exponent != 1) continue;
        SymbolId x = t.monomial[0].symbol;
        if (symbols.is_atom(x)) continue;
        bool elsewhere = false;
        for (size_t j = 0; j < p.terms().size() && !elsewhere; ++j) {
            if (j == i) continue;
            auto tj = DimExpr::from_terms({p.terms()[j]});
            for (SymbolId s : symbols.leaves(*tj)) elsewhere |= s == x;
        }
        if (elsewhere) continue;
        if (!best || p.terms()[*best].monomial[0].symbol < x) best = i;
    }
    if (!best) {
        if (p.terms().size() == 2) {
            auto t1 = DimExpr::from_terms({p.terms()[0]});
            auto t2 = DimExpr::from_terms({p.terms()[1]});
            div_facts.push_back({*t1, *t2});
            div_facts.push_back({*t2, *t1});
        }
        return;
    }
    const Term& t = p.terms()[*best];
    SymbolId x = t.monomial[0].symbol;
    // p == c*x + rest == 0 with c == +-1: x == -c * rest.
    auto rest = solver::sub(p, *DimExpr::from_terms({t}));
    if (!rest) return;
    auto e = solver::scale(*rest, -t.coeff);
    if (!e) return;
    Substitution one{{x, *e}};
    for (auto& [y, f] : d.subst) {
        auto f2 = solver::substitute(f, one, symbols);
        if (!f2) return;  // overflow: keep the equality out of the substitution
        f = std::move(f2).value();
    }
    d.subst.emplace(x, std::move(e).value());
    d.eliminated.push_back(x);
}

}  // namespace

// ---------------------------------------------------------------- RefinementSolver

RefinementSolver::RefinementSolver(SymbolTable& symbols, SolverOptions options)
    : symbols_(symbols), options_(options) {}

RefinementSolver::~RefinementSolver() = default;

void RefinementSolver::assume(Constraint fact) {
    facts_.push_back(std::move(fact));
    invalidate();
}

void RefinementSolver::push() { scopes_.push_back(facts_.size()); }

void RefinementSolver::pop() {
    MESHC_ASSERT(!scopes_.empty(), "RefinementSolver::pop() without push()");
    size_t n = scopes_.back();
    scopes_.pop_back();
    if (facts_.size() != n) {
        facts_.resize(n);
        invalidate();
    }
}

void RefinementSolver::invalidate() { derived_.reset(); }

bool RefinementSolver::facts_contradictory() { return derived().contradictory; }

RefinementSolver::Derived& RefinementSolver::derived() {
    if (derived_) return *derived_;
    derived_ = std::make_unique<Derived>();
    Derived& d = *derived_;

    // Components and ground facts.
    UnionFind uf;
    std::vector<std::vector<SymbolId>> leaves(facts_.size());
    for (size_t i = 0; i < facts_.size(); ++i) {
        leaves[i] = constraint_leaves(facts_[i], symbols_);
        if (leaves[i].empty()) {
            auto h = holds(facts_[i], symbols_, Assignment());
            if (!h || !*h) d.contradictory = true;
            continue;
        }
        for (SymbolId s : leaves[i]) uf.unite(leaves[i][0].index, s.index);
    }
    std::unordered_map<uint32_t, uint32_t> index_of_root;
    for (size_t i = 0; i < facts_.size(); ++i) {
        if (leaves[i].empty()) continue;
        uint32_t root = uf.find(leaves[i][0].index);
        auto [it, fresh] = index_of_root.emplace(root, uint32_t(d.component_facts.size()));
        if (fresh) {
            d.component_facts.emplace_back();
            d.component_leaves.emplace_back();
        }
        d.component_facts[it->second].push_back(i);
        for (SymbolId s : leaves[i]) {
            if (d.component_of.emplace(s, it->second).second)
                d.component_leaves[it->second].push_back(s);
        }
    }
    for (auto& v : d.component_leaves) std::sort(v.begin(), v.end());
    d.witness_state.assign(d.component_facts.size(), 0);
    d.witness.assign(d.component_facts.size(), Assignment());

    // Equalities define symbols; divisibility facts go to the reasoner.
    std::vector<DivisibilityFact> div_facts;
    for (const Constraint& f : facts_) {
        if (f.kind != Constraint::Kind::Compare || f.op != CmpOp::Eq) continue;
        if (as_divisibility(f, symbols_)) continue;
        auto p = solver::sub(f.lhs, f.rhs);
        if (!p) continue;
        auto ps = solver::substitute(*p, d.subst, symbols_);
        if (!ps) continue;
        orient_equality(std::move(ps).value(), d, symbols_, div_facts);
    }
    for (const Constraint& f : facts_) {
        auto df = as_divisibility(f, symbols_);
        if (!df) continue;
        auto k = solver::substitute(df->divisor, d.subst, symbols_);
        auto n = solver::substitute(df->multiple, d.subst, symbols_);
        if (!k || !n) continue;
        if (k->is_constant() && n->is_constant()) {
            auto h = holds(Constraint::divides(*k, *n), symbols_, Assignment());
            if (!h || !*h) d.contradictory = true;
            continue;
        }
        div_facts.push_back({std::move(k).value(), std::move(n).value()});
    }
    d.divisibility = std::make_unique<DivisibilityReasoner>(symbols_, div_facts);
    return d;
}

Outcome RefinementSolver::prove(const Constraint& goal) {
    auto start = Clock::now();
    Outcome out = decide(goal);
    ++stats_.queries;
    switch (out.verdict) {
    case Verdict::Proved: ++stats_.proved; break;
    case Verdict::Refuted: ++stats_.refuted; break;
    case Verdict::Unknown: ++stats_.unknown; break;
    }
    switch (out.decided_by) {
    case DecidedBy::Ground: ++stats_.by_ground; break;
    case DecidedBy::Normalization: ++stats_.by_normalization; break;
    case DecidedBy::Divisibility: ++stats_.by_divisibility; break;
    case DecidedBy::Positivity: ++stats_.by_positivity; break;
    case DecidedBy::Z3: ++stats_.by_z3; break;
    case DecidedBy::Search: ++stats_.by_search; break;
    case DecidedBy::None: break;
    }
    stats_.total_ms += ms_since(start);
    return out;
}

namespace {

Outcome proved(DecidedBy by, std::string reason = {}) {
    return Outcome{Verdict::Proved, by, {}, std::move(reason)};
}

}  // namespace

Outcome RefinementSolver::decide(const Constraint& goal) {
    // 1. Ground: arithmetic only, whatever the facts.
    std::vector<SymbolId> goal_leaves = constraint_leaves(goal, symbols_);
    if (goal_leaves.empty()) {
        auto h = holds(goal, symbols_, Assignment());
        if (!h) return Outcome{Verdict::Refuted, DecidedBy::Ground, {}, h.error().message};
        return *h ? proved(DecidedBy::Ground) : Outcome{Verdict::Refuted, DecidedBy::Ground, {}, {}};
    }
    Derived& d = derived();
    if (d.contradictory) return proved(DecidedBy::Normalization, "the facts in scope are contradictory");

    // The goal's part of the facts: components that share a symbol with it.
    std::vector<uint32_t> comps;
    std::vector<SymbolId> scope_symbols = goal_leaves;
    for (SymbolId s : goal_leaves) {
        auto it = d.component_of.find(s);
        if (it != d.component_of.end()) comps.push_back(it->second);
    }
    std::sort(comps.begin(), comps.end());
    comps.erase(std::unique(comps.begin(), comps.end()), comps.end());
    std::vector<const Constraint*> scope_facts;
    for (uint32_t c : comps) {
        for (size_t i : d.component_facts[c]) scope_facts.push_back(&facts_[i]);
        scope_symbols.insert(scope_symbols.end(), d.component_leaves[c].begin(),
                             d.component_leaves[c].end());
    }
    std::sort(scope_symbols.begin(), scope_symbols.end());
    scope_symbols.erase(std::unique(scope_symbols.begin(), scope_symbols.end()),
                        scope_symbols.end());

    auto space_for = [&](const std::vector<SymbolId>& syms, std::vector<const Constraint*> facts,
                         const Constraint* must_fail) {
        SearchSpace space;
        for (SymbolId s : syms) {
            auto it = d.subst.find(s);
            if (it == d.subst.end()) space.free.push_back(s);
            else space.computed.emplace_back(s, &it->second);
        }
        space.must_hold = std::move(facts);
        space.must_fail = must_fail;
        return space;
    };

    // Values for the symbols of every other component, so a counterexample satisfies
    // all facts, not only the goal's.
    auto witness = [&](uint32_t c) -> const Assignment* {
        if (d.witness_state[c] == 0) {
            std::vector<const Constraint*> facts;
            for (size_t i : d.component_facts[c]) facts.push_back(&facts_[i]);
            auto found = bounded_search(space_for(d.component_leaves[c], facts, nullptr),
                                        symbols_, options_.search_budget,
                                        stats_.search_assignments);
            d.witness_state[c] = found ? 1 : -1;
            if (found) d.witness[c] = std::move(*found);
        }
        return d.witness_state[c] == 1 ? &d.witness[c] : nullptr;
    };

    // Checks a candidate (values for the goal's symbols) against every fact and the goal.
    auto refute_with = [&](const Assignment& candidate) -> std::optional<Counterexample> {
        Assignment full;
        for (SymbolId s : scope_symbols) full.set(s, candidate.get(s).value_or(1));
        for (uint32_t c = 0; c < d.component_facts.size(); ++c) {
            if (std::binary_search(comps.begin(), comps.end(), c)) continue;
            const Assignment* w = witness(c);
            if (!w) return std::nullopt;
            for (SymbolId s : d.component_leaves[c]) full.set(s, w->get(s).value_or(1));
        }
        for (SymbolId s : scope_symbols)
            if (*full.get(s) < 1) return std::nullopt;
        for (const Constraint& f : facts_) {
            auto h = holds(f, symbols_, full);
            if (!h || !*h) return std::nullopt;
        }
        auto h = holds(goal, symbols_, full);
        if (!h || *h) return std::nullopt;
        Counterexample cex;
        for (SymbolId s : scope_symbols) cex.values.emplace_back(s, *full.get(s));
        std::sort(cex.values.begin(), cex.values.end(), [&](const auto& a, const auto& b) {
            if (symbols_.name(a.first) != symbols_.name(b.first))
                return symbols_.name(a.first) < symbols_.name(b.first);
            return a.first < b.first;
        });
        return cex;
    };

    // The smallest counterexample the bounded search finds (searched at most once).
    bool searched = false;
    std::optional<Counterexample> smallest;
    auto search = [&]() -> std::optional<Counterexample> {
        if (!searched) {
            searched = true;
            auto found = bounded_search(space_for(scope_symbols, scope_facts, &goal), symbols_,
                                        options_.search_budget, stats_.search_assignments);
            if (found) smallest = refute_with(*found);
        }
        return smallest;
    };

    // 2-4. Normalise with the equalities, then the reasoning that needs no Z3.
    if (auto df = as_divisibility(goal, symbols_)) {
        auto k = solver::substitute(df->divisor, d.subst, symbols_);
        auto n = solver::substitute(df->multiple, d.subst, symbols_);
        if (k && n) {
            std::optional<bool> decided;
            if (k->is_constant() && n->is_constant()) {
                auto h = holds(Constraint::divides(*k, *n), symbols_, Assignment());
                if (h) decided = *h;
            } else if (solver::exact_quotient(*n, *k) || n->is_zero()) {
                decided = true;
            }
            if (decided && *decided) return proved(DecidedBy::Normalization);
            if (decided && !*decided) {
                if (auto cex = search())
                    return Outcome{Verdict::Refuted, DecidedBy::Normalization, std::move(*cex), {}};
            } else if (d.divisibility->proves(*k, *n)) {
                return proved(DecidedBy::Divisibility);
            }
        }
    } else {
        auto p = solver::sub(goal.lhs, goal.rhs);
        auto ps = p ? solver::substitute(*p, d.subst, symbols_) : DimResult<DimExpr>(p.error());
        if (ps) {
            if (auto c = ps->constant_value()) {
                if (compare_constant(*c, goal.op)) return proved(DecidedBy::Normalization);
                if (auto cex = search())
                    return Outcome{Verdict::Refuted, DecidedBy::Normalization, std::move(*cex), {}};
            } else {
                // 4. Positivity: p op 0 as q >= 0 for one or two q.
                auto minus = [](const DimExpr& a, int64_t k) { return solver::sub(a, DimExpr::constant(k)); };
                auto neg = solver::negate(*ps);
                auto nonneg = [&](const DimResult<DimExpr>& q) {
                    return q && nonnegative_for_positive_symbols(*q, symbols_);
                };
                bool shown = false;
                switch (goal.op) {
                case CmpOp::Ge: shown = nonneg(*ps); break;
                case CmpOp::Gt: shown = nonneg(minus(*ps, 1)); break;
                case CmpOp::Le: shown = neg && nonneg(*neg); break;
                case CmpOp::Lt: shown = neg && nonneg(minus(*neg, 1)); break;
                case CmpOp::Ne: shown = nonneg(minus(*ps, 1)) || (neg && nonneg(minus(*neg, 1))); break;
                case CmpOp::Eq: break;
                }
                if (shown) return proved(DecidedBy::Positivity);
                // 4b. One fact and positivity: a fact q >= 0 (or q == 0, either way) with
                // goal - q >= 0, so the goal follows by adding a non-negative term. This
                // decides the usual `where Q >= 2` passed on to a callee without Z3.
                auto goal_forms = [&]() -> std::vector<DimExpr> {
                    std::vector<DimExpr> out;  // the goal as g >= 0, one or two of them
                    auto add = [&](const DimResult<DimExpr>& q) { if (q) out.push_back(*q); };
                    switch (goal.op) {
                    case CmpOp::Ge: add(*ps); break;
                    case CmpOp::Gt: add(minus(*ps, 1)); break;
                    case CmpOp::Le: if (neg) add(*neg); break;
                    case CmpOp::Lt: if (neg) add(minus(*neg, 1)); break;
                    case CmpOp::Ne: add(minus(*ps, 1)); if (neg) add(minus(*neg, 1)); break;
                    case CmpOp::Eq: break;
                    }
                    return out;
                }();
                for (const Constraint* f : scope_facts) {
                    if (goal_forms.empty() || shown) break;
                    if (f->kind != Constraint::Kind::Compare || f->op == CmpOp::Ne) continue;
                    auto fp = solver::sub(f->lhs, f->rhs);
                    auto fs = fp ? solver::substitute(*fp, d.subst, symbols_) : DimResult<DimExpr>(fp.error());
                    if (!fs) continue;
                    auto fneg = solver::negate(*fs);
                    std::vector<DimExpr> fact_forms;  // the fact as q >= 0
                    auto addf = [&](const DimResult<DimExpr>& q) { if (q) fact_forms.push_back(*q); };
                    switch (f->op) {
                    case CmpOp::Ge: addf(*fs); break;
                    case CmpOp::Gt: addf(minus(*fs, 1)); break;
                    case CmpOp::Le: if (fneg) addf(*fneg); break;
                    case CmpOp::Lt: if (fneg) addf(minus(*fneg, 1)); break;
                    case CmpOp::Eq: addf(*fs); if (fneg) addf(*fneg); break;
                    case CmpOp::Ne: break;
                    }
                    for (const DimExpr& g : goal_forms) {
                        for (const DimExpr& q : fact_forms) {
                            if (nonneg(solver::sub(g, q))) { shown = true; break; }
                        }
                        if (shown) break;
                    }
                }
                if (shown) return proved(DecidedBy::Positivity);
            }
        }
    }

    // 5. Linear goals: Z3 over the linear facts (all of them, when all are linear).
    std::string reason;
    auto run_z3 = [&](const std::vector<const Constraint*>& facts, bool linear) -> std::optional<Outcome> {
        unsigned limit = options_.time_limit_ms;
        if (options_.run_budget_ms > 0) {
            double left = double(options_.run_budget_ms) - stats_.z3_unknown_ms;
            if (left < 1) {
                reason = fmt::format("the solver's budget for this run ({} ms in all, `--solver-budget`) is spent",
                                     options_.run_budget_ms);
                return std::nullopt;
            }
            limit = std::min<unsigned>(limit, unsigned(left));
        }
        if (!z3_) z3_ = std::make_unique<Z3Backend>(symbols_);
        ++stats_.z3_calls;
        uint64_t wall = uint64_t(limit) * std::max(1u, options_.wall_factor);
        Z3Backend::Result r = z3_->check(facts, goal, linear, limit,
                                         unsigned(std::min<uint64_t>(wall, UINT32_MAX)));
        stats_.z3_ms += r.ms;
        stats_.z3_abandoned = z3_->abandoned_count();
        switch (r.status) {
        case Z3Backend::Result::Status::Unsat:
            return proved(DecidedBy::Z3);
        case Z3Backend::Result::Status::Sat:
            // Prefer the small, deterministic counterexample of the search to Z3's model.
            if (auto cex = search())
                return Outcome{Verdict::Refuted, DecidedBy::Search, std::move(*cex), {}};
            if (auto cex = refute_with(r.model))
                return Outcome{Verdict::Refuted, DecidedBy::Z3, std::move(*cex), {}};
            if (reason.empty()) reason = "Z3 found a model that violates a non-linear fact";
            return std::nullopt;
        case Z3Backend::Result::Status::Unknown:
            stats_.z3_unknown_ms += r.ms;
            if (r.out_of_budget) {
                ++stats_.z3_timeouts;
                reason = fmt::format("timed out after {} ms", limit);
            } else if (r.timed_out) {
                ++stats_.z3_timeouts;
                reason = fmt::format("timed out after {} ms of wall-clock time",
                                     std::max(1u, options_.wall_factor) * limit);
            } else {
                reason = fmt::format("Z3 gave up ({})", r.reason);
            }
            return std::nullopt;
        }
        return std::nullopt;
    };

    bool goal_linear = Z3Backend::is_linear(goal, symbols_);
    std::vector<const Constraint*> linear_facts;
    for (const Constraint* f : scope_facts)
        if (Z3Backend::is_linear(*f, symbols_)) linear_facts.push_back(f);
    bool all_linear = goal_linear && linear_facts.size() == scope_facts.size();
    if (goal_linear) {
        if (auto out = run_z3(linear_facts, true)) return std::move(*out);
    }

    // 6. A small counterexample.
    if (auto cex = search()) return Outcome{Verdict::Refuted, DecidedBy::Search, std::move(*cex), {}};

    // 7. Non-linear: Z3 with the time limit.
    if (!all_linear) {
        if (auto out = run_z3(scope_facts, false)) return std::move(*out);
    }
    if (reason.empty()) reason = "no proof or counterexample found";
    return Outcome{Verdict::Unknown, DecidedBy::None, {}, std::move(reason)};
}

}  // namespace meshc::solver

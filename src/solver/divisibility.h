// Divisibility with symbolic divisors (`2*M.data | B` gives `M.data | B`), decided by
// reasoning over monomials and gcd/lcm of coefficients instead of non-linear integer
// arithmetic, which plain Z3 does not finish. Built by RefinementSolver (refinement.cpp)
// from the divisibility facts in scope, after equality facts were substituted; answers
// its divisibility goals. Sound and incomplete: proves() == false means "not shown", and
// the caller then looks for a counterexample or asks Z3.
//
// Notation: `k | n` means n == k*t for some integer t. Expressions are integer
// polynomials; size variables and axis sizes are >= 1, atoms are any integers.
// Rules (each preserves truth; see divisibility.cpp for the argument at each use):
//   R1 polynomial:   n == k*q for a polynomial q with integer coefficients  =>  k | n
//   R2 cancel:       c*k | c*n  <=>  k | n  for a non-zero c (a positive constant times
//                    a monomial of size variables); for a constant k coprime to s,
//                    k | s*n <=> k | n (Euclid)
//   R3 transitivity: d | a  and  a | x  =>  d | x; in particular, known divisors of a
//                    divisor: if d | x, d == q*y and e | y, then q*e | x
//   R4 product:      g | x  and  k' | r  =>  g*k' | x*r
//   R5 lcm:          c1*m1 | x  and  c2*m2 | x  =>  lcm(c1, c2) * gcd(m1, m2) | x
//   R6 sums:         k | a  and  k | b  =>  k | a + b  (and a - b)
//   R7 exact floor:  b | a  (b >= 1)  and  k*b | a*r  =>  k | floor(a / b) * r
// Nothing here concludes `m*n | x` from `m | x` and `n | x` for symbolic m and n: it is
// false (m = n = x = 2).
#pragma once

#include <vector>

#include "solver/dim_expr.h"

namespace meshc::solver {

struct DivisibilityFact {
    solver::DimExpr divisor;
    solver::DimExpr multiple;
};

class DivisibilityReasoner {
public:
    /// Normalises the facts (R2) and closes the known divisors of each multiple under
    /// R3 and R5, with bounded rounds and sizes.
    DivisibilityReasoner(const solver::SymbolTable& symbols, const std::vector<DivisibilityFact>& facts);

    /// True only if `divisor | multiple` follows from the facts by the rules above.
    bool proves(const solver::DimExpr& divisor, const solver::DimExpr& multiple) const;

    /// The closed facts as `multiple: d1, d2` lines (for tests and debugging).
    std::string dump() const;

private:
    struct Entry {
        solver::DimExpr multiple;
        std::vector<solver::DimExpr> divisors;  // an antichain under divisibility
    };
    bool add_divisor(Entry& entry, solver::DimExpr d);
    bool solve(solver::DimExpr k, solver::DimExpr n, int depth, int& budget) const;

    const solver::SymbolTable& symbols_;
    std::vector<Entry> entries_;
};

}  // namespace meshc::solver

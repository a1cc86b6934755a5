// Dim expressions in normal form: integer polynomials over size variables (`B`),
// mesh-axis sizes (`M.data`) and opaque atoms (`floor(a / b)`, `a % b`). Produced from
// parsed `ast::Dim`s by solver::from_ast() (sema/dims_from_ast.h) (and by the type checker's own arithmetic); consumed by
// shape unification (equality is structural on the normal form) and by
// solver/refinement.h, which reasons about divisibility and comparisons of them.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "support/source_manager.h"

namespace meshc::solver {

/// A variable of a dim polynomial: a size variable, a mesh-axis size, or an opaque atom.
/// Index into the SymbolTable that created it; never compared across tables.
struct SymbolId {
    uint32_t index = 0;
    friend auto operator<=>(SymbolId, SymbolId) = default;
};

}  // namespace meshc::solver

template <>
struct std::hash<meshc::solver::SymbolId> {
    size_t operator()(meshc::solver::SymbolId id) const { return std::hash<uint32_t>{}(id.index); }
};

namespace meshc::solver {

enum class SymbolKind : uint8_t {
    SizeVar,   // `B`; an integer >= 1
    AxisSize,  // `M.data` of a generic mesh `M`; an integer >= 1
    FloorDiv,  // floor(numerator / denominator); any integer
    Mod,       // numerator % denominator, the sign of the denominator (NumPy); any integer
};

// ---------------------------------------------------------------- results

enum class DimErrorKind : uint8_t {
    Overflow,        // an int64 coefficient, value or exponent overflowed
    DivisionByZero,  // `/` or `%` by an expression that is the constant 0
    Unbound,         // evaluate(): a symbol without a value; from_ast(): an unresolved name
};

struct DimError {
    DimErrorKind kind;
    std::string message;
    Span span;  // from_ast(): the offending node; otherwise invalid
};

/// The value of a dim operation, or why there is none. Never throws.
template <typename T>
class DimResult {
public:
    DimResult(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
    DimResult(DimError error) : v_(std::move(error)) {}     // NOLINT
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    const T& operator*() const& { return value(); }
    const T* operator->() const { return &value(); }
    const DimError& error() const { return std::get<1>(v_); }

private:
    std::variant<T, DimError> v_;
};

// ---------------------------------------------------------------- polynomials

struct Factor {
    SymbolId symbol;
    uint32_t exponent = 1;
    friend bool operator==(const Factor&, const Factor&) = default;
};

/// Factors sorted by symbol index, each symbol once, exponents >= 1. Empty: the constant 1.
using Monomial = std::vector<Factor>;

struct Term {
    int64_t coeff = 0;
    Monomial monomial;
    friend bool operator==(const Term&, const Term&) = default;
};

class SymbolTable;

/// A dim expression in normal form: a sum of terms with non-zero coefficients and
/// pairwise distinct monomials, in graded-lexicographic order (leading term first).
/// Two DimExprs built in the same SymbolTable are equal as values for every assignment
/// whenever they are equal here; the converse holds for polynomials without atoms.
class DimExpr {
public:
    DimExpr() = default;  // 0
    static DimExpr constant(int64_t value);
    static DimExpr symbol(SymbolId id);
    /// Sorts and merges `terms` into normal form (fails only on coefficient overflow).
    static DimResult<DimExpr> from_terms(std::vector<Term> terms);

    const std::vector<Term>& terms() const { return terms_; }
    bool is_zero() const { return terms_.empty(); }
    bool is_constant() const;
    /// The value when is_constant().
    std::optional<int64_t> constant_value() const;
    /// The symbol when the expression is exactly one symbol with coefficient 1.
    std::optional<SymbolId> as_symbol() const;
    bool is_single_term() const { return terms_.size() == 1; }
    /// The largest total degree of a term (0 for constants).
    uint32_t degree() const;
    /// gcd of the coefficients' absolute values (0 for the zero expression).
    int64_t content() const;
    /// Every symbol that occurs, atoms included (not the symbols inside atoms), sorted.
    std::vector<SymbolId> symbols() const;

    size_t hash() const;
    friend bool operator==(const DimExpr&, const DimExpr&) = default;

    /// Canonical text independent of interning order: terms by degree, then by symbol
    /// names; factors by name; e.g. `2*B*S + D - 1`, `B*B`, `floor(B / 2)`, `(B + 1) % 4`.
    std::string to_string(const SymbolTable& symbols) const;

private:
    std::vector<Term> terms_;
};

/// `e` as an operand of `/` or `%` in Mesh syntax: parenthesised unless it is a symbol, a
/// constant >= 0 or (left operand only) a product with a positive coefficient.
std::string operand_string(const DimExpr& e, const SymbolTable& symbols, bool right_operand);

// ---------------------------------------------------------------- symbols

/// Owns the symbols of one compilation: names for printing and the definitions of the
/// interned atoms. Size variables and axis sizes are created fresh (two functions' `B`s
/// are different symbols); atoms are interned, so equal atoms have equal ids.
class SymbolTable {
public:
    /// A new size variable (`B`).
    SymbolId add_size_var(std::string name);
    /// A new mesh-axis size of a generic mesh (`M.data`).
    SymbolId add_axis_size(std::string_view mesh, std::string_view axis);
    /// The atom floor(num / den) or num % den (kind FloorDiv or Mod); the caller is
    /// floor_div()/mod(), which first reduce the operands.
    SymbolId intern_atom(SymbolKind kind, const DimExpr& num, const DimExpr& den);

    SymbolKind kind(SymbolId id) const { return entries_[id.index].kind; }
    /// `B`, `M.data`, or the atom's text (`floor(B / 2)`).
    const std::string& name(SymbolId id) const { return entries_[id.index].name; }
    bool is_atom(SymbolId id) const {
        return kind(id) == SymbolKind::FloorDiv || kind(id) == SymbolKind::Mod;
    }
    /// Size variables and axis sizes: implicitly >= 1.
    bool is_positive(SymbolId id) const { return !is_atom(id); }
    const DimExpr& atom_numerator(SymbolId id) const { return entries_[id.index].num; }
    const DimExpr& atom_denominator(SymbolId id) const { return entries_[id.index].den; }
    /// The size variables and axis sizes an expression depends on, through atoms, sorted.
    std::vector<SymbolId> leaves(const DimExpr& e) const;
    size_t size() const { return entries_.size(); }

private:
    struct Entry {
        SymbolKind kind;
        std::string name;
        DimExpr num, den;  // atoms only
    };
    struct AtomKey {
        SymbolKind kind;
        DimExpr num, den;
        friend bool operator==(const AtomKey&, const AtomKey&) = default;
    };
    struct AtomKeyHash {
        size_t operator()(const AtomKey& k) const;
    };
    std::vector<Entry> entries_;
    std::unordered_map<AtomKey, SymbolId, AtomKeyHash> atoms_;
};

// ---------------------------------------------------------------- arithmetic

DimResult<DimExpr> add(const DimExpr& a, const DimExpr& b);
DimResult<DimExpr> sub(const DimExpr& a, const DimExpr& b);
DimResult<DimExpr> mul(const DimExpr& a, const DimExpr& b);
DimResult<DimExpr> negate(const DimExpr& a);
DimResult<DimExpr> scale(const DimExpr& a, int64_t factor);

/// The quotient q with a == q * b as integer polynomials (atoms as variables), if any.
/// Then a / b == q wherever b != 0. Nullopt when b does not divide a that way, b is 0,
/// or a coefficient would overflow.
std::optional<DimExpr> exact_quotient(const DimExpr& a, const DimExpr& b);

/// floor(a / b). Exact when exact_quotient() succeeds; with a one-term divisor b the terms
/// of a that b divides leave the floor (floor((b*q + r) / b) == q + floor(r / b)); what
/// remains is the atom floor(r / b), its operands divided by their common constant
/// factor and b's sign made positive. Ground operands are computed.
DimResult<DimExpr> floor_div(const DimExpr& a, const DimExpr& b, SymbolTable& symbols);
/// a % b with the sign of b (a - b * floor(a / b)). 0 when b divides a; otherwise reduced
/// like floor_div() to an atom r % b (times the common constant factor).
DimResult<DimExpr> mod(const DimExpr& a, const DimExpr& b, SymbolTable& symbols);

/// Simultaneous substitution of symbols (size variables, axis sizes) by expressions;
/// atoms whose operands change are rebuilt with floor_div()/mod(), so they may simplify.
using Substitution = std::unordered_map<SymbolId, DimExpr>;
DimResult<DimExpr> substitute(const DimExpr& e, const Substitution& subst, SymbolTable& symbols);

/// Values of symbols, indexed densely by SymbolId (atoms are computed, not assigned).
class Assignment {
public:
    void set(SymbolId id, int64_t value);
    std::optional<int64_t> get(SymbolId id) const {
        if (id.index >= values_.size()) return std::nullopt;
        return values_[id.index];
    }
    void clear() { values_.clear(); }

private:
    std::vector<std::optional<int64_t>> values_;
};

/// The value under `values`; Unbound for a symbol without a value, DivisionByZero, Overflow.
DimResult<int64_t> evaluate(const DimExpr& e, const SymbolTable& symbols, const Assignment& values);

// ---------------------------------------------------------------- from the AST

}  // namespace meshc::solver

template <>
struct std::hash<meshc::solver::DimExpr> {
    size_t operator()(const meshc::solver::DimExpr& e) const { return e.hash(); }
};

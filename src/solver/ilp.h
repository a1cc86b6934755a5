// A 0-1 integer linear program and its exact solution by CBC (COIN-OR branch and cut,
// Debian's coinor-libcbc-dev, through its C API). The layout solver of `with auto`
// (src/autopar/) states its choice as one; nothing else of CBC is seen outside ilp.cpp.
// Input: binary variables with objective coefficients, linear rows; output: the optimum,
// the LP relaxation's bound (the certificate: the optimum is within `gap` of it), time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace meshc::solver {

struct IlpRow {
    std::vector<std::pair<int, double>> terms;  // (variable, coefficient)
    char sense = 'E';                           // 'L' (<=), 'G' (>=), 'E' (==)
    double rhs = 0;
};

struct IlpProblem {
    std::vector<double> objective;  // one binary variable per entry, minimised
    std::vector<IlpRow> rows;
    double time_limit_s = 10;
    /// A feasible 0-1 start (empty: none), given to CBC as its first incumbent.
    std::vector<int> start;
};

struct IlpResult {
    enum class Status { Optimal, Feasible, Infeasible, Failed };
    Status status = Status::Failed;
    std::vector<int> values;  // 0/1 per variable (Optimal, Feasible)
    double objective = 0;     // of `values`
    double lp_bound = 0;      // the LP relaxation's optimum: no integer solution is below it
    double best_bound = 0;    // CBC's best bound at the end (== objective when Optimal)
    double seconds = 0;       // wall time of both solves
    int64_t nodes = 0;        // branch-and-bound nodes
    std::string message;      // Failed, Infeasible: why
    /// (objective - lp_bound) / |objective|: 0 when the LP relaxation is already integral.
    double gap() const;
};

/// Solves `problem` with CBC: first its LP relaxation (the bound), then the 0-1 program,
/// within problem.time_limit_s (Feasible when the limit stopped it with a solution).
IlpResult solve_ilp(const IlpProblem& problem);

}  // namespace meshc::solver

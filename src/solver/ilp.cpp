// solve_ilp: the 0-1 program handed to CBC's C API (Cbc_C_Interface.h). A Cbc_Model is
// not reusable after Cbc_solve, so the LP relaxation is solved on a model of its own.
#include "solver/ilp.h"

#include <Cbc_C_Interface.h>

#include <chrono>
#include <cmath>
#include <string>

namespace meshc::solver {

double IlpResult::gap() const {
    if (status != Status::Optimal && status != Status::Feasible) return 0;
    double scale = std::max(std::abs(objective), 1e-300);
    return std::max(0.0, (objective - lp_bound) / scale);
}

namespace {

// Builds the model: columns first (binary, objective), then the rows.
Cbc_Model* build(const IlpProblem& problem, bool integer) {
    Cbc_Model* model = Cbc_newModel();
    Cbc_setLogLevel(model, 0);
    for (size_t j = 0; j < problem.objective.size(); ++j) {
        Cbc_addCol(model, "", 0.0, 1.0, problem.objective[j], integer ? 1 : 0, 0, nullptr, nullptr);
    }
    std::vector<int> cols;
    std::vector<double> coefs;
    for (const IlpRow& row : problem.rows) {
        cols.clear();
        coefs.clear();
        for (const auto& [var, coef] : row.terms) {
            cols.push_back(var);
            coefs.push_back(coef);
        }
        Cbc_addRow(model, "", static_cast<int>(cols.size()), cols.data(), coefs.data(), row.sense, row.rhs);
    }
    return model;
}

}  // namespace

IlpResult solve_ilp(const IlpProblem& problem) {
    IlpResult result;
    auto begin = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
    for (const IlpRow& row : problem.rows) {
        for (const auto& [var, coef] : row.terms) {
            if (var < 0 || static_cast<size_t>(var) >= problem.objective.size() || !std::isfinite(coef)) {
                result.message = "a row names a variable that does not exist or has a coefficient that is not finite";
                return result;
            }
        }
    }
    if (problem.objective.empty()) {
        result.status = IlpResult::Status::Optimal;
        return result;
    }
    // The LP relaxation: its optimum bounds the integer one from below.
    {
        Cbc_Model* lp = build(problem, false);
        Cbc_setMaximumSeconds(lp, problem.time_limit_s);
        Cbc_solve(lp);
        bool optimal = Cbc_isProvenOptimal(lp) != 0;
        bool infeasible = Cbc_isProvenInfeasible(lp) != 0;
        result.lp_bound = optimal ? Cbc_getObjValue(lp) : -INFINITY;
        Cbc_deleteModel(lp);
        if (infeasible) {
            result.status = IlpResult::Status::Infeasible;
            result.message = "the LP relaxation is infeasible";
            result.seconds = elapsed();
            return result;
        }
    }
    Cbc_Model* model = build(problem, true);
    double left = std::max(0.05, problem.time_limit_s - elapsed());
    Cbc_setMaximumSeconds(model, left);
    Cbc_setAllowableGap(model, 0.0);
    Cbc_setAllowableFractionGap(model, 0.0);
    if (problem.start.size() == problem.objective.size()) {
        std::vector<int> index;
        std::vector<double> value;
        for (size_t j = 0; j < problem.start.size(); ++j) {
            if (problem.start[j] != 0) {
                index.push_back(static_cast<int>(j));
                value.push_back(1.0);
            }
        }
        Cbc_setMIPStartI(model, static_cast<int>(index.size()), index.data(), value.data());
    }
    Cbc_solve(model);
    const double* x = Cbc_bestSolution(model);
    result.nodes = Cbc_getNodeCount(model);
    result.best_bound = Cbc_getBestPossibleObjValue(model);
    if (x) {
        result.values.resize(problem.objective.size());
        double objective = 0;
        for (size_t j = 0; j < problem.objective.size(); ++j) {
            result.values[j] = x[j] > 0.5 ? 1 : 0;
            objective += problem.objective[j] * result.values[j];
        }
        result.objective = objective;
        result.status = Cbc_isProvenOptimal(model) ? IlpResult::Status::Optimal : IlpResult::Status::Feasible;
        if (result.status == IlpResult::Status::Optimal) result.best_bound = objective;
    } else if (Cbc_isProvenInfeasible(model)) {
        result.status = IlpResult::Status::Infeasible;
        result.message = "no 0-1 solution satisfies the rows";
    } else {
        result.message = Cbc_isSecondsLimitReached(model) ? "the time limit ran out before a solution was found"
                                                           : "CBC stopped without a solution";
    }
    Cbc_deleteModel(model);
    result.seconds = elapsed();
    return result;
}

}  // namespace meshc::solver

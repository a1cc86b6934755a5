// Unit tests for the 0-1 program interface over CBC (src/solver/ilp.h), against brute
// force over every assignment, and for reading solved `with auto` layouts in the parser
// (syntax::AutoLayouts).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "solver/ilp.h"
#include "syntax/parser.h"

using namespace meshc;
using solver::IlpProblem;
using solver::IlpResult;
using solver::IlpRow;

namespace {

// The optimum over all 2^n assignments that satisfy the rows (infinity: none does).
double brute_force(const IlpProblem& p) {
    const size_t n = p.objective.size();
    double best = INFINITY;
    for (uint64_t mask = 0; mask < (uint64_t(1) << n); ++mask) {
        bool ok = true;
        for (const IlpRow& r : p.rows) {
            double lhs = 0;
            for (const auto& [v, c] : r.terms) lhs += ((mask >> v) & 1) ? c : 0.0;
            ok = ok && (r.sense == 'L' ? lhs <= r.rhs + 1e-9 : r.sense == 'G' ? lhs >= r.rhs - 1e-9
                                                                                : std::abs(lhs - r.rhs) <= 1e-9);
        }
        if (!ok) continue;
        double obj = 0;
        for (size_t j = 0; j < n; ++j) obj += ((mask >> j) & 1) ? p.objective[j] : 0.0;
        best = std::min(best, obj);
    }
    return best;
}

}  // namespace

TEST_CASE("ilp: random knapsacks agree with brute force, and the LP bound is below the optimum") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> value(1, 100), weight(1, 30);
    for (int trial = 0; trial < 20; ++trial) {
        IlpProblem p;
        IlpRow cap{{}, 'L', 0};
        double total = 0;
        for (int j = 0; j < 14; ++j) {
            p.objective.push_back(-value(rng));
            double w = weight(rng);
            total += w;
            cap.terms.push_back({j, w});
        }
        cap.rhs = total / 3;
        p.rows.push_back(cap);
        IlpResult r = solver::solve_ilp(p);
        REQUIRE(r.status == IlpResult::Status::Optimal);
        const double want = brute_force(p);
        CHECK(r.objective == Approx(want).epsilon(1e-9));
        CHECK(r.lp_bound <= r.objective + 1e-6);
        CHECK(r.best_bound == Approx(r.objective).epsilon(1e-9));
        CHECK(r.gap() >= 0);
        // The values are a real assignment: its objective and feasibility recomputed.
        double obj = 0, used = 0;
        for (int j = 0; j < 14; ++j) {
            obj += r.values[static_cast<size_t>(j)] * p.objective[static_cast<size_t>(j)];
            used += r.values[static_cast<size_t>(j)] * cap.terms[static_cast<size_t>(j)].second;
        }
        CHECK(obj == Approx(r.objective).epsilon(1e-12));
        CHECK(used <= cap.rhs + 1e-9);
    }
}

TEST_CASE("ilp: one-hot choices with pairwise costs (the layout solver's shape)") {
    // Three sites of three choices each; a table variable per (site 0, site 1) pair.
    IlpProblem p;
    const double unary[3][3] = {{5, 1, 3}, {2, 2, 9}, {4, 0.5, 7}};
    for (auto& site : unary) {
        for (double c : site) p.objective.push_back(c);
    }
    for (int s = 0; s < 3; ++s) p.rows.push_back(IlpRow{{{3 * s, 1}, {3 * s + 1, 1}, {3 * s + 2, 1}}, 'E', 1});
    // pair[a][b]: 10 unless a == b (agreeing sites are cheap).
    IlpRow one{{}, 'E', 1};
    std::vector<std::vector<int>> pair(3, std::vector<int>(3));
    for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < 3; ++b) {
            pair[a][b] = static_cast<int>(p.objective.size());
            p.objective.push_back(a == b ? 0 : 10);
            one.terms.push_back({pair[a][b], 1});
        }
    }
    p.rows.push_back(one);
    for (int a = 0; a < 3; ++a) {
        IlpRow tie0{{{a, -1}}, 'E', 0}, tie1{{{3 + a, -1}}, 'E', 0};
        for (int b = 0; b < 3; ++b) {
            tie0.terms.push_back({pair[a][b], 1});
            tie1.terms.push_back({pair[b][a], 1});
        }
        p.rows.push_back(tie0);
        p.rows.push_back(tie1);
    }
    IlpResult r = solver::solve_ilp(p);
    REQUIRE(r.status == IlpResult::Status::Optimal);
    // By hand: site 0 and 1 agree at choice 1 (1 + 2), site 2 takes 0.5: 3.5.
    CHECK(r.objective == Approx(3.5));
    CHECK(r.objective == Approx(brute_force(p)));
    CHECK(r.values[1] == 1);
    CHECK(r.values[4] == 1);
    CHECK(r.values[7] == 1);
}

TEST_CASE("ilp: infeasible rows and malformed input are reported, not crashed on") {
    IlpProblem p;
    p.objective = {1, 1};
    p.rows.push_back(IlpRow{{{0, 1}, {1, 1}}, 'E', 3});
    IlpResult r = solver::solve_ilp(p);
    CHECK(r.status == IlpResult::Status::Infeasible);
    CHECK(!r.message.empty());

    IlpProblem bad;
    bad.objective = {1};
    bad.rows.push_back(IlpRow{{{5, 1}}, 'L', 1});
    CHECK(solver::solve_ilp(bad).status == IlpResult::Status::Failed);
    bad.rows = {IlpRow{{{0, NAN}}, 'L', 1}};
    CHECK(solver::solve_ilp(bad).status == IlpResult::Status::Failed);

    IlpProblem empty;
    CHECK(solver::solve_ilp(empty).status == IlpResult::Status::Optimal);
}

TEST_CASE("parser: a solved `with auto` reads as the chosen layout, spanning the `auto` token") {
    const std::string text = "mesh M = [data: 2, model: 4];\n"
                             "fn f(a: Tensor f32 [D, H] on M with auto, b: Tensor f32 [N, N] on M with auto,\n"
                             "     c: Tensor f32 [N] on M with auto, d: Tensor f32 [N] on M with auto) { }\n";
    auto offset = [&](int k) {
        size_t at = 0;
        for (int i = 0; i <= k; ++i) at = text.find("auto", at + (i ? 1 : 0));
        return static_cast<uint32_t>(at);
    };
    syntax::AutoLayouts chosen{{offset(0), "{H: model}"}, {offset(1), "{0: (data, model)}"}, {offset(2), "_"},
                               {offset(3), "{N: model"}};  // the last is malformed: stays `auto`
    SourceManager sm;
    DiagnosticEngine diags;
    FileId f = sm.add_file("f.msh", text);
    auto module = syntax::parse_file(sm, f, diags, &chosen);
    REQUIRE(!diags.has_errors());
    const ast::Item* fn = module->items.at(1);
    REQUIRE(fn->params.size() == 4);
    const ast::Type* a = fn->params[0].type;
    REQUIRE(a->layout.has_value());
    CHECK(!a->auto_layout);
    CHECK(!a->any_layout);
    REQUIRE(a->layout->entries.size() == 1);
    CHECK(a->layout->entries[0].key_name->name == "H");
    CHECK(a->layout->entries[0].axes.at(0).name == "model");
    CHECK(a->layout->span.begin == offset(0));
    CHECK(a->layout->span.end == offset(0) + 4);
    const ast::Type* b = fn->params[1].type;
    REQUIRE(b->layout.has_value());
    CHECK(b->layout->entries.at(0).key_pos == 0);
    REQUIRE(b->layout->entries[0].axes.size() == 2);
    CHECK(b->layout->entries[0].axes[0].name == "data");
    CHECK(b->layout->entries[0].axes[1].name == "model");
    const ast::Type* c = fn->params[2].type;
    CHECK(!c->layout.has_value());
    CHECK(c->any_layout);
    CHECK(!c->auto_layout);
    const ast::Type* d = fn->params[3].type;
    CHECK(d->auto_layout);
    CHECK(d->any_layout);
}

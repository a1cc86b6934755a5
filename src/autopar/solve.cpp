// solve: the choice of every `auto` site's layout (the method is in shard.h).
//
//  1. The baseline: every site `_` (struct fields `{}`), checked and costed.
//  2. The sweep: each site's every other candidate, the rest as in the baseline. A
//     candidate that does not check is dropped. An instance's share that changes with
//     site s depends on s: that gives each share's sites.
//  3. The tables: a share that depends on two or more sites is checked over their joint
//     choices (several tables filled by one check where their sites allow), up to the
//     evaluation budget; an entry left unchecked is estimated additively (and the solve
//     is then not exact).
//  4. The 0-1 program: x[s][c] one-hot per site; y[k][j] one-hot per table, tied to the
//     x of its sites; the objective the shares; the memory row (when a budget is given)
//     the baseline's peak plus each choice's change of it. CBC solves it.
//  5. The answer checked: a plan that fails to check or exceeds the budget is cut off
//     and the program solved again. A measured cost that differs from the program's
//     objective means a dependency the sweep did not see: coordinate descent from there
//     on measured costs then finishes the search.
//  6. Per site, the best plan with another choice there (the program solved again with
//     the chosen candidate excluded), checked: the "why" of the report.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <atomic>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "autopar/internal.h"
#include "sema/rebind.h"
#include "solver/ilp.h"

namespace meshc::autopar {

namespace {

constexpr double kNs = 1e9;             // objective in nanoseconds
constexpr double kMiB = 1024.0 * 1024;  // memory row in MiB
constexpr size_t kMaxTable = 4096;      // joint entries tabulated per share

bool same_cost(double a, double b) { return std::abs(a - b) <= 1e-12 + 1e-9 * std::max(std::abs(a), std::abs(b)); }

struct Table {
    std::string key;
    std::vector<size_t> sites;  // sorted
    std::map<std::vector<int>, double> known;
    std::set<std::vector<int>> failed;  // joint entries whose check failed (not known)
    std::vector<std::vector<int>> entries;  // every joint entry over feasible candidates
};

class Solver {
public:
    Solver(const ShardOptions& options, ShardResult& r, const std::map<std::string, std::string>& originals)
        : options_(options), r_(r), originals_(originals), begin_(std::chrono::steady_clock::now()) {}

    double elapsed() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
    }
    bool budget_left() const {
        return r_.evaluations < options_.max_evaluations && elapsed() < options_.time_limit_s;
    }

    const Evaluation& eval(const std::vector<int>& x) {
        auto it = cache_.find(x);
        if (it != cache_.end()) return it->second;
        ++r_.evaluations;
        Evaluation e = evaluate(options_, rewrite(r_.sites, x, originals_), false);
        auto [at, inserted] = cache_.emplace(x, std::move(e));
        if (at->second.ok) record(x, at->second);
        return at->second;
    }

    // Checks the plans of `xs` not checked yet, on up to options_.threads threads (each
    // check has its own SourceManager, diagnostics and module), within the budget. The
    // answers go into the cache in the order of `xs`, as eval() would have put them.
    void prefetch(const std::vector<std::vector<int>>& xs) {
        std::vector<std::vector<int>> todo;
        std::set<std::vector<int>> seen;
        for (const auto& x : xs) {
            if (!cache_.count(x) && seen.insert(x).second) todo.push_back(x);
        }
        const size_t left = options_.max_evaluations > r_.evaluations
                                ? static_cast<size_t>(options_.max_evaluations - r_.evaluations) : 0;
        if (todo.size() > left) todo.resize(left);
        const size_t threads = std::min<size_t>(std::max(1, options_.threads), todo.size());
        if (threads <= 1 || elapsed() >= options_.time_limit_s) return;  // eval() does them one by one
        std::vector<std::optional<Evaluation>> out(todo.size());
        std::atomic<size_t> next{0};
        auto work = [&] {
            for (size_t i = next++; i < todo.size(); i = next++) {
                if (elapsed() >= options_.time_limit_s) break;
                out[i] = evaluate(options_, rewrite(r_.sites, todo[i], originals_), false);
            }
        };
        std::vector<std::thread> pool;
        for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
        work();
        for (std::thread& t : pool) t.join();
        for (size_t i = 0; i < todo.size(); ++i) {
            if (!out[i]) continue;
            ++r_.evaluations;
            auto [at, inserted] = cache_.emplace(todo[i], std::move(*out[i]));
            if (inserted && at->second.ok) record(todo[i], at->second);
        }
    }

    bool fits(const Evaluation& e) const { return options_.memory_budget <= 0 || e.peak <= options_.memory_budget; }

    // Returns false when the baseline does not check: the program's own errors.
    bool run();
    // The least peak of any plan checked, and of the plan the memory row rates least.
    int64_t smallest_peak();

private:
    double share(const Evaluation& e, const std::string& key) const {
        auto it = e.shares.find(key);
        return it == e.shares.end() ? 0.0 : it->second;
    }
    void record(const std::vector<int>& x, const Evaluation& e) {
        for (Table& t : tables_) {
            std::vector<int> j;
            for (size_t s : t.sites) j.push_back(x[s]);
            t.known.emplace(std::move(j), share(e, t.key));
        }
    }
    std::vector<int> with(size_t s, int c) const {
        std::vector<int> x = x0_;
        x[s] = c;
        return x;
    }
    void sweep();
    void tabulate();
    struct Program {
        solver::IlpProblem ilp;
        std::vector<std::vector<int>> x;  // x[s][c]: variable, or -1 (candidate dropped)
        double constant = 0;              // ns: shares that depend on no site
        std::vector<std::map<std::vector<int>, int>> entry_var;  // per table: joint entry -> variable
        int memory_row = -1;              // index in ilp.rows, or -1
    };
    // The 0-1 program's objective (ns, without the tie-break terms) at plan `x`, and
    // whether `x` satisfies its memory row.
    double predict(const Program& p, const std::vector<int>& x) const;
    bool predicted_fit(const Program& p, const std::vector<int>& x) const;
    // Among plans of equal cost, the earlier candidate at each site (`_`, then `{}`, ...):
    // CBC's tolerances are coarser than the tie-break terms of the objective.
    void prefer_earlier(const Program& p, std::vector<int>& x);
    Program build(bool memory_row = true) const;
    std::vector<int> decode(const Program& p, const solver::IlpResult& res) const;
    std::optional<std::vector<int>> solve_checked(Program& p, solver::IlpResult* out);
    void cut(Program& p, const std::vector<int>& x) const;
    void descend(const Program& p, std::vector<int>& x);
    double model_error(const Program& p) const;
    void answer_sites(const Program& base, const std::vector<int>& x);

    const ShardOptions& options_;
    ShardResult& r_;
    const std::map<std::string, std::string>& originals_;
    std::chrono::steady_clock::time_point begin_;
    std::map<std::vector<int>, Evaluation> cache_;
    std::vector<int> x0_;
    std::vector<std::vector<bool>> feasible_;
    std::map<std::string, std::set<size_t>> deps_;
    std::vector<Table> tables_;
    std::set<std::string> keys_;  // every share key met
};

void Solver::sweep() {
    const Evaluation base = eval(x0_);
    {
        std::vector<std::vector<int>> all;
        for (size_t s = 0; s < r_.sites.size(); ++s) {
            for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
                if (static_cast<int>(c) != x0_[s]) all.push_back(with(s, static_cast<int>(c)));
            }
        }
        prefetch(all);
    }
    for (const auto& [k, v] : base.shares) keys_.insert(k);
    feasible_.assign(r_.sites.size(), {});
    for (size_t s = 0; s < r_.sites.size(); ++s) {
        feasible_[s].assign(r_.sites[s].candidates.size(), false);
        feasible_[s][static_cast<size_t>(x0_[s])] = true;
        for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
            if (static_cast<int>(c) == x0_[s]) continue;
            if (!budget_left()) {
                r_.exact = false;
                break;
            }
            const Evaluation& e = eval(with(s, static_cast<int>(c)));
            if (!e.ok) continue;
            feasible_[s][c] = true;
            std::set<std::string> keys;
            for (const auto& [k, v] : e.shares) keys.insert(k);
            for (const auto& [k, v] : base.shares) keys.insert(k);
            for (const std::string& k : keys) {
                keys_.insert(k);
                if (!same_cost(share(e, k), share(base, k))) deps_[k].insert(s);
            }
        }
    }
}

void Solver::tabulate() {
    for (const auto& [key, sites] : deps_) {
        if (sites.size() < 2) continue;
        Table t;
        t.key = key;
        t.sites.assign(sites.begin(), sites.end());
        size_t size = 1;
        for (size_t s : t.sites) {
            size_t n = static_cast<size_t>(std::count(feasible_[s].begin(), feasible_[s].end(), true));
            size = size > kMaxTable ? size : size * n;
        }
        if (size > kMaxTable) {
            r_.exact = false;  // estimated additively: the descent finishes the search
            continue;
        }
        std::vector<int> j(t.sites.size(), 0);
        std::function<void(size_t)> enumerate = [&](size_t i) {
            if (i == t.sites.size()) {
                t.entries.push_back(j);
                return;
            }
            for (size_t c = 0; c < feasible_[t.sites[i]].size(); ++c) {
                if (!feasible_[t.sites[i]][c]) continue;
                j[i] = static_cast<int>(c);
                enumerate(i + 1);
            }
        };
        enumerate(0);
        tables_.push_back(std::move(t));
    }
    // What the checks so far already say.
    for (const auto& [x, e] : cache_) {
        if (e.ok) record(x, e);
    }
    // Each check fills one unknown entry of as many tables as agree on their shared sites.
    // In batches of plans built before any is checked (the entries a batch targets are
    // pending for the rest of it), so that a batch is checked on several threads.
    const size_t batch_size = static_cast<size_t>(std::max(1, options_.threads)) * 4;
    while (budget_left()) {
        std::vector<std::set<std::vector<int>>> pending(tables_.size());
        std::vector<std::pair<std::vector<int>, std::vector<std::pair<size_t, std::vector<int>>>>> batch;
        while (batch.size() < batch_size) {
            std::vector<int> x(r_.sites.size(), -1);
            std::vector<std::pair<size_t, std::vector<int>>> targeted;
            for (size_t ti = 0; ti < tables_.size(); ++ti) {
                Table& t = tables_[ti];
                for (const std::vector<int>& j : t.entries) {
                    if (t.known.count(j) || t.failed.count(j) || pending[ti].count(j)) continue;
                    bool consistent = true;
                    for (size_t i = 0; i < t.sites.size() && consistent; ++i) {
                        consistent = x[t.sites[i]] < 0 || x[t.sites[i]] == j[i];
                    }
                    if (!consistent) continue;
                    for (size_t i = 0; i < t.sites.size(); ++i) x[t.sites[i]] = j[i];
                    targeted.push_back({ti, j});
                    break;
                }
            }
            if (targeted.empty()) break;
            for (auto& [ti, j] : targeted) pending[ti].insert(j);
            for (size_t s = 0; s < x.size(); ++s) {
                if (x[s] < 0) x[s] = x0_[s];
            }
            batch.push_back({std::move(x), std::move(targeted)});
        }
        if (batch.empty()) break;
        std::vector<std::vector<int>> plans;
        for (const auto& b : batch) plans.push_back(b.first);
        prefetch(plans);
        for (const auto& [x, targeted] : batch) {
            if (!budget_left() && !cache_.count(x)) break;
            const Evaluation& e = eval(x);
            if (!e.ok) {
                for (const auto& [ti, j] : targeted) tables_[ti].failed.insert(j);
            }
        }
    }
    for (const Table& t : tables_) {
        if (t.known.size() < t.entries.size()) r_.exact = false;
    }
}

Solver::Program Solver::build(bool memory_row) const {
    Program p;
    const Evaluation& base = cache_.at(x0_);
    auto add_var = [&](double cost) {
        p.ilp.objective.push_back(cost);
        return static_cast<int>(p.ilp.objective.size() - 1);
    };
    p.x.resize(r_.sites.size());
    for (size_t s = 0; s < r_.sites.size(); ++s) {
        solver::IlpRow one;
        one.sense = 'E';
        one.rhs = 1;
        for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
            if (!feasible_[s][c]) {
                p.x[s].push_back(-1);
                continue;
            }
            // A tie goes to the earlier candidate (`_`, then `{}`, ...).
            int v = add_var(1e-6 * static_cast<double>(c));
            p.x[s].push_back(v);
            one.terms.push_back({v, 1.0});
        }
        p.ilp.rows.push_back(std::move(one));
    }
    auto unary = [&](size_t s, size_t c, const std::string& key) {
        const Evaluation& e = static_cast<int>(c) == x0_[s] ? base : cache_.at(with(s, static_cast<int>(c)));
        return share(e, key);
    };
    std::set<std::string> tabled;
    for (const Table& t : tables_) tabled.insert(t.key);
    for (const std::string& key : keys_) {
        auto d = deps_.find(key);
        if (d == deps_.end() || d->second.empty()) {
            p.constant += share(base, key) * kNs;
            continue;
        }
        if (tabled.count(key)) continue;
        // One site, or too many to tabulate: additive in the sites' changes.
        p.constant += share(base, key) * kNs;
        for (size_t s : d->second) {
            for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
                if (p.x[s][c] < 0) continue;
                p.ilp.objective[static_cast<size_t>(p.x[s][c])] += (unary(s, c, key) - share(base, key)) * kNs;
            }
        }
    }
    for (const Table& t : tables_) {
        solver::IlpRow one;
        one.sense = 'E';
        one.rhs = 1;
        p.entry_var.emplace_back();
        // link[i][c]: the entries with site i's choice c.
        std::vector<std::map<int, std::vector<int>>> link(t.sites.size());
        for (const std::vector<int>& j : t.entries) {
            double value;
            if (auto it = t.known.find(j); it != t.known.end()) {
                value = it->second;
            } else {
                value = share(base, t.key);
                for (size_t i = 0; i < t.sites.size(); ++i) {
                    value += unary(t.sites[i], static_cast<size_t>(j[i]), t.key) - share(base, t.key);
                }
            }
            int v = add_var(value * kNs);
            p.entry_var.back().emplace(j, v);
            one.terms.push_back({v, 1.0});
            for (size_t i = 0; i < t.sites.size(); ++i) link[i][j[i]].push_back(v);
        }
        p.ilp.rows.push_back(std::move(one));
        for (size_t i = 0; i < t.sites.size(); ++i) {
            for (auto& [c, vars] : link[i]) {
                solver::IlpRow tie;
                tie.sense = 'E';
                tie.rhs = 0;
                for (int v : vars) tie.terms.push_back({v, 1.0});
                tie.terms.push_back({p.x[t.sites[i]][static_cast<size_t>(c)], -1.0});
                p.ilp.rows.push_back(std::move(tie));
            }
        }
    }
    if (options_.memory_budget > 0 && memory_row) {
        solver::IlpRow memory;
        memory.sense = 'L';
        memory.rhs = static_cast<double>(options_.memory_budget - base.peak) / kMiB;
        for (size_t s = 0; s < r_.sites.size(); ++s) {
            for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
                if (p.x[s][c] < 0 || static_cast<int>(c) == x0_[s]) continue;
                const Evaluation& e = cache_.at(with(s, static_cast<int>(c)));
                double delta = static_cast<double>(e.peak - base.peak) / kMiB;
                if (delta != 0) memory.terms.push_back({p.x[s][c], delta});
            }
        }
        p.memory_row = static_cast<int>(p.ilp.rows.size());
        p.ilp.rows.push_back(std::move(memory));
    }
    p.ilp.time_limit_s = std::max(0.5, options_.time_limit_s - elapsed());
    return p;
}

double Solver::predict(const Program& p, const std::vector<int>& x) const {
    double total = p.constant;
    for (size_t s = 0; s < x.size(); ++s) {
        int v = p.x[s][static_cast<size_t>(x[s])];
        if (v >= 0) total += p.ilp.objective[static_cast<size_t>(v)] - 1e-6 * x[s];
    }
    for (size_t t = 0; t < tables_.size(); ++t) {
        std::vector<int> j;
        for (size_t s : tables_[t].sites) j.push_back(x[s]);
        auto it = p.entry_var[t].find(j);
        if (it != p.entry_var[t].end()) total += p.ilp.objective[static_cast<size_t>(it->second)];
    }
    return total;
}

bool Solver::predicted_fit(const Program& p, const std::vector<int>& x) const {
    if (p.memory_row < 0) return true;
    const solver::IlpRow& row = p.ilp.rows[static_cast<size_t>(p.memory_row)];
    double used = 0;
    for (const auto& [v, coef] : row.terms) {
        for (size_t s = 0; s < x.size(); ++s) {
            if (p.x[s][static_cast<size_t>(x[s])] == v) used += coef;
        }
    }
    return used <= row.rhs + 1e-9;
}

void Solver::prefer_earlier(const Program& p, std::vector<int>& x) {
    for (size_t s = 0; s < x.size(); ++s) {
        for (int c = 0; c < x[s] && budget_left(); ++c) {
            if (!feasible_[s][static_cast<size_t>(c)]) continue;
            std::vector<int> y = x;
            y[s] = c;
            const double now = predict(p, x);
            if (std::abs(predict(p, y) - now) > 1e-9 * std::abs(now) + 1e-6 || !predicted_fit(p, y)) continue;
            const Evaluation& e = eval(y);
            if (e.ok && fits(e) && same_cost(e.cost, eval(x).cost)) {
                x = y;
                break;
            }
        }
    }
}

std::vector<int> Solver::decode(const Program& p, const solver::IlpResult& res) const {
    std::vector<int> x(r_.sites.size(), 0);
    for (size_t s = 0; s < r_.sites.size(); ++s) {
        for (size_t c = 0; c < p.x[s].size(); ++c) {
            if (p.x[s][c] >= 0 && res.values[static_cast<size_t>(p.x[s][c])]) x[s] = static_cast<int>(c);
        }
    }
    return x;
}

// Excludes the plan `x` (it failed to check, or its real peak is over the budget).
void Solver::cut(Program& p, const std::vector<int>& x) const {
    solver::IlpRow row;
    row.sense = 'L';
    row.rhs = static_cast<double>(x.size()) - 1;
    for (size_t s = 0; s < x.size(); ++s) row.terms.push_back({p.x[s][static_cast<size_t>(x[s])], 1.0});
    p.ilp.rows.push_back(std::move(row));
}

// Solves `p`, cutting off answers that do not check or do not fit; nullopt: none left.
std::optional<std::vector<int>> Solver::solve_checked(Program& p, solver::IlpResult* out) {
    for (int round = 0; round < 32; ++round) {
        solver::IlpResult res = solver::solve_ilp(p.ilp);
        r_.ilp_seconds += res.seconds;
        if (out) *out = res;
        if (res.status != solver::IlpResult::Status::Optimal && res.status != solver::IlpResult::Status::Feasible) {
            return std::nullopt;
        }
        std::vector<int> x = decode(p, res);
        const Evaluation& e = eval(x);
        if (e.ok && fits(e)) return x;
        cut(p, x);
        if (!budget_left()) return std::nullopt;
    }
    return std::nullopt;
}

// The 0-1 program's largest error (ns) on the plans checked so far: how far a measured
// cost has strayed from the program's prediction of it (0 where the shares are exact).
double Solver::model_error(const Program& p) const {
    double worst = 0;
    for (const auto& [x, e] : cache_) {
        if (e.ok) worst = std::max(worst, std::abs(e.cost * kNs - predict(p, x)));
    }
    return worst;
}

// Coordinate descent on measured costs: at each site, the candidates the 0-1 program
// rates within twice its largest error so far (plus a nanosecond per site) of the current
// plan are checked, and the cheapest that fits is kept, until a pass changes nothing. A
// candidate the program rates further off than that would need an interaction of sites
// larger than any it has mismeasured on the plans checked; those are left unchecked.
void Solver::descend(const Program& p, std::vector<int>& x) {
    bool improved = true;
    while (improved && budget_left()) {
        improved = false;
        for (size_t s = 0; s < x.size() && budget_left(); ++s) {
            const double reach = predict(p, x) + 2 * model_error(p) + static_cast<double>(x.size());
            std::vector<std::vector<int>> row;
            for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
                if (static_cast<int>(c) == x[s] || !feasible_[s][c]) continue;
                std::vector<int> y = x;
                y[s] = static_cast<int>(c);
                if (predict(p, y) > reach) {
                    ++r_.pruned;
                    continue;
                }
                row.push_back(std::move(y));
            }
            prefetch(row);
            double best = eval(x).cost;
            for (const std::vector<int>& y : row) {
                if (!budget_left()) break;
                const Evaluation& e = eval(y);
                if (e.ok && fits(e) && e.cost < best * (1 - 1e-12)) {
                    best = e.cost;
                    x = y;
                    improved = true;
                }
            }
        }
    }
}

void Solver::answer_sites(const Program& base, const std::vector<int>& x) {
    const double cost = eval(x).cost;
    r_.answers.assign(r_.sites.size(), SiteAnswer{});
    auto excluding = [&](size_t s) {
        Program p = base;
        solver::IlpRow exclude;
        exclude.sense = 'E';
        exclude.rhs = 0;
        exclude.terms.push_back({p.x[s][static_cast<size_t>(x[s])], 1.0});
        p.ilp.rows.push_back(std::move(exclude));
        p.ilp.start.clear();
        return p;
    };
    // Each site's first answer, checked together on the threads (the loop below then
    // finds them checked; CBC runs twice, which costs milliseconds).
    if (options_.threads > 1) {
        std::vector<std::vector<int>> first;
        for (size_t s = 0; s < r_.sites.size(); ++s) {
            Program p = excluding(s);
            solver::IlpResult res = solver::solve_ilp(p.ilp);
            r_.ilp_seconds += res.seconds;
            if (res.status == solver::IlpResult::Status::Optimal || res.status == solver::IlpResult::Status::Feasible) {
                first.push_back(decode(p, res));
            }
        }
        prefetch(first);
    }
    for (size_t s = 0; s < r_.sites.size(); ++s) {
        SiteAnswer& a = r_.answers[s];
        a.chosen = x[s];
        a.cost = cost;
        if (!budget_left()) continue;
        Program p = excluding(s);
        if (auto y = solve_checked(p, nullptr)) {
            a.next_best = (*y)[s];
            a.next_best_cost = eval(*y).cost;
        }
    }
}

int64_t Solver::smallest_peak() {
    if (feasible_.size() == r_.sites.size()) {
        Program p = build(false);
        std::fill(p.ilp.objective.begin(), p.ilp.objective.end(), 0.0);
        const Evaluation& base = cache_.at(x0_);
        for (size_t s = 0; s < r_.sites.size(); ++s) {
            for (size_t c = 0; c < r_.sites[s].candidates.size(); ++c) {
                if (p.x[s][c] < 0 || static_cast<int>(c) == x0_[s]) continue;
                const Evaluation& e = cache_.at(with(s, static_cast<int>(c)));
                p.ilp.objective[static_cast<size_t>(p.x[s][c])] = static_cast<double>(e.peak - base.peak) / kMiB;
            }
        }
        solver::IlpResult res = solver::solve_ilp(p.ilp);
        if (res.status == solver::IlpResult::Status::Optimal || res.status == solver::IlpResult::Status::Feasible) {
            eval(decode(p, res));
        }
    }
    int64_t best = -1;
    for (const auto& [x, e] : cache_) {
        if (e.ok && (best < 0 || e.peak < best)) best = e.peak;
    }
    return best;
}

bool Solver::run() {
    // 1. The baseline: `_` where allowed (what inference alone does), else `{}`.
    x0_.assign(r_.sites.size(), 0);
    r_.baseline = eval(x0_);
    if (!r_.baseline.ok) {
        for (size_t s = 0; s < r_.sites.size(); ++s) {
            const auto& c = r_.sites[s].candidates;
            x0_[s] = static_cast<int>(std::find(c.begin(), c.end(), "{}") - c.begin());
        }
        r_.baseline = eval(x0_);
        if (!r_.baseline.ok) return false;
    }
    r_.exact = true;
    sweep();
    tabulate();
    Program p = build();
    r_.ilp_variables = static_cast<int>(p.ilp.objective.size());
    r_.ilp_rows = static_cast<int>(p.ilp.rows.size());
    solver::IlpResult res;
    std::optional<std::vector<int>> x = solve_checked(p, &res);
    if (!x) {
        // Nothing the program allows fits: E0710 (reported by solve()).
        r_.method = "ilp";
        return true;
    }
    r_.method = "ilp";
    r_.proven_optimal = res.status == solver::IlpResult::Status::Optimal;
    r_.ilp_objective = (res.objective + p.constant) / kNs;
    r_.lp_bound = (res.lp_bound + p.constant) / kNs;
    r_.best_bound = (res.best_bound + p.constant) / kNs;
    auto below = [&](double bound) {
        return r_.ilp_objective > 0 ? std::max(0.0, (r_.ilp_objective - bound) / r_.ilp_objective) : 0.0;
    };
    r_.lp_gap = below(r_.lp_bound);
    r_.gap = r_.proven_optimal ? 0.0 : below(r_.best_bound);
    // The tie-break terms are below a femtosecond per site: measured and predicted agree
    // when the shares are exact.
    const double tolerance = 1e-6 * static_cast<double>(r_.sites.size()) * 128 / kNs;
    if (!r_.exact || std::abs(eval(*x).cost - r_.ilp_objective) > tolerance + 1e-9 * r_.ilp_objective) {
        r_.exact = false;
        r_.method = "ilp, then coordinate descent";
        descend(p, *x);
    }
    prefer_earlier(p, *x);
    answer_sites(p, *x);
    // A next-best plan that measures cheaper than the chosen one (possible only when the
    // shares were estimated) becomes the plan.
    for (int round = 0; round < 4; ++round) {
        std::optional<std::vector<int>> better;
        double best = eval(*x).cost;
        for (size_t s = 0; s < r_.answers.size(); ++s) {
            const SiteAnswer& a = r_.answers[s];
            if (a.next_best >= 0 && a.next_best_cost < best * (1 - 1e-12)) {
                std::vector<int> y = *x;
                y[s] = a.next_best;
                const Evaluation& e = eval(y);
                if (e.ok && fits(e) && e.cost < best) {
                    best = e.cost;
                    better = y;
                }
            }
        }
        if (!better) break;
        *x = *better;
        r_.exact = false;
        descend(p, *x);
        answer_sites(p, *x);
    }
    // The answer again, verified (the search checked candidates without the verifier).
    r_.final = evaluate(options_, rewrite(r_.sites, *x, originals_), true);
    MESHC_ASSERT(r_.final.ok, "the solved plan checks as it did in the search: " + r_.final.error);
    r_.rewritten = rewrite(r_.sites, *x, originals_);
    for (size_t s = 0; s < r_.sites.size(); ++s) {
        const Site& site = r_.sites[s];
        r_.chosen[site.canonical][site.begin] = site.candidates[static_cast<size_t>((*x)[s])];
    }
    return true;
}

}  // namespace

std::optional<ShardResult> solve(SourceManager& sources, DiagnosticEngine& diags, const ShardOptions& options) {
    auto begin = std::chrono::steady_clock::now();
    sema::LoadOptions load{options.stdlib_dir, options.overlays};
    sema::Program program = sema::load_program(sources, diags, options.path, load);
    if (program.modules.empty() || diags.has_errors()) return std::nullopt;
    if (!options.meshes.empty()) {
        sema::rebind_meshes(program, options.meshes, diags);
        if (diags.has_errors()) return std::nullopt;
    }
    ShardResult r;
    r.memory_budget = options.memory_budget;
    r.sites = find_sites(sources, program, options.stdlib_dir);
    if (r.sites.empty()) return r;
    std::map<std::string, std::string> originals;
    for (const Site& s : r.sites) {
        originals.emplace(s.canonical, std::string(sources.text(s.file)));
        r.display_path.emplace(s.canonical, s.path);
    }
    bool has_main = false;
    for (const ast::Item* item : program.modules.front()->items) has_main |= item->kind == ast::ItemKind::Fn && item->name.name == "main";
    if (!has_main) {
        diags.emit(DiagCode::E0711, r.sites.front().span,
                   fmt::format("`{}` has no `main`: the layouts written `auto` are chosen for what one run of `main` "
                               "costs, and nothing runs",
                               options.path))
            .note("check the program that imports this module (its `main` fixes the sizes and the mesh)");
        return std::nullopt;
    }
    Solver solver(options, r, originals);
    if (!solver.run()) {
        // The program does not check even with every site `_` or `{}`: its own errors,
        // which the caller reports by checking it as written (`auto` read as `_`).
        r.sites.clear();
        r.program_errors = true;
        return r;
    }
    if (!r.final.ok) {
        // No plan fits the budget: the smallest that any checked plan needed.
        auto& d = diags.emit(DiagCode::E0710, r.sites.front().span,
                             fmt::format("no layout of the {} `auto` sites fits in {} bytes per device", r.sites.size(),
                                         options.memory_budget));
        int64_t smallest = solver.smallest_peak();
        if (smallest > 0) d.note(fmt::format("the smallest budget that works is {} bytes per device", smallest));
        return std::nullopt;
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return r;
}

}  // namespace meshc::autopar

// The step predictor; see predict.h.
#include "sema/predict.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <ostream>

#include "ir/compute_cost.h"

namespace meshc::sema {
namespace {

using ir::OpKind;

std::string where(const SourceManager& sources, Span span) {
    if (!span.valid() || span.file >= sources.file_count()) return "?";
    LineCol lc = sources.line_col(span.file, span.begin);
    return fmt::format("{}:{}:{}", sources.path(span.file), lc.line, lc.col);
}

std::string seconds_text(double s) {
    if (s < 1e-3) return fmt::format("{:.3f} us", s * 1e6);
    if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.3f} s", s);
}

std::string bytes_text(double b) {
    if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
    if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
    if (b >= 1e3) return fmt::format("{:.2f} kB", b / 1e3);
    return fmt::format("{:.0f} B", b);
}

/// Inclusive modelled time of one run of each function instance: its own ops (loops by
/// their trips) and its callees'.
class Costs {
public:
    /// `compute`, `communication`: which of the two the costs count.
    explicit Costs(const ir::Module& m, bool compute = true, bool communication = true)
        : m_(m), memo_(m.functions.size(), -1), compute_(compute), communication_(communication) {}

    double op(const ir::Function& f, const ir::Op& o) const {
        double s = compute_ ? ir::op_compute_cost(m_, f, o).seconds : 0;
        if (communication_) {
            if (auto info = collective_info(m_, f, o)) s += info->cost.seconds;
        }
        return s;
    }

    double function(size_t fi, int depth = 0) {
        if (memo_[fi] >= 0) return memo_[fi];
        memo_[fi] = 0;  // no recursion in GIR; a guard all the same
        if (depth > 200) return 0;
        const ir::Function& f = m_.functions[fi];
        double total = 0;
        bool exact = true;
        for_each_counted(f.ops, constants_of(f), 1, exact, [&](const ir::Op& o, double times) {
            total += times * op(f, o);
            if (o.kind == OpKind::Call && o.callee >= 0 && static_cast<size_t>(o.callee) < m_.functions.size()) {
                total += times * function(static_cast<size_t>(o.callee), depth + 1);
            }
        });
        memo_[fi] = total;
        return total;
    }

    /// One run of `o` with what it holds (a loop's every trip, a call's callee).
    double inclusive(const ir::Function& f, const ir::Op& o, const std::map<ir::ValueId, double>& constants) {
        double total = op(f, o);
        if (o.kind == OpKind::Call && o.callee >= 0 && static_cast<size_t>(o.callee) < m_.functions.size()) {
            total += function(static_cast<size_t>(o.callee));
        }
        double times = 1;
        if (o.kind == OpKind::For && o.operands.size() >= 2) {
            auto lo = constants.find(o.operands[0]), hi = constants.find(o.operands[1]);
            if (lo != constants.end() && hi != constants.end()) times = std::max(0.0, hi->second - lo->second);
        }
        for (const ir::Region& r : o.regions) {
            for (const ir::Op& x : r.ops) total += times * inclusive(f, x, constants);
        }
        return total;
    }

private:
    const ir::Module& m_;
    std::vector<double> memo_;
    bool compute_ = true, communication_ = true;
};

std::optional<double> trips(const ir::Op& loop, const std::map<ir::ValueId, double>& constants) {
    if (loop.operands.size() < 2) return std::nullopt;
    auto lo = constants.find(loop.operands[0]), hi = constants.find(loop.operands[1]);
    if (lo == constants.end() || hi == constants.end()) return std::nullopt;
    return std::max(0.0, hi->second - lo->second);
}

class Timeline {
public:
    Timeline(const ir::Module& m, const SourceManager& sources, StepPrediction& p, Costs& costs)
        : m_(m), sources_(sources), p_(p), costs_(costs), comm_costs_(m, false, true) {}

    /// Appends `ops` of `f` run `times` per step (a loop body: its trips one after another).
    void ops(const ir::Function& f, const std::vector<ir::Op>& list, int depth) {
        auto constants = constants_of(f);
        for (const ir::Op& o : list) one(f, o, constants, depth);
    }

private:
    void one(const ir::Function& f, const ir::Op& o, const std::map<ir::ValueId, double>& constants, int depth) {
        if (depth > 200) return;
        ir::ComputeCost c = ir::op_compute_cost(m_, f, o);
        p_.compute_s += c.seconds;
        p_.flops += c.flops;
        p_.bytes_touched += c.bytes;
        if (c.seconds > 0) add(std::string(ir::op_name(o.kind)), "compute", c.seconds, o, 0);
        if (auto info = collective_info(m_, f, o)) {
            const ir::Mesh* mesh = !o.operands.empty() && o.operands[0] < f.types.size()
                                       ? m_.mesh(f.types[o.operands[0]].mesh)
                                       : nullptr;
            std::string axes = mesh ? mesh->axis_names(info->axes) : "?";
            std::replace(axes.begin(), axes.end(), ',', '+');
            axes.erase(std::remove(axes.begin(), axes.end(), ' '), axes.end());
            p_.communication_s += info->cost.seconds;
            p_.seconds_by_axis[axes] += info->cost.seconds;
            p_.bytes_by_axis[axes] += info->cost.bytes_sent;
            p_.collectives += 1;
            std::string name = fmt::format("{}{} over ({})", ir::op_name(o.kind),
                                           o.kind == OpKind::AllReduce || o.kind == OpKind::ReduceScatter
                                               ? std::string(" ") + std::string(ir::reduce_name(o.reduce))
                                               : std::string(),
                                           axes);
            add(name, "communication", info->cost.seconds, o, info->cost.bytes_sent);
        }
        if (o.kind == OpKind::Call && o.callee >= 0 && static_cast<size_t>(o.callee) < m_.functions.size()) {
            const ir::Function& callee = m_.functions[static_cast<size_t>(o.callee)];
            size_t slot = p_.timeline.size();
            double begin = now_;
            add("call " + ir::function_label(callee), "compute", 0, o, 0);
            ops(callee, callee.ops, depth + 1);
            if (slot < p_.timeline.size()) p_.timeline[slot].duration = now_ - begin;
            return;
        }
        if (o.kind == OpKind::For) {
            auto n = trips(o, constants);
            if (!n) p_.exact = false;
            for (int64_t i = 0; i < static_cast<int64_t>(n.value_or(1)); ++i) {
                for (const ir::Region& r : o.regions) ops(f, r.ops, depth + 1);
            }
            return;
        }
        if (o.kind == OpKind::If && !o.regions.empty()) {
            // One branch runs: the costlier is walked (the step's upper bound); what it
            // costs beyond the cheaper one (an empty `else`: nothing) is noted apart.
            std::vector<double> cost;
            for (const ir::Region& r : o.regions) {
                double c = 0;
                for (const ir::Op& x : r.ops) c += costs_.inclusive(f, x, constants);
                cost.push_back(c);
            }
            if (o.regions.size() == 1) cost.push_back(0);
            size_t hi = static_cast<size_t>(std::max_element(cost.begin(), cost.end()) - cost.begin());
            double lo = *std::min_element(cost.begin(), cost.end());
            if (!in_branch_ && cost[hi] - lo > 0) {
                p_.conditional_s += cost[hi] - lo;
                p_.conditionals.push_back(where(sources_, o.span));
                // Its communication apart: the cheaper branch's step by parts.
                size_t lo_i = static_cast<size_t>(std::min_element(cost.begin(), cost.end()) - cost.begin());
                auto comm = [&](size_t i) {
                    double c = 0;
                    if (i < o.regions.size()) {
                        for (const ir::Op& x : o.regions[i].ops) c += comm_costs_.inclusive(f, x, constants);
                    }
                    return c;
                };
                p_.conditional_communication_s += comm(hi) - comm(lo_i);
            }
            bool outer = in_branch_;
            in_branch_ = true;
            if (hi < o.regions.size()) ops(f, o.regions[hi].ops, depth + 1);
            in_branch_ = outer;
            return;
        }
        for (const ir::Region& r : o.regions) ops(f, r.ops, depth + 1);
    }

    void add(std::string name, const char* track, double duration, const ir::Op& o, double bytes) {
        double start = now_;
        now_ += duration;
        if (p_.timeline.size() >= kMaxTimelineEvents) {
            p_.timeline_truncated = true;
            return;
        }
        TimelineEvent e;
        e.name = std::move(name);
        e.track = track;
        e.start = start;
        e.duration = duration;
        e.at = where(sources_, o.span);
        e.bytes_sent = bytes;
        e.backward = o.backward;
        p_.timeline.push_back(std::move(e));
    }

    const ir::Module& m_;
    const SourceManager& sources_;
    StepPrediction& p_;
    Costs& costs_;
    Costs comm_costs_;  // communication only
    double now_ = 0;
    bool in_branch_ = false;  // inside an `if` branch already noted
};

std::string mesh_text(const ir::Mesh& mesh) {
    std::vector<std::string> axes;
    for (const ir::MeshAxis& a : mesh.axes) {
        axes.push_back(fmt::format("{}: {} {{latency: {:g}, bandwidth: {:g}}}", a.name, a.size, a.latency, a.bandwidth));
    }
    return fmt::format("{} = [{}]", mesh.name, fmt::join(axes, ", "));
}

}  // namespace

StepPrediction predict_step(const ir::Module& module, const SourceManager& sources) {
    StepPrediction p;
    p.device_model = module.device.name;
    for (const ir::Mesh& mesh : module.meshes) {
        int64_t n = 1;
        for (const ir::MeshAxis& a : mesh.axes) n *= a.size;
        p.devices = std::max(p.devices, n);
        p.meshes.push_back(mesh_text(mesh));
    }
    ProgramFacts facts = analyse_program(module);
    if (facts.main < 0) return p;
    p.peak = facts.peak_parts[static_cast<size_t>(facts.main)];
    Costs costs(module);
    p.run_s = costs.function(static_cast<size_t>(facts.main));
    // Down from main: the op holding most of the time; a call is entered, a loop is the step.
    size_t fi = static_cast<size_t>(facts.main);
    const ir::Op* loop = nullptr;
    double runs = 1;  // runs of function fi per run of main
    for (int depth = 0; depth < 64 && !loop; ++depth) {
        const ir::Function& f = module.functions[fi];
        auto constants = constants_of(f);
        const ir::Op* best = nullptr;
        double best_s = -1;
        for (const ir::Op& o : f.ops) {
            if (o.kind != OpKind::Call && o.kind != OpKind::For) continue;
            double s = costs.inclusive(f, o, constants);
            if (s > best_s) {
                best_s = s;
                best = &o;
            }
        }
        // Only worth entering if it holds most of the function's time.
        if (!best || best_s < 0.5 * costs.function(fi)) break;
        if (best->kind == OpKind::For) {
            auto n = trips(*best, constants);
            if (n && *n < 1) break;
            loop = best;
            p.loop = true;
            p.function = ir::function_label(f);
            p.at = where(sources, best->span);
            p.steps = n ? runs * *n : 0;  // 0: known at run time only
            Timeline t(module, sources, p, costs);
            for (const ir::Region& r : best->regions) t.ops(f, r.ops, 0);
            break;
        }
        if (best->callee < 0 || static_cast<size_t>(best->callee) >= module.functions.size()) break;
        fi = static_cast<size_t>(best->callee);
    }
    if (!loop) {
        const ir::Function& main_fn = module.functions[static_cast<size_t>(facts.main)];
        p.function = ir::function_label(main_fn);
        p.at = where(sources, main_fn.span);
        p.steps = 1;
        Timeline t(module, sources, p, costs);
        t.ops(main_fn, main_fn.ops, 0);
    }
    p.exposed_s = p.communication_s;
    return p;
}

void print_prediction_text(std::ostream& out, const StepPrediction& p) {
    for (const std::string& m : p.meshes) out << "mesh " << m << "\n";
    out << fmt::format("devices: {}; device model `{}`\n", p.devices, p.device_model);
    if (p.loop) {
        out << fmt::format("step: one trip of the loop at {} in {} ({})\n", p.at, p.function,
                           p.steps > 0 ? fmt::format("{:g} per run of main", p.steps)
                                       : std::string("its trips are known at run time"));
    } else {
        out << fmt::format("step: one run of {} (no loop holds most of its time)\n", p.function);
    }
    double step = p.step_s();
    auto share = [&](double s) { return step > 0 ? 100 * s / step : 0.0; };
    out << fmt::format("per step and device{}: {}\n", p.exact ? "" : " (at least: a loop of unknown trips counted once)",
                       seconds_text(step));
    out << fmt::format("  compute        {:>12}  {:5.1f}%  ({:.4g} flops, {} touched)\n", seconds_text(p.compute_s),
                       share(p.compute_s), p.flops, bytes_text(p.bytes_touched));
    out << fmt::format("  communication  {:>12}  ({:g} collectives)\n", seconds_text(p.communication_s), p.collectives);
    for (const auto& [axes, s] : p.seconds_by_axis) {
        out << fmt::format("    over {:<10} {:>12}  ({} sent per device)\n", axes, seconds_text(s),
                           bytes_text(p.bytes_by_axis.at(axes)));
    }
    out << fmt::format("  exposed        {:>12}  {:5.1f}%  (no overlap is scheduled: every collective waits for its "
                       "inputs and blocks the device)\n",
                       seconds_text(p.exposed_s), share(p.exposed_s));
    if (p.conditional_s > 0) {
        double comm = p.exposed_s - p.conditional_communication_s;
        out << fmt::format("  of which {} is the costlier branch of an `if` (at {}): a step that takes the cheaper "
                           "branch: {} = compute {} + communication {}\n",
                           seconds_text(p.conditional_s), fmt::join(p.conditionals, ", "),
                           seconds_text(step - p.conditional_s), seconds_text(step - p.conditional_s - comm),
                           seconds_text(comm));
    }
    out << fmt::format("peak memory per device: {} = state {} + saved for backward {} + temporaries {}\n",
                       bytes_text(static_cast<double>(p.peak.total())), bytes_text(static_cast<double>(p.peak.state)),
                       bytes_text(static_cast<double>(p.peak.saved)), bytes_text(static_cast<double>(p.peak.temporaries)));
    if (p.steps > 0) out << fmt::format("run of main: {} ({:g} steps and the rest)\n", seconds_text(p.run_s), p.steps);
    // The largest slices of the step: where the time goes.
    std::map<std::pair<std::string, std::string>, std::pair<double, int>> by_kind;
    for (const TimelineEvent& e : p.timeline) {
        if (e.name.rfind("call ", 0) == 0) continue;
        auto& [s, n] = by_kind[{e.track, e.name}];
        s += e.duration;
        ++n;
    }
    std::vector<std::pair<double, std::string>> top;
    for (const auto& [k, v] : by_kind) {
        top.emplace_back(v.first, fmt::format("{:<13} {} (x{})", k.first, k.second, v.second));
    }
    std::sort(top.rbegin(), top.rend());
    out << "where the step goes:\n";
    for (size_t i = 0; i < top.size() && i < 8; ++i) {
        out << fmt::format("  {:>12}  {:5.1f}%  {}\n", seconds_text(top[i].first), share(top[i].first), top[i].second);
    }
}

void print_prediction_json(std::ostream& out, const StepPrediction& p) {
    nlohmann::ordered_json j;
    j["meshes"] = p.meshes;
    j["devices"] = p.devices;
    j["device_model"] = p.device_model;
    j["step"] = {{"loop", p.loop}, {"function", p.function}, {"at", p.at}, {"steps_per_run", p.steps > 0 ? nlohmann::ordered_json(p.steps) : nlohmann::ordered_json()}, {"exact", p.exact}};
    nlohmann::ordered_json axes = nlohmann::ordered_json::object();
    for (const auto& [a, s] : p.seconds_by_axis) axes[a] = {{"seconds", s}, {"bytes_sent", p.bytes_by_axis.at(a)}};
    j["per_step"] = {{"step_s", p.step_s()},
                     {"compute_s", p.compute_s},
                     {"communication_s", p.communication_s},
                     {"exposed_communication_s", p.exposed_s},
                     {"flops", p.flops},
                     {"bytes_touched", p.bytes_touched},
                     {"collectives", p.collectives},
                     {"conditional_s", p.conditional_s},
                     {"conditional_communication_s", p.conditional_communication_s},
                     {"conditional_at", p.conditionals},
                     {"by_axes", axes}};
    j["peak"] = {{"peak_bytes", p.peak.total()},
                 {"state_bytes", p.peak.state},
                 {"saved_bytes", p.peak.saved},
                 {"temporary_bytes", p.peak.temporaries}};
    j["run_s"] = p.run_s;
    j["timeline_events"] = p.timeline.size();
    j["timeline_truncated"] = p.timeline_truncated;
    out << j.dump(2) << "\n";
}

void write_trace(std::ostream& out, const StepPrediction& p) {
    nlohmann::json events = nlohmann::json::array();
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "device 0 (predicted)"}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 1}, {"args", {{"name", "communication"}}}});
    for (const TimelineEvent& e : p.timeline) {
        nlohmann::json args = {{"at", e.at}, {"pass", e.backward ? "backward" : "forward"}};
        if (e.bytes_sent > 0) args["bytes_sent"] = e.bytes_sent;
        events.push_back({{"name", e.name},
                          {"cat", e.track},
                          {"ph", "X"},
                          {"pid", 0},
                          {"tid", e.track == "communication" ? 1 : 0},
                          {"ts", e.start * 1e6},
                          {"dur", e.duration * 1e6},
                          {"args", args}});
    }
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

}  // namespace meshc::sema

// `meshc explain` over GIR; see explain.h. The driver calls it after checking; the JSON
// form is the stable one (tools, tests), the text form is for people.
#include "sema/explain.h"

#include "ir/compute_cost.h"
#include "ir/reshard_plan.h"
#include "ir/op_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <ostream>

namespace meshc::sema {

using ir::OpKind;

std::optional<CollectiveInfo> collective_info(const ir::Module& module, const ir::Function& function,
                                              const ir::Op& op) {
    auto collective = ir::collective_kind(op.kind);
    if (!collective) return std::nullopt;
    CollectiveKind kind = *collective;
    if (op.operands.empty() || op.operands.size() != op.results.size()) return std::nullopt;
    if (op.operands.size() > 1 && kind != CollectiveKind::AllReduce) return std::nullopt;
    // b: the unsplit side; an all_reduce of several tensors at once sends them as one buffer.
    int64_t bytes = 0;
    const Mesh* mesh = nullptr;
    for (size_t i = 0; i < op.operands.size(); ++i) {
        ir::ValueId unsplit_side = kind == CollectiveKind::AllGather ? op.results[i] : op.operands[i];
        if (unsplit_side >= function.types.size()) return std::nullopt;
        const ir::TensorType& type = function.types[unsplit_side];
        mesh = type.mesh >= 0 && static_cast<size_t>(type.mesh) < module.meshes.size() ? module.mesh(type.mesh) : nullptr;
        if (!mesh) return std::nullopt;
        bytes += type.local_bytes(mesh);
    }
    // Over axes of size 1 nothing moves and nothing runs (codegen copies the piece).
    if (mesh && mesh->group_size(op.axes) == 1) return std::nullopt;
    CollectiveInfo info{kind, op.axes, bytes, {}};
    info.cost = collective_cost(kind, *mesh, op.axes, static_cast<double>(info.buffer_bytes));
    return info;
}

namespace {

bool selected(const ir::Function& f, std::string_view only_fn) {
    return only_fn.empty() || f.name == only_fn;
}

std::optional<LineCol> position(const SourceManager& sources, Span span) {
    if (!span.valid() || span.file >= sources.file_count()) return std::nullopt;
    return sources.line_col(span.file, span.begin);
}

// The file explain was asked about: its locations are `LINE:COL`, others (a stdlib
// function inlined or instantiated there) `FILE:LINE:COL`.
FileId g_main_file = 0;

std::string at(const SourceManager& sources, Span span) {
    auto lc = position(sources, span);
    if (!lc) return "?:?";
    if (span.file != g_main_file) return fmt::format("{}:{}:{}", sources.path(span.file), lc->line, lc->col);
    return fmt::format("{}:{}", lc->line, lc->col);
}

/// `30.004 us`, `1.250 ms`, `2.000 s`.
std::string seconds(double s) {
    if (s < 1e-3) return fmt::format("{:.3f} us", s * 1e6);
    if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.3f} s", s);
}

const Mesh* mesh_of(const ir::Module& module, const ir::TensorType& t) {
    if (t.mesh < 0 || static_cast<size_t>(t.mesh) >= module.meshes.size()) return nullptr;
    return module.mesh(t.mesh);
}

std::string value_label(const ir::Function& f, ir::ValueId id) {
    if (id < f.names.size() && !f.names[id].empty()) return fmt::format("%{} {}", id, f.names[id]);
    return fmt::format("%{}", id);
}

/// `all_reduce sum over (model)`, `all_to_all over (data) dim 0 -> 1`.
std::string describe(const ir::Module& module, const ir::Function& f, const ir::Op& op) {
    std::string out(ir::op_name(op.kind));
    if (op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter) {
        out += " ";
        out += ir::reduce_name(op.reduce);
    }
    const Mesh* mesh = nullptr;
    if (!op.operands.empty() && op.operands[0] < f.types.size()) mesh = mesh_of(module, f.types[op.operands[0]]);
    out += " over (" + (mesh ? mesh->axis_names(op.axes) : fmt::format("{:#x}", op.axes)) + ")";
    switch (ir::op_rule(op.kind).comm) {
    case ir::CommRule::ReduceScatter:
    case ir::CommRule::AllGather:
    case ir::CommRule::LocalSlice: out += fmt::format(" dim {}", op.dim); break;
    case ir::CommRule::AllToAll: out += fmt::format(" dim {} -> {}", op.dim, op.dim2); break;
    case ir::CommRule::AllReduce:
    case ir::CommRule::MakePartial:
    case ir::CommRule::None: break;
    }
    return out;
}

std::string global_shape(const ir::TensorType& t) {
    return fmt::format("{} [{}]", ast::dtype_name(t.dtype), fmt::join(t.shape, ", "));
}

/// ` via A > B`: the calls autodiff inlined the op through (empty: none).
std::string via(const SourceManager& sources, const ir::Op& op) {
    if (op.call_path.empty()) return {};
    std::vector<std::string> steps;
    for (Span s : op.call_path) steps.push_back(at(sources, s));
    return " via " + fmt::format("{}", fmt::join(steps, " > "));
}

std::string why(const ir::Op& op) {
    if (!op.inserted) return "  (written)";
    return op.reason.empty() ? "  (inserted)" : "  (inserted: " + op.reason + ")";
}

/// What the i-th tensor of `op` is, when its result is one of a derived function's results:
/// "the value" (of value_and_grad) or "grad of p.w1" (the parameter leaf it is the
/// gradient of); "" otherwise (then the value's own name, if any).
std::string tensor_name(const ir::Function& f, const ir::Op& op, size_t i) {
    if (i >= op.results.size()) return {};
    ir::ValueId r = op.results[i];
    if (!f.derived.empty()) {
        size_t offset = f.derived == "value_and_grad" ? 1 : 0;
        // The loss leaves its mesh on the way out (a `place` of the all_reduce's result).
        std::vector<ir::ValueId> placed;
        for (const ir::Op& o : f.ops) {
            if (o.kind == OpKind::Place && o.operands.size() == 1 && o.operands[0] == r && o.results.size() == 1) {
                placed.push_back(o.results[0]);
            }
        }
        for (size_t k = 0; k < f.results.size(); ++k) {
            if (f.results[k] != r && std::find(placed.begin(), placed.end(), f.results[k]) == placed.end()) continue;
            if (k < offset) return "the value";
            size_t p = k - offset;
            if (p < f.params.size() && f.params[p] < f.names.size() && !f.names[f.params[p]].empty()) {
                return "grad of " + f.names[f.params[p]];
            }
        }
    }
    ir::ValueId v = op.operands[i];
    return v < f.names.size() ? f.names[v] : std::string();
}

/// The operands' global shapes; of a collective of several tensors, each named.
std::string shapes_of(const ir::Function& f, const ir::Op& op) {
    std::string out;
    for (size_t i = 0; i < op.operands.size(); ++i) {
        if (op.operands[i] >= f.types.size()) continue;
        if (!out.empty()) out += ", ";
        out += global_shape(f.types[op.operands[i]]);
        if (op.operands.size() > 1) {
            if (std::string name = tensor_name(f, op, i); !name.empty()) out += " (" + name + ")";
        }
    }
    return out;
}

std::string pass_of(const ir::Op& op) { return op.backward ? "backward" : "forward"; }

}  // namespace

std::map<ir::ValueId, double> constants_of(const ir::Function& f) {
    std::map<ir::ValueId, double> out;
    ir::for_each_op(f.ops, [&](const ir::Op& op) {
        if (op.kind == OpKind::Constant && !op.results.empty()) out[op.results[0]] = op.number;
    });
    return out;
}

void for_each_counted(const std::vector<ir::Op>& ops, const std::map<ir::ValueId, double>& constants, double times,
                      bool& exact, const std::function<void(const ir::Op&, double)>& fn) {
    for (const ir::Op& op : ops) {
        fn(op, times);
        double inner = times;
        if (op.kind == OpKind::For && op.operands.size() >= 2) {
            auto lo = constants.find(op.operands[0]), hi = constants.find(op.operands[1]);
            if (lo != constants.end() && hi != constants.end()) {
                inner = times * std::max(0.0, hi->second - lo->second);
            } else {
                exact = false;
            }
        }
        for (const ir::Region& r : op.regions) for_each_counted(r.ops, constants, inner, exact, fn);
    }
}

namespace {

int64_t value_bytes(const ir::Module& module, const ir::Function& f, ir::ValueId v) {
    if (v >= f.types.size()) return 0;
    const ir::TensorType& t = f.types[v];
    return t.local_bytes(mesh_of(module, t));  // already in bytes
}

}  // namespace

ProgramFacts analyse_program(const ir::Module& module) {
    size_t n = module.functions.size();
    ProgramFacts facts;
    facts.runs.assign(n, 0);
    facts.exact.assign(n, true);
    facts.peak_bytes.assign(n, -1);
    // Peak bytes of live tensors per device: a value lives from its op to its last use (in
    // its block; a use inside a nested block counts at the op holding that block); an op's
    // own peak adds its results and what runs inside it (a callee's peak, a region's).
    facts.peak_parts.assign(n, MemoryBreakdown{});
    std::function<int64_t(size_t)> peak_of;
    // Per function, by value: its bytes per device (-1: not computed yet), its kind
    // (state: parameters and a loop's carried values; saved: forward values the backward
    // ops read), and scratch for the block being swept (its last use there).
    constexpr uint8_t kTemporary = 0, kSaved = 1, kState = 2;
    struct Values {
        std::vector<int64_t> bytes;
        std::vector<uint8_t> kind;
        std::vector<size_t> last;
    };
    constexpr size_t kUnused = static_cast<size_t>(-1);
    std::function<MemoryBreakdown(const ir::Function&, Values&, const std::vector<ir::Op>&,
                                  const std::vector<ir::ValueId>&, const std::vector<ir::ValueId>&)>
        block_peak = [&](const ir::Function& f, Values& vals, const std::vector<ir::Op>& ops,
                         const std::vector<ir::ValueId>& args, const std::vector<ir::ValueId>& kept) -> MemoryBreakdown {
        auto bytes = [&](ir::ValueId v) -> int64_t {
            if (v >= vals.bytes.size()) return 0;
            if (vals.bytes[v] < 0) vals.bytes[v] = value_bytes(module, f, v);
            return vals.bytes[v];
        };
        auto add_to = [&](MemoryBreakdown& m, ir::ValueId v, int64_t sign) {
            int64_t b = sign * bytes(v);
            uint8_t k = v < vals.kind.size() ? vals.kind[v] : kTemporary;
            (k == kState ? m.state : k == kSaved ? m.saved : m.temporaries) += b;
        };
        // The values this block defines (its arguments first), and their last uses here.
        std::vector<std::pair<ir::ValueId, size_t>> defs;
        for (ir::ValueId a : args) defs.emplace_back(a, 0);
        for (size_t i = 0; i < ops.size(); ++i) {
            for (ir::ValueId r : ops[i].results) defs.emplace_back(r, i);
        }
        auto note = [&](ir::ValueId v, size_t i) {
            if (v < vals.last.size()) vals.last[v] = i;
        };
        // fn(v, i) for each use of a value by op i of this block (a use inside a nested
        // block counts at the op holding it).
        auto for_each_use = [&](const std::function<void(ir::ValueId, size_t)>& fn) {
            for (size_t i = 0; i < ops.size(); ++i) {
                auto use = [&](const ir::Op& o) {
                    for (ir::ValueId v : o.operands) fn(v, i);
                    for (const ir::Region& r : o.regions) {
                        for (ir::ValueId y : r.yields) fn(y, i);
                    }
                };
                use(ops[i]);
                for (const ir::Region& r : ops[i].regions) ir::for_each_op(r.ops, use);
            }
        };
        for_each_use(note);
        for (ir::ValueId v : kept) note(v, ops.size());
        MemoryBreakdown peak;
        for (ir::ValueId a : args) add_to(peak, a, 1);
        // What is live before op i: an argument from the start, a result from the op after
        // the one that makes it, each until its last use (a sweep over interval ends).
        const size_t m = ops.size();
        std::vector<MemoryBreakdown> delta(m + 1);
        const size_t nargs = args.size();
        for (size_t k = 0; k < defs.size(); ++k) {
            auto [v, d] = defs[k];
            if (v >= vals.last.size()) continue;
            size_t l = vals.last[v];
            vals.last[v] = kUnused;  // scratch: clean for the next block
            if (l == kUnused || m == 0) continue;
            size_t from = k < nargs ? 0 : d + 1;
            size_t to = std::min(l, m - 1);
            if (from > to) continue;
            add_to(delta[from], v, 1);
            add_to(delta[to + 1], v, -1);
        }
        // Values of outer blocks used here keep a last use in the scratch: clear it.
        for_each_use([&](ir::ValueId v, size_t) { note(v, kUnused); });
        for (ir::ValueId v : kept) note(v, kUnused);
        MemoryBreakdown live;
        for (size_t i = 0; i < ops.size(); ++i) {
            live.state += delta[i].state;
            live.saved += delta[i].saved;
            live.temporaries += delta[i].temporaries;
            MemoryBreakdown here = live;
            for (ir::ValueId r : ops[i].results) add_to(here, r, 1);
            MemoryBreakdown inner;
            if (ops[i].kind == OpKind::Call && ops[i].callee >= 0 && static_cast<size_t>(ops[i].callee) < n) {
                size_t callee = static_cast<size_t>(ops[i].callee);
                peak_of(callee);
                // The callee's arguments are the caller's live operands, counted already:
                // its peak less its parameters' bytes (taken from its state first).
                inner = facts.peak_parts[callee];
                int64_t params = 0;
                for (ir::ValueId p : module.functions[callee].params) params += value_bytes(module, module.functions[callee], p);
                for (int64_t* part : {&inner.state, &inner.temporaries, &inner.saved}) {
                    int64_t take = std::min(*part, params);
                    *part -= take;
                    params -= take;
                }
            }
            for (const ir::Region& r : ops[i].regions) {
                // A loop's carried values (its region's arguments after the index, and what
                // it yields) are state: what persists from one iteration to the next.
                std::vector<std::pair<ir::ValueId, uint8_t>> was;
                if (ops[i].kind == OpKind::For) {
                    for (size_t k = 1; k < r.args.size(); ++k) {
                        ir::ValueId a = r.args[k];
                        if (a >= vals.kind.size()) continue;
                        was.emplace_back(a, vals.kind[a]);
                        vals.kind[a] = kState;
                    }
                }
                MemoryBreakdown b = block_peak(f, vals, r.ops, r.args, r.yields);
                for (auto [a, k] : was) vals.kind[a] = k;
                if (b.total() > inner.total()) inner = b;
            }
            MemoryBreakdown at{here.state + inner.state, here.saved + inner.saved, here.temporaries + inner.temporaries};
            if (at.total() > peak.total()) peak = at;
        }
        return peak;
    };
    peak_of = [&](size_t fi) -> int64_t {
        if (facts.peak_bytes[fi] >= 0) return facts.peak_bytes[fi];
        facts.peak_bytes[fi] = 0;  // no recursion in GIR; a guard all the same
        const ir::Function& f = module.functions[fi];
        Values vals;
        const size_t nv = f.types.size();
        vals.bytes.assign(nv, -1);
        vals.kind.assign(nv, kTemporary);
        vals.last.assign(nv, kUnused);
        if (!f.derived.empty()) {
            std::vector<bool> forward(nv, false);
            ir::for_each_op(f.ops, [&](const ir::Op& op) {
                if (op.backward) return;
                for (ir::ValueId r : op.results) {
                    if (r < nv) forward[r] = true;
                }
            });
            ir::for_each_op(f.ops, [&](const ir::Op& op) {
                if (!op.backward) return;
                for (ir::ValueId v : op.operands) {
                    if (v < nv && forward[v]) vals.kind[v] = kSaved;
                }
            });
        }
        for (ir::ValueId p : f.params) {
            if (p < nv) vals.kind[p] = kState;
        }
        MemoryBreakdown parts = block_peak(f, vals, f.ops, f.params, f.results);
        facts.peak_parts[fi] = parts;
        facts.peak_bytes[fi] = parts.total();
        return facts.peak_bytes[fi];
    };
    for (size_t i = 0; i < n; ++i) peak_of(i);
    // Runs per run of main: over the call graph from main, times loop trip counts.
    std::vector<size_t> order;
    std::vector<int> state(n, 0);
    std::function<void(size_t)> visit = [&](size_t fi) {
        if (state[fi]) return;
        state[fi] = 1;
        ir::for_each_op(module.functions[fi].ops, [&](const ir::Op& op) {
            if (op.kind == OpKind::Call && op.callee >= 0 && static_cast<size_t>(op.callee) < n) visit(static_cast<size_t>(op.callee));
        });
        order.push_back(fi);
    };
    for (size_t i = 0; i < n; ++i) {
        const ir::Function& f = module.functions[i];
        if (f.name == "main" && f.instance.empty() && f.derived.empty()) {
            facts.main = static_cast<int32_t>(i);
            facts.runs[i] = 1;
            visit(i);
        }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const ir::Function& f = module.functions[*it];
        if (facts.runs[*it] == 0) continue;
        auto constants = constants_of(f);
        bool exact = true;
        for_each_counted(f.ops, constants, 1, exact, [&](const ir::Op& op, double times) {
            if (op.kind != OpKind::Call || op.callee < 0 || static_cast<size_t>(op.callee) >= n) return;
            facts.runs[static_cast<size_t>(op.callee)] += facts.runs[*it] * times;
            if (!exact || !facts.exact[*it]) facts.exact[static_cast<size_t>(op.callee)] = false;
        });
    }
    return facts;
}

FunctionTotals function_totals(const ir::Module& module, const ir::Function& f) {
    FunctionTotals t;
    auto constants = constants_of(f);
    for_each_counted(f.ops, constants, 1, t.exact, [&](const ir::Op& op, double times) {
        ir::ComputeCost compute = ir::op_compute_cost(module, f, op);
        t.compute_seconds += times * compute.seconds;
        t.flops += times * compute.flops;
        t.compute_bytes += times * compute.bytes;
        auto info = collective_info(module, f, op);
        if (!info) return;
        t.collectives += times;
        t.bytes_sent += times * info->cost.bytes_sent;
        t.seconds += times * info->cost.seconds;
        if (op.backward) {
            t.backward_collectives += times;
            t.backward_bytes_sent += times * info->cost.bytes_sent;
        }
    });
    return t;
}

namespace {

std::string count_text(double n) {
    return n == static_cast<double>(static_cast<int64_t>(n)) ? fmt::format("{}", static_cast<int64_t>(n)) : fmt::format("{:.2f}", n);
}

/// `PREFIX: 12.3 us = compute 2.3 us (… flops, … bytes touched per device on `cpu`) + communication 10.0 us`.
std::string cost_line(std::string_view prefix, const FunctionTotals& t, const ir::DeviceModel& device) {
    return fmt::format("{}: {}{} = compute {} ({} flops, {} bytes touched per device on `{}`) + communication {}\n", prefix,
                       t.exact ? "" : "at least ", seconds(t.cost_seconds()), seconds(t.compute_seconds),
                       count_text(t.flops), count_text(t.compute_bytes), device.name, seconds(t.seconds));
}

/// `PREFIX: N bytes per device = state A + saved for the backward pass B + temporaries C`.
std::string memory_line(std::string_view prefix, const MemoryBreakdown& m) {
    return fmt::format("{}: {} bytes per device = state {} + saved for backward {} + temporaries {}\n", prefix, m.total(),
                       m.state, m.saved, m.temporaries);
}

nlohmann::ordered_json memory_json(const MemoryBreakdown& m) {
    nlohmann::ordered_json j;
    j["peak_bytes"] = m.total();
    j["state_bytes"] = m.state;
    j["saved_bytes"] = m.saved;
    j["temporary_bytes"] = m.temporaries;
    return j;
}

std::string runs_text(const ProgramFacts& facts, size_t index) {
    if (facts.main < 0) return "";
    if (facts.runs[index] == 0) return "  (not run by main)";
    return fmt::format("  (runs {}{} times per run of main)", facts.exact[index] ? "" : "at least ", count_text(facts.runs[index]));
}

void explain_function(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                      const ProgramFacts& facts, size_t index) {
    const ir::Function& f = module.functions[index];
    out << "fn " << ir::function_label(f) << runs_text(facts, index) << "\n";

    out << "  layouts:\n";
    auto show = [&](ir::ValueId id, const std::string& where) {
        if (id >= f.types.size()) return;
        const ir::TensorType& t = f.types[id];
        if (t.mesh < 0 && t.rank() == 0) return;  // a scalar has no layout
        out << "    " << value_label(f, id) << ": " << ir::type_to_string(module, t) << "  " << where << "\n";
    };
    for (ir::ValueId p : f.params) show(p, "(parameter)");
    ir::for_each_op(f.ops, [&](const ir::Op& op) {
        for (ir::ValueId r : op.results) show(r, at(sources, op.span));
    });

    double total = 0;
    std::vector<std::string> collectives, free;
    auto constants = constants_of(f);
    bool exact = true;
    for_each_counted(f.ops, constants, 1, exact, [&](const ir::Op& op, double times) {
        if (auto info = collective_info(module, f, op)) {
            total += info->cost.seconds;
            collectives.push_back(fmt::format(
                "    {}{}  {} of {}: b = {} bytes per device, sends {:.0f} bytes, {}{}{}{}", at(sources, op.span),
                via(sources, op),
                describe(module, f, op), shapes_of(f, op), info->buffer_bytes, info->cost.bytes_sent,
                seconds(info->cost.seconds), why(op), op.backward ? "  [backward]" : "",
                times != 1 ? fmt::format("  [x{} per run]", count_text(times)) : std::string()));
        } else if (op.kind == OpKind::LocalSlice || op.kind == OpKind::MakePartial) {
            std::string shape = !op.operands.empty() && op.operands[0] < f.types.size()
                                    ? " of " + global_shape(f.types[op.operands[0]])
                                    : std::string();
            free.push_back(fmt::format("    {}{}  {}{}: no communication{}", at(sources, op.span), via(sources, op),
                                       describe(module, f, op), shape, why(op)));
        }
    });
    if (collectives.empty()) {
        out << "  collectives: none\n";
    } else {
        out << fmt::format("  collectives: {}, {} in all\n", collectives.size(), seconds(total));
        for (const std::string& line : collectives) out << line << "\n";
    }
    if (!free.empty()) {
        out << "  local slices (free):\n";
        for (const std::string& line : free) out << line << "\n";
    }
    FunctionTotals t = function_totals(module, f);
    out << fmt::format("  per run: {}{} collectives ({} backward), {:.0f} bytes sent per device, {}; peak live tensors {} bytes per device\n",
                       t.exact ? "" : "at least ", count_text(t.collectives), count_text(t.backward_collectives),
                       t.bytes_sent, seconds(t.seconds), facts.peak_bytes[index]);
    out << cost_line("  cost per run", t, module.device);
    out << memory_line("  memory at peak", facts.peak_parts[index]);
}

/// One run of main: every reached instance's totals times its runs.
FunctionTotals whole_program(const ir::Module& module, const ProgramFacts& facts) {
    FunctionTotals p;
    for (size_t i = 0; i < module.functions.size(); ++i) {
        if (facts.runs[i] == 0) continue;
        FunctionTotals t = function_totals(module, module.functions[i]);
        p.collectives += facts.runs[i] * t.collectives;
        p.backward_collectives += facts.runs[i] * t.backward_collectives;
        p.bytes_sent += facts.runs[i] * t.bytes_sent;
        p.backward_bytes_sent += facts.runs[i] * t.backward_bytes_sent;
        p.seconds += facts.runs[i] * t.seconds;
        p.compute_seconds += facts.runs[i] * t.compute_seconds;
        p.flops += facts.runs[i] * t.flops;
        p.compute_bytes += facts.runs[i] * t.compute_bytes;
        p.exact = p.exact && t.exact && facts.exact[i];
    }
    return p;
}

void program_totals(std::ostream& out, const ir::Module& module, const ProgramFacts& facts) {
    if (facts.main < 0) return;
    FunctionTotals p = whole_program(module, facts);
    out << fmt::format("\nprogram (one run of main): {}{} collectives ({} backward), {:.0f} bytes sent per device, {}; "
                       "peak live tensors {} bytes per device\n",
                       p.exact ? "" : "at least ", count_text(p.collectives), count_text(p.backward_collectives),
                       p.bytes_sent, seconds(p.seconds), facts.peak_bytes[static_cast<size_t>(facts.main)]);
    out << cost_line("program cost", p, module.device);
    out << memory_line("program memory at peak", facts.peak_parts[static_cast<size_t>(facts.main)]);
}

}  // namespace

void explain_text(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn, FileId main_file) {
    g_main_file = main_file;
    bool first = true;
    ProgramFacts facts = analyse_program(module);
    for (size_t i = 0; i < module.functions.size(); ++i) {
        if (!selected(module.functions[i], only_fn)) continue;
        if (!first) out << "\n";
        first = false;
        explain_function(out, sources, module, facts, i);
    }
    if (only_fn.empty()) program_totals(out, module, facts);
}

void explain_json(std::ostream& out, const SourceManager& sources, const ir::Module& module,
                  std::string_view only_fn, FileId main_file) {
    g_main_file = main_file;
    using nlohmann::ordered_json;
    auto place = [&](ordered_json& j, Span span) {
        auto lc = position(sources, span);
        if (lc && span.file != g_main_file) j["file"] = sources.path(span.file);
        j["line"] = lc ? lc->line : 0;
        j["col"] = lc ? lc->col : 0;
    };
    auto axes_of = [&](const ir::Op& op, const Mesh& mesh) {
        ordered_json axes = ordered_json::array();
        for (size_t a = 0; a < mesh.axes.size(); ++a) {
            if (op.axes & axis_bit(a)) axes.push_back(mesh.axes[a].name);
        }
        return axes;
    };
    auto provenance = [&](ordered_json& j, const ir::Op& op) {
        j["inserted"] = op.inserted;
        j["reason"] = op.inserted && !op.reason.empty() ? ordered_json(op.reason) : ordered_json(nullptr);
    };
    auto dims = [&](ordered_json& j, const ir::Op& op) {
        if (op.kind == OpKind::ReduceScatter || op.kind == OpKind::AllGather || op.kind == OpKind::LocalSlice) j["dim"] = op.dim;
        if (op.kind == OpKind::AllToAll) {
            j["from"] = op.dim;
            j["to"] = op.dim2;
        }
    };
    ordered_json functions = ordered_json::array();
    ProgramFacts facts = analyse_program(module);
    for (size_t index = 0; index < module.functions.size(); ++index) {
        const ir::Function& f = module.functions[index];
        if (!selected(f, only_fn)) continue;
        ordered_json fn;
        fn["name"] = f.name;
        fn["instance"] = ordered_json::object();
        for (const auto& [var, size] : f.instance) fn["instance"][var] = size;
        fn["collectives"] = ordered_json::array();
        ordered_json meshes = ordered_json::object();
        for (const auto& [var, mesh] : f.mesh_instance) meshes[var] = mesh;
        // Every value's inferred type and layout (scalars off any mesh have none).
        ordered_json layouts = ordered_json::array();
        auto show = [&](ir::ValueId id, Span span, bool parameter) {
            if (id >= f.types.size()) return;
            const ir::TensorType& t = f.types[id];
            if (t.mesh < 0 && t.rank() == 0) return;
            ordered_json v;
            v["value"] = id;
            v["name"] = id < f.names.size() && !f.names[id].empty() ? ordered_json(f.names[id]) : ordered_json(nullptr);
            v["type"] = ir::type_to_string(module, t);
            v["parameter"] = parameter;
            place(v, span);
            layouts.push_back(std::move(v));
        };
        for (ir::ValueId p : f.params) show(p, f.span, true);
        ir::for_each_op(f.ops, [&](const ir::Op& op) {
            for (ir::ValueId r : op.results) show(r, op.span, false);
        });
        ordered_json free = ordered_json::array();
        double total = 0;
        auto constants = constants_of(f);
        bool exact = true;
        for_each_counted(f.ops, constants, 1, exact, [&](const ir::Op& op, double times) {
            if (auto info = collective_info(module, f, op)) {
                const ir::TensorType& t = f.types[op.operands[0]];
                const Mesh& mesh = *mesh_of(module, t);
                ordered_json c;
                c["kind"] = std::string(collective_name(info->kind));
                if (op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter) {
                    c["op"] = std::string(ir::reduce_name(op.reduce));
                } else {
                    c["op"] = nullptr;
                }
                c["axes"] = axes_of(op, mesh);
                c["dtype"] = std::string(ast::dtype_name(t.dtype));
                c["shape"] = t.shape;
                c["bytes"] = info->buffer_bytes;
                c["cost_s"] = info->cost.seconds;
                place(c, op.span);
                dims(c, op);
                c["sent_bytes"] = info->cost.bytes_sent;
                provenance(c, op);
                c["pass"] = pass_of(op);
                c["count"] = times;
                {
                    // The calls autodiff inlined it through: a layer called twice has two.
                    ordered_json path = ordered_json::array();
                    for (Span s : op.call_path) path.push_back(at(sources, s));
                    c["call_path"] = std::move(path);
                }
                if (op.operands.size() > 1) {
                    c["tensors"] = op.operands.size();
                    ordered_json shapes = ordered_json::array();
                    for (ir::ValueId v : op.operands) shapes.push_back(f.types[v].shape);
                    c["shapes"] = std::move(shapes);
                    ordered_json names = ordered_json::array();
                    for (size_t i = 0; i < op.operands.size(); ++i) {
                        std::string name = tensor_name(f, op, i);
                        names.push_back(name.empty() ? ordered_json(nullptr) : ordered_json(name));
                    }
                    c["names"] = std::move(names);
                }
                total += info->cost.seconds;
                fn["collectives"].push_back(std::move(c));
                return;
            }
            if (op.kind != OpKind::LocalSlice && op.kind != OpKind::MakePartial) return;
            if (op.operands.empty() || op.operands[0] >= f.types.size()) return;
            const ir::TensorType& t = f.types[op.operands[0]];
            const Mesh* mesh = mesh_of(module, t);
            if (!mesh) return;
            ordered_json c;
            c["op"] = std::string(ir::op_name(op.kind));
            c["axes"] = axes_of(op, *mesh);
            c["dtype"] = std::string(ast::dtype_name(t.dtype));
            c["shape"] = t.shape;
            place(c, op.span);
            dims(c, op);
            provenance(c, op);
            free.push_back(std::move(c));
        });
        fn["total_cost_s"] = total;
        fn["label"] = ir::function_label(f);
        fn["mesh_instance"] = std::move(meshes);
        fn["free"] = std::move(free);
        fn["layouts"] = std::move(layouts);
        fn["derived"] = f.derived.empty() ? ordered_json(nullptr) : ordered_json(f.derived);
        fn["runs"] = facts.runs[index];
        fn["runs_exact"] = static_cast<bool>(facts.exact[index]);
        FunctionTotals t = function_totals(module, f);
        ordered_json per_run;
        per_run["collectives"] = t.collectives;
        per_run["backward_collectives"] = t.backward_collectives;
        per_run["sent_bytes"] = t.bytes_sent;
        per_run["backward_sent_bytes"] = t.backward_bytes_sent;
        per_run["cost_s"] = t.cost_seconds();
        per_run["compute_s"] = t.compute_seconds;
        per_run["communication_s"] = t.seconds;
        per_run["flops"] = t.flops;
        per_run["compute_bytes"] = t.compute_bytes;
        per_run["exact"] = t.exact;
        fn["per_run"] = std::move(per_run);
        fn["peak_bytes"] = facts.peak_bytes[index];
        fn["cost_s"] = t.cost_seconds();
        fn["compute_s"] = t.compute_seconds;
        fn["communication_s"] = t.seconds;
        fn["memory"] = memory_json(facts.peak_parts[index]);
        functions.push_back(std::move(fn));
    }
    ordered_json root;
    root["functions"] = std::move(functions);
    if (facts.main >= 0) {
        ordered_json program;
        FunctionTotals p = whole_program(module, facts);
        program["collectives"] = p.collectives;
        program["backward_collectives"] = p.backward_collectives;
        program["sent_bytes"] = p.bytes_sent;
        program["cost_s"] = p.cost_seconds();
        program["compute_s"] = p.compute_seconds;
        program["communication_s"] = p.seconds;
        program["flops"] = p.flops;
        program["exact"] = p.exact;
        program["peak_bytes"] = facts.peak_bytes[static_cast<size_t>(facts.main)];
        program["device"] = module.device.name;
        program["memory"] = memory_json(facts.peak_parts[static_cast<size_t>(facts.main)]);
        root["program"] = std::move(program);
    }
    out << root.dump(2) << "\n";
}

}  // namespace meshc::sema

// `meshc predict`: one step of a program's main loop on a mesh the machine need not
// have, from the cost model alone (nothing runs). Input: the checked GIR (after autodiff
// and combine-collectives), its meshes rebound by `--mesh`/`--link`; output: the step's
// compute, communication, exposed communication and peak memory per device, and the
// step's timeline as a Chrome trace (Perfetto opens it). docs/cli.md, "meshc predict".
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "ir/gir.h"
#include "sema/explain.h"
#include "support/source_manager.h"

namespace meshc::sema {

/// One slice of the step's timeline: an op's compute or collective, or a call holding
/// others (`depth` > 0 inside it). Times in seconds from the step's start.
struct TimelineEvent {
    std::string name;   // `contract`, `all_reduce sum over (data)`, `call attention[...]`
    std::string track;  // "compute" or "communication"
    double start = 0, duration = 0;
    std::string at;     // FILE:LINE:COL of the op
    double bytes_sent = 0;  // collectives: per device
    bool backward = false;
};

struct StepPrediction {
    /// Where the step is: the loop of `main` (or of a function it calls) that holds most of
    /// the run's modelled time, `function` its instance, `at` the loop, `steps` its trips
    /// per run of main. No such loop: the step is one run of `main` (`steps` 1).
    bool loop = false;
    std::string function;
    std::string at;
    double steps = 1;  // 0: the loop's trips are known at run time only
    bool exact = true;  // every loop bound inside the step a constant
    /// Per step and device.
    double compute_s = 0, communication_s = 0;
    /// Communication not hidden behind compute. No overlap is scheduled yet (every
    /// collective waits for its inputs and blocks the device), so it is all of it.
    double exposed_s = 0;
    double step_s() const { return compute_s + exposed_s; }
    double flops = 0, bytes_touched = 0;
    std::map<std::string, double> seconds_by_axis;  // "data", "data+model": communication per step
    std::map<std::string, double> bytes_by_axis;    // bytes each device sends per step
    double collectives = 0;
    /// An `if` in the step runs one branch: the costlier is counted (and on the
    /// timeline); `conditional_s` is what it costs beyond the cheaper one, summed over
    /// the step's outermost `if`s (`conditionals`: where they are). A validation pass
    /// every N steps is one: step_s() - conditional_s is the step without it.
    double conditional_s = 0;
    double conditional_communication_s = 0;  // the part of conditional_s that is communication
    std::vector<std::string> conditionals;
    /// The whole run: main's modelled time, and its peak per device (explain's).
    double run_s = 0;
    MemoryBreakdown peak;
    int64_t devices = 0;                  // the largest mesh's device count
    std::vector<std::string> meshes;      // `Pod = [data: 64, model: 8]` with links
    std::string device_model;
    std::vector<TimelineEvent> timeline;  // one step, in order
    bool timeline_truncated = false;      // past kMaxEvents: the rest is summed, not listed
};

constexpr size_t kMaxTimelineEvents = 200000;

StepPrediction predict_step(const ir::Module& module, const SourceManager& sources);

void print_prediction_text(std::ostream& out, const StepPrediction& p);
void print_prediction_json(std::ostream& out, const StepPrediction& p);
/// The Chrome trace event format (JSON): two tracks of one device, compute and
/// communication, microseconds.
void write_trace(std::ostream& out, const StepPrediction& p);

}  // namespace meshc::sema

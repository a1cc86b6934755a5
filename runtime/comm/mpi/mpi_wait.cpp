// The MPI handler's bounded waits and roll calls (see mpi_handler.h): every collective is
// issued nonblocking and waited for here.
//
// A rank that waits longer than --comm-timeout asks each other member of the group, on
// the handler's own communicator (watch_), what it waits for. Every rank that polls in
// wait() answers such a question at once with (collective, mesh, axes, sequence number),
// so within the grace period the answers come from the members that are alive and
// waiting themselves; the others did not answer: their host or link is lost, or they are
// stuck outside the communication. With a silent member the abort is delayed
// (kLauncherGraceS, 30 s): when a host is lost, mpirun's own abort must reach that host's
// daemon and would wait for TCP to give up on it (many minutes), while the launcher's
// keepalive (docs/running.md) ends the job by itself within that grace.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "comm/mpi/mpi_handler.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/topology.h"

namespace meshrt::comm::mpi {
namespace {

constexpr int kAskTag = 1;
constexpr int kAnswerTag = 2;
constexpr double kLauncherGraceS = 30;

/// kLauncherGraceS, or $MESHRT_COMM_ABORT_GRACE (seconds; a knob for tests).
double launcher_grace() {
    if (const char* env = std::getenv("MESHRT_COMM_ABORT_GRACE")) {
        char* end = nullptr;
        const double v = std::strtod(env, &end);
        if (end != env && *end == '\0' && v >= 0 && v <= 3600)
            return v;
    }
    return kLauncherGraceS;
}

/// What a collective is called in answers: an index into this table.
constexpr const char* kOps[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                "barrier",    "broadcast",  "gather",         "process barrier",
                                "trace collection", "bootstrap"};

int64_t op_code(const char* op) {
    if (!op)
        return -1;
    for (size_t i = 0; i < std::size(kOps); ++i)
        if (std::string_view(kOps[i]) == op)
            return int64_t(i);
    return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g s", s);
    return buf;
}

int64_t axes_mask(const Group* g) {
    int64_t m = 0;
    if (g)
        for (int32_t a : g->axes)
            m |= int64_t(1) << a;
    return m;
}

} // namespace

void MpiHandler::wait(meshrt_device* dev, MPI_Request* req, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t polls = 0;; ++polls) {
        int done = 0;
        check(dev, MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
        if (done)
            return;
        answer_roll_calls();
        // Spin at first (a small collective completes in microseconds), then let the
        // other processes of an oversubscribed node run between tests.
        if (polls > 2000)
            sched_yield();
        if (timeout_s_ > 0 && (polls & 63) == 0) {
            const double waited = seconds_since(start);
            if (waited >= timeout_s_)
                timed_out(dev, what, waited);
        }
    }
}

void MpiHandler::answer_roll_calls() {
    for (;;) {
        int arrived = 0;
        MPI_Status st;
        if (ask_request_ == MPI_REQUEST_NULL ||
            MPI_Test(&ask_request_, &arrived, &st) != MPI_SUCCESS || !arrived)
            return;
        Answer* slot = nullptr;
        for (Answer& a : answers_) {
            if (a.request != MPI_REQUEST_NULL) {
                int sent = 0;
                MPI_Test(&a.request, &sent, MPI_STATUS_IGNORE);
            }
            if (a.request == MPI_REQUEST_NULL) {
                slot = &a;
                break;
            }
        }
        // All slots busy: 64 answers to ranks that never took them; this asker gets none.
        if (slot) {
            const Group* g = current_.group;
            slot->data[0] = op_code(current_.op);
            slot->data[1] = g ? g->mesh : -2;
            slot->data[2] = axes_mask(g);
            slot->data[3] = current_.seq;
            MPI_Isend(slot->data, 4, MPI_INT64_T, st.MPI_SOURCE, kAnswerTag, watch_,
                      &slot->request);
        }
        if (MPI_Irecv(&ask_buf_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kAskTag, watch_,
                      &ask_request_) != MPI_SUCCESS)
            ask_request_ = MPI_REQUEST_NULL;
    }
}

void MpiHandler::roll_call(std::string* answered, std::vector<int>* silent) {
    const Group* g = current_.group;
    std::vector<int> peers;
    if (g && g->mesh >= 0) {
        for (int64_t m : g->members)
            if (m != rank_)
                peers.push_back(int(m));
    } else {
        for (int r = 0; r < size_; ++r)
            if (r != rank_)
                peers.push_back(r);
    }
    const size_t n = peers.size();
    std::vector<std::array<int64_t, 4>> replies(n);
    std::vector<MPI_Request> asks(n, MPI_REQUEST_NULL), recvs(n, MPI_REQUEST_NULL);
    std::vector<bool> got(n, false);
    ask_buf_out_ = current_.seq;
    for (size_t i = 0; i < n; ++i) {
        MPI_Isend(&ask_buf_out_, 1, MPI_INT64_T, peers[i], kAskTag, watch_, &asks[i]);
        MPI_Irecv(replies[i].data(), 4, MPI_INT64_T, peers[i], kAnswerTag, watch_, &recvs[i]);
    }
    const double grace = std::clamp(timeout_s_ / 4, 1.0, 10.0);
    const auto start = std::chrono::steady_clock::now();
    size_t count = 0;
    while (count < n && seconds_since(start) < grace) {
        for (size_t i = 0; i < n; ++i) {
            if (got[i])
                continue;
            int flag = 0;
            if (MPI_Test(&recvs[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
                got[i] = true;
                ++count;
            }
        }
        answer_roll_calls(); // the others' roll calls, held at the same time
        usleep(1000);
    }
    // Members in the same collective (same op, group and sequence number) are summed up;
    // the others say where they are.
    std::vector<int> same;
    std::string elsewhere;
    for (size_t i = 0; i < n; ++i) {
        if (!got[i]) {
            silent->push_back(peers[i]);
            continue;
        }
        const auto& a = replies[i];
        if (a[0] == op_code(current_.op) && a[1] == (g ? g->mesh : -2) && a[2] == axes_mask(g) &&
            a[3] == current_.seq) {
            same.push_back(peers[i]);
            continue;
        }
        if (!elsewhere.empty())
            elsewhere += "; ";
        elsewhere += "device " + describe_ranks({peers[i]}) + " waits in " +
                     (a[0] >= 0 && size_t(a[0]) < std::size(kOps) ? kOps[a[0]] : "(unknown)");
        if (a[1] >= 0 && a[1] < topology_.nmeshes()) {
            const MeshInfo& mesh = topology_.mesh(int32_t(a[1]));
            elsewhere += " over " + mesh.name + " axes ";
            std::string axes;
            for (size_t ax = 0; ax < mesh.axis_names.size(); ++ax)
                if (a[2] & (int64_t(1) << ax))
                    axes += (axes.empty() ? "" : ",") + mesh.axis_names[ax];
            elsewhere += axes.empty() ? "(none)" : axes;
        }
        elsewhere += ", its collective #" + std::to_string(a[3]);
    }
    if (!same.empty())
        *answered = "device" + std::string(same.size() > 1 ? "s " : " ") + describe_ranks(same) +
                    (same.size() > 1 ? " wait" : " waits") + " in the same collective";
    if (!elsewhere.empty())
        *answered += (answered->empty() ? "" : "; ") + elsewhere;
}

void MpiHandler::timed_out(meshrt_device* dev, const char* what, double waited) {
    std::string answered;
    std::vector<int> silent;
    roll_call(&answered, &silent);
    std::string msg = std::string(current_.op ? current_.op : "a collective") +
                      (dev && dev->comm_site ? std::string(" at ") + dev->comm_site : std::string()) + " " +
                      describe_group(current_.group) + " made no progress for " +
                      seconds_text(waited) + " (--comm-timeout=" + seconds_text(timeout_s_) +
                      "; collective #" + std::to_string(current_.seq) + " of this device, in " +
                      what + ")";
    if (silent.empty()) {
        msg += ": every other member answered (" + answered +
               "): the members do not make the same collectives";
    } else {
        msg += ": no answer from device" + std::string(silent.size() > 1 ? "s " : " ") +
               describe_ranks(silent) +
               " (a lost host or link, or stuck outside any collective)";
        if (!answered.empty())
            msg += "; " + answered;
        // See the file comment: give the launcher the time to notice a lost host.
        delay_abort(launcher_grace());
    }
    fail(dev, msg + "; ending the job");
}

std::string MpiHandler::describe_group(const Group* g) const {
    if (!g)
        return "of the run (all " + std::to_string(size_) + " processes)";
    return comm::describe_group(topology_, *g, rank_);
}

std::string MpiHandler::describe_ranks(const std::vector<int>& ranks) const {
    std::string s;
    for (size_t i = 0; i < ranks.size(); ++i) {
        const int r = ranks[i];
        s += (i ? ", " : "") + std::to_string(r);
        if (r >= 0 && size_t(r) < hosts_.size())
            s += " (node " + std::to_string(nodes_[size_t(r)]) + ", host " + hosts_[size_t(r)] +
                 ")";
    }
    return s;
}

std::string MpiHandler::process_label() const {
    return "host " + hosts_[size_t(rank_)] + ", node " + std::to_string(nodes_[size_t(rank_)]);
}

std::unique_ptr<GroupState> MpiHandler::bootstrap_group(meshrt_device* dev, const Group& g,
                                                        void* blob, int bytes,
                                                        const std::function<void(void*)>& make) {
    std::unique_ptr<GroupState> st = make_group_state(g);
    const MPI_Comm comm = static_cast<MpiGroupState&>(*st).comm;
    int r = -1;
    MPI_Comm_rank(comm, &r);
    if (r == 0)
        make(blob);
    if (g.size() > 1) {
        Enter enter(*this, &g, "bootstrap");
        MPI_Request req;
        check(dev, MPI_Ibcast(blob, bytes, MPI_BYTE, 0, comm, &req), "bootstrap: MPI_Ibcast");
        wait(dev, &req, "bootstrap: MPI_Ibcast");
    }
    return st;
}

} // namespace meshrt::comm::mpi

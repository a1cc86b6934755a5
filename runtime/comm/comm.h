// The communication interface every handler implements: the simulated mesh (sim/,
// devices are threads of one process), OpenMPI (mpi/, one process per device), and later
// NCCL. The C ABI entry points (collectives.cpp) validate arguments, find the group
// (group.h) and trace; a handler only moves bytes, given the group, the caller's rank in
// it and its buffers. Every member of a group makes the same calls in the same order
// (SPMD), and a handler must not return to a member while a peer may still read that
// member's buffers. A handler also says which devices this process runs and collects
// the trace tracks of all processes (meshrt_main).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/group.h"
#include "meshrt.h"

namespace meshrt {
class Topology;
}

namespace meshrt::comm {

/// What the options tell a handler that talks to other processes.
struct CommSettings {
    /// --comm-timeout: a collective that makes no progress for this many seconds ends
    /// the job with a message (MPI, NCCL); 0 waits for ever.
    double timeout_s = 300;
};

class CommHandler {
public:
    virtual ~CommHandler() = default;
    virtual std::string_view name() const = 0;

    /// Called once per group, before any member uses it (under the registry's lock).
    virtual std::unique_ptr<GroupState> make_group_state(const Group& group) = 0;

    /// out = op over the members' `in` (count elements each).
    virtual void all_reduce(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype,
                            int32_t op, const void* in, void* out, int64_t count) = 0;
    /// out (in_shape with [dim] * n) gets member r's `in` at index r along dim.
    virtual void all_gather(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype,
                            const void* in, void* out, std::span<const int64_t> in_shape,
                            int32_t dim) = 0;
    /// out (in_shape with [dim] / n) = piece `rank` along dim of op over the inputs.
    virtual void reduce_scatter(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype,
                                int32_t op, const void* in, void* out,
                                std::span<const int64_t> in_shape, int32_t dim) = 0;
    /// See meshrt_all_to_all.
    virtual void all_to_all(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype,
                            const void* in, void* out, std::span<const int64_t> in_shape,
                            int32_t from_dim, int32_t to_dim) = 0;
    virtual void barrier(meshrt_device* dev, const Group& g, int64_t rank) = 0;
    /// Every member's buf gets the root's `bytes` bytes.
    virtual void broadcast(meshrt_device* dev, const Group& g, int64_t rank, int64_t root,
                           void* buf, int64_t bytes) = 0;
    /// The root's out (n * bytes) gets member r's `in` at r * bytes; out is unused on the
    /// other members. Used to assemble values for save and print.
    virtual void gather(meshrt_device* dev, const Group& g, int64_t rank, int64_t root,
                        const void* in, int64_t bytes, void* out) = 0;

    // ---- the process (meshrt_main), outside any device

    /// The devices this process runs: [first_local_device(), + local_device_count()).
    /// The simulated mesh runs every device, MPI one per process (its rank).
    virtual int64_t first_local_device() const { return 0; }
    virtual int64_t local_device_count(int64_t ndevices) const { return ndevices; }
    /// Whether this process's one device must run on the calling thread (MPI: the
    /// thread that initialised it) instead of a thread of its own.
    virtual bool device_on_main_thread() const { return false; }
    /// Waits for every process of the run (aligns the trace clocks); no-op in one process.
    virtual void process_barrier() {}
    /// Collects every process's trace tracks on the process that runs device 0: returns
    /// true there, with *all in device order; false on the other processes.
    virtual bool gather_tracks(std::string tracks, std::vector<std::string>* all) {
        all->push_back(std::move(tracks));
        return true;
    }
    /// Where this process runs, for --print-topology and messages: "host NAME" plus,
    /// under MPI, "node N" (ranks with the same host name and network namespace).
    virtual std::string process_label() const {
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        return std::string("host ") + name;
    }
};

/// The handlers this runtime was built with.
std::unique_ptr<CommHandler> make_sim_handler(const Topology& topology);
#ifdef MESHRT_HAVE_MPI
/// Initialises MPI (mpi/mpi_handler.cpp). When MPI_COMM_WORLD's size is not the
/// program's device count, rank 0 says so, MPI is finalised, and the result is null with
/// *status set to the exit status (2) every rank returns.
std::unique_ptr<CommHandler> make_mpi_handler(const Topology& topology,
                                              const CommSettings& settings,
                                              const std::string& program_name, int* argc,
                                              char*** argv, int* status);
#endif

} // namespace meshrt::comm

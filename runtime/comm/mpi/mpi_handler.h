// The OpenMPI handler (--comm=mpi): one process per mesh device, the device index being
// the rank in MPI_COMM_WORLD, started by `mpirun -np N prog --comm=mpi`. Each group gets
// its own communicator, made by its members alone the first time they use it
// (MPI_Comm_create_group, members in rank order) and kept for the run. Created by
// make_mpi_handler (comm.h) for meshrt_main; the MPI check program (tests/) uses
// BlockType directly.
//
// Failure is bounded (--comm-timeout, mpi_wait.cpp): every collective is issued
// nonblocking (MPI_Iallreduce, ...) and waited for by polling MPI_Test. One that has not
// completed after the timeout holds a roll call: the group's other members are asked,
// on a communicator of their own, what they are waiting for; a member that is itself
// waiting in any collective answers at once, so the members that do not answer within a
// grace period are those that are lost (their host, their link) or stuck outside the
// communication (computing, or in a hang of their own). The message names the
// collective, its place in the device's sequence of collectives, its group and the
// silent members, and the job ends through MPI_Abort.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "src/tensor.h"

namespace meshrt::comm::mpi {

/// Fails the run when an MPI call did not succeed (the handler's communicators return
/// errors instead of aborting, so the message names the device and the collective).
void check(meshrt_device* dev, int rc, const char* what);

/// The next failure waits this long before MPI_Abort (see mpi_wait.cpp).
void delay_abort(double seconds);

/// An MPI datatype for one member's block of a collective. MPI counts are ints: a
/// block of more than INT_MAX bytes is described as one derived element. Owns (frees)
/// the datatypes it creates; pass (type(), count()) to MPI.
class BlockType {
public:
    /// `bytes` contiguous bytes: (MPI_BYTE, bytes) when that fits an int, else one
    /// derived element of extent `bytes`.
    static BlockType contiguous(meshrt_device* dev, int64_t bytes);
    /// `rows` runs of `run` bytes, `stride` bytes apart, as one element of extent
    /// `extent` bytes, so that member i's block starts i * extent bytes into the buffer
    /// (a dim that is not the outermost one, gathered or scattered without a copy).
    static BlockType strided(meshrt_device* dev, int64_t rows, int64_t run, int64_t stride,
                             int64_t extent);

    BlockType(BlockType&& other) noexcept;
    BlockType& operator=(BlockType&&) = delete;
    BlockType(const BlockType&) = delete;
    ~BlockType();

    MPI_Datatype type() const { return type_; }
    int count() const { return count_; }

private:
    BlockType() = default;
    MPI_Datatype type_ = MPI_BYTE;
    int count_ = 0;
    bool owned_ = false;
};

/// A group's communicator: the handler's copies of MPI_COMM_SELF (a group of one) and
/// MPI_COMM_WORLD (all devices), else its own (freed with the state).
class MpiGroupState : public GroupState {
public:
    MpiGroupState(MPI_Comm comm, bool owned) : comm(comm), owned_(owned) {}
    ~MpiGroupState() override;
    const MPI_Comm comm;

private:
    bool owned_;
};

class MpiHandler : public CommHandler {
public:
    /// `world`: a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN (the handler owns it
    /// and finalises MPI when destroyed). Collective over MPI_COMM_WORLD (it learns every
    /// rank's host).
    MpiHandler(MPI_Comm world, int rank, int size, const Topology& topology,
               const CommSettings& settings);
    ~MpiHandler() override;

    std::string_view name() const override { return "mpi"; }
    std::unique_ptr<GroupState> make_group_state(const Group& group) override;

    void all_reduce(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, int32_t op,
                    const void* in, void* out, int64_t count) override;
    void all_gather(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, const void* in,
                    void* out, std::span<const int64_t> in_shape, int32_t dim) override;
    void reduce_scatter(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, int32_t op,
                        const void* in, void* out, std::span<const int64_t> in_shape,
                        int32_t dim) override;
    void all_to_all(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, const void* in,
                    void* out, std::span<const int64_t> in_shape, int32_t from_dim,
                    int32_t to_dim) override;
    void barrier(meshrt_device* dev, const Group& g, int64_t rank) override;
    void broadcast(meshrt_device* dev, const Group& g, int64_t rank, int64_t root, void* buf,
                   int64_t bytes) override;
    void gather(meshrt_device* dev, const Group& g, int64_t rank, int64_t root, const void* in,
                int64_t bytes, void* out) override;

    int64_t first_local_device() const override { return rank_; }
    int64_t local_device_count(int64_t) const override { return 1; }
    bool device_on_main_thread() const override { return true; }
    void process_barrier() override;
    bool gather_tracks(std::string tracks, std::vector<std::string>* all) override;
    std::string process_label() const override;

    /// Bootstraps another library's communicator for g from g's MPI communicator (NCCL's
    /// unique id): the member of rank 0 fills `bytes` bytes of `blob` with make(), and
    /// every member gets them, under the timeout of the collectives. Returns g's MPI
    /// group state, which carried them (the caller keeps it).
    std::unique_ptr<GroupState> bootstrap_group(meshrt_device* dev, const Group& g, void* blob,
                                                int bytes, const std::function<void(void*)>& make);

    /// Waits for `req`, answering other ranks' roll calls meanwhile; after the timeout,
    /// holds its own roll call and fails the run (see the file comment). `what` names the
    /// MPI call ("all_reduce: MPI_Ialltoall").
    void wait(meshrt_device* dev, MPI_Request* req, const char* what);

    double timeout_s() const { return timeout_s_; }

    /// Starts a nonblocking call (start(&request) returns its MPI status) and waits for it.
    template <typename Start>
    void complete(meshrt_device* dev, const char* what, Start&& start) {
        MPI_Request req = MPI_REQUEST_NULL;
        check(dev, start(&req), what);
        wait(dev, &req, what);
    }

private:
    /// The collective this process's device is in: set by Enter for its duration.
    struct Current {
        const char* op = nullptr; // "all_reduce", ...; null outside a collective
        const Group* group = nullptr; // null: the run's own (start, trace collection)
        int64_t seq = 0;              // 1 for the process's first collective
    };
    class Enter {
    public:
        Enter(MpiHandler& h, const Group* g, const char* op) : h_(h) {
            h_.current_ = Current{op, g, ++h_.seq_};
        }
        ~Enter() { h_.current_ = Current{}; }
        Enter(const Enter&) = delete;
        Enter& operator=(const Enter&) = delete;

    private:
        MpiHandler& h_;
    };

    /// Answers the roll calls that have arrived (and reposts the receive).
    void answer_roll_calls();
    /// Asks every other member of the current group what it waits for: the message's
    /// text on the members that answered, and the silent ones.
    void roll_call(std::string* answered, std::vector<int>* silent);
    [[noreturn]] void timed_out(meshrt_device* dev, const char* what, double waited);
    /// "over Pod axes data (devices 0, 4; this one is rank 1)"
    std::string describe_group(const Group* g) const;
    /// "2 (node 1), 3 (node 1)"
    std::string describe_ranks(const std::vector<int>& ranks) const;


    /// One segment (at most segment_bytes_) of an all_reduce whose order matters.
    void ordered_all_reduce(meshrt_device* dev, MPI_Comm comm, int64_t n, int64_t rank,
                            int32_t dtype, int32_t op, const char* in, char* out, int64_t count);

    /// At least `bytes` of scratch memory, kept from call to call: a fresh 64 MiB buffer
    /// per collective would cost more in page faults than the copy into it.
    char* scratch(int64_t bytes);

    MPI_Comm world_;
    MPI_Comm self_; // a duplicate of MPI_COMM_SELF, errors returned like world_'s
    int rank_;
    int size_;
    int64_t segment_bytes_; // all_reduce works in segments of at most this many bytes
    Scratch scratch_;       // this process's one device calls one collective at a time
    const Topology& topology_;
    double timeout_s_;      // 0: wait for ever
    std::vector<std::string> hosts_; // by rank: MPI_Get_processor_name
    std::vector<int> nodes_;         // by rank: node number (shared-memory domain)
    // Roll calls (mpi_wait.cpp): a communicator of their own, the pending receive of an
    // ask, and the answers in flight (their buffers live until they complete).
    MPI_Comm watch_ = MPI_COMM_NULL;
    MPI_Request ask_request_ = MPI_REQUEST_NULL;
    int64_t ask_buf_ = 0;     // an ask received
    int64_t ask_buf_out_ = 0; // the ask this rank sends
    struct Answer {
        int64_t data[4];
        MPI_Request request = MPI_REQUEST_NULL;
    };
    std::array<Answer, 64> answers_{}; // a slot is free when its request is null
    Current current_;
    int64_t seq_ = 0;
};

} // namespace meshrt::comm::mpi

// The OpenMPI handler (--comm=mpi): one process per mesh device, the device index being
// the rank in MPI_COMM_WORLD, started by `mpirun -np N prog --comm=mpi`. Each group gets
// its own communicator, made by its members alone the first time they use it
// (MPI_Comm_create_group, members in rank order) and kept for the run. Created by
// make_mpi_handler (comm.h) for meshrt_main; the MPI check program (tests/) uses
// BlockType directly.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "src/tensor.h"

namespace meshrt::comm::mpi {

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
    /// and finalises MPI when destroyed).
    MpiHandler(MPI_Comm world, int rank, int size);
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

private:
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
};

} // namespace meshrt::comm::mpi

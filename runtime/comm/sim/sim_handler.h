// The simulated mesh: every device is a thread of this process and collectives move data
// through shared memory. Each group has its own rendezvous (a blocking barrier and one
// slot per member where it publishes its buffers); members read their peers' buffers
// directly, so nothing is staged and no lock is held on the data path.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/comm.h"

namespace meshrt::comm::sim {

/// A reusable barrier for a fixed number of threads (mutex + condition variable with a
/// generation count). It blocks instead of spinning: the simulated mesh usually runs
/// more device threads than there are cores.
class GenerationBarrier {
public:
    explicit GenerationBarrier(int64_t n) : n_(n) {}
    void arrive_and_wait();

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    const int64_t n_;
    int64_t waiting_ = 0;
    uint64_t generation_ = 0;
};

/// Where a member publishes its buffers for the current collective. Written by the
/// member before the first barrier, read by its peers after it; the barrier's mutex
/// orders the accesses. One cache line each, so members never share a line.
struct alignas(64) Slot {
    const void* in = nullptr;
    void* out = nullptr;
};

class SimGroupState : public GroupState {
public:
    explicit SimGroupState(int64_t n) : barrier(n), slots(size_t(n)) {}
    GenerationBarrier barrier;
    std::vector<Slot> slots;
};

class SimHandler : public CommHandler {
public:
    std::string_view name() const override { return "sim"; }
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
};

} // namespace meshrt::comm::sim

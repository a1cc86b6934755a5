// The simulated mesh's collectives (see sim_handler.h). Every collective has the same
// shape: publish this member's buffers in its slot, barrier, read peers' buffers
// directly, barrier at the end so no member returns (and frees a buffer) while a peer
// may still read it. all_reduce is reduce-scatter then all-gather: member r reduces
// chunk r of all inputs into chunk r of its own output, then copies the other chunks
// from the peers' outputs, so every member reads about 2x the data once.
#include "comm/sim/sim_handler.h"

#include <cstring>

#include "comm/reduce.h"
#include "src/dtype.h"
#include "src/tensor.h"

namespace meshrt::comm::sim {

void GenerationBarrier::arrive_and_wait() {
    std::unique_lock lock(mutex_);
    const uint64_t gen = generation_;
    if (++waiting_ == n_) {
        waiting_ = 0;
        ++generation_;
        lock.unlock();
        cv_.notify_all();
        return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
}

std::unique_ptr<GroupState> SimHandler::make_group_state(const Group& group) {
    return std::make_unique<SimGroupState>(group.size());
}

namespace {

SimGroupState& state_of(const Group& g) {
    return static_cast<SimGroupState&>(*g.state);
}

/// [begin, end) of chunk r when `count` elements are shared by n members.
std::pair<int64_t, int64_t> chunk(int64_t count, int64_t n, int64_t r) {
    const int64_t base = count / n, extra = count % n;
    const int64_t begin = r * base + std::min(r, extra);
    return {begin, begin + base + (r < extra ? 1 : 0)};
}

/// Product of shape[0, dim) and of shape[dim, rank).
std::pair<int64_t, int64_t> split_at(std::span<const int64_t> shape, int32_t dim) {
    return {num_elements(shape.subspan(0, size_t(dim))), num_elements(shape.subspan(size_t(dim)))};
}

} // namespace

void SimHandler::all_reduce(meshrt_device*, const Group& g, int64_t rank, int32_t dtype, int32_t op,
                            const void* in, void* out, int64_t count) {
    const size_t elem = dtype_size(dtype);
    const int64_t n = g.size();
    if (n == 1) {
        reduce_into(dtype, op, out, &in, 1, count); // normalises bools like the n > 1 case
        return;
    }
    SimGroupState& st = state_of(g);
    st.slots[size_t(rank)] = Slot{in, out};
    st.barrier.arrive_and_wait();

    // Phase 1 (reduce-scatter): chunk `rank` of every input -> chunk `rank` of out.
    auto [begin, end] = chunk(count, n, rank);
    std::vector<const void*> inputs(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        inputs[size_t(i)] = static_cast<const char*>(st.slots[size_t(i)].in) + size_t(begin) * elem;
    reduce_into(dtype, op, static_cast<char*>(out) + size_t(begin) * elem, inputs.data(), n,
                end - begin);
    st.barrier.arrive_and_wait();

    // Phase 2 (all-gather): the other chunks from the peers that reduced them.
    for (int64_t j = 0; j < n; ++j) {
        if (j == rank)
            continue;
        auto [b, e] = chunk(count, n, j);
        std::memcpy(static_cast<char*>(out) + size_t(b) * elem,
                    static_cast<const char*>(st.slots[size_t(j)].out) + size_t(b) * elem,
                    size_t(e - b) * elem);
    }
    st.barrier.arrive_and_wait();
}

void SimHandler::all_gather(meshrt_device*, const Group& g, int64_t rank, int32_t dtype,
                            const void* in, void* out, std::span<const int64_t> in_shape,
                            int32_t dim) {
    const size_t elem = dtype_size(dtype);
    const int64_t n = g.size();
    auto [outer, inner] = split_at(in_shape, dim);
    const size_t block = size_t(inner) * elem; // one member's part of one outer row
    SimGroupState& st = state_of(g);
    st.slots[size_t(rank)] = Slot{in, out};
    if (n > 1)
        st.barrier.arrive_and_wait();
    for (int64_t i = 0; i < n; ++i) {
        const char* src = static_cast<const char*>(st.slots[size_t(i)].in);
        char* dst = static_cast<char*>(out) + size_t(i) * block;
        for (int64_t o = 0; o < outer; ++o)
            std::memcpy(dst + size_t(o * n) * block, src + size_t(o) * block, block);
    }
    if (n > 1)
        st.barrier.arrive_and_wait();
}

void SimHandler::reduce_scatter(meshrt_device*, const Group& g, int64_t rank, int32_t dtype,
                                int32_t op, const void* in, void* out,
                                std::span<const int64_t> in_shape, int32_t dim) {
    const size_t elem = dtype_size(dtype);
    const int64_t n = g.size();
    auto [outer, inner] = split_at(in_shape, dim);
    const int64_t piece = inner / n; // elements of one member's piece of one outer row
    SimGroupState& st = state_of(g);
    st.slots[size_t(rank)] = Slot{in, out};
    if (n > 1)
        st.barrier.arrive_and_wait();
    std::vector<const void*> inputs(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
        const size_t offset = size_t(o * inner + rank * piece) * elem;
        for (int64_t i = 0; i < n; ++i)
            inputs[size_t(i)] = static_cast<const char*>(st.slots[size_t(i)].in) + offset;
        reduce_into(dtype, op, static_cast<char*>(out) + size_t(o * piece) * elem, inputs.data(), n,
                    piece);
    }
    if (n > 1)
        st.barrier.arrive_and_wait();
}

void SimHandler::all_to_all(meshrt_device*, const Group& g, int64_t rank, int32_t dtype,
                            const void* in, void* out, std::span<const int64_t> in_shape,
                            int32_t from_dim, int32_t to_dim) {
    const size_t elem = dtype_size(dtype);
    const int64_t n = g.size();
    std::vector<int64_t> out_shape(in_shape.begin(), in_shape.end());
    out_shape[size_t(from_dim)] *= n;
    out_shape[size_t(to_dim)] /= n;
    // The piece every member sends to every other: in_shape with [to_dim] / n.
    std::vector<int64_t> box(in_shape.begin(), in_shape.end());
    box[size_t(to_dim)] /= n;
    SimGroupState& st = state_of(g);
    st.slots[size_t(rank)] = Slot{in, out};
    if (n > 1)
        st.barrier.arrive_and_wait();
    std::vector<int64_t> src_start(in_shape.size(), 0), dst_start(in_shape.size(), 0);
    src_start[size_t(to_dim)] = rank * box[size_t(to_dim)];
    for (int64_t i = 0; i < n; ++i) {
        dst_start[size_t(from_dim)] = i * in_shape[size_t(from_dim)];
        copy_box(elem, box, st.slots[size_t(i)].in, in_shape, src_start, out, out_shape, dst_start);
    }
    if (n > 1)
        st.barrier.arrive_and_wait();
}

void SimHandler::barrier(meshrt_device*, const Group& g, int64_t) {
    if (g.size() > 1)
        state_of(g).barrier.arrive_and_wait();
}

void SimHandler::broadcast(meshrt_device*, const Group& g, int64_t rank, int64_t root, void* buf,
                           int64_t bytes) {
    if (g.size() == 1)
        return;
    SimGroupState& st = state_of(g);
    st.slots[size_t(rank)] = Slot{buf, buf};
    st.barrier.arrive_and_wait();
    if (rank != root)
        std::memcpy(buf, st.slots[size_t(root)].in, size_t(bytes));
    st.barrier.arrive_and_wait();
}

void SimHandler::gather(meshrt_device*, const Group& g, int64_t rank, int64_t root, const void* in,
                        int64_t bytes, void* out) {
    const int64_t n = g.size();
    SimGroupState& st = state_of(g);
    st.slots[size_t(rank)] = Slot{in, out};
    if (n > 1)
        st.barrier.arrive_and_wait();
    if (rank == root)
        for (int64_t i = 0; i < n; ++i)
            std::memcpy(static_cast<char*>(out) + size_t(i * bytes), st.slots[size_t(i)].in,
                        size_t(bytes));
    if (n > 1)
        st.barrier.arrive_and_wait();
}

} // namespace meshrt::comm::sim

namespace meshrt::comm {

std::unique_ptr<CommHandler> make_sim_handler(const Topology&) {
    return std::make_unique<sim::SimHandler>();
}

} // namespace meshrt::comm

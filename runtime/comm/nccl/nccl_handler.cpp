// The NCCL handler's collectives (see nccl_handler.h). Every collective enqueues on the
// calling device's stream (kernels/cuda/device.h) and waits for it before returning, so
// no member returns while a peer may still read its buffers.
//
// NCCL's own reductions are used where their result is what meshrt.h promises up to the
// order of the additions: integer sums (on the unsigned type: they wrap) and maxima, and
// f32/f64 sums (NCCL's ring or tree order, not the simulated mesh's rank order; meshrt.h
// allows that, as for any change of mesh). NCCL sums f16/bf16 in 16 bits (a rounding
// per step, where meshrt.h rounds once) and its float max drops NaNs (fmax), so those,
// and bools (normalised to 0/1), take the exact path: member j receives slice j of
// every input (grouped ncclSend/ncclRecv) and reduces them in rank order with the
// reduce_slices kernel, bitwise what the simulated mesh computes; an all_reduce then
// shares the reduced slices the same way. That moves the bytes a ring moves.
//
// A gathered or scattered dim that is not the outermost one is packed or unpacked with
// cudaMemcpy2DAsync (one call per member), as NCCL only moves contiguous blocks.
// Buffers the GPU cannot address (the host buffers save and print gather into) are
// staged through device memory (DeviceBuffer).
#include "comm/nccl/nccl_handler.h"

#include <nccl.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/device.h"
#include "src/runtime.h"
#include "kernels/cuda/kernels.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/tensor.h"
#include "src/topology.h"

#ifdef MESHRT_HAVE_MPI
#include "comm/mpi/mpi_handler.h"
#endif

namespace meshrt::comm::nccl {
namespace {

using cuda::DeviceBuffer;
using cuda::DeviceContext;
using cuda::DeviceScratch;

void check(meshrt_device* dev, ncclResult_t r, const char* what) {
    if (r == ncclSuccess)
        return;
    std::string msg = std::string("NCCL: ") + what + ": " + ncclGetErrorString(r);
    const char* last = ncclGetLastError(nullptr);
    if (last && *last)
        msg += std::string(" (") + last + ")";
    fail(dev, msg);
}

/// [begin, end) of chunk r when `count` elements are shared by n members (as the
/// simulated mesh cuts an all_reduce).
std::pair<int64_t, int64_t> chunk(int64_t count, int64_t n, int64_t r) {
    const int64_t base = count / n, extra = count % n;
    const int64_t begin = r * base + std::min(r, extra);
    return {begin, begin + base + (r < extra ? 1 : 0)};
}

/// Product of shape[0, dim) and of shape[dim, rank).
std::pair<int64_t, int64_t> split_at(std::span<const int64_t> shape, int32_t dim) {
    return {num_elements(shape.subspan(0, size_t(dim))), num_elements(shape.subspan(size_t(dim)))};
}

/// The NCCL type and op of a reduction NCCL computes as meshrt.h wants (see the header
/// comment); ncclNumTypes for the exact path.
std::pair<ncclDataType_t, ncclRedOp_t> native_reduction(int32_t dtype, int32_t op) {
    const bool sum = op == MESHRT_SUM;
    switch (dtype) {
    case MESHRT_I32:
        return {sum ? ncclUint32 : ncclInt32, sum ? ncclSum : ncclMax};
    case MESHRT_I64:
        return {sum ? ncclUint64 : ncclInt64, sum ? ncclSum : ncclMax};
    case MESHRT_F32:
        return {sum ? ncclFloat32 : ncclNumTypes, ncclSum};
    case MESHRT_F64:
        return {sum ? ncclFloat64 : ncclNumTypes, ncclSum};
    default:
        return {ncclNumTypes, ncclSum};
    }
}

/// What a group keeps: its unique id and, by rank, the members' communicators (each
/// made and used by its member's thread only; under mpirun only this process's member
/// has one).
class NcclGroupState : public GroupState {
public:
    explicit NcclGroupState(int64_t n) : comms(size_t(n), nullptr), gpus(size_t(n), 0) {}
    ~NcclGroupState() override {
        for (size_t r = 0; r < comms.size(); ++r)
            if (comms[r]) {
                cudaSetDevice(gpus[r]);
                ncclCommDestroy(comms[r]);
            }
    }
    ncclUniqueId id{};
    std::vector<ncclComm_t> comms;
    std::vector<int> gpus;
    /// Under mpirun: the group's MPI communicator, which carried the id.
    std::unique_ptr<GroupState> mpi;
};

/// Copies a block of `rows` rows of `width` bytes between pitched buffers on the stream.
void copy_2d(meshrt_device* dev, DeviceContext& c, void* dst, size_t dpitch, const void* src,
             size_t spitch, size_t width, size_t rows) {
    if (width == 0 || rows == 0)
        return;
    cuda::check(dev,
                cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice,
                                  c.stream),
                "cudaMemcpy2DAsync");
}

void copy_1d(meshrt_device* dev, DeviceContext& c, void* dst, const void* src, size_t bytes) {
    if (bytes)
        cuda::check(dev, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c.stream),
                    "cudaMemcpyAsync");
}

class NcclHandler : public CommHandler {
public:
    /// mpi: the MPI handler under mpirun (this process runs one device), else null.
    NcclHandler(std::unique_ptr<CommHandler> mpi, const Topology& topology,
                const CommSettings& settings)
        : mpi_(std::move(mpi)), topology_(topology), timeout_s_(settings.timeout_s) {}

    std::string_view name() const override { return "nccl"; }

    std::unique_ptr<GroupState> make_group_state(const Group& g) override {
        auto st = std::make_unique<NcclGroupState>(g.size());
        if (g.size() == 1)
            return st; // nothing to communicate
        if (!mpi_) {
            check(nullptr, ncclGetUniqueId(&st->id), "ncclGetUniqueId");
            return st;
        }
#ifdef MESHRT_HAVE_MPI
        // Every member's process gets here (groups are made by their members), on
        // whichever host; the first member makes the id and the group's MPI
        // communicator carries it (under --comm-timeout).
        st->mpi = static_cast<mpi::MpiHandler&>(*mpi_).bootstrap_group(
            nullptr, g, &st->id, int(sizeof st->id), [](void* id) {
                check(nullptr, ncclGetUniqueId(static_cast<ncclUniqueId*>(id)),
                      "ncclGetUniqueId");
            });
#endif
        return st;
    }

    void all_reduce(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, int32_t op,
                    const void* in, void* out, int64_t count) override {
        DeviceContext& c = cuda::context(dev);
        const int64_t n = g.size();
        const size_t elem = dtype_size(dtype);
        DeviceBuffer din(dev, c, in, size_t(count) * elem, true, false);
        DeviceBuffer dout(dev, c, out, size_t(count) * elem, false, true);
        const auto [type, nop] = native_reduction(dtype, op);
        if (n == 1) {
            reduce(dev, c, dtype, op, din.get(), 1, 0, dout.get(), count);
        } else if (type != ncclNumTypes) {
            check(dev,
                  ncclAllReduce(din.get(), dout.get(), size_t(count), type, nop, comm(dev, g, rank),
                                c.stream),
                  "all_reduce: ncclAllReduce");
        } else {
            ncclComm_t comm = this->comm(dev, g, rank);
            const char* src = din.get<char>();
            char* dst = dout.get<char>();
            const auto [begin, end] = chunk(count, n, rank);
            const int64_t mine = end - begin;
            // Slice `rank` of every member's input, reduced in rank order into out.
            DeviceScratch slices(dev, c, size_t(n * mine) * elem);
            group_start(dev);
            for (int64_t j = 0; j < n; ++j) {
                const auto [b, e] = chunk(count, n, j);
                if (j == rank) {
                    copy_1d(dev, c, slices.get<char>() + size_t(j * mine) * elem,
                            src + size_t(b) * elem, size_t(mine) * elem);
                    continue;
                }
                send(dev, c, src + size_t(b) * elem, size_t(e - b) * elem, j, comm);
                recv(dev, c, slices.get<char>() + size_t(j * mine) * elem, size_t(mine) * elem, j,
                     comm);
            }
            group_end(dev);
            reduce(dev, c, dtype, op, slices.get(), n, mine, dst + size_t(begin) * elem, mine);
            // Every member's reduced slice to every other.
            group_start(dev);
            for (int64_t j = 0; j < n; ++j) {
                if (j == rank)
                    continue;
                const auto [b, e] = chunk(count, n, j);
                send(dev, c, dst + size_t(begin) * elem, size_t(mine) * elem, j, comm);
                recv(dev, c, dst + size_t(b) * elem, size_t(e - b) * elem, j, comm);
            }
            group_end(dev);
        }
        dout.finish();
        settle(dev, c, g, rank, "all_reduce");
    }

    void all_gather(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, const void* in,
                    void* out, std::span<const int64_t> in_shape, int32_t dim) override {
        DeviceContext& c = cuda::context(dev);
        const int64_t n = g.size();
        auto [outer, inner] = split_at(in_shape, dim);
        const size_t block = size_t(inner) * dtype_size(dtype); // a member's part of a row
        const size_t mine = size_t(outer) * block;
        DeviceBuffer din(dev, c, in, mine, true, false);
        DeviceBuffer dout(dev, c, out, size_t(n) * mine, false, true);
        if (n == 1) {
            copy_1d(dev, c, dout.get(), din.get(), mine);
        } else if (outer == 1) {
            check(
                dev,
                ncclAllGather(din.get(), dout.get(), mine, ncclUint8, comm(dev, g, rank), c.stream),
                "all_gather: ncclAllGather");
        } else {
            // Gathered as [n][outer][block], then member i's rows to out[o][i].
            DeviceScratch all(dev, c, size_t(n) * mine);
            check(
                dev,
                ncclAllGather(din.get(), all.get(), mine, ncclUint8, comm(dev, g, rank), c.stream),
                "all_gather: ncclAllGather");
            for (int64_t i = 0; i < n; ++i)
                copy_2d(dev, c, dout.get<char>() + size_t(i) * block, size_t(n) * block,
                        all.get<char>() + size_t(i) * mine, block, block, size_t(outer));
        }
        dout.finish();
        settle(dev, c, g, rank, "all_gather");
    }

    void reduce_scatter(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, int32_t op,
                        const void* in, void* out, std::span<const int64_t> in_shape,
                        int32_t dim) override {
        DeviceContext& c = cuda::context(dev);
        const int64_t n = g.size();
        const size_t elem = dtype_size(dtype);
        auto [outer, inner] = split_at(in_shape, dim);
        const int64_t piece = inner / n;    // elements of one member's piece of one row
        const int64_t mine = outer * piece; // elements of the result
        const size_t mine_bytes = size_t(mine) * elem;
        DeviceBuffer din(dev, c, in, size_t(n) * mine_bytes, true, false);
        DeviceBuffer dout(dev, c, out, mine_bytes, false, true);
        if (n == 1) {
            reduce(dev, c, dtype, op, din.get(), 1, 0, dout.get(), mine);
        } else {
            // NCCL wants member j's piece as block j: [n][outer][piece].
            const char* send_buf = din.get<char>();
            std::unique_ptr<DeviceScratch> packed;
            if (outer > 1) {
                packed = std::make_unique<DeviceScratch>(dev, c, size_t(n) * mine_bytes);
                for (int64_t j = 0; j < n; ++j)
                    copy_2d(dev, c, packed->get<char>() + size_t(j) * mine_bytes,
                            size_t(piece) * elem, din.get<char>() + size_t(j * piece) * elem,
                            size_t(inner) * elem, size_t(piece) * elem, size_t(outer));
                send_buf = packed->get<char>();
            }
            const auto [type, nop] = native_reduction(dtype, op);
            ncclComm_t comm = this->comm(dev, g, rank);
            if (type != ncclNumTypes) {
                check(dev,
                      ncclReduceScatter(send_buf, dout.get(), size_t(mine), type, nop, comm,
                                        c.stream),
                      "reduce_scatter: ncclReduceScatter");
            } else {
                DeviceScratch blocks(dev, c, size_t(n) * mine_bytes);
                group_start(dev);
                for (int64_t j = 0; j < n; ++j) {
                    char* slot = blocks.get<char>() + size_t(j) * mine_bytes;
                    if (j == rank) {
                        copy_1d(dev, c, slot, send_buf + size_t(j) * mine_bytes, mine_bytes);
                        continue;
                    }
                    send(dev, c, send_buf + size_t(j) * mine_bytes, mine_bytes, j, comm);
                    recv(dev, c, slot, mine_bytes, j, comm);
                }
                group_end(dev);
                reduce(dev, c, dtype, op, blocks.get(), n, mine, dout.get(), mine);
            }
        }
        dout.finish();
        settle(dev, c, g, rank, "reduce_scatter");
    }

    void all_to_all(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype, const void* in,
                    void* out, std::span<const int64_t> in_shape, int32_t from_dim,
                    int32_t to_dim) override {
        DeviceContext& c = cuda::context(dev);
        const int64_t n = g.size();
        const size_t elem = dtype_size(dtype);
        const size_t total = size_t(num_elements(in_shape)) * elem;
        std::vector<int64_t> out_shape(in_shape.begin(), in_shape.end());
        out_shape[size_t(from_dim)] *= n;
        out_shape[size_t(to_dim)] /= n;
        DeviceBuffer din(dev, c, in, total, true, false);
        DeviceBuffer dout(dev, c, out, total, false, true);
        // Member r sends member j the box of `in` with range [j*b, (j+1)*b) along to_dim
        // ([A][b][B] inside [A][T][B]) and puts what member i sends at range
        // [i*f, (i+1)*f) along from_dim of `out` ([A'][f][B'] inside [A'][n*f][B']). Both
        // boxes have the shape in_shape with [to_dim] / n, so their row-major bytes match.
        const int64_t T = in_shape[size_t(to_dim)], b = T / n, f = in_shape[size_t(from_dim)];
        auto [send_outer, send_inner] = split_at(in_shape, to_dim + 1);
        auto [recv_outer, recv_inner] = split_at(out_shape, from_dim + 1);
        send_outer /= T;
        recv_outer /= out_shape[size_t(from_dim)];
        const size_t piece = total / size_t(n); // bytes of one box
        const size_t send_run = size_t(b * send_inner) * elem,
                     recv_run = size_t(f * recv_inner) * elem;
        // Pack (when the boxes are not contiguous) into [n][box].
        const char* send_buf = din.get<char>();
        std::unique_ptr<DeviceScratch> packed, unpacked;
        if (send_outer > 1) {
            packed = std::make_unique<DeviceScratch>(dev, c, total);
            for (int64_t j = 0; j < n; ++j)
                copy_2d(dev, c, packed->get<char>() + size_t(j) * piece, send_run,
                        din.get<char>() + size_t(j) * send_run, size_t(T * send_inner) * elem,
                        send_run, size_t(send_outer));
            send_buf = packed->get<char>();
        }
        char* recv_buf = dout.get<char>();
        if (recv_outer > 1) {
            unpacked = std::make_unique<DeviceScratch>(dev, c, total);
            recv_buf = unpacked->get<char>();
        }
        if (n == 1) {
            copy_1d(dev, c, recv_buf, send_buf, piece);
        } else {
            ncclComm_t comm = this->comm(dev, g, rank);
            group_start(dev);
            for (int64_t j = 0; j < n; ++j) {
                if (j == rank) {
                    copy_1d(dev, c, recv_buf + size_t(j) * piece, send_buf + size_t(j) * piece,
                            piece);
                    continue;
                }
                send(dev, c, send_buf + size_t(j) * piece, piece, j, comm);
                recv(dev, c, recv_buf + size_t(j) * piece, piece, j, comm);
            }
            group_end(dev);
        }
        if (unpacked)
            for (int64_t i = 0; i < n; ++i)
                copy_2d(dev, c, dout.get<char>() + size_t(i) * recv_run, size_t(n) * recv_run,
                        recv_buf + size_t(i) * piece, recv_run, recv_run, size_t(recv_outer));
        dout.finish();
        settle(dev, c, g, rank, "all_to_all");
    }

    void barrier(meshrt_device* dev, const Group& g, int64_t rank) override {
        if (g.size() == 1)
            return;
        DeviceContext& c = cuda::context(dev);
        if (!c.scratch_word)
            cuda::check(dev, cudaMalloc(&c.scratch_word, 4), "cudaMalloc");
        // An all-reduce completes on a member only once every member has joined it.
        check(dev,
              ncclAllReduce(c.scratch_word, c.scratch_word, 1, ncclInt32, ncclSum,
                            comm(dev, g, rank), c.stream),
              "barrier: ncclAllReduce");
        settle(dev, c, g, rank, "barrier");
    }

    void broadcast(meshrt_device* dev, const Group& g, int64_t rank, int64_t root, void* buf,
                   int64_t bytes) override {
        if (g.size() == 1)
            return;
        DeviceContext& c = cuda::context(dev);
        DeviceBuffer d(dev, c, buf, size_t(bytes), rank == root, rank != root);
        check(dev,
              ncclBroadcast(d.get(), d.get(), size_t(bytes), ncclUint8, int(root),
                            comm(dev, g, rank), c.stream),
              "broadcast: ncclBroadcast");
        d.finish();
        settle(dev, c, g, rank, "broadcast");
    }

    void gather(meshrt_device* dev, const Group& g, int64_t rank, int64_t root, const void* in,
                int64_t bytes, void* out) override {
        DeviceContext& c = cuda::context(dev);
        const int64_t n = g.size();
        const size_t b = size_t(bytes);
        DeviceBuffer din(dev, c, in, b, true, false);
        DeviceBuffer dout(dev, c, rank == root ? out : nullptr, rank == root ? size_t(n) * b : 0,
                          false, true);
        if (n == 1) {
            copy_1d(dev, c, dout.get(), din.get(), b);
        } else {
            ncclComm_t comm = this->comm(dev, g, rank);
            group_start(dev);
            if (rank == root) {
                for (int64_t i = 0; i < n; ++i) {
                    char* slot = dout.get<char>() + size_t(i) * b;
                    if (i == rank)
                        copy_1d(dev, c, slot, din.get(), b);
                    else
                        recv(dev, c, slot, b, i, comm);
                }
            } else {
                send(dev, c, din.get(), b, root, comm);
            }
            group_end(dev);
        }
        dout.finish();
        settle(dev, c, g, rank, "gather");
    }

    // ---- the process: under mpirun, MPI's (one device per process)

    int64_t first_local_device() const override {
        return mpi_ ? mpi_->first_local_device() : 0;
    }
    int64_t local_device_count(int64_t ndevices) const override {
        return mpi_ ? mpi_->local_device_count(ndevices) : ndevices;
    }
    bool device_on_main_thread() const override {
        return mpi_ && mpi_->device_on_main_thread();
    }
    void process_barrier() override {
        if (mpi_)
            mpi_->process_barrier();
    }
    std::string process_label() const override {
        return mpi_ ? mpi_->process_label() : CommHandler::process_label();
    }
    bool gather_tracks(std::string tracks, std::vector<std::string>* all) override {
        if (mpi_)
            return mpi_->gather_tracks(std::move(tracks), all);
        all->push_back(std::move(tracks));
        return true;
    }

private:
    /// Waits for the device's stream after a collective of g (see nccl_handler.h): NCCL's
    /// asynchronous errors and the timeout abort the communicator and fail the run.
    void settle(meshrt_device* dev, DeviceContext& c, const Group& g, int64_t rank,
                const char* what) {
        auto& st = static_cast<NcclGroupState&>(*g.state);
        const auto start = std::chrono::steady_clock::now();
        for (int64_t polls = 0;; ++polls) {
            const cudaError_t e = cudaStreamQuery(c.stream);
            if (e == cudaSuccess)
                return;
            if (e != cudaErrorNotReady)
                cuda::sync(dev, c, what); // reports the error
            ncclComm_t comm = st.comms[size_t(rank)];
            ncclResult_t async = ncclSuccess;
            if (comm && ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
                async != ncclSuccess && async != ncclInProgress) {
                abort_comm(st, rank);
                fail(dev, std::string("NCCL: ") + what + " " +
                              describe_group(topology_, g, g.members[size_t(rank)]) +
                              " failed: " + ncclGetErrorString(async) +
                              "; the communicator was aborted");
            }
            if (timeout_s_ > 0 && (polls & 63) == 0) {
                const double waited =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                        .count();
                if (waited >= timeout_s_) {
                    abort_comm(st, rank);
                    char secs[64];
                    std::snprintf(secs, sizeof secs, "%.3g s (--comm-timeout=%.3g s)", waited,
                                  timeout_s_);
                    fail(dev, std::string("NCCL: ") + what +
                                  (dev->comm_site ? std::string(" at ") + dev->comm_site : std::string()) + " " +
                                  describe_group(topology_, g, g.members[size_t(rank)]) +
                                  " made no progress for " + secs +
                                  ": a member did not join it (NCCL does not say which: "
                                  "the members' own messages do); the communicator was "
                                  "aborted; ending the job");
                }
            }
            if (polls > 2000)
                sched_yield();
        }
    }

    static void abort_comm(NcclGroupState& st, int64_t rank) {
        if (ncclComm_t& comm = st.comms[size_t(rank)]) {
            ncclCommAbort(comm);
            comm = nullptr;
        }
    }

    /// The calling member's communicator of g, made on its first use (every member gets
    /// here at the same collective, so ncclCommInitRank meets all of them).
    ncclComm_t comm(meshrt_device* dev, const Group& g, int64_t rank) {
        auto& st = static_cast<NcclGroupState&>(*g.state);
        ncclComm_t& comm = st.comms[size_t(rank)];
        if (!comm) {
            DeviceContext& c = cuda::context(dev); // binds this thread to its GPU
            check(dev, ncclCommInitRank(&comm, int(g.size()), st.id, int(rank)),
                  "ncclCommInitRank");
            st.gpus[size_t(rank)] = c.gpu;
        }
        return comm;
    }

    static void group_start(meshrt_device* dev) {
        check(dev, ncclGroupStart(), "ncclGroupStart");
    }
    static void group_end(meshrt_device* dev) {
        check(dev, ncclGroupEnd(), "ncclGroupEnd");
    }
    static void send(meshrt_device* dev, DeviceContext& c, const void* buf, size_t bytes,
                     int64_t peer, ncclComm_t comm) {
        if (bytes)
            check(dev, ncclSend(buf, bytes, ncclUint8, int(peer), comm, c.stream), "ncclSend");
    }
    static void recv(meshrt_device* dev, DeviceContext& c, void* buf, size_t bytes, int64_t peer,
                     ncclComm_t comm) {
        if (bytes)
            check(dev, ncclRecv(buf, bytes, ncclUint8, int(peer), comm, c.stream), "ncclRecv");
    }
    static void reduce(meshrt_device* dev, DeviceContext& c, int32_t dtype, int32_t op,
                       const void* in, int64_t n, int64_t stride, void* out, int64_t count) {
        cuda::check(dev,
                    cuda::kernels::reduce_slices(dtype, op, in, n, stride, out, count, c.stream),
                    "the reduction kernel");
    }

    std::unique_ptr<CommHandler> mpi_;
    const Topology& topology_;
    double timeout_s_;
};

/// Whether this process was started by an MPI launcher (OpenMPI, PMIx, MPICH's Hydra).
bool under_mpirun() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") ||
           std::getenv("PMI_SIZE");
}

} // namespace
} // namespace meshrt::comm::nccl

namespace meshrt::comm {

std::unique_ptr<CommHandler> make_nccl_handler(const Topology& topology,
                                               const CommSettings& settings,
                                               const std::string& program_name, int* argc,
                                               char*** argv, int* status) {
    const int64_t ndevices = topology.ndevices();
    if (nccl::under_mpirun()) {
#ifdef MESHRT_HAVE_MPI
        std::unique_ptr<CommHandler> mpi =
            make_mpi_handler(topology, settings, program_name, argc, argv, status);
        if (!mpi)
            return nullptr;
        return std::make_unique<nccl::NcclHandler>(std::move(mpi), topology, settings);
#else
        std::fprintf(stderr,
                     "error: %s was started by mpirun, but its runtime was built without MPI: "
                     "run it as one process (%s --device=cuda --comm=nccl, one GPU per device)\n",
                     program_name.c_str(), program_name.c_str());
        *status = 2;
        return nullptr;
#endif
    }
    (void)argc;
    (void)argv;
    // In one process NCCL may read and write a peer GPU's user buffers directly; the
    // scratch buffers here come from each GPU's stream-ordered pool, which other GPUs may
    // not address, and managed memory would migrate back and forth. Through NCCL's own
    // buffers instead (unless the user chose otherwise).
    setenv("NCCL_P2P_DIRECT_DISABLE", "1", 0);
    const int gpus = cuda::gpu_count();
    if (ndevices > gpus) {
        std::fprintf(stderr,
                     "error: --comm=nccl runs one mesh device per GPU: %s runs on %lld device%s "
                     "and this machine has %d GPU%s (--device=cuda --comm=sim runs every device "
                     "on the GPUs there are)\n",
                     program_name.c_str(), static_cast<long long>(ndevices),
                     ndevices == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
        *status = 2;
        return nullptr;
    }
    return std::make_unique<nccl::NcclHandler>(nullptr, topology, settings);
}

} // namespace meshrt::comm

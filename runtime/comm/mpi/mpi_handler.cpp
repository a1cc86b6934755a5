// The OpenMPI handler's collectives (see mpi_handler.h).
//
// Results are bitwise those of the simulated mesh (up to the sign and payload of a NaN
// made from two NaNs, which depend on the operand order a compiler chose for a loop of
// reduce_into and are not specified). Data movement (all_gather, all_to_all, gather,
// broadcast) is exact anyway; so are integer sums (they wrap, in any order: MPI_SUM on
// the unsigned type of the same width), integer max and bool or, which go to
// MPI_Allreduce and MPI_Reduce_scatter_block. Floating-point reductions are not: MPI
// picks its algorithm (and so the order of the additions) by message and group size,
// its MAX does not propagate NaN, and a user-defined MPI_Op on f16/bf16 would round
// after every pairwise step where meshrt.h promises one rounding. So, as on the
// simulated mesh, each member reduces its own slice of every input in rank order 0..n-1
// with reduce_into (comm/reduce.h): the slices arrive by MPI_Alltoall(v), and an
// all_reduce then shares the reduced slices with MPI_Allgather(v). That moves the same
// bytes as a ring all-reduce; a small all_reduce (at most kSmallBytes per member) is one
// MPI_Allgather of the inputs, every member reducing all of them.
//
// A gathered or scattered dim that is not the outermost non-trivial one is described by
// a strided MPI datatype (BlockType::strided), so MPI reads and writes the tensors in
// place and nothing is packed here, except for MPI_Reduce_scatter_block, whose input
// must be contiguous per member (integers and bools split inside an outer dim).
#include "comm/mpi/mpi_handler.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "comm/reduce.h"
#include "src/dtype.h"
#include "src/errors.h"
#include "src/tensor.h"
#include "src/topology.h"

namespace meshrt::comm::mpi {
namespace {

constexpr int64_t kSmallBytes = 4096;                     // see the header comment
constexpr int64_t kDefaultSegmentBytes = int64_t(256) << 20; // all_reduce segment
constexpr int64_t kMaxSegmentBytes = int64_t(1) << 30;       // counts stay ints
constexpr int kTraceTag = 1;

/// An uncommitted datatype of `bytes` contiguous bytes with extent `bytes`: 2^30-byte
/// chunks plus the rest when it does not fit one int count.
MPI_Datatype bytes_type(meshrt_device* dev, int64_t bytes) {
    MPI_Datatype t;
    if (bytes <= INT_MAX) {
        check(dev, MPI_Type_contiguous(int(bytes), MPI_BYTE, &t), "MPI_Type_contiguous");
        return t;
    }
    constexpr int64_t unit = int64_t(1) << 30;
    MPI_Datatype chunk, body;
    check(dev, MPI_Type_contiguous(int(unit), MPI_BYTE, &chunk), "MPI_Type_contiguous");
    check(dev, MPI_Type_contiguous(int(bytes / unit), chunk, &body), "MPI_Type_contiguous");
    MPI_Type_free(&chunk);
    const int64_t rest = bytes % unit;
    if (rest == 0)
        return body;
    int lengths[2] = {1, int(rest)};
    MPI_Aint displs[2] = {0, MPI_Aint(bytes - rest)};
    MPI_Datatype types[2] = {body, MPI_BYTE};
    check(dev, MPI_Type_create_struct(2, lengths, displs, types, &t), "MPI_Type_create_struct");
    MPI_Type_free(&body);
    return t;
}

/// Product of shape[0, dim) and of shape[dim, rank).
std::pair<int64_t, int64_t> split_at(std::span<const int64_t> shape, int32_t dim) {
    return {num_elements(shape.subspan(0, size_t(dim))), num_elements(shape.subspan(size_t(dim)))};
}

/// [begin, end) of chunk r when `count` elements are shared by n members (as the
/// simulated mesh cuts an all_reduce).
std::pair<int64_t, int64_t> chunk(int64_t count, int64_t n, int64_t r) {
    const int64_t base = count / n, extra = count % n;
    const int64_t begin = r * base + std::min(r, extra);
    return {begin, begin + base + (r < extra ? 1 : 0)};
}

/// The MPI type and op of a reduction whose result does not depend on the order
/// (integers, bools); MPI_DATATYPE_NULL for floating point, reduced in rank order here.
std::pair<MPI_Datatype, MPI_Op> exact_reduction(int32_t dtype, int32_t op) {
    const bool sum = op == MESHRT_SUM;
    switch (dtype) {
    case MESHRT_BOOL: // 0/1 bytes: sum and max are both "any"
        return {MPI_UINT8_T, MPI_LOR};
    case MESHRT_I32:
        return {sum ? MPI_UINT32_T : MPI_INT32_T, sum ? MPI_SUM : MPI_MAX};
    case MESHRT_I64:
        return {sum ? MPI_UINT64_T : MPI_INT64_T, sum ? MPI_SUM : MPI_MAX};
    default:
        return {MPI_DATATYPE_NULL, MPI_OP_NULL};
    }
}

MPI_Comm comm_of(const Group& g) {
    return static_cast<const MpiGroupState&>(*g.state).comm;
}

/// Pointers to the n blocks of `bytes` bytes of a received buffer, for reduce_into.
std::vector<const void*> blocks(const char* base, int64_t n, int64_t bytes) {
    std::vector<const void*> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[size_t(i)] = base + size_t(i * bytes);
    return v;
}

std::atomic<double> g_abort_delay{0};

[[noreturn]] void abort_job(int status) {
    if (const double d = g_abort_delay.load(); d > 0) {
        // mpirun may end the job meanwhile (SIGTERM: the temporary files are gone already).
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(d);
        while (std::chrono::steady_clock::now() < until)
            usleep(100000);
    }
    // mpirun stops the other ranks (SIGTERM, whose handler removes their temporary files).
    MPI_Abort(MPI_COMM_WORLD, status);
    _Exit(status);
}

} // namespace

void check(meshrt_device* dev, int rc, const char* what) {
    if (rc == MPI_SUCCESS)
        return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        len = std::snprintf(text, sizeof text, "MPI error %d", rc);
    fail(dev, std::string(what) + " failed: " + std::string(text, size_t(len)));
}

void delay_abort(double seconds) {
    g_abort_delay.store(seconds);
}

// ---------------------------------------------------------------- BlockType

BlockType BlockType::contiguous(meshrt_device* dev, int64_t bytes) {
    BlockType t;
    if (bytes <= INT_MAX) {
        t.count_ = int(bytes);
        return t;
    }
    t.type_ = bytes_type(dev, bytes);
    check(dev, MPI_Type_commit(&t.type_), "MPI_Type_commit");
    t.count_ = 1;
    t.owned_ = true;
    return t;
}

BlockType BlockType::strided(meshrt_device* dev, int64_t rows, int64_t run, int64_t stride,
                             int64_t extent) {
    if (rows == 1 && run == extent)
        return contiguous(dev, run);
    if (rows > INT_MAX)
        fail(dev, "a collective over " + std::to_string(rows) +
                      " rows is more than an MPI datatype describes (INT_MAX)");
    BlockType t;
    MPI_Datatype r = bytes_type(dev, run), v;
    check(dev, MPI_Type_create_hvector(int(rows), 1, MPI_Aint(stride), r, &v),
          "MPI_Type_create_hvector");
    check(dev, MPI_Type_create_resized(v, 0, MPI_Aint(extent), &t.type_),
          "MPI_Type_create_resized");
    MPI_Type_free(&v);
    MPI_Type_free(&r);
    check(dev, MPI_Type_commit(&t.type_), "MPI_Type_commit");
    t.count_ = 1;
    t.owned_ = true;
    return t;
}

BlockType::BlockType(BlockType&& other) noexcept
    : type_(other.type_), count_(other.count_), owned_(other.owned_) {
    other.owned_ = false;
}

BlockType::~BlockType() {
    if (owned_)
        MPI_Type_free(&type_);
}

// ---------------------------------------------------------------- groups

MpiGroupState::~MpiGroupState() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) {
        MPI_Comm c = comm;
        MPI_Comm_free(&c);
    }
}

MpiHandler::MpiHandler(MPI_Comm world, int rank, int size, const Topology& topology,
                       const CommSettings& settings)
    : world_(world), self_(MPI_COMM_NULL), rank_(rank), size_(size),
      segment_bytes_(kDefaultSegmentBytes), topology_(topology),
      timeout_s_(settings.timeout_s) {
    check(nullptr, MPI_Comm_dup(MPI_COMM_SELF, &self_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(self_, MPI_ERRORS_RETURN);
    check(nullptr, MPI_Comm_dup(world_, &watch_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(watch_, MPI_ERRORS_RETURN);
    check(nullptr,
          MPI_Irecv(&ask_buf_, 1, MPI_INT64_T, MPI_ANY_SOURCE, 1, watch_, &ask_request_),
          "MPI_Irecv");
    // Every rank's host and node, for --print-topology and the timeout's message. A node
    // is a host name and a network namespace: ranks with both equal are numbered as one
    // node, in the order of their first ranks. (Not MPI_COMM_TYPE_SHARED: OpenMPI 4.1
    // crashes splitting that way across network namespaces of one machine, as the
    // multi-host test's hosts are.)
    constexpr size_t kKey = MPI_MAX_PROCESSOR_NAME + 64;
    char key[kKey] = {};
    int len = 0;
    MPI_Get_processor_name(key, &len);
    char ns[64] = {};
    const ssize_t ns_len = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    if (ns_len > 0)
        std::memcpy(key + MPI_MAX_PROCESSOR_NAME, ns, size_t(ns_len));
    std::vector<char> keys(static_cast<size_t>(size) * kKey);
    check(nullptr,
          MPI_Allgather(key, int(kKey), MPI_CHAR, keys.data(), int(kKey), MPI_CHAR, world_),
          "MPI_Allgather");
    std::vector<std::string> seen;
    for (int r = 0; r < size; ++r) {
        const char* k = keys.data() + size_t(r) * kKey;
        hosts_.emplace_back(k, strnlen(k, MPI_MAX_PROCESSOR_NAME));
        const std::string whole(k, kKey);
        auto at = std::find(seen.begin(), seen.end(), whole);
        if (at == seen.end())
            at = seen.insert(seen.end(), whole);
        nodes_.push_back(int(at - seen.begin()));
    }
    // A knob for tests and tuning: smaller segments exercise the segmented path.
    if (const char* env = std::getenv("MESHRT_MPI_SEGMENT_BYTES")) {
        const long long v = std::atoll(env);
        if (v > 0)
            segment_bytes_ = std::min<int64_t>(v, kMaxSegmentBytes);
    }
}

char* MpiHandler::scratch(int64_t bytes) {
    if (scratch_.size() < size_t(bytes))
        scratch_.resize(size_t(bytes));
    return scratch_.get<char>();
}

MpiHandler::~MpiHandler() {
    set_fail_exit(nullptr);
    if (ask_request_ != MPI_REQUEST_NULL) {
        MPI_Cancel(&ask_request_);
        MPI_Wait(&ask_request_, MPI_STATUS_IGNORE);
    }
    for (Answer& a : answers_)
        if (a.request != MPI_REQUEST_NULL)
            MPI_Request_free(&a.request);
    MPI_Comm_free(&watch_);
    MPI_Comm_free(&self_);
    MPI_Comm_free(&world_);
    MPI_Finalize();
}

std::unique_ptr<GroupState> MpiHandler::make_group_state(const Group& g) {
    if (g.mesh < 0)
        return std::make_unique<MpiGroupState>(world_, false);
    if (g.size() == 1)
        return std::make_unique<MpiGroupState>(self_, false);
    // Only the members call MPI_Comm_create_group, so a group can be made lazily, by
    // some members of a mesh (save and print gather over the group of device 0 only)
    // or on a smaller mesh. The tag tells apart groups that share members; every member
    // computes the same one.
    std::vector<int> ranks(g.members.begin(), g.members.end());
    uint64_t h = uint64_t(g.mesh + 1);
    for (int32_t a : g.axes)
        h = h * 131 + uint64_t(a + 1);
    h = h * 1000003 + uint64_t(ranks[0]);
    const int tag = int(h % 32749) + 2; // MPI_TAG_UB is at least 32767; 1 is the trace's
    MPI_Group world_group, group;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_group(world_, &world_group);
    if (rc == MPI_SUCCESS)
        rc = MPI_Group_incl(world_group, int(ranks.size()), ranks.data(), &group);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_create_group(world_, group, tag, &comm);
        MPI_Group_free(&group);
    }
    if (rc == MPI_SUCCESS)
        MPI_Group_free(&world_group);
    check(nullptr, rc, ("rank " + std::to_string(rank_) + ": MPI_Comm_create_group").c_str());
    int r = -1;
    MPI_Comm_rank(comm, &r);
    const int64_t want = std::find(g.members.begin(), g.members.end(), rank_) - g.members.begin();
    if (r != want)
        fail(nullptr, "rank " + std::to_string(rank_) + ": a group's communicator numbers it " +
                          std::to_string(r) + ", not " + std::to_string(want));
    return std::make_unique<MpiGroupState>(comm, true);
}

// ---------------------------------------------------------------- collectives

void MpiHandler::all_reduce(meshrt_device* dev, const Group& g, int64_t rank, int32_t dtype,
                            int32_t op, const void* in, void* out, int64_t count) {
    Enter enter(*this, &g, "all_reduce");
    const int64_t n = g.size();
    if (n == 1) {
        reduce_into(dtype, op, out, &in, 1, count); // normalises bools like the n > 1 case
        return;
    }
    const MPI_Comm comm = comm_of(g);
    const int64_t elem = int64_t(dtype_size(dtype));
    const auto [type, mop] = exact_reduction(dtype, op);
    const int64_t seg = std::max<int64_t>(1, segment_bytes_ / elem);
    for (int64_t s = 0; s < count; s += seg) {
        const int64_t len = std::min(seg, count - s);
        const char* src = static_cast<const char*>(in) + s * elem;
        char* dst = static_cast<char*>(out) + s * elem;
        if (type != MPI_DATATYPE_NULL)
            complete(dev, "all_reduce: MPI_Iallreduce", [&](MPI_Request* req) {
                return MPI_Iallreduce(src, dst, int(len), type, mop, comm, req);
            });
        else
            ordered_all_reduce(dev, comm, n, rank, dtype, op, src, dst, len);
    }
}

void MpiHandler::ordered_all_reduce(meshrt_device* dev, MPI_Comm comm, int64_t n, int64_t rank,
                                    int32_t dtype, int32_t op, const char* in, char* out,
                                    int64_t count) {
    const int64_t elem = int64_t(dtype_size(dtype));
    if (count * elem <= kSmallBytes) {
        // One round: everyone gets every input and reduces all of it.
        const int bytes = int(count * elem);
        char* all = scratch(n * bytes);
        complete(dev, "all_reduce: MPI_Iallgather", [&](MPI_Request* req) {
            return MPI_Iallgather(in, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comm, req);
        });
        reduce_into(dtype, op, out, blocks(all, n, bytes).data(), n, count);
        return;
    }
    // Reduce-scatter (slice r of every input to member r, reduced there in rank order),
    // then all-gather of the reduced slices. Byte counts fit ints: count * elem is at
    // most one segment. Equal slices (count divisible by n, the usual case) take
    // MPI_Alltoall and MPI_Allgather, which OpenMPI has more algorithms for than for
    // their v-forms.
    if (count % n == 0) {
        const int slice = int(count / n * elem);
        char* slices = scratch(n * slice);
        complete(dev, "all_reduce: MPI_Ialltoall", [&](MPI_Request* req) {
            return MPI_Ialltoall(in, slice, MPI_BYTE, slices, slice, MPI_BYTE, comm, req);
        });
        reduce_into(dtype, op, out + rank * slice, blocks(slices, n, slice).data(), n,
                    slice / elem);
        complete(dev, "all_reduce: MPI_Iallgather", [&](MPI_Request* req) {
            return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, slice, MPI_BYTE, comm,
                                  req);
        });
        return;
    }
    std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
        auto [b, e] = chunk(count, n, j);
        counts[size_t(j)] = int((e - b) * elem);
        displs[size_t(j)] = int(b * elem);
    }
    const int mine = counts[size_t(rank)];
    std::vector<int> recv_counts(static_cast<size_t>(n), mine), recv_displs(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        recv_displs[size_t(i)] = int(i * mine);
    char* slices = scratch(n * mine);
    complete(dev, "all_reduce: MPI_Ialltoallv", [&](MPI_Request* req) {
        return MPI_Ialltoallv(in, counts.data(), displs.data(), MPI_BYTE, slices,
                              recv_counts.data(), recv_displs.data(), MPI_BYTE, comm, req);
    });
    reduce_into(dtype, op, out + displs[size_t(rank)], blocks(slices, n, mine).data(), n,
                mine / elem);
    complete(dev, "all_reduce: MPI_Iallgatherv", [&](MPI_Request* req) {
        return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, counts.data(),
                               displs.data(), MPI_BYTE, comm, req);
    });
}

void MpiHandler::all_gather(meshrt_device* dev, const Group& g, int64_t, int32_t dtype,
                            const void* in, void* out, std::span<const int64_t> in_shape,
                            int32_t dim) {
    Enter enter(*this, &g, "all_gather");
    const int64_t n = g.size();
    auto [outer, inner] = split_at(in_shape, dim);
    const int64_t block = inner * int64_t(dtype_size(dtype)); // one member's part of a row
    // out is [outer][n][block]: member i's rows land block bytes apart, n * block apart.
    BlockType send = BlockType::contiguous(dev, outer * block);
    BlockType recv = BlockType::strided(dev, outer, block, n * block, block);
    complete(dev, "all_gather: MPI_Iallgather", [&](MPI_Request* req) {
        return MPI_Iallgather(in, send.count(), send.type(), out, recv.count(), recv.type(),
                              comm_of(g), req);
    });
}

void MpiHandler::reduce_scatter(meshrt_device* dev, const Group& g, int64_t, int32_t dtype,
                                int32_t op, const void* in, void* out,
                                std::span<const int64_t> in_shape, int32_t dim) {
    Enter enter(*this, &g, "reduce_scatter");
    const int64_t n = g.size();
    const int64_t elem = int64_t(dtype_size(dtype));
    auto [outer, inner] = split_at(in_shape, dim);
    const int64_t piece = inner / n;   // elements of one member's piece of one outer row
    const int64_t mine = outer * piece; // elements of the result
    if (n == 1) {
        reduce_into(dtype, op, out, &in, 1, mine);
        return;
    }
    const MPI_Comm comm = comm_of(g);
    const auto [type, mop] = exact_reduction(dtype, op);
    if (type != MPI_DATATYPE_NULL && mine <= INT_MAX) {
        // MPI reduces; its input must hold each member's piece contiguously.
        const void* send = in;
        if (outer > 1) {
            char* packed = scratch(n * mine * elem);
            for (int64_t j = 0; j < n; ++j)
                for (int64_t o = 0; o < outer; ++o)
                    std::memcpy(packed + (j * mine + o * piece) * elem,
                                static_cast<const char*>(in) + (o * inner + j * piece) * elem,
                                size_t(piece * elem));
            send = packed;
        }
        complete(dev, "reduce_scatter: MPI_Ireduce_scatter_block", [&](MPI_Request* req) {
            return MPI_Ireduce_scatter_block(send, out, int(mine), type, mop, comm, req);
        });
        return;
    }
    // Piece j of every outer row goes to member j; each member reduces what it received
    // in rank order.
    BlockType send = BlockType::strided(dev, outer, piece * elem, inner * elem, piece * elem);
    BlockType recv = BlockType::contiguous(dev, mine * elem);
    char* pieces = scratch(n * mine * elem);
    complete(dev, "reduce_scatter: MPI_Ialltoall", [&](MPI_Request* req) {
        return MPI_Ialltoall(in, send.count(), send.type(), pieces, recv.count(), recv.type(), comm,
                             req);
    });
    reduce_into(dtype, op, out, blocks(pieces, n, mine * elem).data(), n, mine);
}

void MpiHandler::all_to_all(meshrt_device* dev, const Group& g, int64_t, int32_t dtype,
                            const void* in, void* out, std::span<const int64_t> in_shape,
                            int32_t from_dim, int32_t to_dim) {
    Enter enter(*this, &g, "all_to_all");
    const int64_t n = g.size();
    const int64_t elem = int64_t(dtype_size(dtype));
    std::vector<int64_t> out_shape(in_shape.begin(), in_shape.end());
    out_shape[size_t(from_dim)] *= n;
    out_shape[size_t(to_dim)] /= n;
    // What member r sends member j: the box of `in` with index range [j*b, (j+1)*b) along
    // to_dim; what it receives from member i goes to the box of `out` with range
    // [i*f, (i+1)*f) along from_dim. Both boxes have the same shape (in_shape with
    // [to_dim] / n), so their row-major byte sequences match one for one.
    const int64_t b = in_shape[size_t(to_dim)] / n, f = in_shape[size_t(from_dim)];
    auto [send_outer, send_inner] = split_at(in_shape, to_dim + 1);
    auto [recv_outer, recv_inner] = split_at(out_shape, from_dim + 1);
    send_outer /= in_shape[size_t(to_dim)];
    recv_outer /= out_shape[size_t(from_dim)];
    BlockType send = BlockType::strided(dev, send_outer, b * send_inner * elem,
                                        in_shape[size_t(to_dim)] * send_inner * elem,
                                        b * send_inner * elem);
    BlockType recv = BlockType::strided(dev, recv_outer, f * recv_inner * elem,
                                        n * f * recv_inner * elem, f * recv_inner * elem);
    complete(dev, "all_to_all: MPI_Ialltoall", [&](MPI_Request* req) {
        return MPI_Ialltoall(in, send.count(), send.type(), out, recv.count(), recv.type(),
                             comm_of(g), req);
    });
}

void MpiHandler::barrier(meshrt_device* dev, const Group& g, int64_t) {
    Enter enter(*this, &g, "barrier");
    if (g.size() > 1)
        complete(dev, "barrier: MPI_Ibarrier", [&](MPI_Request* req) {
            return MPI_Ibarrier(comm_of(g), req);
        });
}

void MpiHandler::broadcast(meshrt_device* dev, const Group& g, int64_t, int64_t root, void* buf,
                           int64_t bytes) {
    Enter enter(*this, &g, "broadcast");
    if (g.size() == 1)
        return;
    BlockType t = BlockType::contiguous(dev, bytes);
    complete(dev, "broadcast: MPI_Ibcast", [&](MPI_Request* req) {
        return MPI_Ibcast(buf, t.count(), t.type(), int(root), comm_of(g), req);
    });
}

void MpiHandler::gather(meshrt_device* dev, const Group& g, int64_t, int64_t root, const void* in,
                        int64_t bytes, void* out) {
    Enter enter(*this, &g, "gather");
    BlockType t = BlockType::contiguous(dev, bytes);
    complete(dev, "gather: MPI_Igather", [&](MPI_Request* req) {
        return MPI_Igather(in, t.count(), t.type(), out, t.count(), t.type(), int(root), comm_of(g),
                           req);
    });
}

// ---------------------------------------------------------------- the process

void MpiHandler::process_barrier() {
    Enter enter(*this, nullptr, "process barrier");
    complete(nullptr, "MPI_Ibarrier", [&](MPI_Request* req) {
        return MPI_Ibarrier(world_, req);
    });
}

bool MpiHandler::gather_tracks(std::string tracks, std::vector<std::string>* all) {
    Enter enter(*this, nullptr, "trace collection");
    // Point to point, in pieces of at most 1 GiB: a track's size is not bounded by INT_MAX.
    constexpr int64_t kPiece = int64_t(1) << 30;
    int64_t len = int64_t(tracks.size());
    if (rank_ != 0) {
        complete(nullptr, "trace: MPI_Isend", [&](MPI_Request* req) {
            return MPI_Isend(&len, 1, MPI_INT64_T, 0, kTraceTag, world_, req);
        });
        for (int64_t at = 0; at < len; at += kPiece)
            complete(nullptr, "trace: MPI_Isend", [&](MPI_Request* req) {
                return MPI_Isend(tracks.data() + at, int(std::min(kPiece, len - at)), MPI_BYTE, 0,
                                 kTraceTag, world_, req);
            });
        return false;
    }
    all->assign(size_t(size_), std::string());
    (*all)[0] = std::move(tracks);
    for (int r = 1; r < size_; ++r) {
        complete(nullptr, "trace: MPI_Irecv", [&](MPI_Request* req) {
            return MPI_Irecv(&len, 1, MPI_INT64_T, r, kTraceTag, world_, req);
        });
        std::string& s = (*all)[size_t(r)];
        s.resize(size_t(len));
        for (int64_t at = 0; at < len; at += kPiece)
            complete(nullptr, "trace: MPI_Irecv", [&](MPI_Request* req) {
                return MPI_Irecv(s.data() + at, int(std::min(kPiece, len - at)), MPI_BYTE, r,
                                 kTraceTag, world_, req);
            });
    }
    return true;
}

} // namespace meshrt::comm::mpi

namespace meshrt::comm {

std::unique_ptr<CommHandler> make_mpi_handler(const Topology& topology,
                                              const CommSettings& settings,
                                              const std::string& program_name, int* argc,
                                              char*** argv, int* status) {
    int done = 0;
    MPI_Finalized(&done);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (done || initialized) {
        std::fprintf(stderr, "error: %s: MPI is already %s (one --comm=mpi run per process)\n",
                     program_name.c_str(), done ? "finalized" : "initialized");
        *status = 1;
        return nullptr;
    }
    // Only this (the main) thread calls MPI; OpenBLAS's threads never do.
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        std::fprintf(stderr, "error: %s: MPI_Init_thread failed\n", program_name.c_str());
        *status = 1;
        return nullptr;
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int64_t ndevices = topology.ndevices();
    if (size != ndevices) {
        // Every rank knows both numbers, so every rank stops here, before any
        // collective; rank 0 says why.
        if (rank == 0) {
            const char* exe = *argc > 0 && *argv && (*argv)[0] ? (*argv)[0] : program_name.c_str();
            std::fprintf(stderr,
                         "error: %s runs on %lld device%s, one MPI process each, but it was "
                         "started as %d process%s: run it as mpirun -np %lld %s --comm=mpi\n",
                         program_name.c_str(), static_cast<long long>(ndevices),
                         ndevices == 1 ? "" : "s", size, size == 1 ? "" : "es",
                         static_cast<long long>(ndevices), exe);
            std::fflush(stderr);
        }
        MPI_Finalize();
        *status = 2;
        return nullptr;
    }
    // The runtime's own copy of MPI_COMM_WORLD: its traffic never meets anyone else's,
    // and errors come back to check() instead of aborting in MPI.
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    // From now on a failing device ends the whole job.
    set_fail_exit(&mpi::abort_job);
    return std::make_unique<mpi::MpiHandler>(world, rank, size, topology, settings);
}

} // namespace meshrt::comm

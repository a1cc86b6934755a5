// The state of one run of meshrt_main: the program, its topology, options, the
// communication handler with its groups, and the devices. Every C ABI entry point
// reaches it through its meshrt_device argument.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/group.h"
#include "meshrt.h"
#include "src/memory.h"
#include "src/topology.h"
#include "src/trace.h"

namespace meshrt {

namespace comm {
class CommHandler;
}
namespace cuda {
struct DeviceContext;
}
/// A device's GPU state under --device=cuda (kernels/cuda/device.h) and its deleter.
using CudaContextPtr = std::unique_ptr<cuda::DeviceContext, void (*)(cuda::DeviceContext*)>;

struct Options {
    std::string comm = "sim";
    std::string device = "cpu"; // cpu, cuda (only when built with CUDA) or gpu-emulator
    int64_t mesh_threads = 0; // 0: the default (cores / devices, at least 1)
    std::string trace_path;   // empty: no trace
    double comm_timeout_s = 300; // --comm-timeout (MPI, NCCL); 0: no timeout
    bool print_topology = false; // --print-topology: which process runs which device
    // The program's arguments (program->args), parsed: one entry per argument.
    std::vector<std::string> arg_text;  // the path of a path argument
    std::vector<double> arg_number;     // int (exact up to 2^53), float and bool arguments
    std::vector<int64_t> arg_int;       // int arguments, exactly
};

class Runtime {
public:
    Runtime();
    ~Runtime();

    const meshrt_program* program = nullptr;
    std::string program_name;
    Topology topology;
    Options options;
    Tracer tracer;
    std::unique_ptr<comm::CommHandler> comm;
    std::unique_ptr<comm::GroupRegistry> groups;
};

/// Fails the run when dev is null (a C ABI call made outside a device).
Runtime& runtime_of(meshrt_device* dev, const char* what);

} // namespace meshrt

/// The opaque device handle of the C ABI: one per mesh device, owned by meshrt_main and
/// used only by that device's thread.
struct meshrt_device {
    int64_t index = 0;
    meshrt::Runtime* runtime = nullptr;
    bool tracing = false;
    /// The program's GPU kernels run (--device=cuda or gpu-emulator): meshrt_offload.
    bool offload = false;
    meshrt::TraceBuffer trace;
    /// Groups this device has used, by (mesh, axes): found without the registry's lock.
    std::unordered_map<std::string, meshrt::comm::GroupMember> group_cache;
    /// Freed buffers kept for reuse by this device (meshrt_alloc / meshrt_free).
    meshrt::BufferCache cache;
    /// The device's GPU state under --device=cuda, made by its first GPU call.
    meshrt::CudaContextPtr cuda{nullptr, nullptr};
    /// `file:line:col` of the collective this device makes next or is making
    /// (meshrt_comm_site), for the messages of a collective that fails or times out.
    const char* comm_site = nullptr;
};

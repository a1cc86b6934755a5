// meshrt_main: the options of a compiled Mesh program, the choice of the communication
// handler, the launch of the devices this process runs (every device as a thread on the
// simulated mesh, the rank's own device under MPI), and the device queries of the C ABI.
// Called by the `main` meshc generates; returns the process's exit status.
#include <cblas.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "src/blas_kernels.h"
#include "src/errors.h"
#include "src/runtime.h"
#ifdef MESHRT_HAVE_CUDA
#include "comm/nccl/nccl_handler.h"
#include "kernels/cuda/cuda.h"
#endif

namespace meshrt {

Runtime::Runtime() = default;
Runtime::~Runtime() = default;

Runtime& runtime_of(meshrt_device* dev, const char* what) {
    if (!dev || !dev->runtime)
        fail(nullptr, std::string(what) + " called without a device (outside meshrt_main)");
    return *dev->runtime;
}

namespace {

constexpr int kUsageError = 2;

#if defined(MESHRT_HAVE_MPI) && defined(MESHRT_HAVE_CUDA)
constexpr const char* kHandlers = "sim, mpi, nccl";
#elif defined(MESHRT_HAVE_MPI)
constexpr const char* kHandlers = "sim, mpi";
#elif defined(MESHRT_HAVE_CUDA)
constexpr const char* kHandlers = "sim, nccl";
#else
constexpr const char* kHandlers = "sim";
#endif
#ifdef MESHRT_HAVE_CUDA
constexpr const char* kDevices = "cpu, gpu-emulator, cuda";
#else
constexpr const char* kDevices = "cpu, gpu-emulator";
#endif

const char* arg_kind_name(int32_t kind) {
    switch (kind) {
    case MESHRT_ARG_INT: return "INT";
    case MESHRT_ARG_FLOAT: return "FLOAT";
    case MESHRT_ARG_BOOL: return "BOOL";
    default: return "PATH";
    }
}

const char* arg_kind_title(int32_t kind) {
    switch (kind) {
    case MESHRT_ARG_INT: return "an i64";
    case MESHRT_ARG_FLOAT: return "an f32";
    case MESHRT_ARG_BOOL: return "a bool (true, false, 1 or 0)";
    default: return "a file name";
    }
}

/// Parses `text` as program argument `i` into rt.options; false when malformed.
bool set_program_arg(Runtime& rt, int32_t i, const std::string& text) {
    const meshrt_arg_desc& a = rt.program->args[i];
    Options& o = rt.options;
    switch (a.kind) {
    case MESHRT_ARG_INT: {
        char* end = nullptr;
        errno = 0;
        long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE)
            return false;
        o.arg_int[size_t(i)] = v;
        o.arg_number[size_t(i)] = double(v);
        return true;
    }
    case MESHRT_ARG_FLOAT: {
        char* end = nullptr;
        errno = 0;
        double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
            return false;
        o.arg_number[size_t(i)] = v;
        return true;
    }
    case MESHRT_ARG_BOOL:
        if (text == "true" || text == "1")
            o.arg_number[size_t(i)] = 1;
        else if (text == "false" || text == "0")
            o.arg_number[size_t(i)] = 0;
        else
            return false;
        return true;
    default:
        if (text.empty())
            return false;
        o.arg_text[size_t(i)] = text;
        return true;
    }
}

void print_usage(const Runtime& rt, int64_t default_threads) {
    std::printf("usage: %s [options] [-- ignored...]\n", rt.program_name.c_str());
    std::printf("A Mesh program compiled by meshc; it runs on %lld device%s.\n\n",
                static_cast<long long>(rt.topology.ndevices()),
                rt.topology.ndevices() == 1 ? "" : "s");
    std::printf("options:\n");
    std::printf("  --comm=sim|mpi|nccl  communication handler (default sim; this runtime has: "
                "%s)\n",
                kHandlers);
#ifdef MESHRT_HAVE_MPI
    std::printf("                       (mpi: one process per device, "
                "mpirun -np %lld %s --comm=mpi)\n",
                static_cast<long long>(rt.topology.ndevices()), rt.program_name.c_str());
#endif
#ifdef MESHRT_HAVE_CUDA
    std::printf("                       (nccl: with --device=cuda, one GPU per device)\n");
#endif
    std::printf("  --device=cpu|cuda|gpu-emulator\n");
    std::printf("                       cuda: contractions, random numbers and the kernels of "
                "`meshc build --gpu` on GPUs\n");
    std::printf("                       gpu-emulator: those kernels on the host, one GPU thread "
                "after another\n");
    std::printf("                       (default cpu; here: %s)\n", kDevices);
    std::printf("  --mesh-threads=N     threads each device's kernels may use (default %lld)\n",
                static_cast<long long>(default_threads));
    std::printf("  --trace=FILE.json    write a Chrome/Perfetto trace, one track per device\n");
    std::printf("  --comm-timeout=SECONDS\n");
    std::printf("                       mpi, nccl: a collective that makes no progress for this "
                "long ends the\n");
    std::printf("                       job with a message naming it and the devices that did "
                "not answer\n");
    std::printf("                       (default %g; 0: wait for ever)\n",
                Options{}.comm_timeout_s);
    std::printf("  --print-topology     print which process (rank, host, node) runs which device "
                "at which\n");
    std::printf("                       mesh coordinates, and exit\n");
    std::printf("  --help               this message\n");
    std::printf("\ncontractions on the CPU: %s\n", blas::describe(blas::blas_kernels()).c_str());
    const meshrt_program& prog = *rt.program;
    if (prog.nargs > 0) {
        std::printf("\nprogram arguments:\n");
        for (int32_t i = 0; i < prog.nargs; ++i) {
            const meshrt_arg_desc& a = prog.args[i];
            std::string left = std::string("  --") + a.name + "=" + arg_kind_name(a.kind);
            std::printf("%-22s %s argument (default %s)\n", left.c_str(), arg_kind_title(a.kind),
                        a.default_text);
        }
    }
    std::printf("\nmeshes:\n");
    if (rt.topology.nmeshes() == 0)
        std::printf("  (none)\n");
    for (int32_t m = 0; m < rt.topology.nmeshes(); ++m) {
        const MeshInfo& mesh = rt.topology.mesh(m);
        std::string axes;
        for (size_t a = 0; a < mesh.axis_names.size(); ++a) {
            if (a)
                axes += ", ";
            axes += mesh.axis_names[a] + "=" + std::to_string(mesh.axis_sizes[a]);
        }
        std::printf("  %s: %lld device%s (%s)\n", mesh.name.c_str(),
                    static_cast<long long>(mesh.size), mesh.size == 1 ? "" : "s",
                    axes.empty() ? "no axes" : axes.c_str());
    }
    std::fflush(stdout);
}

/// Parses argv into rt.options. Returns -1 to go on, else the exit status to return
/// (0 after --help, 2 for a bad option).
int parse_options(int argc, char** argv, Runtime& rt, int64_t default_threads) {
    auto usage_error = [&](const std::string& message) {
        std::fprintf(stderr, "error: %s (see %s --help)\n", message.c_str(),
                     rt.program_name.c_str());
        return kUsageError;
    };
    // The program's arguments start at their defaults (checked by the compiler).
    const int32_t nargs = rt.program->args ? rt.program->nargs : 0;
    rt.options.arg_text.assign(size_t(std::max(nargs, 0)), "");
    rt.options.arg_number.assign(size_t(std::max(nargs, 0)), 0.0);
    rt.options.arg_int.assign(size_t(std::max(nargs, 0)), 0);
    for (int32_t i = 0; i < nargs; ++i) {
        if (!set_program_arg(rt, i, rt.program->args[i].default_text)) {
            std::fprintf(stderr, "error: %s: invalid default '%s' of argument --%s\n",
                         rt.program_name.c_str(), rt.program->args[i].default_text,
                         rt.program->args[i].name);
            return 1;
        }
    }
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i] ? argv[i] : "";
        if (arg == "--")
            break;
        // A program argument: --NAME=VALUE.
        int32_t which = -1;
        for (int32_t k = 0; k < nargs && which < 0; ++k) {
            std::string_view name = rt.program->args[k].name;
            if (arg.size() >= 2 + name.size() && arg.starts_with("--") &&
                arg.substr(2, name.size()) == name &&
                (arg.size() == 2 + name.size() || arg[2 + name.size()] == '='))
                which = k;
        }
        if (which >= 0) {
            const meshrt_arg_desc& a = rt.program->args[which];
            size_t eq = 2 + std::strlen(a.name);
            if (arg.size() == eq)
                return usage_error(std::string("--") + a.name + " wants a value: --" + a.name + "=" +
                                   arg_kind_name(a.kind));
            std::string value(arg.substr(eq + 1));
            if (!set_program_arg(rt, which, value))
                return usage_error(std::string("--") + a.name + " wants " + arg_kind_title(a.kind) +
                                   ", not '" + value + "'");
            continue;
        }
        if (arg == "--help" || arg == "-h") {
            print_usage(rt, default_threads);
            return 0;
        }
        if (arg.starts_with("--comm=")) {
            std::string_view v = arg.substr(7);
            if (v != "sim" && v != "mpi" && v != "nccl")
                return usage_error("unknown communication handler '" + std::string(v) +
                                   "' in --comm (sim, mpi or nccl)");
            rt.options.comm = v;
        } else if (arg.starts_with("--device=")) {
            std::string_view v = arg.substr(9);
            if (v != "cpu" && v != "cuda" && v != "gpu-emulator")
                return usage_error("unknown device '" + std::string(v) +
                                   "' in --device (cpu, cuda or gpu-emulator)");
            rt.options.device = v;
        } else if (arg.starts_with("--mesh-threads=")) {
            std::string v(arg.substr(15));
            char* end = nullptr;
            long long n = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < 1 || n > 4096)
                return usage_error("--mesh-threads wants a number from 1 to 4096, not '" + v + "'");
            rt.options.mesh_threads = n;
        } else if (arg.starts_with("--comm-timeout=")) {
            std::string v(arg.substr(15));
            char* end = nullptr;
            errno = 0;
            const double t = v.empty() ? -1 : std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(t) || t < 0 ||
                t > 1e6)
                return usage_error("--comm-timeout wants a number of seconds from 0 (no "
                                   "timeout) to 1000000, not '" + v + "'");
            rt.options.comm_timeout_s = t;
        } else if (arg == "--print-topology") {
            rt.options.print_topology = true;
        } else if (arg.starts_with("--trace=")) {
            if (arg.size() == 8)
                return usage_error("--trace wants a file name");
            rt.options.trace_path = arg.substr(8);
            // The trace is written at the end: a folder that cannot take it is an error
            // now, not after the whole run.
            std::string dir = rt.options.trace_path;
            auto slash = dir.find_last_of('/');
            dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
            if (access(dir.c_str(), W_OK) != 0)
                return usage_error("--trace=" + rt.options.trace_path + ": cannot write in '" + dir +
                                   "': " + std::strerror(errno));
        } else {
            return usage_error("unknown option '" + std::string(arg) + "'");
        }
    }
    return -1;
}

/// --print-topology: one line per device, in device order, printed by the process of
/// device 0: "device D: rank R, host H, node N, Mesh[axis=c, ...] ...".
int print_topology(Runtime& rt, int64_t first, int64_t count) {
    std::string lines;
    const std::string where = rt.comm->process_label();
    for (int64_t d = first; d < first + count; ++d) {
        std::string line = "device " + std::to_string(d) + ": ";
        if (rt.options.comm != "sim")
            line += "rank " + std::to_string(d) + ", ";
        line += where;
        for (int32_t m = 0; m < rt.topology.nmeshes(); ++m) {
            const int64_t* c = rt.topology.coords(d, m);
            if (!c)
                continue;
            const MeshInfo& mesh = rt.topology.mesh(m);
            line += ", " + mesh.name + "[";
            for (size_t a = 0; a < mesh.axis_names.size(); ++a)
                line += (a ? ", " : "") + mesh.axis_names[a] + "=" + std::to_string(c[a]);
            line += "]";
        }
        lines += line + "\n";
    }
    std::vector<std::string> all;
    if (rt.comm->gather_tracks(std::move(lines), &all)) {
        std::printf("%s: %lld device%s, --comm=%s\n", rt.program_name.c_str(),
                    static_cast<long long>(rt.topology.ndevices()),
                    rt.topology.ndevices() == 1 ? "" : "s", rt.options.comm.c_str());
        for (const std::string& s : all)
            std::fputs(s.c_str(), stdout);
        std::fflush(stdout);
    }
    return 0;
}

void run_device(meshrt_device* dev, void (*entry)(meshrt_device*)) {
    try {
        entry(dev);
    } catch (const std::exception& e) {
        fail(dev, std::string("internal error: ") + e.what());
    } catch (...) {
        fail(dev, "internal error: unknown exception");
    }
    // Regions generated code left open end with the device.
    while (!dev->trace.open.empty())
        meshrt_trace_end(dev);
}

int run_main(int argc, char** argv, const meshrt_program* program, const std::string& program_name) {
    Runtime rt;
    rt.program = program;
    rt.program_name = program_name;
    if (program->ndevices > MESHRT_MAX_DEVICES) {
        std::fprintf(stderr,
                     "error: %s runs on %lld devices; a program runs on at most %d (rebuild it "
                     "for fewer: meshc build --mesh NAME=axis:size,...)\n",
                     rt.program_name.c_str(), static_cast<long long>(program->ndevices),
                     MESHRT_MAX_DEVICES);
        return 1;
    }
    // OpenBLAS's kernels, before anything can call BLAS or start a thread (MPI, the
    // devices): OpenBLAS's own choice, or a better one when it chose below this CPU.
    blas::blas_kernels();
    std::string error;
    if (!rt.topology.init(*program, &error)) {
        std::fprintf(stderr, "error: %s: invalid program description: %s\n",
                     rt.program_name.c_str(), error.c_str());
        return 1;
    }
    const int64_t ndevices = rt.topology.ndevices();
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t default_threads = std::max<int64_t>(1, cores / ndevices);
    if (int status = parse_options(argc, argv, rt, default_threads); status >= 0)
        return status;

    if (rt.options.device == "cuda") {
#ifdef MESHRT_HAVE_CUDA
        std::string why;
        if (!cuda::init_process(&why)) {
            std::fprintf(stderr, "error: --device=cuda: %s\n", why.c_str());
            return 1;
        }
#else
        std::fprintf(stderr, "error: this program's runtime was built without CUDA\n");
        return 2;
#endif
    }

    comm::CommSettings settings;
    settings.timeout_s = rt.options.comm_timeout_s;
    if (rt.options.comm == "sim") {
        rt.comm = comm::make_sim_handler(rt.topology);
#ifdef MESHRT_HAVE_CUDA
    } else if (rt.options.comm == "nccl") {
        if (rt.options.device != "cuda") {
            std::fprintf(stderr, "error: --comm=nccl runs on GPUs: add --device=cuda\n");
            return 2;
        }
        int status = 0;
        rt.comm = comm::make_nccl_handler(rt.topology, settings, rt.program_name, &argc, &argv,
                                          &status);
        if (!rt.comm)
            return status;
#endif
#ifdef MESHRT_HAVE_MPI
    } else if (rt.options.comm == "mpi") {
        int status = 0;
        rt.comm = comm::make_mpi_handler(rt.topology, settings, rt.program_name, &argc, &argv,
                                         &status);
        if (!rt.comm)
            return status;
#endif
    } else {
        std::fprintf(stderr,
                     "error: this program's runtime was built without the %s handler "
                     "(available: %s)\n",
                     rt.options.comm.c_str(), kHandlers);
        return 2;
    }
    rt.groups = std::make_unique<comm::GroupRegistry>(rt.topology, *rt.comm);
    // After MPI_Init: a SIGTERM from mpirun (another rank failed) or a Ctrl-C removes
    // the file a save is writing.
    install_signal_cleanup();

    // OpenBLAS's thread count is process-wide: every device thread's BLAS calls use it.
    openblas_set_num_threads(
        int(rt.options.mesh_threads > 0 ? rt.options.mesh_threads : default_threads));

    const int64_t first = rt.comm->first_local_device();
    const int64_t count = rt.comm->local_device_count(ndevices);
    if (rt.options.print_topology)
        return print_topology(rt, first, count);
    std::vector<std::unique_ptr<meshrt_device>> devices;
    for (int64_t d = first; d < first + count; ++d) {
        auto dev = std::make_unique<meshrt_device>();
        dev->index = d;
        dev->runtime = &rt;
        dev->tracing = !rt.options.trace_path.empty();
        dev->offload = rt.options.device == "cuda" || rt.options.device == "gpu-emulator";
        devices.push_back(std::move(dev));
    }
    if (!rt.options.trace_path.empty()) {
        rt.comm->process_barrier(); // every process's clock starts (nearly) together
        rt.tracer.start();
    }

    if (rt.comm->device_on_main_thread() && devices.size() == 1) {
        run_device(devices[0].get(), program->entry);
    } else {
        std::vector<std::thread> threads;
        threads.reserve(devices.size());
        try {
            for (auto& dev : devices)
                threads.emplace_back(run_device, dev.get(), program->entry);
        } catch (const std::exception& e) {
            fail(nullptr,
                 "cannot start device " + std::to_string(first + int64_t(threads.size())) +
                     ": " + e.what());
        }
        for (std::thread& t : threads)
            t.join();
    }

    int status = 0;
    if (rt.tracer.enabled()) {
        std::string tracks;
        for (auto& dev : devices)
            tracks += trace_track_json(dev->index, dev->trace);
        std::vector<std::string> all;
        if (rt.comm->gather_tracks(std::move(tracks), &all) &&
            !write_trace(rt.options.trace_path, rt.program_name, all, &error,
                         blas::describe(blas::blas_kernels()))) {
            std::fprintf(stderr, "error: %s\n", error.c_str());
            status = 1;
        }
    }
    std::fflush(stdout);
    return status; // ~Runtime frees the groups, then the handler (MPI_Finalize)
}

} // namespace
} // namespace meshrt

extern "C" int meshrt_main(int argc, char** argv, const meshrt_program* program) {
    if (!program || !program->entry) {
        std::fprintf(stderr, "error: meshrt_main: no program to run\n");
        return 1;
    }
    std::string name = program->name && *program->name ? program->name
                       : argc > 0 && argv && argv[0]   ? argv[0]
                                                       : "program";
    // Start-up allocates per device (tables, threads): running out of memory there is
    // an error message and status 1, never an uncaught std::bad_alloc (an abort).
    try {
        return meshrt::run_main(argc, argv, program, name);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: %s: out of memory while starting its %lld devices\n", name.c_str(),
                     static_cast<long long>(program->ndevices));
        return 1;
    }
}

extern "C" int64_t meshrt_device_index(meshrt_device* dev) {
    meshrt::runtime_of(dev, "meshrt_device_index");
    return dev->index;
}

extern "C" int64_t meshrt_coord(meshrt_device* dev, int32_t mesh, int32_t axis) {
    meshrt::Runtime& rt = meshrt::runtime_of(dev, "meshrt_coord");
    if (mesh < 0 || mesh >= rt.topology.nmeshes() || axis < 0 ||
        size_t(axis) >= rt.topology.mesh(mesh).axis_sizes.size())
        meshrt::fail(dev, "meshrt_coord: no axis " + std::to_string(axis) + " on mesh " +
                              std::to_string(mesh));
    const int64_t* c = rt.topology.coords(dev->index, mesh);
    return c ? c[axis] : -1;
}

extern "C" void meshrt_arg(meshrt_device* dev, int32_t index, int32_t dtype, void* out) {
    meshrt::Runtime& rt = meshrt::runtime_of(dev, "meshrt_arg");
    if (index < 0 || size_t(index) >= rt.options.arg_number.size())
        meshrt::fail(dev, "meshrt_arg: no argument " + std::to_string(index));
    const double v = rt.options.arg_number[size_t(index)];
    switch (dtype) {
    case MESHRT_I64: *static_cast<int64_t*>(out) = rt.options.arg_int[size_t(index)]; return;
    case MESHRT_F32: *static_cast<float*>(out) = float(v); return;
    case MESHRT_F64: *static_cast<double*>(out) = v; return;
    case MESHRT_BOOL: *static_cast<uint8_t*>(out) = v != 0; return;
    default: meshrt::fail(dev, "meshrt_arg: unsupported dtype " + std::to_string(dtype));
    }
}

extern "C" const char* meshrt_arg_path(meshrt_device* dev, int32_t index) {
    meshrt::Runtime& rt = meshrt::runtime_of(dev, "meshrt_arg_path");
    if (index < 0 || size_t(index) >= rt.options.arg_text.size())
        meshrt::fail(dev, "meshrt_arg_path: no argument " + std::to_string(index));
    return rt.options.arg_text[size_t(index)].c_str();
}

extern "C" void meshrt_check_slice(meshrt_device* dev, int64_t start, int64_t size, int64_t bound,
                                   const char* where) {
    if (start >= 0 && size <= bound && start <= bound - size)
        return;
    meshrt::fail(dev, std::string(where ? where : "slice") + ": slice start " + std::to_string(start) +
                          " is out of range: a slice of " + std::to_string(size) +
                          " must start in 0.." + std::to_string(bound - size) + " (the dim has " +
                          std::to_string(bound) + ")");
}

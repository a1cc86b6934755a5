// meshrt_main: options, --help, the failure path (one message however many devices
// fail), and the trace file (parsed as JSON).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "src/errors.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

TEST_CASE("help lists the options and meshes", "[startup]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}, {"Line", {"x"}, {3}}}, "mlp");
        bool ran = false;
        int status = prog.run([&](meshrt_device*) { ran = true; }, {"--help"});
        std::printf("status %d ran %d\n", status, int(ran));
    });
    CHECK(r.exit_status == 0);
    CHECK_THAT(r.out, Catch::StartsWith("usage: mlp [options]"));
    CHECK_THAT(r.out, Catch::Contains("--comm=sim|mpi|nccl"));
    CHECK_THAT(r.out, Catch::Contains("--device=cpu|cuda"));
    CHECK_THAT(r.out, Catch::Contains("--mesh-threads=N"));
    CHECK_THAT(r.out, Catch::Contains("--trace=FILE.json"));
    CHECK_THAT(r.out, Catch::Contains("--comm-timeout=SECONDS"));
    CHECK_THAT(r.out, Catch::Contains("(default 300; 0: wait for ever)"));
    CHECK_THAT(r.out, Catch::Contains("--print-topology"));
    // Which BLAS kernels the contractions run on (src/blas_kernels.h).
    CHECK_THAT(r.out, Catch::Contains("\ncontractions on the CPU: OpenBLAS "));
    CHECK_THAT(r.out, Catch::Contains(" kernels ("));
    CHECK_THAT(r.out, Catch::Contains("  Pod: 8 devices (data=2, model=4)\n"));
    CHECK_THAT(r.out, Catch::Contains("  Line: 3 devices (x=3)\n"));
    CHECK_THAT(r.out, Catch::EndsWith("status 0 ran 0\n"));
}

TEST_CASE("bad options are usage errors", "[startup]") {
    auto status_of = [](std::vector<std::string> args, std::string* err) {
        ChildResult r = run_in_child([&] {
            TestProgram prog({{"Pod", {"x"}, {2}}}, "prog");
            int status = prog.run([](meshrt_device*) {}, args);
            std::fflush(stdout);
            _exit(status);
        });
        *err = r.err;
        return r.exit_status;
    };
    std::string err;
    CHECK(status_of({"--frobnicate"}, &err) == 2);
    CHECK(err == "error: unknown option '--frobnicate' (see prog --help)\n");
#ifdef MESHRT_HAVE_MPI
    // Not under mpirun: MPI starts as a singleton, one process for two devices.
    CHECK(status_of({"--comm=mpi"}, &err) == 2);
    CHECK(err == "error: prog runs on 2 devices, one MPI process each, but it was started as 1 "
                 "process: run it as mpirun -np 2 prog --comm=mpi\n");
#else
    CHECK(status_of({"--comm=mpi"}, &err) == 2);
    CHECK(err ==
          "error: this program's runtime was built without the mpi handler (available: sim)\n");
#endif
#ifdef MESHRT_HAVE_CUDA
    CHECK(status_of({"--comm=nccl"}, &err) == 2);
    CHECK(err == "error: --comm=nccl runs on GPUs: add --device=cuda\n");
#else
    CHECK(status_of({"--comm=nccl"}, &err) == 2);
    CHECK_THAT(err, Catch::Contains("without the nccl handler"));
    CHECK(status_of({"--device=cuda"}, &err) == 2);
    CHECK(err == "error: this program's runtime was built without CUDA\n");
#endif
    CHECK(status_of({"--device=tpu"}, &err) == 2);
    CHECK(err == "error: unknown device 'tpu' in --device (cpu, cuda or gpu-emulator) (see prog --help)\n");
    CHECK(status_of({"--comm=tcp"}, &err) == 2);
    CHECK(status_of({"--mesh-threads=0"}, &err) == 2);
    CHECK(status_of({"--mesh-threads=two"}, &err) == 2);
    CHECK(err == "error: --mesh-threads wants a number from 1 to 4096, not 'two' (see prog --help)\n");
    CHECK(status_of({"--trace="}, &err) == 2);
    CHECK(status_of({"--trace=/nonexistent-meshrt-dir/t.json"}, &err) == 2);
    CHECK(err == "error: --trace=/nonexistent-meshrt-dir/t.json: cannot write in '/nonexistent-meshrt-dir': No "
                 "such file or directory (see prog --help)\n");
    for (const char* bad : {"--comm-timeout=", "--comm-timeout=-1", "--comm-timeout=5s",
                            "--comm-timeout=nan", "--comm-timeout=1e7"}) {
        CHECK(status_of({bad}, &err) == 2);
        CHECK_THAT(err, Catch::StartsWith("error: --comm-timeout wants a number of seconds from 0 "
                                          "(no timeout) to 1000000, not '"));
    }
    CHECK(status_of({"--comm-timeout=0", "--comm-timeout=2.5"}, &err) == 0);
    CHECK(status_of({"--comm=sim", "--mesh-threads=1", "--", "--anything"}, &err) == 0);
    CHECK(err.empty());
}

TEST_CASE("print-topology lists every device's coordinates and runs nothing", "[startup]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Pod", {"data", "model"}, {2, 2}}, {"Line", {"x"}, {3}}}, "prog");
        std::atomic<int> ran{0};
        int status = prog.run([&](meshrt_device*) { ++ran; }, {"--print-topology"});
        std::printf("status %d ran %d\n", status, ran.load());
    });
    CHECK(r.exit_status == 0);
    CHECK_THAT(r.out, Catch::StartsWith("prog: 4 devices, --comm=sim\n"));
    CHECK_THAT(r.out, Catch::Contains(", Pod[data=0, model=1], Line[x=1]\n"));
    CHECK_THAT(r.out, Catch::Contains("device 3: host "));
    CHECK_THAT(r.out, Catch::Contains(", Pod[data=1, model=1]\n")); // device 3: not on Line
    CHECK_THAT(r.out, Catch::EndsWith("status 0 ran 0\n"));
}

TEST_CASE("a program on more devices than the runtime starts is refused", "[startup]") {
    // 2^40 devices: the per-device tables alone would not fit in memory (it used to end
    // in an uncaught std::bad_alloc). Refused before anything is allocated, status 1.
    auto run = [](std::vector<MeshSpec> meshes, std::vector<std::string> args) {
        return run_in_child([&] {
            TestProgram prog(std::move(meshes), "huge");
            bool ran = false;
            int status = prog.run([&](meshrt_device*) { ran = true; }, args);
            std::fflush(stdout);
            _exit(ran ? 3 : status);
        });
    };
    ChildResult r = run({{"Pod", {"data", "model"}, {int64_t{1} << 20, int64_t{1} << 20}}}, {});
    CHECK(r.exit_status == 1);
    CHECK(r.err == "error: huge runs on 1099511627776 devices; a program runs on at most 65536 "
                   "(rebuild it for fewer: meshc build --mesh NAME=axis:size,...)\n");
    r = run({{"Pod", {"x"}, {MESHRT_MAX_DEVICES + 1}}}, {"--help"});
    CHECK(r.exit_status == 1);
    CHECK_THAT(r.err, Catch::Contains("runs on 65537 devices; a program runs on at most 65536"));
    // At the limit the program starts (here only as far as --help).
    r = run({{"Pod", {"x"}, {MESHRT_MAX_DEVICES}}}, {"--help"});
    CHECK(r.exit_status == 0);
    CHECK_THAT(r.out, Catch::Contains("Pod: 65536 devices (x=65536)"));
}

TEST_CASE("when every device fails one message is printed", "[startup]") {
    TempDir dir;
    const std::string tmp = dir.path("partial.tmp");
    { std::ofstream(tmp) << "x"; }
    ChildResult r = run_in_child([&] {
        register_temp_file(tmp);
        TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
        prog.run([](meshrt_device* dev) { meshrt_fail(dev, "boom"); });
    });
    CHECK(r.exit_status == 1);
    CHECK_THAT(r.err, Catch::Matches("error: device [0-7]: boom\n"));
    CHECK(!std::ifstream(tmp).good()); // the registered temporary was removed
}

TEST_CASE("SIGTERM removes the registered temporaries and still ends the process", "[startup]") {
    // What mpirun does to the other ranks when one fails: the handler unlinks the file a
    // save is writing, then the signal's default action ends the process.
    TempDir dir;
    const std::string tmp = dir.path("out.npy.tmp.1"), other = dir.path("done.tmp");
    { std::ofstream(tmp) << "half"; }
    { std::ofstream(other) << "x"; }
    ChildResult r = run_in_child([&] {
        install_signal_cleanup();
        if (!register_temp_file(other) || !register_temp_file(tmp))
            _exit(3);
        unregister_temp_file(other);
        raise(SIGTERM);
        _exit(4); // not reached
    });
    CHECK(r.exit_status == -1); // died of the signal
    CHECK(!std::ifstream(tmp).good());
    CHECK(std::ifstream(other).good()); // unregistered: renamed into place, kept
    CHECK(!register_temp_file(std::string(5000, 'x'))); // longer than PATH_MAX
}

TEST_CASE("trace option writes a Chrome trace with one track per device", "[startup]") {
    TempDir dir;
    const std::string path = dir.path("trace.json");
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}}, "traced");
    REQUIRE(prog.run(
                [](meshrt_device* dev) {
                    meshrt_trace_begin(dev, "step");
                    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4];
                    const int64_t s[2] = {2, 2};
                    meshrt_contract(dev, MESHRT_F32, "ik,kj->ij", a, 2, s, b, 2, s, c, 2, s);
                    const int32_t model = 1;
                    meshrt_all_reduce(dev, 0, 1, &model, MESHRT_F32, MESHRT_SUM, a, c, 4);
                    meshrt_trace_end(dev);
                },
                {"--trace=" + path}) == 0);
    std::ifstream f(path);
    REQUIRE(f.good());
    nlohmann::json trace = nlohmann::json::parse(f);
    std::set<std::string> threads;
    int contracts = 0, reduces = 0, steps = 0;
    for (const auto& e : trace.at("traceEvents")) {
        if (e.at("ph") == "M" && e.at("name") == "thread_name")
            threads.insert(e.at("args").at("name").get<std::string>());
        if (e.at("ph") != "X")
            continue;
        CHECK(e.at("pid") == 0);
        CHECK(e.at("dur").get<double>() >= 0);
        const std::string name = e.at("name");
        if (name == "contract") {
            ++contracts;
            CHECK(e.at("args").at("spec") == "ik,kj->ij");
            CHECK(e.at("args").at("copies") == 0);
        } else if (name == "all_reduce") {
            ++reduces;
            CHECK(e.at("args").at("bytes") == 16);
            CHECK(e.at("args").at("group") == 4);
            CHECK(e.at("args").at("over") == "model");
        } else if (name == "step") {
            ++steps;
        }
    }
    CHECK(threads.size() == 8);
    CHECK(threads.count("device 7") == 1);
    CHECK_THAT(trace.at("otherData").at("blas").get<std::string>(),
               Catch::StartsWith("OpenBLAS ") && Catch::Contains(" kernels ("));
    CHECK(contracts == 8);
    CHECK(reduces == 8);
    CHECK(steps == 8);
}

TEST_CASE("devices multiply concurrently with several BLAS threads each", "[startup]") {
    // OpenBLAS's thread count is process-wide; eight devices calling sgemm at once with
    // two BLAS threads each must still get their own, correct products.
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
    const int64_t n = 96;
    std::vector<double> err(8, -1);
    REQUIRE(prog.run(
                [&](meshrt_device* dev) {
                    const int64_t d = meshrt_device_index(dev);
                    std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
                    for (int64_t i = 0; i < n * n; ++i) {
                        a[size_t(i)] = float((i * 7 + d) % 13) - 6;
                        b[size_t(i)] = float((i * 5 + 3 * d) % 11) - 5;
                    }
                    const int64_t s[2] = {n, n};
                    double worst = 0;
                    for (int rep = 0; rep < 5; ++rep) {
                        meshrt_contract(dev, MESHRT_F32, "ik,kj->ij", a.data(), 2, s, b.data(), 2,
                                        s, c.data(), 2, s);
                        for (int64_t i = 0; i < n; i += 7)
                            for (int64_t j = 0; j < n; j += 5) {
                                double want = 0;
                                for (int64_t k = 0; k < n; ++k)
                                    want += double(a[size_t(i * n + k)]) * b[size_t(k * n + j)];
                                worst = std::max(worst, std::abs(want - c[size_t(i * n + j)]));
                            }
                    }
                    err[size_t(d)] = worst;
                },
                {"--mesh-threads=2"}) == 0);
    for (double e : err)
        CHECK(e == 0);
}

namespace {
// A kernel's host copy as meshc emits it for the gpu-emulator: a grid-stride loop over
// n elements; args[0] points to the output pointer, args[1] to n. Each element records
// which emulated thread wrote it and how many threads there were.
void emulated_kernel(void** args) {
    int64_t* out = *static_cast<int64_t**>(args[0]);
    const int64_t n = *static_cast<int64_t*>(args[1]);
    for (int64_t i = meshrt_kernel_thread(); i < n; i += meshrt_kernel_threads())
        out[i] += 1000 * meshrt_kernel_threads() + meshrt_kernel_thread() + 1;
}
} // namespace

TEST_CASE("gpu-emulator runs a kernel's host copy once per emulated GPU thread", "[startup]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Pod", {"x"}, {2}}}, "prog");
        int status = prog.run(
            [](meshrt_device* dev) {
                std::vector<int64_t> out(23, 0);
                int64_t* data = out.data();
                int64_t n = int64_t(out.size());
                void* args[] = {&data, &n};
                meshrt_launch(dev, "", "meshk_0", emulated_kernel, args, n);
                int64_t empty = 0;
                void* none[] = {&data, &empty};
                meshrt_launch(dev, "", "meshk_1", emulated_kernel, none, 0); // nothing to do
                if (meshrt_device_index(dev) == 0) {
                    std::printf("offload %d outside %lld/%lld:", meshrt_offload(dev),
                                static_cast<long long>(meshrt_kernel_thread()),
                                static_cast<long long>(meshrt_kernel_threads()));
                    for (int64_t v : out)
                        std::printf(" %lld", static_cast<long long>(v));
                    std::printf("\n");
                }
            },
            {"--device=gpu-emulator"});
        std::fflush(stdout);
        _exit(status);
    });
    CHECK(r.exit_status == 0);
    // Element i written once, by thread i % 7 of 7.
    std::string want = "offload 1 outside 0/1:";
    for (int i = 0; i < 23; ++i)
        want += " " + std::to_string(7000 + i % 7 + 1);
    CHECK(r.out == want + "\n");
}

TEST_CASE("a kernel launch on the CPU device fails the run naming the kernel", "[startup]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Pod", {"x"}, {1}}}, "prog");
        int status = prog.run(
            [](meshrt_device* dev) {
                if (meshrt_offload(dev) != 0)
                    std::printf("offload on the CPU device\n");
                int64_t* data = nullptr;
                int64_t n = 4;
                void* args[] = {&data, &n};
                meshrt_launch(dev, "", "meshk_3", emulated_kernel, args, n);
            },
            {});
        std::fflush(stdout);
        _exit(status);
    });
    CHECK(r.exit_status == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "error: device 0: GPU kernel meshk_3 launched without --device=cuda or "
                   "gpu-emulator\n");
}

TEST_CASE("program arguments: defaults, values, --help and bad values", "[startup]") {
    auto run = [](std::vector<std::string> args) {
        return run_in_child([args] {
            TestProgram prog({{"Pod", {"x"}, {2}}}, "prog");
            prog.set_args({{"steps", MESHRT_ARG_INT, "100"},
                           {"lr", MESHRT_ARG_FLOAT, "0.05"},
                           {"verbose", MESHRT_ARG_BOOL, "false"},
                           {"init", MESHRT_ARG_PATH, "init.npy"}});
            int status = prog.run(
                [](meshrt_device* dev) {
                    if (meshrt_device_index(dev) != 0)
                        return;
                    int64_t steps = 0;
                    float lr = 0;
                    uint8_t verbose = 2;
                    meshrt_arg(dev, 0, MESHRT_I64, &steps);
                    meshrt_arg(dev, 1, MESHRT_F32, &lr);
                    meshrt_arg(dev, 2, MESHRT_BOOL, &verbose);
                    std::printf("steps %lld lr %g verbose %d init %s\n", static_cast<long long>(steps), lr,
                                int(verbose), meshrt_arg_path(dev, 3));
                },
                args);
            std::fflush(stdout);
            _exit(status);
        });
    };
    ChildResult r = run({});
    CHECK(r.exit_status == 0);
    CHECK(r.out == "steps 100 lr 0.05 verbose 0 init init.npy\n");
    r = run({"--steps=-12", "--lr=1e-3", "--verbose=1", "--init=a/b.npy"});
    CHECK(r.exit_status == 0);
    CHECK(r.out == "steps -12 lr 0.001 verbose 1 init a/b.npy\n");
    r = run({"--steps=9223372036854775807"});
    CHECK(r.out == "steps 9223372036854775807 lr 0.05 verbose 0 init init.npy\n");
    r = run({"--help"});
    CHECK(r.exit_status == 0);
    CHECK_THAT(r.out, Catch::Contains("program arguments:\n"
                                      "  --steps=INT          an i64 argument (default 100)\n"
                                      "  --lr=FLOAT           an f32 argument (default 0.05)\n"
                                      "  --verbose=BOOL       a bool (true, false, 1 or 0) argument (default false)\n"
                                      "  --init=PATH          a file name argument (default init.npy)\n"));
    r = run({"--steps=1e3"});
    CHECK(r.exit_status == 2);
    CHECK(r.err == "error: --steps wants an i64, not '1e3' (see prog --help)\n");
    r = run({"--steps=99999999999999999999"});
    CHECK(r.exit_status == 2);
    r = run({"--lr=fast"});
    CHECK(r.exit_status == 2);
    CHECK(r.err == "error: --lr wants an f32, not 'fast' (see prog --help)\n");
    r = run({"--lr=inf"});
    CHECK(r.exit_status == 2);
    r = run({"--verbose=yes"});
    CHECK(r.exit_status == 2);
    r = run({"--init="});
    CHECK(r.exit_status == 2);
    r = run({"--steps"});
    CHECK(r.exit_status == 2);
    CHECK(r.err == "error: --steps wants a value: --steps=INT (see prog --help)\n");
    r = run({"--stepsx=3"});
    CHECK(r.exit_status == 2);
    CHECK(r.err == "error: unknown option '--stepsx=3' (see prog --help)\n");
    r = run({"--", "--steps=abc"});  // after `--`: ignored
    CHECK(r.exit_status == 0);
}

TEST_CASE("a run-time slice start out of range fails the run naming the source", "[startup]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Pod", {"x"}, {2}}}, "prog");
        int status = prog.run([](meshrt_device* dev) {
            meshrt_check_slice(dev, 0, 4, 8, "f.msh:3:9");
            meshrt_check_slice(dev, 4, 4, 8, "f.msh:3:9");
            if (meshrt_device_index(dev) == 1)
                meshrt_check_slice(dev, 5, 4, 8, "f.msh:3:9");
        });
        _exit(status);
    });
    CHECK(r.exit_status == 1);
    CHECK(r.err == "error: device 1: f.msh:3:9: slice start 5 is out of range: a slice of 4 must start in 0..4 "
                   "(the dim has 8)\n");
}

// meshrt_print: one line from device 0 with the global values of split tensors, nested
// lists up to 64 elements, summaries beyond, and every dtype's formatting.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "src/dtype.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

TEST_CASE("print assembles split tensors and prints once", "[print]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
        Layout grid(0, {2, 4}, {{0}, {1}});
        Layout scalar(-1, {}, {});
        Layout big(0, {16, 16}, {{1}, {}});
        Layout flags(-1, {3}, {});
        Layout f64(-1, {2}, {});
        Layout halves(0, {4}, {{1}});
        prog.run([&](meshrt_device* dev) {
            const int64_t data = meshrt_coord(dev, 0, 0), model = meshrt_coord(dev, 0, 1);
            int32_t g = int32_t(data * 4 + model); // one element each
            float s = 0.5f;
            std::vector<float> b(4 * 16, 1.0f);
            for (size_t i = 0; i < b.size(); ++i)
                b[i] = float(model * 64 + int64_t(i));
            uint8_t fl[3] = {1, 0, 1};
            double d[2] = {0.1, 1.0 / 3};
            uint16_t h = f32_to_f16(float(model) - 1.5f);
            const meshrt_print_arg args[] = {
                {MESHRT_I32, grid.get(), &g},      {MESHRT_F32, scalar.get(), &s},
                {MESHRT_F32, big.get(), b.data()}, {MESHRT_BOOL, flags.get(), fl},
                {MESHRT_F64, f64.get(), d},        {MESHRT_F16, halves.get(), &h}};
            meshrt_print(dev, "g={} s={} big={} fl={} d={} h={}", 6, args);
            meshrt_print(dev, "no arguments", 0, nullptr);
        });
    });
    CHECK(r.exit_status == 0);
    CHECK(r.err.empty());
    CHECK(r.out == "g=[[0, 1, 2, 3], [4, 5, 6, 7]] s=0.5 big=<f32[16, 16] sum=32640 min=0 max=255> "
                   "fl=[true, false, true] d=[0.1, 0.3333333333] h=[-1.5, -0.5, 0.5, 1.5]\n"
                   "no arguments\n");
}

TEST_CASE("print summarises integers and bools exactly", "[print]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({});
        Layout l(-1, {100}, {});
        prog.run([&](meshrt_device* dev) {
            std::vector<int64_t> v(100);
            std::vector<uint8_t> b(100, 0);
            for (int i = 0; i < 100; ++i)
                v[size_t(i)] = int64_t(i) - 10 + (i == 50 ? (int64_t(1) << 60) : 0);
            b[3] = b[7] = 1;
            const meshrt_print_arg args[] = {{MESHRT_I64, l.get(), v.data()},
                                             {MESHRT_BOOL, l.get(), b.data()}};
            meshrt_print(dev, "{} {}", 2, args);
        });
    });
    CHECK(r.exit_status == 0);
    CHECK(r.out == "<i64[100] sum=" + std::to_string((int64_t(1) << 60) + 3950) +
                       " min=-10 max=" + std::to_string((int64_t(1) << 60) + 40) +
                       "> <bool[100] sum=2 min=false max=true>\n");
}

TEST_CASE("print with a wrong number of arguments fails", "[print]") {
    ChildResult r = run_in_child([] {
        TestProgram prog({});
        Layout l(-1, {}, {});
        float x = 1;
        prog.run([&](meshrt_device* dev) {
            const meshrt_print_arg args[] = {{MESHRT_F32, l.get(), &x}};
            meshrt_print(dev, "{} and {}", 1, args);
        });
    });
    CHECK(r.exit_status == 1);
    CHECK(r.err == "error: device 0: print: \"{} and {}\" has more {} than the 1 arguments\n");
}

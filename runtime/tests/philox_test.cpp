// Philox4x32-10 against Random123's known-answer vectors, and meshrt_random's values:
// the formula of the header, and the same values whatever the layout.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

#include "src/philox.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

TEST_CASE("philox4x32-10 known answers (Random123 kat_vectors)", "[random]") {
    CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
          PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
    CHECK(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                        {0xffffffffu, 0xffffffffu}) ==
          PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
    CHECK(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                        {0xa4093822u, 0x299f31d0u}) ==
          PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("random values follow the header's formulas", "[random]") {
    TestProgram prog({});
    const int64_t seed = 0x123456789abcdefLL;
    Layout layout(-1, {3, 5}, {});
    std::vector<float> uni(15);
    std::vector<double> nor(15);
    REQUIRE(prog.run([&](meshrt_device* dev) {
        meshrt_random(dev, MESHRT_UNIFORM, seed, MESHRT_F32, layout.get(), uni.data());
        meshrt_random(dev, MESHRT_NORMAL, seed, MESHRT_F64, layout.get(), nor.data());
    }) == 0);
    for (int64_t i = 0; i < 15; ++i) {
        PhiloxCounter x =
            philox4x32_10({uint32_t(i), 0, 0, 0}, {uint32_t(seed), uint32_t(uint64_t(seed) >> 32)});
        CHECK(uni[size_t(i)] == float(double(x[0] >> 8) / 16777216.0));
        double u1 = (double(x[0] >> 8) + 1) / 16777216.0, u2 = double(x[1] >> 8) / 16777216.0;
        CHECK(nor[size_t(i)] == std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2));
        CHECK(uni[size_t(i)] >= 0.0f);
        CHECK(uni[size_t(i)] < 1.0f);
    }
}

TEST_CASE("random pieces of a split layout match the replicated tensor", "[random]") {
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
    Layout whole(-1, {4, 8, 6}, {});
    Layout split(0, {4, 8, 6}, {{0}, {}, {}});
    Layout split2(0, {4, 8, 6}, {{}, {1, 0}, {}}); // dim 1 over (model, data): 8 pieces
    std::vector<float> ref(4 * 8 * 6);
    std::vector<std::vector<float>> a(8, std::vector<float>(2 * 8 * 6)),
        b(8, std::vector<float>(4 * 1 * 6));
    REQUIRE(prog.run([&](meshrt_device* dev) {
        int64_t d = meshrt_device_index(dev);
        if (d == 0)
            meshrt_random(dev, MESHRT_NORMAL, 42, MESHRT_F32, whole.get(), ref.data());
        meshrt_random(dev, MESHRT_NORMAL, 42, MESHRT_F32, split.get(), a[size_t(d)].data());
        meshrt_random(dev, MESHRT_NORMAL, 42, MESHRT_F32, split2.get(), b[size_t(d)].data());
    }) == 0);
    for (int64_t d = 0; d < 8; ++d) {
        int64_t data = d / 4, model = d % 4;
        for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 8; ++j)
                for (int64_t k = 0; k < 6; ++k)
                    REQUIRE(a[size_t(d)][size_t((i * 8 + j) * 6 + k)] ==
                            ref[size_t(((data * 2 + i) * 8 + j) * 6 + k)]);
        int64_t piece = model * 2 + data; // mixed radix over (model, data)
        for (int64_t i = 0; i < 4; ++i)
            for (int64_t k = 0; k < 6; ++k)
                REQUIRE(b[size_t(d)][size_t(i * 6 + k)] == ref[size_t((i * 8 + piece) * 6 + k)]);
    }
}

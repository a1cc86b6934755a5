// f16/bf16 conversions: exhaustive round trips and round-to-nearest-even against a
// reference computed in double.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "src/dtype.h"

using namespace meshrt;

namespace {

/// The binary16 nearest to x (ties to even), by search over all finite halves.
uint16_t nearest_half(const std::vector<double>& values, double x) {
    uint16_t bits;
    // values[h] for h in [0, 0x7c00]: the non-negative finite halves and inf, increasing.
    const double ax = std::fabs(x);
    auto it = std::lower_bound(values.begin(), values.end(), ax);
    size_t hi = size_t(it - values.begin());
    if (hi == 0) {
        bits = 0;
    } else if (hi >= values.size()) {
        bits = 0x7c00;
    } else {
        const size_t lo = hi - 1;
        const double dlo = ax - values[lo], dhi = values[hi] - ax;
        // Past the largest finite half, IEEE rounds to inf at the halfway point 65520.
        bits = uint16_t(dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi));
    }
    if (std::signbit(x))
        bits |= 0x8000;
    return bits;
}

} // namespace

TEST_CASE("f16 round trip is exact for every half", "[dtype]") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = f16_to_f32(uint16_t(h));
        if (std::isnan(f)) {
            CHECK(std::isnan(f16_to_f32(f32_to_f16(f))));
            continue;
        }
        REQUIRE(f32_to_f16(f) == h);
    }
    CHECK(f16_to_f32(0x3c00) == 1.0f);
    CHECK(f16_to_f32(0x7bff) == 65504.0f);
    CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(f16_to_f32(0xc000) == -2.0f);
}

TEST_CASE("f32 -> f16 rounds to nearest even", "[dtype]") {
    std::vector<double> values;
    for (uint32_t h = 0; h <= 0x7bff; ++h)
        values.push_back(f16_to_f32(uint16_t(h)));
    values.push_back(65536.0); // the next "half" past 65504: rounding there means inf
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
    for (int i = 0; i < 200000; ++i) {
        uint32_t b = bits(rng);
        // Concentrate on the half range (exponents 100..145).
        b = (b & 0x807fffffu) | ((100u + (b >> 23) % 46u) << 23);
        float f;
        std::memcpy(&f, &b, 4);
        const uint16_t want = nearest_half(values, f);
        INFO("f = " << f);
        REQUIRE(f32_to_f16(f) == want);
    }
    // Ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> even (1).
    CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
    CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK(f32_to_f16(65520.0f) == 0x7c00);
    CHECK(f32_to_f16(65519.0f) == 0x7bff);
    CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("bf16 conversions", "[dtype]") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = bf16_to_f32(uint16_t(h));
        if (!std::isnan(f))
            REQUIRE(f32_to_bf16(f) == h);
    }
    CHECK(bf16_to_f32(0x3f80) == 1.0f);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
    CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

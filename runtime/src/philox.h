// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// exactly as Random123's philox4x32 with 10 rounds: the counter-based generator behind
// meshrt_random. Header-only so tests can check it against Random123's known answers.
#pragma once

#include <array>
#include <cstdint>

namespace meshrt {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u; // round multipliers
    constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; // Weyl key increments
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            key[0] += kW0;
            key[1] += kW1;
        }
        const uint64_t p0 = uint64_t(kM0) * ctr[0];
        const uint64_t p1 = uint64_t(kM1) * ctr[2];
        ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1),
               uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
    }
    return ctr;
}

/// The words meshrt_random derives element `index` of a tensor from.
inline PhiloxCounter philox_for_index(int64_t seed, int64_t index) {
    const uint64_t s = uint64_t(seed), i = uint64_t(index);
    return philox4x32_10({uint32_t(i), uint32_t(i >> 32), 0, 0}, {uint32_t(s), uint32_t(s >> 32)});
}

/// uniform in [0, 1): (x0 >> 8) * 2^-24.
inline double philox_uniform(const PhiloxCounter& x) {
    return double(x[0] >> 8) * 0x1p-24;
}

/// Standard normal by Box-Muller: sqrt(-2 ln u1) * cos(2 pi u2), u1 in (0, 1].
double philox_normal(const PhiloxCounter& x);

} // namespace meshrt

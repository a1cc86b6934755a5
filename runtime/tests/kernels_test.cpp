// Data-movement kernels: slice, concat_part, embedding (with its range error), one_hot;
// and memory alignment.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

#include "tests/test_util.h"

using namespace meshrt::test;

TEST_CASE("slice and concat_part along every dim", "[kernels]") {
    const int64_t shape[3] = {3, 4, 5};
    std::vector<int32_t> in(60);
    std::iota(in.begin(), in.end(), 0);
    for (int32_t dim = 0; dim < 3; ++dim) {
        const int64_t start = 1, size = 2;
        std::vector<int64_t> box{3, 4, 5};
        box[size_t(dim)] = size;
        std::vector<int32_t> out(size_t(box[0] * box[1] * box[2]), -1);
        meshrt_slice(nullptr, MESHRT_I32, in.data(), 3, shape, dim, start, size, out.data());
        for (int64_t i = 0; i < box[0]; ++i)
            for (int64_t j = 0; j < box[1]; ++j)
                for (int64_t k = 0; k < box[2]; ++k) {
                    int64_t idx[3] = {i, j, k};
                    idx[dim] += start;
                    REQUIRE(out[size_t((i * box[1] + j) * box[2] + k)] ==
                            in[size_t((idx[0] * 4 + idx[1]) * 5 + idx[2])]);
                }
        // Put the slice back at offset 1 of a bigger tensor (extent 4 along dim).
        std::vector<int64_t> big{3, 4, 5};
        big[size_t(dim)] = 4;
        std::vector<int32_t> cat(size_t(big[0] * big[1] * big[2]), -1);
        meshrt_concat_part(nullptr, MESHRT_I32, out.data(), 3, box.data(), dim, 4, 1, cat.data());
        for (int64_t i = 0; i < big[0]; ++i)
            for (int64_t j = 0; j < big[1]; ++j)
                for (int64_t k = 0; k < big[2]; ++k) {
                    int64_t idx[3] = {i, j, k};
                    const int32_t got = cat[size_t((i * big[1] + j) * big[2] + k)];
                    if (idx[dim] < 1 || idx[dim] >= 3) {
                        REQUIRE(got == -1);
                    } else {
                        idx[dim] -= 1;
                        REQUIRE(got == out[size_t((idx[0] * box[1] + idx[1]) * box[2] + idx[2])]);
                    }
                }
    }
}

TEST_CASE("embedding looks up this piece's rows and zeros the others", "[kernels]") {
    // Rows [2, 5) of a 6-row table, width 3.
    std::vector<float> table(9);
    std::iota(table.begin(), table.end(), 1.0f);
    const int64_t ids[4] = {0, 2, 4, 5};
    std::vector<float> out(12, -1.0f);
    meshrt_embedding(nullptr, MESHRT_F32, table.data(), 3, 2, 6, 3, MESHRT_I64, ids, 4, out.data(), nullptr);
    CHECK(out == std::vector<float>{0, 0, 0, 1, 2, 3, 7, 8, 9, 0, 0, 0});
    const int32_t ids32[2] = {3, 1};
    std::vector<float> out2(6, -1.0f);
    meshrt_embedding(nullptr, MESHRT_F32, table.data(), 3, 2, 6, 3, MESHRT_I32, ids32, 2,
                     out2.data(), nullptr);
    CHECK(out2 == std::vector<float>{4, 5, 6, 0, 0, 0});

    ChildResult r = run_in_child([&] {
        const int64_t bad[2] = {1, 6};
        meshrt_embedding(nullptr, MESHRT_F32, table.data(), 3, 2, 6, 3, MESHRT_I64, bad, 2,
                         out.data(), nullptr);
    });
    CHECK(r.exit_status == 1);
    CHECK(r.err == "error: embedding: id 6 at position 1 is outside the vocabulary [0, 6)\n");
}

TEST_CASE("one_hot", "[kernels]") {
    const int32_t ids[3] = {2, 0, 7};
    std::vector<float> out(12, -1.0f);
    meshrt_one_hot(nullptr, MESHRT_I32, ids, 3, 4, out.data());
    CHECK(out == std::vector<float>{0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("alloc returns 64-byte aligned memory", "[kernels]") {
    TestProgram prog({});
    bool ok = true;
    REQUIRE(prog.run([&](meshrt_device* dev) {
        for (int64_t bytes : {0, 1, 63, 64, 65, 1000, 1 << 20}) {
            void* p = meshrt_alloc(dev, bytes);
            ok = ok && p && reinterpret_cast<uintptr_t>(p) % 64 == 0;
            meshrt_free(dev, p);
        }
        meshrt_free(dev, nullptr);
    }) == 0);
    CHECK(ok);
}

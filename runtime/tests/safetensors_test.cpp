// .safetensors checkpoints: a round trip of several tensors (every dtype) saved from one
// split layout and loaded into others, the file's header, a lone tensor, the load
// errors (in a child process), and permutation's independence of the layout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/dtype.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

namespace {

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_all_to(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string st_file(const std::string& json, const std::string& data) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i)
        out[size_t(i)] = char((uint64_t(json.size()) >> (8 * i)) & 0xff);
    return out + json + data;
}

} // namespace

TEST_CASE("safetensors: save then load every dtype through split layouts", "[safetensors]") {
    TempDir dir;
    TestProgram prog({{"Pod", {"data", "model"}, {2, 2}}});
    const int64_t R = 4, C = 6;
    const std::vector<int32_t> dtypes{MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16,
                                      MESHRT_BF16, MESHRT_F32, MESHRT_F64};
    const std::string path = dir.path("ckpt.safetensors");
    Layout saved(0, {R, C}, {{0}, {1}});
    Layout rows(0, {R, C}, {{1, 0}, {}});
    Layout whole(-1, {R, C}, {});
    // Global bytes of tensor k: byte b of element e is (e * 7 + b + k) (bools 0/1).
    auto global = [&](size_t k) {
        const size_t elem = dtype_size(dtypes[k]);
        std::vector<char> g(size_t(R * C) * elem);
        for (size_t e = 0; e < size_t(R * C); ++e)
            for (size_t b = 0; b < elem; ++b)
                g[e * elem + b] = dtypes[k] == MESHRT_BOOL ? char(e % 3 == 0) : char(e * 7 + b + k);
        return g;
    };
    std::vector<std::vector<std::vector<char>>> got_rows(4), got_whole(4);
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        const int64_t data = meshrt_coord(dev, 0, 0), model = meshrt_coord(dev, 0, 1);
        for (size_t k = 0; k < dtypes.size(); ++k) {
            const size_t elem = dtype_size(dtypes[k]);
            std::vector<char> g = global(k), piece(size_t(R / 2 * C / 2) * elem);
            for (int64_t i = 0; i < R / 2; ++i)
                std::memcpy(piece.data() + size_t(i * C / 2) * elem,
                            g.data() + size_t((data * R / 2 + i) * C + model * C / 2) * elem,
                            size_t(C / 2) * elem);
            const std::string name = "t." + dtype_name(dtypes[k]);
            meshrt_save_tensor(dev, path.c_str(), name.c_str(), dtypes[k], saved.get(), piece.data());
        }
        meshrt_save_finish(dev, path.c_str());
        got_rows[size_t(d)].resize(dtypes.size());
        got_whole[size_t(d)].resize(dtypes.size());
        for (size_t k = dtypes.size(); k-- > 0;) { // any order
            const size_t elem = dtype_size(dtypes[k]);
            const std::string name = "t." + dtype_name(dtypes[k]);
            got_rows[size_t(d)][k].resize(size_t(C) * elem);
            meshrt_load_tensor(dev, path.c_str(), name.c_str(), dtypes[k], rows.get(), got_rows[size_t(d)][k].data());
            got_whole[size_t(d)][k].resize(size_t(R * C) * elem);
            meshrt_load_tensor(dev, path.c_str(), name.c_str(), dtypes[k], whole.get(), got_whole[size_t(d)][k].data());
        }
    }) == 0);
    for (size_t k = 0; k < dtypes.size(); ++k) {
        INFO(dtype_name(dtypes[k]));
        const size_t elem = dtype_size(dtypes[k]);
        const std::vector<char> g = global(k);
        for (int64_t d = 0; d < 4; ++d) {
            const int64_t data = d / 2, model = d % 2, row = model * 2 + data;
            CHECK(got_whole[size_t(d)][k] == g);
            CHECK(std::equal(got_rows[size_t(d)][k].begin(), got_rows[size_t(d)][k].end(),
                             g.begin() + row * C * int64_t(elem)));
        }
    }
    const std::string bytes = read_all(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = n << 8 | uint8_t(bytes[size_t(i)]);
    CHECK(n % 8 == 0);
    const std::string header = bytes.substr(8, n);
    CHECK(header.find("\"t.f32\": {\"dtype\": \"F32\", \"shape\": [4, 6], \"data_offsets\": [") != std::string::npos);
    CHECK(header.find("\"t.bf16\": {\"dtype\": \"BF16\"") != std::string::npos);
    CHECK(header.find("\"__metadata__\"") != std::string::npos);
    size_t data_bytes = 0;
    for (int32_t dt : dtypes)
        data_bytes += size_t(R * C) * dtype_size(dt);
    CHECK(bytes.size() == 8 + n + data_bytes);
}

TEST_CASE("safetensors: load errors name the file and the tensor", "[safetensors]") {
    TempDir dir;
    const std::string data(24, '\0');
    write_all_to(dir.path("ok.safetensors"),
                 st_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", data));
    write_all_to(dir.path("short.safetensors"),
                 st_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", data.substr(0, 20)));
    write_all_to(dir.path("offsets.safetensors"),
                 st_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", data));
    write_all_to(dir.path("json.safetensors"), st_file("{\"a\": {\"dtype\": \"F32\", ", data));
    write_all_to(dir.path("u8.safetensors"),
                 st_file("{\"a\": {\"dtype\": \"U8\", \"shape\": [6], \"data_offsets\": [0, 6]}}", data));
    write_all_to(dir.path("long.safetensors"), std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10));
    auto load_error = [&](const std::string& file, const char* name, int32_t dtype, std::vector<int64_t> shape) {
        const std::string path = dir.path(file);
        ChildResult r = run_in_child([&] {
            TestProgram prog({});
            Layout layout(-1, shape, {});
            std::vector<double> out(64);
            prog.run([&](meshrt_device* dev) {
                meshrt_load_tensor(dev, path.c_str(), name, dtype, layout.get(), out.data());
            });
        });
        CHECK(r.exit_status == 1);
        return r.err;
    };
    const std::string p = dir.path("");
    CHECK(load_error("ok.safetensors", "b", MESHRT_F32, {2, 3}).find("load " + p + "ok.safetensors: no tensor 'b' (the file has a)") != std::string::npos);
    CHECK(load_error("ok.safetensors", "a", MESHRT_F64, {2, 3}).find("tensor 'a': expected f64[2, 3], found f32[2, 3]") != std::string::npos);
    CHECK(load_error("ok.safetensors", "a", MESHRT_F32, {3, 2}).find("tensor 'a': expected f32[3, 2], found f32[2, 3]") != std::string::npos);
    CHECK(load_error("short.safetensors", "a", MESHRT_F32, {2, 3}).find("tensor 'a': truncated") != std::string::npos);
    CHECK(load_error("offsets.safetensors", "a", MESHRT_F32, {2, 3}).find("bad header: data_offsets [0, 20] hold 20 bytes") != std::string::npos);
    CHECK(load_error("json.safetensors", "a", MESHRT_F32, {2, 3}).find("bad header:") != std::string::npos);
    CHECK(load_error("u8.safetensors", "a", MESHRT_F32, {6}).find("found unsupported dtype 'U8'") != std::string::npos);
    CHECK(load_error("long.safetensors", "a", MESHRT_F32, {6}).find("bad header: its length") != std::string::npos);
    CHECK(load_error("missing.safetensors", "a", MESHRT_F32, {6}).find("cannot open") != std::string::npos);
}

TEST_CASE("permutation is the same in every layout", "[safetensors]") {
    TestProgram prog({{"Pod", {"x"}, {4}}});
    Layout whole(-1, {10}, {});
    std::vector<std::vector<int64_t>> wholes(4, std::vector<int64_t>(10));
    Layout even(0, {12}, {{0}});
    std::vector<std::vector<int64_t>> even_pieces(4, std::vector<int64_t>(3));
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        meshrt_permutation(dev, 7, whole.get(), wholes[size_t(d)].data());
        meshrt_permutation(dev, 7, even.get(), even_pieces[size_t(d)].data());
    }) == 0);
    std::vector<int64_t> sorted = wholes[0];
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 10; ++i)
        CHECK(sorted[size_t(i)] == i);
    for (int64_t d = 1; d < 4; ++d)
        CHECK(wholes[size_t(d)] == wholes[0]);
    std::vector<int64_t> joined;
    for (auto& piece : even_pieces)
        joined.insert(joined.end(), piece.begin(), piece.end());
    std::sort(joined.begin(), joined.end());
    for (int64_t i = 0; i < 12; ++i)
        CHECK(joined[size_t(i)] == i);
}

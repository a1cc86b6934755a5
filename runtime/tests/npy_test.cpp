// .npy save and load: round trips through split and replicated layouts for every dtype,
// the header NumPy expects, format versions 2.0 and 3.0, strided pieces, and every load
// error (in a child process: meshrt_fail ends it).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/dtype.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
}

/// A .npy file as NumPy writes it, with header version `major`.
std::string npy_bytes(int major, const std::string& dict, const std::string& data) {
    std::string header = dict;
    const size_t pre = major == 1 ? 10 : 12;
    while ((pre + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    std::string out = "\x93NUMPY";
    out += char(major);
    out += char(0);
    const size_t len = header.size();
    out += char(len & 0xff);
    out += char(len >> 8);
    if (major != 1) {
        out += char(0);
        out += char(0);
    }
    return out + header + data;
}

template <class T> std::string raw(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

/// Global element (i, j) of the test tensors.
double value(int32_t dtype, int64_t i, int64_t j) {
    if (dtype == MESHRT_BOOL)
        return (i * 3 + j) % 4 == 1;
    return double(i * 100 + j) * (dtype == MESHRT_I32 || dtype == MESHRT_I64 ? 1 : 0.25) - 7;
}

void put(int32_t dtype, void* buf, int64_t k, double v) {
    char* p = static_cast<char*>(buf) + size_t(k) * dtype_size(dtype);
    switch (dtype) {
    case MESHRT_BOOL:
        *p = v != 0;
        break;
    case MESHRT_I32: {
        int32_t x = int32_t(v);
        std::memcpy(p, &x, 4);
        break;
    }
    case MESHRT_I64: {
        int64_t x = int64_t(v);
        std::memcpy(p, &x, 8);
        break;
    }
    case MESHRT_F16:
    case MESHRT_BF16: {
        uint16_t x = f32_to_half(dtype, float(v));
        std::memcpy(p, &x, 2);
        break;
    }
    case MESHRT_F32: {
        float x = float(v);
        std::memcpy(p, &x, 4);
        break;
    }
    case MESHRT_F64:
        std::memcpy(p, &v, 8);
        break;
    }
}

/// The value the test tensor has after a round trip through dtype.
double stored(int32_t dtype, double v) {
    std::vector<char> b(8);
    put(dtype, b.data(), 0, v);
    return element_as_double(dtype, b.data(), 0);
}

} // namespace

TEST_CASE("save then load through split layouts for every dtype", "[npy]") {
    TempDir dir;
    TestProgram prog({{"Pod", {"data", "model"}, {2, 4}}});
    const int64_t R = 8, C = 12;
    for (int32_t dtype :
         {MESHRT_BOOL, MESHRT_I32, MESHRT_I64, MESHRT_F16, MESHRT_BF16, MESHRT_F32, MESHRT_F64}) {
        INFO(dtype_name(dtype));
        const std::string path = dir.path("t_" + dtype_name(dtype) + ".npy");
        Layout saved(0, {R, C}, {{0}, {1}});  // rows over data, columns over model
        Layout rows(0, {R, C}, {{1, 0}, {}}); // rows over (model, data)
        Layout inner(0, {R, C}, {{}, {1}});   // columns only: strided pieces
        Layout whole(-1, {R, C}, {});
        const size_t elem = dtype_size(dtype);
        std::vector<std::vector<char>> got_rows(8), got_inner(8), got_whole(8);
        REQUIRE(prog.run([&](meshrt_device* dev) {
            const int64_t d = meshrt_device_index(dev);
            const int64_t data = meshrt_coord(dev, 0, 0), model = meshrt_coord(dev, 0, 1);
            std::vector<char> piece(size_t(R / 2 * C / 4) * elem);
            for (int64_t i = 0; i < R / 2; ++i)
                for (int64_t j = 0; j < C / 4; ++j)
                    put(dtype, piece.data(), i * (C / 4) + j,
                        value(dtype, data * (R / 2) + i, model * (C / 4) + j));
            meshrt_save(dev, path.c_str(), dtype, saved.get(), piece.data());
            got_rows[size_t(d)].resize(size_t(R / 8 * C) * elem);
            meshrt_load(dev, path.c_str(), dtype, rows.get(), got_rows[size_t(d)].data());
            got_inner[size_t(d)].resize(size_t(R * C / 4) * elem);
            meshrt_load(dev, path.c_str(), dtype, inner.get(), got_inner[size_t(d)].data());
            got_whole[size_t(d)].resize(size_t(R * C) * elem);
            meshrt_load(dev, path.c_str(), dtype, whole.get(), got_whole[size_t(d)].data());
        }) == 0);
        for (int64_t d = 0; d < 8; ++d) {
            const int64_t data = d / 4, model = d % 4, row_piece = model * 2 + data;
            for (int64_t i = 0; i < R; ++i)
                for (int64_t j = 0; j < C; ++j)
                    REQUIRE(element_as_double(dtype, got_whole[size_t(d)].data(), i * C + j) ==
                            stored(dtype, value(dtype, i, j)));
            for (int64_t j = 0; j < C; ++j)
                REQUIRE(element_as_double(dtype, got_rows[size_t(d)].data(), j) ==
                        stored(dtype, value(dtype, row_piece, j)));
            for (int64_t i = 0; i < R; ++i)
                for (int64_t j = 0; j < C / 4; ++j)
                    REQUIRE(
                        element_as_double(dtype, got_inner[size_t(d)].data(), i * (C / 4) + j) ==
                        stored(dtype, value(dtype, i, model * (C / 4) + j)));
        }
        // The file NumPy would write: v1.0 header, data 64-byte aligned.
        const std::string bytes = read_file(path);
        REQUIRE(bytes.size() > 10);
        CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
        const size_t hlen = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
        CHECK((10 + hlen) % 64 == 0);
        const std::string descr = dtype == MESHRT_BF16   ? "<f4"
                                  : dtype == MESHRT_BOOL ? "|b1"
                                  : dtype == MESHRT_F16  ? "<f2"
                                  : dtype == MESHRT_F32  ? "<f4"
                                  : dtype == MESHRT_F64  ? "<f8"
                                  : dtype == MESHRT_I32  ? "<i4"
                                                         : "<i8";
        const std::string dict =
            "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (8, 12), }";
        REQUIRE(hlen > dict.size());
        CHECK(bytes.substr(10, hlen) == dict + std::string(hlen - dict.size() - 1, ' ') + "\n");
        const size_t file_elem = dtype == MESHRT_BF16 ? 4 : elem;
        CHECK(bytes.size() == 10 + hlen + size_t(R * C) * file_elem);
    }
    // Nothing but the saved files: the temporaries were renamed.
    for (auto& entry : std::filesystem::directory_iterator(dir.path("")))
        CHECK(entry.path().extension() == ".npy");
}

TEST_CASE("save of a replicated value and of a scalar", "[npy]") {
    TempDir dir;
    TestProgram prog({{"Pod", {"x"}, {4}}});
    Layout vec(-1, {5}, {});
    Layout scalar(-1, {}, {});
    std::vector<double> back(5);
    float s = 0;
    REQUIRE(prog.run([&](meshrt_device* dev) {
        std::vector<double> v{1, 2, 3, 4, 5};
        float x = 2.5f;
        meshrt_save(dev, dir.path("v.npy").c_str(), MESHRT_F64, vec.get(), v.data());
        meshrt_save(dev, dir.path("s.npy").c_str(), MESHRT_F32, scalar.get(), &x);
        if (meshrt_device_index(dev) == 2) {
            meshrt_load(dev, dir.path("v.npy").c_str(), MESHRT_F64, vec.get(), back.data());
            meshrt_load(dev, dir.path("s.npy").c_str(), MESHRT_F32, scalar.get(), &s);
        }
    }) == 0);
    CHECK(back == std::vector<double>{1, 2, 3, 4, 5});
    CHECK(s == 2.5f);
    CHECK(read_file(dir.path("v.npy")).find("'shape': (5,)") != std::string::npos);
    CHECK(read_file(dir.path("s.npy")).find("'shape': ()") != std::string::npos);
}

TEST_CASE("load reads format versions 2.0 and 3.0 and long strided rows", "[npy]") {
    TempDir dir;
    std::vector<float> data(2 * 40000);
    for (size_t i = 0; i < data.size(); ++i)
        data[i] = float(i);
    for (int major : {1, 2, 3})
        write_file(dir.path("v" + std::to_string(major) + ".npy"),
                   npy_bytes(major,
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 40000), }",
                             raw(data)));
    TestProgram prog({{"Pair", {"x"}, {2}}});
    Layout cols(0, {2, 40000}, {{}, {0}}); // 80 KB rows: one read per row
    std::vector<std::vector<float>> got(6, std::vector<float>(40000));
    REQUIRE(prog.run([&](meshrt_device* dev) {
        const int64_t d = meshrt_device_index(dev);
        for (int major : {1, 2, 3})
            meshrt_load(dev, dir.path("v" + std::to_string(major) + ".npy").c_str(), MESHRT_F32,
                        cols.get(), got[size_t((major - 1) * 2 + d)].data());
    }) == 0);
    for (int v = 0; v < 3; ++v)
        for (int64_t d = 0; d < 2; ++d)
            for (int64_t i = 0; i < 2; ++i)
                for (int64_t j = 0; j < 20000; ++j)
                    REQUIRE(got[size_t(v * 2 + d)][size_t(i * 20000 + j)] ==
                            float(i * 40000 + d * 20000 + j));
}

TEST_CASE("load errors name the file and the types", "[npy]") {
    TempDir dir;
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    write_file(dir.path("ok.npy"), npy_bytes(1, dict, raw(std::vector<float>(6, 1.0f))));
    write_file(dir.path("f64.npy"),
               npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                         raw(std::vector<double>(6, 1.0))));
    write_file(dir.path("short.npy"), npy_bytes(1, dict, raw(std::vector<float>(5, 1.0f))));
    write_file(dir.path("fortran.npy"),
               npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                         raw(std::vector<float>(6, 1.0f))));
    write_file(dir.path("u16.npy"),
               npy_bytes(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }",
                         std::string(12, '\0')));
    write_file(dir.path("text.npy"), "just some text, long enough to have a header\n");
    write_file(dir.path("badhdr.npy"), npy_bytes(1, "{'descr': '<f4', 'shape': (2, 3)", ""));

    auto load_error = [&](const std::string& file, int32_t dtype, std::vector<int64_t> shape) {
        const std::string path = dir.path(file);
        ChildResult r = run_in_child([&] {
            TestProgram prog({});
            Layout layout(-1, shape, {});
            std::vector<double> out(64);
            prog.run([&](meshrt_device* dev) {
                meshrt_load(dev, path.c_str(), dtype, layout.get(), out.data());
            });
        });
        CHECK(r.exit_status == 1);
        CHECK(r.out.empty());
        return r.err;
    };
    const std::string p = dir.path("");
    CHECK(load_error("missing.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p + "missing.npy: cannot open: No such file or directory\n");
    CHECK(load_error("text.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p + "text.npy: not a .npy file\n");
    CHECK(load_error("badhdr.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p + "badhdr.npy: not a .npy file\n");
    CHECK(load_error("f64.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p + "f64.npy: expected f32[2, 3], found f64[2, 3]\n");
    CHECK(load_error("ok.npy", MESHRT_F32, {3, 2}) ==
          "error: device 0: load " + p + "ok.npy: expected f32[3, 2], found f32[2, 3]\n");
    CHECK(load_error("ok.npy", MESHRT_BF16, {2, 2}) ==
          "error: device 0: load " + p +
              "ok.npy: expected bf16[2, 2] (stored as f32), found f32[2, 3]\n");
    CHECK(load_error("short.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p +
              "short.npy: truncated: expected 24 data bytes, found 20\n");
    CHECK(load_error("fortran.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p +
              "fortran.npy: Fortran-order arrays are not supported (save it in C order)\n");
    CHECK(load_error("u16.npy", MESHRT_F32, {2, 3}) ==
          "error: device 0: load " + p +
              "u16.npy: expected f32[2, 3], found unsupported dtype '<u2'\n");
}

TEST_CASE("a failed save leaves no file behind", "[npy]") {
    TempDir dir;
    const std::string path = dir.path("nodir/x.npy");
    ChildResult r = run_in_child([&] {
        TestProgram prog({});
        Layout layout(-1, {2}, {});
        float v[2] = {1, 2};
        prog.run([&](meshrt_device* dev) {
            meshrt_save(dev, path.c_str(), MESHRT_F32, layout.get(), v);
        });
    });
    CHECK(r.exit_status == 1);
    CHECK_THAT(r.err, Catch::StartsWith("error: device 0: save " + path + ": cannot create " +
                                        path + ".tmp."));
    CHECK_THAT(r.err, Catch::EndsWith(": No such file or directory\n"));
}

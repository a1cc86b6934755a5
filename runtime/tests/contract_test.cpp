// meshrt_contract against a naive einsum: transposed, batched, permuted and summing
// specs, every dtype; spec errors; and (hidden, tag [.perf]) the cost of the no-copy
// path against a direct cblas_sgemm.
#include <catch2/catch.hpp>

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "src/dtype.h"
#include "tests/test_util.h"

using namespace meshrt;
using namespace meshrt::test;

namespace {

struct Operands {
    std::string a, b, out; // letters; b empty and absent for a unary spec
    bool binary = false;
};

Operands split(const std::string& spec) {
    Operands o;
    const size_t arrow = spec.find("->");
    const std::string lhs = spec.substr(0, arrow);
    o.out = spec.substr(arrow + 2);
    const size_t comma = lhs.find(',');
    o.binary = comma != std::string::npos;
    o.a = lhs.substr(0, comma);
    if (o.binary)
        o.b = lhs.substr(comma + 1);
    return o;
}

std::vector<int64_t> shape_of(const std::string& letters, const std::map<char, int64_t>& ext) {
    std::vector<int64_t> s;
    for (char c : letters)
        s.push_back(ext.at(c));
    return s;
}

int64_t count(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t e : s)
        n *= e;
    return n;
}

/// Linear index of `letters` at the assignment `at` (row-major).
int64_t offset(const std::string& letters, const std::map<char, int64_t>& ext,
               const std::map<char, int64_t>& at) {
    int64_t o = 0;
    for (char c : letters)
        o = o * ext.at(c) + at.at(c);
    return o;
}

/// out = einsum(spec, a, b) in double, by enumerating every letter assignment.
std::vector<double> reference(const Operands& ops, const std::map<char, int64_t>& ext,
                              const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> out(size_t(count(shape_of(ops.out, ext))), 0.0);
    std::string all = ops.a + ops.b;
    std::string letters;
    for (char c : all)
        if (letters.find(c) == std::string::npos)
            letters += c;
    std::map<char, int64_t> at;
    for (char c : letters)
        at[c] = 0;
    for (char c : letters)
        if (ext.at(c) == 0)
            return out;
    for (;;) {
        double v = a[size_t(offset(ops.a, ext, at))];
        if (ops.binary)
            v *= b[size_t(offset(ops.b, ext, at))];
        out[size_t(offset(ops.out, ext, at))] += v;
        size_t i = letters.size();
        for (; i-- > 0;) {
            if (++at[letters[i]] < ext.at(letters[i]))
                break;
            at[letters[i]] = 0;
        }
        if (i == size_t(-1))
            return out;
    }
}

template <class T> std::vector<T> convert(int32_t dtype, const std::vector<double>& v) {
    std::vector<T> r;
    for (double x : v) {
        if constexpr (std::is_same_v<T, uint16_t>)
            r.push_back(f32_to_half(dtype, float(x)));
        else
            r.push_back(T(x));
    }
    return r;
}

template <class T>
void check_spec(int32_t dtype, const std::string& spec, std::map<char, int64_t> ext,
                std::mt19937& rng) {
    const Operands ops = split(spec);
    const bool integral = dtype == MESHRT_I32 || dtype == MESHRT_I64;
    std::uniform_int_distribution<int> small(-3, 3);
    std::uniform_real_distribution<double> real(-1, 1);
    auto fill = [&](const std::string& letters) {
        std::vector<double> v(size_t(count(shape_of(letters, ext))));
        for (double& x : v) {
            x = integral ? small(rng) : real(rng);
            if (dtype_is_half(dtype)) // exactly representable inputs
                x = half_to_f32(dtype, f32_to_half(dtype, float(x)));
        }
        return v;
    };
    const std::vector<double> a = fill(ops.a), b = ops.binary ? fill(ops.b) : std::vector<double>{};
    const std::vector<double> want = reference(ops, ext, a, b);
    std::vector<T> ta = convert<T>(dtype, a), tb = convert<T>(dtype, b);
    ta.emplace_back(); // never a null pointer, even for an empty operand (b == NULL means unary)
    tb.emplace_back();
    std::vector<T> out(want.size() + 1);
    const auto sa = shape_of(ops.a, ext), sb = shape_of(ops.b, ext), so = shape_of(ops.out, ext);
    meshrt_contract(nullptr, dtype, spec.c_str(), ta.data(), int32_t(sa.size()), sa.data(),
                    ops.binary ? tb.data() : nullptr, int32_t(sb.size()), sb.data(), out.data(),
                    int32_t(so.size()), so.data());
    const double tol = dtype == MESHRT_F64    ? 1e-12
                       : dtype == MESHRT_F32  ? 1e-5
                       : dtype == MESHRT_F16  ? 2e-3
                       : dtype == MESHRT_BF16 ? 1e-2
                                              : 0.0;
    double scale = 1;
    for (double x : want)
        scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < want.size(); ++i) {
        double got;
        if constexpr (std::is_same_v<T, uint16_t>)
            got = half_to_f32(dtype, out[i]);
        else
            got = double(out[i]);
        INFO(dtype_name(dtype) << " " << spec << " element " << i);
        REQUIRE(std::fabs(got - want[i]) <= tol * scale * 4);
    }
}

const std::vector<std::string> kBinarySpecs = {
    "ik,kj->ij",    "ki,kj->ij",    "ik,jk->ij",    "ki,jk->ij",    "ik,kj->ji",    "ki,jk->ji",
    "bik,bkj->bij", "ibk,bkj->bij", "bik,bkj->ibj", "bik,bkj->bji", "bik,bjk->ijb", "abcd,cde->abe",
    "ijk,jkl->il",  "ijk,kjl->il",  "ijk,jkl->li",  "ij,j->i",      "j,ij->i",      "i,j->ij",
    "ij,ij->i",     "ij,ij->",      "ijk,k->ij",    "abx,bc->ac",   "ab,bcy->ac",   "xab,ybc->ca",
    "b,b->b",       "bmk,bkn->mbn", "xmk,kn->mxn",  "mk,kn->nm",    "abc,cd->dab",  "ab,cd->acbd",
    "pqr,rqs->sp",  "a,a->",        "ab,->ab",
};
const std::vector<std::string> kUnarySpecs = {
    "abc->cab", "abc->a", "abc->", "ab->ba", "abc->cb", "abcd->dbca", "abc->abc", "a->", "->",
};

std::map<char, int64_t> random_extents(std::mt19937& rng, int64_t lo, int64_t hi) {
    std::uniform_int_distribution<int64_t> d(lo, hi);
    std::map<char, int64_t> ext;
    for (char c = 'a'; c <= 'z'; ++c)
        ext[c] = d(rng);
    return ext;
}

template <class T> void check_all(int32_t dtype) {
    std::mt19937 rng(1234 + uint32_t(dtype));
    for (int round = 0; round < 3; ++round) {
        auto ext = random_extents(rng, 1, 5);
        for (const std::string& spec : kBinarySpecs)
            check_spec<T>(dtype, spec, ext, rng);
        for (const std::string& spec : kUnarySpecs)
            check_spec<T>(dtype, spec, ext, rng);
    }
}

} // namespace

TEST_CASE("contract f32 matches einsum", "[contract]") {
    check_all<float>(MESHRT_F32);
}
TEST_CASE("contract f64 matches einsum", "[contract]") {
    check_all<double>(MESHRT_F64);
}
TEST_CASE("contract i64 matches einsum", "[contract]") {
    check_all<int64_t>(MESHRT_I64);
}
TEST_CASE("contract i32 matches einsum", "[contract]") {
    check_all<int32_t>(MESHRT_I32);
}
TEST_CASE("contract f16 and bf16 go through f32", "[contract]") {
    check_all<uint16_t>(MESHRT_F16);
    check_all<uint16_t>(MESHRT_BF16);
}

TEST_CASE("contract with empty and unit extents", "[contract]") {
    std::mt19937 rng(5);
    auto ext = random_extents(rng, 2, 3);
    ext['k'] = 0; // an empty sum: zeros
    check_spec<float>(MESHRT_F32, "ik,kj->ij", ext, rng);
    ext['k'] = 3;
    ext['i'] = 0; // an empty output
    check_spec<float>(MESHRT_F32, "ik,kj->ij", ext, rng);
    ext['i'] = 1;
    ext['j'] = 1;
    for (const std::string& spec : kBinarySpecs)
        check_spec<float>(MESHRT_F32, spec, ext, rng);
}

TEST_CASE("contract rejects a spec that does not fit its operands", "[contract]") {
    auto expect_error = [](const char* spec, int32_t rank_a, const char* message) {
        ChildResult r = run_in_child([&] {
            float a[8] = {}, b[8] = {}, o[8] = {};
            int64_t s2[2] = {2, 2}, s3[3] = {2, 2, 2};
            meshrt_contract(nullptr, MESHRT_F32, spec, a, rank_a, rank_a == 3 ? s3 : s2, b, 2, s2,
                            o, 2, s2);
        });
        CHECK(r.exit_status == 1);
        CHECK_THAT(r.err, Catch::Contains(message));
    };
    expect_error("ik,kj->ij", 3, "operand a has rank 3 but the spec names 2 letters");
    expect_error("ik,kj", 2, "expected one \"->\"");
    expect_error("ik,kj->iz", 2, "output letter z is in no operand");
    expect_error("ii,kj->ij", 2, "letter i repeats in operand a");
    ChildResult r = run_in_child([] {
        float a[6] = {}, b[6] = {}, o[6] = {};
        int64_t sa[2] = {2, 3}, sb[2] = {2, 3}, so[2] = {2, 3};
        meshrt_contract(nullptr, MESHRT_F32, "ik,kj->ij", a, 2, sa, b, 2, sb, o, 2, so);
    });
    CHECK(r.exit_status == 1);
    CHECK_THAT(r.err, Catch::Contains("letter k is 3 in one place and 2 in operand b"));
}

TEST_CASE("contract's no-copy path is as fast as sgemm", "[.perf]") {
    openblas_set_num_threads(1);
    const int n = 1024;
    std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
    const int64_t s[2] = {n, n};
    auto time = [](auto&& f) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (const char* spec : {"ik,kj->ij", "ki,kj->ij", "ik,jk->ij", "ik,kj->ji"}) {
        double best_direct = 1e9, best_contract = 1e9;
        for (int rep = 0; rep < 7; ++rep) {
            best_direct =
                std::min(best_direct, time([&] {
                             cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                                         a.data(), n, b.data(), n, 0.0f, c.data(), n);
                         }));
            best_contract = std::min(best_contract, time([&] {
                                         meshrt_contract(nullptr, MESHRT_F32, spec, a.data(), 2, s,
                                                         b.data(), 2, s, c.data(), 2, s);
                                     }));
        }
        const double ratio = best_direct / best_contract;
        WARN(spec << ": sgemm " << best_direct * 1e3 << " ms, contract " << best_contract * 1e3
                  << " ms, ratio " << ratio);
        CHECK(ratio >= 0.9);
    }
}

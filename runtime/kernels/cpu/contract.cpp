// meshrt_contract: einsum on local shapes, as BLAS matrix products where possible.
//
// Letters of a two-operand spec fall in four classes: batch (in a, b and out), m (a and
// out), n (b and out), k (a and b, summed). Letters in one operand only and not in out
// are summed out of that operand first. What remains is, for every batch index, one
// product C[m, n] = sum_k A[m, k] B[k, n] with each of m, n, k the row-major merge of its
// letters. When each operand's m/k (or k/n) letters are consecutive runs and one of them
// has unit stride, the operand *is* such a matrix (transposed or not) with a leading
// dimension, whatever the position of the batch letters: the product is then one
// cblas_?gemm per batch index with no copy. Otherwise the operand (or the output) is
// permuted to the canonical [batch, rows, cols] layout first. f16/bf16 go through f32;
// i32/i64 use the same plan with a plain loop in place of BLAS.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "src/dtype.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/tensor.h"

namespace meshrt::cpu {
namespace {

/// An operand or the output: one letter per dim.
template <class T> struct Tensor {
    std::string letters;
    std::vector<int64_t> shape;
    T* data = nullptr;
};

struct Spec {
    std::vector<std::string> inputs; // 1 or 2
    std::string output;
    int64_t extent[26]; // per letter, -1 when unused
};

[[noreturn]] void spec_error(meshrt_device* dev, const char* spec, const std::string& why) {
    fail(dev, std::string("contract \"") + spec + "\": " + why);
}

Spec parse_spec(meshrt_device* dev, const char* spec, int32_t noperands, const int32_t* ranks,
                const int64_t* const* shapes) {
    if (!spec)
        fail(dev, "contract: no spec");
    std::string s = spec;
    const size_t arrow = s.find("->");
    if (arrow == std::string::npos || s.find("->", arrow + 1) != std::string::npos)
        spec_error(dev, spec, "expected one \"->\"");
    Spec p;
    std::fill(std::begin(p.extent), std::end(p.extent), -1);
    std::string lhs = s.substr(0, arrow);
    p.output = s.substr(arrow + 2);
    size_t start = 0;
    for (;;) {
        size_t comma = lhs.find(',', start);
        p.inputs.push_back(lhs.substr(start, comma - start));
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    if (int32_t(p.inputs.size()) != noperands)
        spec_error(dev, spec,
                   "names " + std::to_string(p.inputs.size()) + " operands but " +
                       std::to_string(noperands) + (noperands == 1 ? " was" : " were") + " passed");
    auto check_letters = [&](const std::string& letters, const char* what) {
        bool seen[26] = {};
        for (char c : letters) {
            if (c < 'a' || c > 'z')
                spec_error(dev, spec, std::string("'") + c + "' in " + what + " is not a letter");
            if (seen[c - 'a'])
                spec_error(dev, spec, std::string("letter ") + c + " repeats in " + what);
            seen[c - 'a'] = true;
        }
    };
    const char* names[3] = {"operand a", "operand b", "the output"};
    for (int32_t i = 0; i <= noperands; ++i) {
        const std::string& letters = i < noperands ? p.inputs[size_t(i)] : p.output;
        const char* what = names[i < noperands ? i : 2];
        check_letters(letters, what);
        if (ranks[i] != int32_t(letters.size()))
            spec_error(dev, spec,
                       std::string(what) + " has rank " + std::to_string(ranks[i]) +
                           " but the spec names " + std::to_string(letters.size()) + " letters");
        if (ranks[i] > 0 && !shapes[i])
            spec_error(dev, spec, std::string(what) + " has no shape");
        for (size_t d = 0; d < letters.size(); ++d) {
            const int64_t e = shapes[i][d];
            int64_t& known = p.extent[letters[d] - 'a'];
            if (e < 0)
                spec_error(dev, spec, std::string(what) + " has a negative extent");
            if (i == noperands && known < 0)
                spec_error(dev, spec,
                           std::string("output letter ") + letters[d] + " is in no operand");
            if (known >= 0 && known != e)
                spec_error(dev, spec,
                           std::string("letter ") + letters[d] + " is " + std::to_string(known) +
                               " in one place and " + std::to_string(e) + " in " + what);
            known = e;
        }
    }
    return p;
}

bool has(const std::string& s, char c) {
    return s.find(c) != std::string::npos;
}

int64_t extent_of(const std::string& group, const int64_t* extent) {
    int64_t n = 1;
    for (char c : group)
        n *= extent[c - 'a'];
    return n;
}

std::vector<int64_t> shape_of(const std::string& letters, const int64_t* extent) {
    std::vector<int64_t> s;
    for (char c : letters)
        s.push_back(extent[c - 'a']);
    return s;
}

int64_t stride_of(const std::string& letters, const std::vector<int64_t>& strides, char c) {
    return strides[letters.find(c)];
}

/// Calls f(offset_in, offset_out) for every index of `shape` but the last dim (rank >= 1).
template <class F>
void walk_rows(const std::vector<int64_t>& shape, const std::vector<int64_t>& s_in,
               const std::vector<int64_t>& s_out, F&& f) {
    const size_t outer = shape.size() - 1;
    std::vector<int64_t> idx(outer, 0);
    int64_t oi = 0, oo = 0;
    for (;;) {
        f(oi, oo);
        size_t d = outer;
        for (; d-- > 0;) {
            oi += s_in[d];
            oo += s_out[d];
            if (++idx[d] < shape[d])
                break;
            oi -= s_in[d] * shape[d];
            oo -= s_out[d] * shape[d];
            idx[d] = 0;
        }
        if (d == size_t(-1))
            return;
    }
}

/// Accumulator for summing letters out: double for floats, unsigned 64-bit (wrapping,
/// like the integer types) for integers.
template <class T> using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

/// out = in with its letters permuted to out.letters, summing the letters out lacks.
template <class T> void unary(const Tensor<const T>& in, const Tensor<T>& out) {
    const int64_t n_out = num_elements(out.shape);
    if (n_out == 0)
        return;
    if (in.letters == out.letters) {
        std::memcpy(out.data, in.data, size_t(n_out) * sizeof(T));
        return;
    }
    const std::vector<int64_t> in_strides = row_major_strides(in.shape);
    const std::vector<int64_t> out_strides = row_major_strides(out.shape);
    if (in.letters.size() == out.letters.size()) {
        // Pure permutation: walk the output (contiguous writes), gather from the input.
        std::vector<int64_t> shape = out.shape, s_in, s_out = out_strides;
        for (char c : out.letters)
            s_in.push_back(stride_of(in.letters, in_strides, c));
        if (shape.empty()) {
            out.data[0] = in.data[0];
            return;
        }
        const int64_t row = shape.back(), step = s_in.back();
        walk_rows(shape, s_in, s_out, [&](int64_t oi, int64_t oo) {
            const T* src = in.data + oi;
            T* dst = out.data + oo;
            for (int64_t j = 0; j < row; ++j)
                dst[j] = src[j * step];
        });
        return;
    }
    // Summation: walk the input (contiguous reads), accumulate into the output's slots.
    std::vector<Acc<T>> acc(size_t(n_out), Acc<T>(0));
    if (num_elements(in.shape) > 0) {
        std::vector<int64_t> s_acc;
        for (char c : in.letters)
            s_acc.push_back(has(out.letters, c) ? stride_of(out.letters, out_strides, c) : 0);
        const int64_t row = in.shape.back(), step = s_acc.back();
        walk_rows(in.shape, in_strides, s_acc, [&](int64_t oi, int64_t oa) {
            const T* src = in.data + oi;
            Acc<T>* dst = acc.data() + oa;
            for (int64_t j = 0; j < row; ++j)
                dst[j * step] += Acc<T>(src[j]);
        });
    }
    for (int64_t i = 0; i < n_out; ++i)
        out.data[i] = T(acc[size_t(i)]);
}

/// A batch of matrices inside a tensor: for batch index b, rows x cols starting at the
/// batch offset, stored row-major with leading dimension ld (trans: stored cols x rows).
struct MatrixView {
    bool trans = false;
    int64_t ld = 1;
};

/// The letters of `group` in the order they appear in `letters`, if they form one
/// consecutive run there (an empty group always does).
std::optional<std::string> run_in(const std::string& letters, const std::string& group) {
    if (group.empty())
        return std::string();
    size_t first = letters.size(), last = 0;
    for (char c : group) {
        size_t pos = letters.find(c);
        first = std::min(first, pos);
        last = std::max(last, pos);
    }
    if (last - first + 1 != group.size())
        return std::nullopt;
    return letters.substr(first, group.size());
}

/// Whether `t` holds rows x cols matrices without transposition (rows and cols each a
/// consecutive run in exactly the given order, cols with unit stride); the leading
/// dimension if so.
std::optional<int64_t> plain_view(const std::string& letters, const std::vector<int64_t>& shape,
                                  const std::string& rows, const std::string& cols,
                                  const int64_t* extent) {
    if (!rows.empty() && letters.find(rows) == std::string::npos)
        return std::nullopt;
    if (!cols.empty() && letters.find(cols) == std::string::npos)
        return std::nullopt;
    const std::vector<int64_t> strides = row_major_strides(shape);
    const int64_t R = extent_of(rows, extent), C = extent_of(cols, extent);
    if (!cols.empty() && C > 1 && stride_of(letters, strides, cols.back()) != 1)
        return std::nullopt;
    if (rows.empty() || R == 1)
        return std::max<int64_t>(1, C);
    const int64_t ld = stride_of(letters, strides, rows.back());
    if (ld < std::max<int64_t>(1, C))
        return std::nullopt;
    return ld;
}

std::optional<MatrixView> matrix_view(const Tensor<const void>& t, const std::string& rows,
                                      const std::string& cols, const int64_t* extent) {
    if (auto ld = plain_view(t.letters, t.shape, rows, cols, extent))
        return MatrixView{false, *ld};
    if (auto ld = plain_view(t.letters, t.shape, cols, rows, extent))
        return MatrixView{true, *ld};
    return std::nullopt;
}

template <class T>
void gemm(meshrt_device* dev, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
          int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc) {
    if constexpr (std::is_floating_point_v<T>) {
        for (int64_t v : {M, N, K, lda, ldb, ldc})
            if (v > INT_MAX)
                fail(dev, "contract: a matrix dimension of " + std::to_string(v) +
                              " exceeds the BLAS's 32-bit integers");
        const auto tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
        if constexpr (std::is_same_v<T, float>)
            cblas_sgemm(CblasRowMajor, tA, tB, int(M), int(N), int(K), 1.0f, A, int(lda), B,
                        int(ldb), 0.0f, C, int(ldc));
        else
            cblas_dgemm(CblasRowMajor, tA, tB, int(M), int(N), int(K), 1.0, A, int(lda), B,
                        int(ldb), 0.0, C, int(ldc));
    } else {
        // Integers: i-k-j loops, wrapping arithmetic like the integer types themselves.
        using U = std::make_unsigned_t<T>;
        for (int64_t i = 0; i < M; ++i) {
            T* c = C + i * ldc;
            for (int64_t j = 0; j < N; ++j)
                c[j] = 0;
            for (int64_t p = 0; p < K; ++p) {
                const U aip = U(ta ? A[p * lda + i] : A[i * lda + p]);
                if (aip == 0)
                    continue;
                if (tb) {
                    for (int64_t j = 0; j < N; ++j)
                        c[j] = T(U(c[j]) + aip * U(B[j * ldb + p]));
                } else {
                    const T* b = B + p * ldb;
                    for (int64_t j = 0; j < N; ++j)
                        c[j] = T(U(c[j]) + aip * U(b[j]));
                }
            }
        }
    }
}

struct Stats {
    int copies = 0; // operands or outputs that had to be permuted
    int64_t flops = 0;
};

template <class T>
void binary(meshrt_device* dev, const Spec& spec, Tensor<const T> a, Tensor<const T> b,
            Tensor<T> out, Stats* stats) {
    const int64_t* extent = spec.extent;
    if (num_elements(out.shape) == 0)
        return;
    // 1. Letters in one operand only and not in the output are summed out of it first.
    std::vector<Scratch> temps;
    auto sum_out_private = [&](Tensor<const T>& t, const Tensor<const T>& other) {
        std::string kept;
        for (char c : t.letters)
            if (has(other.letters, c) || has(out.letters, c))
                kept += c;
        if (kept.size() == t.letters.size())
            return;
        Tensor<T> r{kept, shape_of(kept, extent), nullptr};
        temps.emplace_back(size_t(std::max<int64_t>(1, num_elements(r.shape))) * sizeof(T));
        r.data = temps.back().template get<T>();
        unary<T>(t, r);
        t = Tensor<const T>{r.letters, r.shape, r.data};
        ++stats->copies;
    };
    sum_out_private(a, b);
    sum_out_private(b, a);

    // 2. Classify.
    std::string batch, m, n, k;
    for (char c : out.letters) {
        if (has(a.letters, c) && has(b.letters, c))
            batch += c;
        else if (has(a.letters, c))
            m += c;
        else
            n += c;
    }
    for (char c : a.letters)
        if (has(b.letters, c) && !has(out.letters, c))
            k += c;
    const int64_t K = extent_of(k, extent);
    if (K == 0) { // an empty sum
        std::memset(out.data, 0, size_t(num_elements(out.shape)) * sizeof(T));
        return;
    }

    // 3. Orders of the merged m, n, k: the output's if it has them as runs, else the
    // operand's, so that as few tensors as possible need a permutation.
    auto pick = [](std::optional<std::string> first, std::optional<std::string> second,
                   const std::string& fallback) {
        return first ? *first : second ? *second : fallback;
    };
    const std::string mo = pick(run_in(out.letters, m), run_in(a.letters, m), m);
    const std::string no = pick(run_in(out.letters, n), run_in(b.letters, n), n);
    const std::string ko = pick(run_in(a.letters, k), run_in(b.letters, k), k);

    // 4. The output: C = [m, n] as it is, or C^T = [n, m] (then the product is computed
    // as C^T = B^T A^T, swapping the operands' roles), or a canonical temporary.
    Tensor<T> c = out;
    bool swapped = false;
    Scratch out_temp;
    int64_t ldc;
    if (auto ld = plain_view(out.letters, out.shape, mo, no, extent)) {
        ldc = *ld;
    } else if (auto ldt = plain_view(out.letters, out.shape, no, mo, extent)) {
        ldc = *ldt;
        swapped = true;
    } else {
        c.letters = batch + mo + no;
        c.shape = shape_of(c.letters, extent);
        out_temp.resize(size_t(num_elements(c.shape)) * sizeof(T));
        c.data = out_temp.get<T>();
        ldc = std::max<int64_t>(1, extent_of(no, extent));
        ++stats->copies;
    }

    // 5. The operands in their roles: left (rows x k) and right (k x cols).
    Tensor<const T> left = swapped ? b : a, right = swapped ? a : b;
    const std::string& rows = swapped ? no : mo;
    const std::string& cols = swapped ? mo : no;
    auto view_or_permute = [&](Tensor<const T>& t, const std::string& r, const std::string& cc) {
        Tensor<const void> tv{t.letters, t.shape, t.data};
        if (auto v = matrix_view(tv, r, cc, extent))
            return *v;
        Tensor<T> p{batch + r + cc, shape_of(batch + r + cc, extent), nullptr};
        temps.emplace_back(size_t(num_elements(p.shape)) * sizeof(T));
        p.data = temps.back().template get<T>();
        unary<T>(t, p);
        t = Tensor<const T>{p.letters, p.shape, p.data};
        ++stats->copies;
        return MatrixView{false, std::max<int64_t>(1, extent_of(cc, extent))};
    };
    const MatrixView lv = view_or_permute(left, rows, ko);
    const MatrixView rv = view_or_permute(right, ko, cols);

    // 6. One product per batch index.
    const int64_t R = extent_of(rows, extent), C = extent_of(cols, extent);
    const std::vector<int64_t> ls = row_major_strides(left.shape),
                               rs = row_major_strides(right.shape), cs = row_major_strides(c.shape);
    std::vector<int64_t> bshape, bl, br, bc;
    for (char ch : batch) {
        bshape.push_back(extent[ch - 'a']);
        bl.push_back(stride_of(left.letters, ls, ch));
        br.push_back(stride_of(right.letters, rs, ch));
        bc.push_back(stride_of(c.letters, cs, ch));
    }
    std::vector<int64_t> idx(batch.size(), 0);
    int64_t ol = 0, orr = 0, oc = 0;
    for (;;) {
        gemm<T>(dev, lv.trans, rv.trans, R, C, K, left.data + ol, lv.ld, right.data + orr, rv.ld,
                c.data + oc, ldc);
        size_t d = batch.size();
        for (; d-- > 0;) {
            ol += bl[d];
            orr += br[d];
            oc += bc[d];
            if (++idx[d] < bshape[d])
                break;
            ol -= bl[d] * bshape[d];
            orr -= br[d] * bshape[d];
            oc -= bc[d] * bshape[d];
            idx[d] = 0;
        }
        if (d == size_t(-1))
            break;
    }
    stats->flops = 2 * num_elements(bshape) * R * C * K;
    if (out_temp.size())
        unary<T>(Tensor<const T>{c.letters, c.shape, c.data}, out);
}

template <class T>
void run(meshrt_device* dev, const Spec& spec, const void* a, const int64_t* shape_a, const void* b,
         const int64_t* shape_b, void* out, const int64_t* shape_out, Stats* stats) {
    auto make = [](const std::string& letters, const int64_t* shape, auto* data) {
        using P = std::remove_pointer_t<decltype(data)>;
        return Tensor<P>{letters, std::vector<int64_t>(shape, shape + letters.size()), data};
    };
    Tensor<T> o = make(spec.output, shape_out, static_cast<T*>(out));
    Tensor<const T> ta = make(spec.inputs[0], shape_a, static_cast<const T*>(a));
    if (spec.inputs.size() == 1) {
        unary<T>(ta, o);
        return;
    }
    Tensor<const T> tb = make(spec.inputs[1], shape_b, static_cast<const T*>(b));
    binary<T>(dev, spec, ta, tb, o, stats);
}

} // namespace
} // namespace meshrt::cpu

extern "C" void meshrt_contract(meshrt_device* dev, int32_t dtype, const char* spec, const void* a,
                                int32_t rank_a, const int64_t* shape_a, const void* b,
                                int32_t rank_b, const int64_t* shape_b, void* out, int32_t rank_out,
                                const int64_t* shape_out) {
    using namespace meshrt;
    using namespace meshrt::cpu;
    TraceScope scope(dev, "contract");
    const int32_t noperands = b ? 2 : 1;
    if (noperands == 1 && rank_b != 0)
        fail(dev, std::string("contract \"") + (spec ? spec : "") +
                      "\": no operand b but rank_b is " + std::to_string(rank_b));
    // The operands' ranks and shapes, then the output's.
    int32_t ranks[3] = {rank_a, rank_b, rank_out};
    const int64_t* shapes[3] = {shape_a, shape_b, shape_out};
    ranks[noperands] = rank_out;
    shapes[noperands] = shape_out;
    const Spec p = parse_spec(dev, spec, noperands, ranks, shapes);
    Stats stats;
    switch (dtype) {
    case MESHRT_F32:
        run<float>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_F64:
        run<double>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_I32:
        run<int32_t>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_I64:
        run<int64_t>(dev, p, a, shape_a, b, shape_b, out, shape_out, &stats);
        break;
    case MESHRT_F16:
    case MESHRT_BF16: {
        // Through f32: convert the operands, contract, round the result once.
        auto widen = [&](const void* h, int32_t rank, const int64_t* shape, Scratch& buf) {
            const int64_t n = num_elements(std::span<const int64_t>(shape, size_t(rank)));
            buf.resize(size_t(std::max<int64_t>(1, n)) * sizeof(float));
            halves_to_f32(dtype, static_cast<const uint16_t*>(h), buf.get<float>(), n);
            return buf.get<float>();
        };
        Scratch fa, fb, fo;
        const float* wa = widen(a, rank_a, shape_a, fa);
        const float* wb = noperands == 2 ? widen(b, rank_b, shape_b, fb) : nullptr;
        const int64_t n_out = num_elements(std::span<const int64_t>(shape_out, size_t(rank_out)));
        fo.resize(size_t(std::max<int64_t>(1, n_out)) * sizeof(float));
        run<float>(dev, p, wa, shape_a, wb, shape_b, fo.get(), shape_out, &stats);
        f32_to_halves(dtype, fo.get<float>(), static_cast<uint16_t*>(out), n_out);
        break;
    }
    default:
        fail(dev, std::string("contract \"") + spec + "\": unsupported dtype " + dtype_name(dtype));
    }
    if (scope.active()) {
        scope.arg("spec", spec);
        scope.arg("dtype", dtype_name(dtype));
        if (stats.flops)
            scope.arg("flops", stats.flops);
        scope.arg("copies", stats.copies);
    }
}

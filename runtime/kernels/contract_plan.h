// The plan of a meshrt_contract, shared by the CPU kernels (kernels/cpu/contract.cpp,
// OpenBLAS) and the CUDA kernels (kernels/cuda/contract.cpp, cuBLAS): the parsed spec,
// and for two operands which letters are summed out first, which operand plays which
// role in the matrix product, which tensors are read in place as matrices (transposed
// or not, with a leading dimension) and which must be permuted first, and the batch
// strides. Header-only: it decides, the executors allocate and compute.
//
// Letters of a two-operand spec fall in four classes: batch (in a, b and out), m (a and
// out), n (b and out), k (a and b, summed). Letters in one operand only and not in out
// are summed out of that operand first. What remains is, for every batch index, one
// product C[m, n] = sum_k A[m, k] B[k, n] with each of m, n, k the row-major merge of its
// letters. When each operand's m/k (or k/n) letters are consecutive runs and one of them
// has unit stride, the operand *is* such a matrix (transposed or not) with a leading
// dimension, whatever the position of the batch letters: the product is then one GEMM
// per batch index with no copy. Otherwise the operand (or the output) is permuted to the
// canonical [batch, rows, cols] layout first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/errors.h"
#include "src/tensor.h"

namespace meshrt::contract {

struct Spec {
    std::vector<std::string> inputs; // 1 or 2
    std::string output;
    int64_t extent[26]; // per letter, -1 when unused
};

[[noreturn]] inline void spec_error(meshrt_device* dev, const char* spec, const std::string& why) {
    fail(dev, std::string("contract \"") + spec + "\": " + why);
}

/// Parses and checks `spec` against the operands' ranks and shapes (ranks[noperands] and
/// shapes[noperands] are the output's); a mismatch fails the run.
inline Spec parse_spec(meshrt_device* dev, const char* spec, int32_t noperands,
                       const int32_t* ranks, const int64_t* const* shapes) {
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

inline bool has(const std::string& s, char c) {
    return s.find(c) != std::string::npos;
}

inline int64_t extent_of(const std::string& group, const int64_t* extent) {
    int64_t n = 1;
    for (char c : group)
        n *= extent[c - 'a'];
    return n;
}

inline std::vector<int64_t> shape_of(const std::string& letters, const int64_t* extent) {
    std::vector<int64_t> s;
    for (char c : letters)
        s.push_back(extent[c - 'a']);
    return s;
}

inline int64_t stride_of(const std::string& letters, const std::vector<int64_t>& strides, char c) {
    return strides[letters.find(c)];
}

/// What a contraction did, for its trace event.
struct Stats {
    int copies = 0;    // operands or outputs that had to be permuted (or summed) first
    int64_t flops = 0; // of the matrix products
};

/// A batch of matrices inside a tensor: for batch index b, rows x cols starting at the
/// batch offset, stored row-major with leading dimension ld (trans: stored cols x rows).
struct MatrixView {
    bool trans = false;
    int64_t ld = 1;
};

/// The letters of `group` in the order they appear in `letters`, if they form one
/// consecutive run there (an empty group always does).
inline std::optional<std::string> run_in(const std::string& letters, const std::string& group) {
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

/// Whether a tensor holds rows x cols matrices without transposition (rows and cols
/// each a consecutive run in exactly the given order, cols with unit stride); the
/// leading dimension if so.
inline std::optional<int64_t> plain_view(const std::string& letters,
                                         const std::vector<int64_t>& shape,
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

inline std::optional<MatrixView> matrix_view(const std::string& letters,
                                             const std::vector<int64_t>& shape,
                                             const std::string& rows, const std::string& cols,
                                             const int64_t* extent) {
    if (auto ld = plain_view(letters, shape, rows, cols, extent))
        return MatrixView{false, *ld};
    if (auto ld = plain_view(letters, shape, cols, rows, extent))
        return MatrixView{true, *ld};
    return std::nullopt;
}

/// One operand of the matrix product: the letters of the tensor the product reads (the
/// operand's own after step 1, or batch + rows + cols when it is permuted first) and how
/// it is read.
struct OperandPlan {
    std::string letters;
    bool permuted = false;
    MatrixView view;
};

/// A two-operand contraction, as every executor runs it:
///   1. a (b) with letters a_letters (b_letters): the operand with its private letters
///      summed out when a_summed (b_summed), else the operand itself;
///   2. K == 0: the output is zeros; stop;
///   3. c: the output itself, or (out_temp) a temporary with c_letters, permuted into the
///      output at the end; rows x cols of c with leading dimension ldc;
///   4. left = swapped ? b : a, right = swapped ? a : b, each permuted first to its
///      OperandPlan::letters when `permuted`;
///   5. for each index of batch_shape (element strides batch_left / batch_right /
///      batch_c in left, right and c): c[R x C] = left[R x K] * right[K x C], each read
///      through its MatrixView.
struct BinaryPlan {
    std::string a_letters, b_letters;
    bool a_summed = false, b_summed = false;
    std::string batch, k;
    int64_t K = 0;
    bool swapped = false;
    bool out_temp = false;
    std::string c_letters;
    int64_t ldc = 1;
    std::string rows, cols, ko; // letters of the merged R, C and K dims
    OperandPlan left, right;
    int64_t R = 0, C = 0;
    std::vector<int64_t> batch_shape, batch_left, batch_right, batch_c;
    int copies = 0;     // tensors materialised: summed or permuted operands, the output temp
    int64_t flops = 0;  // 2 * batch * R * C * K
};

/// The plan of a two-operand spec (spec.inputs.size() == 2).
inline BinaryPlan plan_binary(const Spec& spec) {
    const int64_t* extent = spec.extent;
    const std::string& a = spec.inputs[0];
    const std::string& b = spec.inputs[1];
    const std::string& out = spec.output;
    BinaryPlan p;
    // 1. Letters in one operand only and not in the output are summed out of it first.
    auto kept = [&](const std::string& t, const std::string& other) {
        std::string s;
        for (char c : t)
            if (has(other, c) || has(out, c))
                s += c;
        return s;
    };
    p.a_letters = kept(a, b);
    p.a_summed = p.a_letters.size() != a.size();
    p.b_letters = kept(b, p.a_letters);
    p.b_summed = p.b_letters.size() != b.size();
    p.copies = int(p.a_summed) + int(p.b_summed);
    const std::string& al = p.a_letters;
    const std::string& bl = p.b_letters;

    // 2. Classify.
    std::string m, n;
    for (char c : out) {
        if (has(al, c) && has(bl, c))
            p.batch += c;
        else if (has(al, c))
            m += c;
        else
            n += c;
    }
    for (char c : al)
        if (has(bl, c) && !has(out, c))
            p.k += c;
    p.K = extent_of(p.k, extent);
    if (p.K == 0)
        return p;

    // 3. Orders of the merged m, n, k: the output's if it has them as runs, else the
    // operand's, so that as few tensors as possible need a permutation.
    auto pick = [](std::optional<std::string> first, std::optional<std::string> second,
                   const std::string& fallback) {
        return first ? *first : second ? *second : fallback;
    };
    const std::string mo = pick(run_in(out, m), run_in(al, m), m);
    const std::string no = pick(run_in(out, n), run_in(bl, n), n);
    p.ko = pick(run_in(al, p.k), run_in(bl, p.k), p.k);

    // 4. The output: C = [m, n] as it is, or C^T = [n, m] (then the product is computed
    // as C^T = B^T A^T, swapping the operands' roles), or a canonical temporary.
    const std::vector<int64_t> out_shape = shape_of(out, extent);
    p.c_letters = out;
    if (auto ld = plain_view(out, out_shape, mo, no, extent)) {
        p.ldc = *ld;
    } else if (auto ldt = plain_view(out, out_shape, no, mo, extent)) {
        p.ldc = *ldt;
        p.swapped = true;
    } else {
        p.out_temp = true;
        p.c_letters = p.batch + mo + no;
        p.ldc = std::max<int64_t>(1, extent_of(no, extent));
        ++p.copies;
    }

    // 5. The operands in their roles: left (rows x k) and right (k x cols).
    p.rows = p.swapped ? no : mo;
    p.cols = p.swapped ? mo : no;
    auto view_or_permute = [&](const std::string& letters, const std::string& r,
                               const std::string& cc) {
        OperandPlan op;
        if (auto v = matrix_view(letters, shape_of(letters, extent), r, cc, extent)) {
            op.letters = letters;
            op.view = *v;
            return op;
        }
        op.letters = p.batch + r + cc;
        op.permuted = true;
        op.view = MatrixView{false, std::max<int64_t>(1, extent_of(cc, extent))};
        ++p.copies;
        return op;
    };
    p.left = view_or_permute(p.swapped ? bl : al, p.rows, p.ko);
    p.right = view_or_permute(p.swapped ? al : bl, p.ko, p.cols);

    // 6. One product per batch index.
    p.R = extent_of(p.rows, extent);
    p.C = extent_of(p.cols, extent);
    const std::vector<int64_t> ls = row_major_strides(shape_of(p.left.letters, extent)),
                               rs = row_major_strides(shape_of(p.right.letters, extent)),
                               cs = row_major_strides(shape_of(p.c_letters, extent));
    for (char ch : p.batch) {
        p.batch_shape.push_back(extent[ch - 'a']);
        p.batch_left.push_back(stride_of(p.left.letters, ls, ch));
        p.batch_right.push_back(stride_of(p.right.letters, rs, ch));
        p.batch_c.push_back(stride_of(p.c_letters, cs, ch));
    }
    p.flops = 2 * num_elements(p.batch_shape) * p.R * p.C * p.K;
    return p;
}

} // namespace meshrt::contract

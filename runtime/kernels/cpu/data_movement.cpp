// CPU kernels that move data without arithmetic: slice, concat_part, embedding lookup,
// one_hot. Called by generated code; shapes are local.
#include <cstring>
#include <string>

#include "src/dtype.h"
#include "src/layout.h"
#include "src/errors.h"
#include "src/runtime.h"
#include "src/tensor.h"

namespace meshrt {
namespace {

size_t check_dtype(meshrt_device* dev, const char* op, int32_t dtype) {
    const size_t elem = dtype_size(dtype);
    if (!elem)
        fail(dev, std::string(op) + ": unknown dtype " + std::to_string(dtype));
    return elem;
}

std::vector<int64_t> check_shape(meshrt_device* dev, const char* op, int32_t rank,
                                 const int64_t* shape, int32_t dim) {
    if (rank < 1 || !shape || dim < 0 || dim >= rank)
        fail(dev, std::string(op) + ": dim " + std::to_string(dim) + " of a rank-" +
                      std::to_string(rank) + " tensor");
    std::vector<int64_t> s(shape, shape + rank);
    for (int64_t e : s)
        if (e < 0)
            fail(dev, std::string(op) + ": negative extent");
    return s;
}

int64_t id_at(int32_t id_dtype, const void* ids, int64_t i) {
    return id_dtype == MESHRT_I32 ? int64_t(static_cast<const int32_t*>(ids)[i])
                                  : static_cast<const int64_t*>(ids)[i];
}

void check_id_dtype(meshrt_device* dev, const char* op, int32_t id_dtype) {
    if (id_dtype != MESHRT_I32 && id_dtype != MESHRT_I64)
        fail(dev, std::string(op) + ": ids must be i32 or i64, not " + dtype_name(id_dtype));
}

} // namespace
} // namespace meshrt

using namespace meshrt;

extern "C" {

void meshrt_slice(meshrt_device* dev, int32_t dtype, const void* in, int32_t rank,
                  const int64_t* in_shape, int32_t dim, int64_t start, int64_t size, void* out) {
    TraceScope scope(dev, "slice");
    const size_t elem = check_dtype(dev, "slice", dtype);
    std::vector<int64_t> shape = check_shape(dev, "slice", rank, in_shape, dim);
    if (start < 0 || size < 0 || start + size > shape[size_t(dim)])
        fail(dev, "slice: [" + std::to_string(start) + ", " + std::to_string(start + size) +
                      ") is outside dim " + std::to_string(dim) + " of " +
                      type_string(dtype, shape));
    std::vector<int64_t> box = shape, src_start(shape.size(), 0);
    box[size_t(dim)] = size;
    src_start[size_t(dim)] = start;
    scope.arg("bytes", num_elements(box) * int64_t(elem));
    copy_box(elem, box, in, shape, src_start, out, box, std::vector<int64_t>(shape.size(), 0));
}

void meshrt_concat_part(meshrt_device* dev, int32_t dtype, const void* in, int32_t rank,
                        const int64_t* in_shape, int32_t dim, int64_t out_dim_size, int64_t offset,
                        void* out) {
    TraceScope scope(dev, "concat_part");
    const size_t elem = check_dtype(dev, "concat_part", dtype);
    std::vector<int64_t> shape = check_shape(dev, "concat_part", rank, in_shape, dim);
    if (offset < 0 || offset + shape[size_t(dim)] > out_dim_size)
        fail(dev, "concat_part: " + type_string(dtype, shape) + " at offset " +
                      std::to_string(offset) + " does not fit in extent " +
                      std::to_string(out_dim_size) + " of dim " + std::to_string(dim));
    std::vector<int64_t> out_shape = shape, dst_start(shape.size(), 0);
    out_shape[size_t(dim)] = out_dim_size;
    dst_start[size_t(dim)] = offset;
    scope.arg("bytes", num_elements(shape) * int64_t(elem));
    copy_box(elem, shape, in, shape, std::vector<int64_t>(shape.size(), 0), out, out_shape,
             dst_start);
}

void meshrt_embedding(meshrt_device* dev, int32_t dtype, const void* table, int64_t rows,
                      int64_t row_offset, int64_t vocab_size, int64_t width, int32_t id_dtype,
                      const void* ids, int64_t n, void* out, const meshrt_layout* ids_layout) {
    TraceScope scope(dev, "embedding");
    const size_t elem = check_dtype(dev, "embedding", dtype);
    check_id_dtype(dev, "embedding", id_dtype);
    if (rows < 0 || width < 0 || n < 0 || row_offset < 0 || row_offset + rows > vocab_size)
        fail(dev, "embedding: rows [" + std::to_string(row_offset) + ", " +
                      std::to_string(row_offset + rows) + ") of a table of " +
                      std::to_string(vocab_size) + " rows");
    const size_t row_bytes = size_t(width) * elem;
    scope.arg("bytes", n * int64_t(row_bytes));
    char* o = static_cast<char*>(out);
    for (int64_t i = 0; i < n; ++i, o += row_bytes) {
        const int64_t id = id_at(id_dtype, ids, i);
        if (id < 0 || id >= vocab_size) {
            // The position in the global ids tensor: this device's piece starts at its
            // offsets; the local index unravels over the local shape.
            std::string where = std::to_string(i);
            if (ids_layout && dev) {
                Piece p = local_piece(dev, "embedding", ids_layout);
                std::vector<int64_t> at(p.local_shape.size());
                int64_t rest = i;
                for (size_t d = at.size(); d-- > 0;) {
                    int64_t len = p.local_shape[d] > 0 ? p.local_shape[d] : 1;
                    at[d] = rest % len + p.offset[d];
                    rest /= len;
                }
                int64_t flat = 0;
                where.clear();
                for (size_t d = 0; d < at.size(); ++d) {
                    flat = flat * p.global_shape[d] + at[d];
                    where += (d ? ", " : "") + std::to_string(at[d]);
                }
                where = std::to_string(flat) + " ([" + where + "] of the ids)";
            }
            fail(dev, "embedding: id " + std::to_string(id) + " at position " + where +
                          " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
        }
        if (id >= row_offset && id < row_offset + rows)
            std::memcpy(o, static_cast<const char*>(table) + size_t(id - row_offset) * row_bytes,
                        row_bytes);
        else if (row_bytes)
            std::memset(o, 0, row_bytes); // another device's rows: the pieces are summed
    }
}

void meshrt_one_hot(meshrt_device* dev, int32_t id_dtype, const void* ids, int64_t n,
                    int64_t classes, float* out) {
    TraceScope scope(dev, "one_hot");
    check_id_dtype(dev, "one_hot", id_dtype);
    if (n < 0 || classes < 0)
        fail(dev, "one_hot: negative size");
    // An id outside [0, classes) gives a row of zeros (as in JAX and PyTorch's
    // scatter-based forms); it is not an error.
    for (int64_t i = 0; i < n; ++i) {
        float* row = out + i * classes;
        for (int64_t k = 0; k < classes; ++k)
            row[k] = 0.0f;
        const int64_t id = id_at(id_dtype, ids, i);
        if (id >= 0 && id < classes)
            row[id] = 1.0f;
    }
}

} // extern "C"

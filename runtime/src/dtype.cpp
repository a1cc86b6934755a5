// meshrt_dtype sizes, names and bulk half conversions (see dtype.h).
#include "src/dtype.h"

#include <cstring>

namespace meshrt {

size_t dtype_size(int32_t dtype) {
    switch (dtype) {
    case MESHRT_BOOL:
        return 1;
    case MESHRT_I32:
        return 4;
    case MESHRT_I64:
        return 8;
    case MESHRT_F16:
        return 2;
    case MESHRT_BF16:
        return 2;
    case MESHRT_F32:
        return 4;
    case MESHRT_F64:
        return 8;
    default:
        return 0;
    }
}

std::string dtype_name(int32_t dtype) {
    switch (dtype) {
    case MESHRT_BOOL:
        return "bool";
    case MESHRT_I32:
        return "i32";
    case MESHRT_I64:
        return "i64";
    case MESHRT_F16:
        return "f16";
    case MESHRT_BF16:
        return "bf16";
    case MESHRT_F32:
        return "f32";
    case MESHRT_F64:
        return "f64";
    default:
        return "dtype#" + std::to_string(dtype);
    }
}

std::string type_string(int32_t dtype, const std::vector<int64_t>& shape) {
    std::string s = dtype_name(dtype) + "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i)
            s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

void halves_to_f32(int32_t dtype, const uint16_t* in, float* out, int64_t n) {
    if (dtype == MESHRT_F16) {
        for (int64_t i = 0; i < n; ++i)
            out[i] = f16_to_f32(in[i]);
    } else {
        for (int64_t i = 0; i < n; ++i)
            out[i] = bf16_to_f32(in[i]);
    }
}

void f32_to_halves(int32_t dtype, const float* in, uint16_t* out, int64_t n) {
    if (dtype == MESHRT_F16) {
        for (int64_t i = 0; i < n; ++i)
            out[i] = f32_to_f16(in[i]);
    } else {
        for (int64_t i = 0; i < n; ++i)
            out[i] = f32_to_bf16(in[i]);
    }
}

double element_as_double(int32_t dtype, const void* data, int64_t i) {
    const char* p = static_cast<const char*>(data) + i * int64_t(dtype_size(dtype));
    switch (dtype) {
    case MESHRT_BOOL:
        return *reinterpret_cast<const uint8_t*>(p) ? 1.0 : 0.0;
    case MESHRT_I32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        return double(v);
    }
    case MESHRT_I64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        return double(v);
    }
    case MESHRT_F16:
    case MESHRT_BF16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return half_to_f32(dtype, v);
    }
    case MESHRT_F32: {
        float v;
        std::memcpy(&v, p, 4);
        return double(v);
    }
    case MESHRT_F64: {
        double v;
        std::memcpy(&v, p, 8);
        return v;
    }
    default:
        return 0.0;
    }
}

} // namespace meshrt

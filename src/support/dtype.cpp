// Element type names; see dtype.h.
#include "support/dtype.h"

namespace meshc {

std::string_view dtype_name(DType t) {
    switch (t) {
    case DType::Bool: return "bool";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    }
    return "?";
}

bool dtype_from_name(std::string_view name, DType& out) {
    for (DType t : {DType::Bool, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
        if (dtype_name(t) == name) {
            out = t;
            return true;
        }
    }
    return false;
}

}  // namespace meshc

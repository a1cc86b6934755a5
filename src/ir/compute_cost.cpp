// Compute costs of GIR ops and the device profiles; see compute_cost.h and device_model.h.
#include "ir/compute_cost.h"

#include <algorithm>
#include <map>

#include "ir/op_rules.h"

namespace meshc::ir {

double DeviceModel::matmul_rate(DType t) const {
    switch (t) {
    case DType::F64: return matmul_f64;
    case DType::F32: return matmul_f32;
    case DType::F16:
    case DType::BF16: return matmul_f16;
    case DType::Bool:
    case DType::I32:
    case DType::I64: return matmul_int;
    }
    return matmul_f32;
}

std::optional<DeviceModel> device_profile(std::string_view name) {
    DeviceModel m;
    if (name == "cpu") {
        // One AVX-512 server core pair as meshc's own runtime sees it: OpenBLAS sgemm at
        // about 200 GFLOP/s, element-wise loops bound by about 20 GB/s of memory.
        m.name = "cpu";
        return m;
    }
    if (name == "h100" || name == "h200") {
        // SXM parts, dense rates: FP64 and FP32 (no TF32) 67 TFLOP/s, FP16/BF16 tensor cores
        // 989 TFLOP/s; HBM3 3.35 TB/s and 80 GB (H100), HBM3e 4.8 TB/s and 141 GB (H200).
        m.name = std::string(name);
        m.matmul_f64 = 6.7e13;
        m.matmul_f32 = 6.7e13;
        m.matmul_f16 = 9.89e14;
        m.matmul_int = 6.7e13;
        m.vector_flops = 6.7e13;
        m.memory_bandwidth = name == "h100" ? 3.35e12 : 4.8e12;
        m.memory_bytes = name == "h100" ? 80e9 : 141e9;
        return m;
    }
    return std::nullopt;
}

std::vector<std::string_view> device_profile_names() { return {"cpu", "h100", "h200"}; }

namespace {

const Mesh* mesh_of(const Module& module, const TensorType& t) {
    return t.mesh >= 0 && static_cast<size_t>(t.mesh) < module.meshes.size() ? &module.meshes[static_cast<size_t>(t.mesh)]
                                                                             : nullptr;
}

/// Size of dim `d` of `t`'s per-device piece.
int64_t local_dim(const Module& module, const TensorType& t, size_t d) {
    const Mesh* mesh = mesh_of(module, t);
    int64_t factor = 1;
    if (mesh && d < t.layout.dims.size()) {
        for (uint8_t a : t.layout.dims[d]) {
            if (a < mesh->axes.size()) factor *= mesh->axes[a].size;
        }
    }
    return factor > 1 ? (t.shape[d] + factor - 1) / factor : t.shape[d];
}

double local_elements(const Module& module, const TensorType& t) {
    double n = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) n *= static_cast<double>(local_dim(module, t, d));
    return n;
}

double local_bytes(const Module& module, const Function& f, ValueId v) {
    if (v >= f.types.size()) return 0;
    const TensorType& t = f.types[v];
    return static_cast<double>(t.local_bytes(mesh_of(module, t)));
}

double operand_bytes(const Module& module, const Function& f, const Op& op) {
    double b = 0;
    for (ValueId v : op.operands) b += local_bytes(module, f, v);
    return b;
}

double result_bytes(const Module& module, const Function& f, const Op& op) {
    double b = 0;
    for (ValueId v : op.results) b += local_bytes(module, f, v);
    return b;
}

/// 2 · the product of every factor's local extent (the smallest piece any operand or
/// the result holds of it: a split factor is split alike everywhere it appears).
double contraction_flops(const Module& module, const Function& f, const Op& op) {
    RuleInput in{module, op, {}, {}, {}};
    for (ValueId v : op.operands) {
        if (v >= f.types.size()) return 0;
        in.operands.push_back(&f.types[v]);
    }
    OpFactors factors = op_factors(in);
    if (!factors.defined) return 0;
    const TensorType* result = !op.results.empty() && op.results[0] < f.types.size() ? &f.types[op.results[0]] : nullptr;
    double flops = 2;
    for (const Factor& factor : factors.factors) {
        int64_t n = factor.size;
        for (size_t k = 0; k < in.operands.size(); ++k) {
            if (factor.operand_dims[k] >= 0) n = std::min(n, local_dim(module, *in.operands[k], static_cast<size_t>(factor.operand_dims[k])));
        }
        if (result && factor.result_dim >= 0 && static_cast<size_t>(factor.result_dim) < result->rank()) {
            n = std::min(n, local_dim(module, *result, static_cast<size_t>(factor.result_dim)));
        }
        flops *= static_cast<double>(n);
    }
    return flops;
}

}  // namespace

ComputeCost op_compute_cost(const Module& module, const Function& f, const Op& op) {
    ComputeCost c;
    const DeviceModel& dev = module.device;
    double rate = dev.vector_flops;
    auto result_elements = [&] {
        return op.results.empty() || op.results[0] >= f.types.size() ? 0.0 : local_elements(module, f.types[op.results[0]]);
    };
    // How the op is charged: its row of op_rules.def.
    switch (op_rule(op.kind).cost) {
    case CostRule::Contraction:
        c.flops = contraction_flops(module, f, op);
        c.bytes = operand_bytes(module, f, op) + result_bytes(module, f, op);
        if (!op.results.empty() && op.results[0] < f.types.size()) rate = dev.matmul_rate(f.types[op.results[0]].dtype);
        break;
    case CostRule::Pointwise:
        c.flops = result_elements() * (op.kind == OpKind::Elementwise ? ew_rule(op.ew).flops : 1.0);
        c.bytes = operand_bytes(module, f, op) + result_bytes(module, f, op);
        break;
    case CostRule::Reduction:
        c.flops = op.operands.empty() || op.operands[0] >= f.types.size() ? 0 : local_elements(module, f.types[op.operands[0]]);
        c.bytes = operand_bytes(module, f, op) + result_bytes(module, f, op);
        break;
    case CostRule::Creation:
        // Writes the piece; the random kinds run Philox (about 20 operations an element).
        c.flops = op.create == CreateKind::RandomNormal || op.create == CreateKind::RandomUniform ||
                          op.create == CreateKind::Permutation
                      ? 20 * result_elements()
                      : 0;
        c.bytes = result_bytes(module, f, op);
        break;
    case CostRule::Lookup:
        // Reads the rows it returns (and the ids), writes the result.
        c.bytes = 2 * result_bytes(module, f, op) + (op.operands.size() > 1 ? local_bytes(module, f, op.operands[1]) : 0);
        break;
    case CostRule::Copy:
        // Copies: read what is kept, write the result.
        c.bytes = std::min(operand_bytes(module, f, op), result_bytes(module, f, op)) + result_bytes(module, f, op);
        break;
    case CostRule::None: return c;
    }
    c.seconds = std::max(rate > 0 ? c.flops / rate : 0.0, dev.memory_bandwidth > 0 ? c.bytes / dev.memory_bandwidth : 0.0);
    return c;
}

}  // namespace meshc::ir

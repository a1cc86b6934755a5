// Element-wise ops: a fused tree of element-wise and broadcast ops evaluated per element
// of its root, and the scalar code of each element-wise kind.
#include "codegen/generator.h"
#include "ir/op_rules.h"

namespace meshc::codegen::lower {

void Generator::collect_leaves(const Op& op, const std::vector<int64_t>& out, std::map<ValueId, Leaf>& leaves, bool& flat) {
    for (ValueId v : op.operands) {
        if (inlined_[v]) {
            collect_leaves(*def_[v], out, leaves, flat);
            continue;
        }
        if (leaves.count(v)) continue;
        if (def_[v] && def_[v]->kind == OpKind::Constant) continue;  // an immediate
        Leaf leaf;
        const auto& s = lshape(v);
        if (product(s) == 1) {
            leaf.scalar = load_elem(dt(v), val_[v], i64c(0));
        } else {
            if (s != out) flat = false;
            auto st = strides_of(s);
            leaf.stride.assign(out.size(), 0);
            size_t off = out.size() - s.size();
            for (size_t d = 0; d < s.size(); ++d) leaf.stride[off + d] = s[d] == 1 ? 0 : st[d];
        }
        leaves.emplace(v, std::move(leaf));
    }
}

llvm::Value* Generator::element(ValueId v, std::map<ValueId, Leaf>& leaves, const std::vector<llvm::Value*>& idx, llvm::Value* flat_index) {
    if (inlined_[v]) return evaluate(*def_[v], leaves, idx, flat_index);
    if (def_[v] && def_[v]->kind == OpKind::Constant) return const_of(dt(v), def_[v]->number);
    Leaf& leaf = leaves.at(v);
    if (leaf.scalar) return leaf.scalar;
    llvm::Value* at = flat_index;
    if (!at) {
        at = i64c(0);
        for (size_t d = 0; d < idx.size(); ++d) {
            if (leaf.stride[d]) at = b_.CreateAdd(at, b_.CreateMul(idx[d], i64c(leaf.stride[d])));
        }
    }
    return load_elem(dt(v), val_[v], at);
}

llvm::Value* Generator::evaluate(const Op& op, std::map<ValueId, Leaf>& leaves, const std::vector<llvm::Value*>& idx, llvm::Value* flat_index) {
    DType rt = dt(op.results[0]);
    if (op.kind == OpKind::Broadcast) return element(op.operands[0], leaves, idx, flat_index);
    std::vector<llvm::Value*> a;
    for (ValueId v : op.operands) a.push_back(element(v, leaves, idx, flat_index));
    DType in = dt(op.operands[0]);
    return ew(op.ew, rt, in, op.operands.size() > 1 ? dt(op.operands[1]) : in, a,
              op.operands.size() > 2 ? dt(op.operands[2]) : in);
}

/// One element-wise function on compute values. `rt`: result type; `in`, `in2`: the
/// first two operands' types (`in3`: the third, for select).
llvm::Value* Generator::ew(Ew e, DType rt, DType in, DType in2, std::vector<llvm::Value*> a, DType in3) {
    switch (e) {
    case Ew::Cast: return convert(a[0], in, rt);
    case Ew::Select: return b_.CreateSelect(convert(a[0], in, DType::Bool), convert(a[1], in2, rt), convert(a[2], in3, rt));
    case Ew::Eq: case Ew::Ne: case Ew::Lt: case Ew::Le: case Ew::Gt: case Ew::Ge: {
        // Compare in the wider of the two operand types.
        DType ct = in;
        if (in2 != in && (is_float(in2) || in == DType::Bool)) ct = in2;
        if (ct == DType::F16 || ct == DType::BF16) ct = DType::F32;
        llvm::Value* x = convert(a[0], in, ct);
        llvm::Value* y = convert(a[1], in2, ct);
        if (is_float(ct)) {
            static const llvm::CmpInst::Predicate fp[] = {llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::FCMP_UNE, llvm::CmpInst::FCMP_OLT,
                                                          llvm::CmpInst::FCMP_OLE, llvm::CmpInst::FCMP_OGT, llvm::CmpInst::FCMP_OGE};
            return b_.CreateFCmp(fp[static_cast<int>(e) - static_cast<int>(Ew::Eq)], x, y);
        }
        bool u = ct == DType::Bool;
        static const llvm::CmpInst::Predicate sp[] = {llvm::CmpInst::ICMP_EQ, llvm::CmpInst::ICMP_NE, llvm::CmpInst::ICMP_SLT,
                                                      llvm::CmpInst::ICMP_SLE, llvm::CmpInst::ICMP_SGT, llvm::CmpInst::ICMP_SGE};
        static const llvm::CmpInst::Predicate up[] = {llvm::CmpInst::ICMP_EQ, llvm::CmpInst::ICMP_NE, llvm::CmpInst::ICMP_ULT,
                                                      llvm::CmpInst::ICMP_ULE, llvm::CmpInst::ICMP_UGT, llvm::CmpInst::ICMP_UGE};
        return b_.CreateICmp((u ? up : sp)[static_cast<int>(e) - static_cast<int>(Ew::Eq)], x, y);
    }
    case Ew::And: return b_.CreateAnd(convert(a[0], in, DType::Bool), convert(a[1], in2, DType::Bool));
    case Ew::Or: return b_.CreateOr(convert(a[0], in, DType::Bool), convert(a[1], in2, DType::Bool));
    case Ew::Not: return b_.CreateNot(convert(a[0], in, DType::Bool));
    case Ew::IsFinite: {
        // Neither infinite nor NaN: |x| < inf (ordered). Integers and bools always are.
        if (!is_float(in)) return b_.getTrue();
        DType ct = in == DType::F64 ? DType::F64 : DType::F32;
        llvm::Value* x = fcall(llvm::Intrinsic::fabs, convert(a[0], in, ct));
        return b_.CreateFCmpOLT(x, llvm::ConstantFP::getInfinity(compute(ct)));
    }
    case Ew::Add:
    case Ew::Sub:
    case Ew::Mul:
    case Ew::Div:
    case Ew::Mod:
    case Ew::Max:
    case Ew::Min:
    case Ew::Neg:
    case Ew::Exp:
    case Ew::Log:
    case Ew::Sqrt:
    case Ew::Rsqrt:
    case Ew::Tanh:
    case Ew::Cos:
    case Ew::Sin:
    case Ew::Sigmoid:
    case Ew::Relu:
    case Ew::Gelu:
    case Ew::Softplus:
    case Ew::Abs: break;
    }
    // Arithmetic: in the result's compute type. Math functions of integers go through f64.
    bool unary_math = ir::ew_rule(e).domain == ir::EwDomain::Float;
    DType ct = rt;
    if (unary_math && !is_float(rt)) ct = DType::F64;
    llvm::Value* x = convert(a[0], in, ct);
    llvm::Value* y = a.size() > 1 ? convert(a[1], in2, ct) : nullptr;
    llvm::Value* r = nullptr;
    if (ct == DType::Bool) {
        // Booleans as 0/1 integers: + and max are `or`, * and min are `and`.
        switch (e) {
        case Ew::Add: case Ew::Max: case Ew::Sub: return b_.CreateOr(x, y);
        case Ew::Mul: case Ew::Min: return b_.CreateAnd(x, y);
        case Ew::Abs: case Ew::Relu: return x;
        default: ct = DType::I64; x = convert(x, DType::Bool, ct); y = y ? convert(y, DType::Bool, ct) : nullptr; break;
        }
    }
    if (is_float(ct)) {
        llvm::Type* ty = compute(ct);
        auto c = [&](double v) { return llvm::ConstantFP::get(ty, v); };
        switch (e) {
        case Ew::Add: r = b_.CreateFAdd(x, y); break;
        case Ew::Sub: r = b_.CreateFSub(x, y); break;
        case Ew::Mul: r = b_.CreateFMul(x, y); break;
        case Ew::Div: r = b_.CreateFDiv(x, y); break;
        case Ew::Mod: {
            // NumPy: the remainder takes the divisor's sign.
            llvm::Value* m = b_.CreateFRem(x, y);
            llvm::Value* fix = b_.CreateAnd(b_.CreateFCmpUNE(m, c(0)),
                                            b_.CreateXor(b_.CreateFCmpOLT(m, c(0)), b_.CreateFCmpOLT(y, c(0))));
            r = b_.CreateSelect(fix, b_.CreateFAdd(m, y), m);
            break;
        }
        case Ew::Max: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y); break;
        case Ew::Min: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y); break;
        case Ew::Neg: r = b_.CreateFNeg(x); break;
        case Ew::Exp: r = fcall(llvm::Intrinsic::exp, x); break;
        case Ew::Log: r = fcall(llvm::Intrinsic::log, x); break;
        case Ew::Sqrt: r = fcall(llvm::Intrinsic::sqrt, x); break;
        case Ew::Rsqrt: r = b_.CreateFDiv(c(1), fcall(llvm::Intrinsic::sqrt, x)); break;
        case Ew::Tanh: r = fcall(llvm::Intrinsic::tanh, x); break;
        case Ew::Cos: r = fcall(llvm::Intrinsic::cos, x); break;
        case Ew::Sin: r = fcall(llvm::Intrinsic::sin, x); break;
        case Ew::Sigmoid: r = b_.CreateFDiv(c(1), b_.CreateFAdd(c(1), fcall(llvm::Intrinsic::exp, b_.CreateFNeg(x)))); break;
        case Ew::Relu: r = b_.CreateSelect(b_.CreateFCmpOGT(x, c(0)), x, c(0)); break;
        case Ew::Gelu: {
            // The tanh approximation (as jax.nn.gelu's default):
            // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
            llvm::Value* x3 = b_.CreateFMul(x, b_.CreateFMul(x, x));
            llvm::Value* inner = b_.CreateFMul(c(0.7978845608028654), b_.CreateFAdd(x, b_.CreateFMul(c(0.044715), x3)));
            r = b_.CreateFMul(b_.CreateFMul(c(0.5), x), b_.CreateFAdd(c(1), fcall(llvm::Intrinsic::tanh, inner)));
            break;
        }
        case Ew::Softplus: {
            // log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
            llvm::Value* tail = fcall(llvm::Intrinsic::exp, b_.CreateFNeg(fcall(llvm::Intrinsic::fabs, x)));
            r = b_.CreateFAdd(b_.CreateSelect(b_.CreateFCmpOGT(x, c(0)), x, c(0)),
                              fcall(llvm::Intrinsic::log, b_.CreateFAdd(c(1), tail)));
            break;
        }
        case Ew::Abs: r = fcall(llvm::Intrinsic::fabs, x); break;
        case Ew::Eq:
        case Ew::Ne:
        case Ew::Lt:
        case Ew::Le:
        case Ew::Gt:
        case Ew::Ge:
        case Ew::And:
        case Ew::Or:
        case Ew::Not:
        case Ew::IsFinite:
        case Ew::Select:
        case Ew::Cast: internal_error(fmt::format("element-wise {} on floats", ir::ew_name(e)), __FILE__, __LINE__);
        }
        // A 16-bit float result is rounded after each op, as NumPy does.
        if (ct == rt && (rt == DType::F16 || rt == DType::BF16)) return convert(r, DType::F32, rt);
        return convert(r, ct, rt);
    }
    llvm::Type* ty = compute(ct);
    auto c = [&](int64_t v) { return llvm::ConstantInt::get(ty, static_cast<uint64_t>(v), true); };
    switch (e) {
    case Ew::Add: r = b_.CreateAdd(x, y); break;
    case Ew::Sub: r = b_.CreateSub(x, y); break;
    case Ew::Mul: r = b_.CreateMul(x, y); break;
    case Ew::Div:
    case Ew::Mod: {
        // NumPy floor division and modulo; a zero divisor gives 0 (never undefined),
        // and so does the one overflowing quotient (MIN / -1 wraps to MIN).
        llvm::Value* zero_div = b_.CreateICmpEQ(y, c(0));
        llvm::Value* minus_one = b_.CreateICmpEQ(y, c(-1));
        llvm::Value* safe = b_.CreateSelect(b_.CreateOr(zero_div, minus_one), c(1), y);
        llvm::Value* q = b_.CreateSDiv(x, safe);
        llvm::Value* m = b_.CreateSRem(x, safe);
        llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(m, c(0)), b_.CreateXor(b_.CreateICmpSLT(m, c(0)), b_.CreateICmpSLT(safe, c(0))));
        if (e == Ew::Div) {
            q = b_.CreateSelect(adjust, b_.CreateSub(q, c(1)), q);
            q = b_.CreateSelect(minus_one, b_.CreateSub(c(0), x), q);
            r = b_.CreateSelect(zero_div, c(0), q);
        } else {
            m = b_.CreateSelect(adjust, b_.CreateAdd(m, safe), m);
            r = b_.CreateSelect(b_.CreateOr(zero_div, minus_one), c(0), m);
        }
        break;
    }
    case Ew::Max: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y); break;
    case Ew::Min: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y); break;
    case Ew::Neg: r = b_.CreateSub(c(0), x); break;
    case Ew::Relu: r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, c(0)); break;
    case Ew::Abs: r = b_.CreateSelect(b_.CreateICmpSLT(x, c(0)), b_.CreateSub(c(0), x), x); break;
    case Ew::Eq:
    case Ew::Ne:
    case Ew::Lt:
    case Ew::Le:
    case Ew::Gt:
    case Ew::Ge:
    case Ew::And:
    case Ew::Or:
    case Ew::Not:
    case Ew::Exp:
    case Ew::Log:
    case Ew::Sqrt:
    case Ew::Rsqrt:
    case Ew::Tanh:
    case Ew::Cos:
    case Ew::Sin:
    case Ew::Sigmoid:
    case Ew::Gelu:
    case Ew::Softplus:
    case Ew::IsFinite:
    case Ew::Select:
    case Ew::Cast: internal_error(fmt::format("element-wise {} on integers", ir::ew_name(e)), __FILE__, __LINE__);
    }
    return convert(r, ct, rt);
}

/// The names of the element-wise functions of a fused tree: "mul,add,relu".
void Generator::fused_names(const Op& op, std::string& names) {
    for (ValueId v : op.operands) {
        if (inlined_[v]) fused_names(*def_[v], names);
    }
    names += (names.empty() ? "" : ",") + std::string(op.kind == OpKind::Broadcast ? "broadcast" : ir::ew_name(op.ew));
}

void Generator::fused(const Op& op) {
    std::string names;
    fused_names(op, names);
    traced("elementwise " + names, product(lshape(op.results[0])), [&] { fused_loop(op, "elementwise " + names); });
}

void Generator::fused_loop(const Op& op, const std::string& what) {
    ValueId r = op.results[0];
    val_[r] = alloc(r);
    const auto& out = lshape(r);
    DType t = dt(r);
    llvm::Value* base = val_[r];
    offload(what, [&](bool, const Nest& nest) {
        std::map<ValueId, Leaf> leaves;
        bool flat = true;
        collect_leaves(op, out, leaves, flat);
        if (flat) {
            nest({product(out)}, [&](const std::vector<llvm::Value*>& i) { store_elem(t, base, i[0], evaluate(op, leaves, {}, i[0])); });
            return;
        }
        auto strides = strides_of(out);
        nest(out, [&](const std::vector<llvm::Value*>& idx) {
            llvm::Value* at = i64c(0);
            for (size_t k = 0; k < idx.size(); ++k) at = b_.CreateAdd(at, b_.CreateMul(idx[k], i64c(strides[k])));
            store_elem(t, base, at, evaluate(op, leaves, idx, nullptr));
        });
    });
}

}  // namespace meshc::codegen::lower

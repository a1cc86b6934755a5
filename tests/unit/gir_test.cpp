// Unit tests for GIR: the printer (--emit=gir), the verifier and `meshc explain`, on
// modules built by hand — chiefly the MLP of docs/language.md, "A complete example", with the figures
// of its collective worked out from docs/language.md, "Sharding rules" and "Cost model".
#include <catch2/catch.hpp>

#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/gir.h"
#include "ir/gir_parse.h"
#include "sema/explain.h"

using namespace meshc;
using namespace meshc::ir;

namespace {

constexpr const char* kSource =
    "// Megatron-style tensor-parallel MLP on a 2x4 mesh.\n"    // 1
    "mesh Pod = [data: 2, model: 4];\n"                         // 2
    "\n"                                                        // 3
    "fn mlp(x:  Tensor f32 [B, D] on Pod with {B: data},\n"     // 4
    "       w1: Tensor f32 [D, H] on Pod with {H: model},\n"    // 5
    "       w2: Tensor f32 [H, D] on Pod with {H: model})\n"    // 6
    "    -> Tensor f32 [B, D] on Pod with {B: data}\n"          // 7
    "{\n"                                                       // 8
    "    let h = relu(x @ w1);\n"                               // 9
    "    h @ w2\n"                                              // 10
    "}\n"                                                       // 11
    "\n"                                                        // 12
    "fn main() {\n"                                             // 13
    "    let x  = random_normal(1, [8, 16]);\n"                 // 14
    "    let w1 = random_normal(2, [16, 32]) * 0.1;\n"          // 15
    "    let w2 = random_normal(3, [32, 16]) * 0.1;\n"          // 16
    "    let y = mlp(x, w1, w2);\n"                             // 17
    "    print(\"sum\", sum(y));\n"                             // 18
    "    save(\"y.npy\", y);\n"                                 // 19
    "}\n";                                                      // 20

const AxisSet kData = ir::axis_bit(0);
const AxisSet kModel = ir::axis_bit(1);
constexpr uint8_t D = 0;  // axis index of data
constexpr uint8_t M = 1;  // axis index of model

Mesh pod() {
    Mesh mesh;
    mesh.name = "Pod";
    mesh.axes = {ir::MeshAxis{"data", 2}, ir::MeshAxis{"model", 4}};
    return mesh;
}

TensorType tensor(std::vector<int64_t> shape, std::vector<std::vector<uint8_t>> dims, AxisSet partial = 0,
                  ast::DType dtype = ast::DType::F32) {
    TensorType t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.mesh = 0;
    for (const auto& d : dims) t.layout.dims.emplace_back(d.data(), d.data() + d.size());
    t.layout.partial = partial;
    return t;
}

TensorType scalar(ast::DType dtype = ast::DType::F32) {
    TensorType t;
    t.dtype = dtype;
    return t;
}

struct Fixture {
    SourceManager sm;
    FileId file;
    Module module;

    Fixture() : file(sm.add_file("mlp.msh", kSource)) { module.meshes.push_back(pod()); }

    /// The span of the `nth` occurrence of `needle` in the source.
    Span span(std::string_view needle, int nth = 0) const {
        std::string_view text = sm.text(file);
        size_t at = text.find(needle);
        for (int i = 0; i < nth; ++i) at = text.find(needle, at + 1);
        REQUIRE(at != std::string_view::npos);
        return Span{file, static_cast<uint32_t>(at), static_cast<uint32_t>(at + needle.size())};
    }

    Op op(OpKind kind, std::vector<ValueId> results, std::vector<ValueId> operands, Span where) const {
        Op o;
        o.kind = kind;
        o.results = std::move(results);
        o.operands = std::move(operands);
        o.span = where;
        return o;
    }

    std::string print() const {
        std::ostringstream out;
        print_module(out, sm, module);
        return out.str();
    }
    std::string json(std::string_view only_fn = {}) const {
        std::ostringstream out;
        sema::explain_json(out, sm, module, only_fn);
        return out.str();
    }
    std::string text(std::string_view only_fn = {}) const {
        std::ostringstream out;
        sema::explain_text(out, sm, module, only_fn);
        return out.str();
    }
};

/// The MLP of docs/language.md, "A complete example": `mlp` (function 0) with the all_reduce the checker inserts at its
/// return (or, with `scatter`, a reduce_scatter to {0: data, 1: model}), and `main`
/// (function 1) calling it.
Fixture mlp_module(bool scatter = false) {
    Fixture fx;
    Function f;
    f.name = "mlp";
    f.span = fx.span("fn mlp");
    ValueId x = f.add_value(tensor({8, 16}, {{D}, {}}), "x");
    ValueId w1 = f.add_value(tensor({16, 32}, {{}, {M}}), "w1");
    ValueId w2 = f.add_value(tensor({32, 16}, {{M}, {}}), "w2");
    f.params = {x, w1, w2};
    ValueId xw = f.add_value(tensor({8, 32}, {{D}, {M}}));
    Op c1 = fx.op(OpKind::Contract, {xw}, {x, w1}, fx.span("x @ w1"));
    c1.text = "bd,dh->bh";
    f.ops.push_back(c1);
    ValueId h = f.add_value(tensor({8, 32}, {{D}, {M}}), "h");
    Op relu = fx.op(OpKind::Elementwise, {h}, {xw}, fx.span("relu(x @ w1)"));
    relu.ew = Ew::Relu;
    f.ops.push_back(relu);
    ValueId hw = f.add_value(tensor({8, 16}, {{D}, {}}, kModel));
    Op c2 = fx.op(OpKind::Contract, {hw}, {h, w2}, fx.span("h @ w2"));
    c2.text = "bh,hd->bd";
    f.ops.push_back(c2);
    ValueId y = f.add_value(scatter ? tensor({8, 16}, {{D}, {M}}) : tensor({8, 16}, {{D}, {}}));
    Op coerce = fx.op(scatter ? OpKind::ReduceScatter : OpKind::AllReduce, {y}, {hw}, fx.span("h @ w2"));
    coerce.axes = kModel;
    coerce.dim = scatter ? 1 : -1;
    coerce.inserted = true;
    coerce.reason = "the result must have mlp's return type";
    f.ops.push_back(coerce);
    f.results = {y};
    fx.module.functions.push_back(std::move(f));

    Function m;
    m.name = "main";
    m.span = fx.span("fn main");
    auto create = [&](int64_t seed, TensorType type, const char* name, const char* call) {
        ValueId v = m.add_value(std::move(type), name);
        Op o = fx.op(OpKind::Create, {v}, {}, fx.span(call));
        o.create = CreateKind::RandomNormal;
        o.seed = seed;
        m.ops.push_back(o);
        return v;
    };
    auto scale = [&](ValueId v, const char* name, int nth) {
        ValueId c = m.add_value(scalar());
        Op k = fx.op(OpKind::Constant, {c}, {}, fx.span("0.1", nth));
        k.number = 0.1;
        m.ops.push_back(k);
        ValueId r = m.add_value(m.types[v], name);
        Op mul = fx.op(OpKind::Elementwise, {r}, {v, c}, fx.span("* 0.1", nth));
        mul.ew = Ew::Mul;
        m.ops.push_back(mul);
        return r;
    };
    ValueId mx = create(1, tensor({8, 16}, {{D}, {}}), "x", "random_normal(1");
    ValueId mw1 = scale(create(2, tensor({16, 32}, {{}, {M}}), "", "random_normal(2"), "w1", 0);
    ValueId mw2 = scale(create(3, tensor({32, 16}, {{M}, {}}), "", "random_normal(3"), "w2", 1);
    ValueId my = m.add_value(fx.module.functions[0].types[y], "y");
    Op call = fx.op(OpKind::Call, {my}, {mx, mw1, mw2}, fx.span("mlp(x, w1, w2)"));
    call.callee = 0;
    m.ops.push_back(call);
    AxisSet summed = scatter ? kData | kModel : kData;  // the axes splitting y
    ValueId s = m.add_value(tensor({}, {}, summed));
    Op sum = fx.op(OpKind::Reduce, {s}, {my}, fx.span("sum(y)"));
    sum.reduce = ReduceKind::Sum;
    sum.ints = {0, 1};
    m.ops.push_back(sum);
    ValueId g = m.add_value(tensor({}, {}));
    Op ar = fx.op(OpKind::AllReduce, {g}, {s}, fx.span("sum(y)"));
    ar.axes = summed;
    ar.inserted = true;
    ar.reason = "print shows the global value";
    m.ops.push_back(ar);
    Op print = fx.op(OpKind::Print, {}, {g}, fx.span("print("));
    print.text = "sum";
    m.ops.push_back(print);
    Op save = fx.op(OpKind::Save, {}, {my}, fx.span("save("));
    save.text = "y.npy";
    m.ops.push_back(save);
    fx.module.functions.push_back(std::move(m));
    return fx;
}

/// One function `f(%0: from) -> to` whose body is a single coercion op.
Fixture coercion_module(OpKind kind, TensorType from, TensorType to, AxisSet axes, int32_t dim = -1,
                        int32_t dim2 = -1) {
    Fixture fx;
    Function f;
    f.name = "f";
    ValueId x = f.add_value(std::move(from), "x");
    ValueId y = f.add_value(std::move(to), "y");
    f.params = {x};
    Op o = fx.op(kind, {y}, {x}, fx.span("h @ w2"));
    o.axes = axes;
    o.dim = dim;
    o.dim2 = dim2;
    f.ops.push_back(o);
    f.results = {y};
    fx.module.functions.push_back(std::move(f));
    return fx;
}

bool mentions(const std::vector<std::string>& problems, std::string_view text) {
    for (const std::string& p : problems) {
        if (p.find(text) != std::string::npos) return true;
    }
    return false;
}

std::string joined(const std::vector<std::string>& problems) {
    std::string out;
    for (const std::string& p : problems) out += p + "\n";
    return out;
}

}  // namespace

// ---------------------------------------------------------------- types

TEST_CASE("element sizes, element counts and per-device bytes", "[gir]") {
    CHECK(dtype_bytes(ast::DType::Bool) == 1);
    CHECK(dtype_bytes(ast::DType::I32) == 4);
    CHECK(dtype_bytes(ast::DType::I64) == 8);
    CHECK(dtype_bytes(ast::DType::F16) == 2);
    CHECK(dtype_bytes(ast::DType::BF16) == 2);
    CHECK(dtype_bytes(ast::DType::F32) == 4);
    CHECK(dtype_bytes(ast::DType::F64) == 8);
    Mesh mesh = pod();
    TensorType x = tensor({8, 16}, {{D}, {}});
    CHECK(x.elements() == 128);
    CHECK(x.local_bytes(&mesh) == 4 * 16 * 4);
    CHECK(x.local_bytes(nullptr) == 8 * 16 * 4);
    TensorType p = tensor({8, 16}, {{D}, {}}, kModel);
    CHECK(p.local_bytes(&mesh) == 256);  // partial does not change the size
    TensorType both = tensor({8, 32}, {{}, {D, M}}, 0, ast::DType::F16);
    CHECK(both.local_bytes(&mesh) == 8 * 4 * 2);
    CHECK(scalar(ast::DType::F64).elements() == 1);
    CHECK(scalar(ast::DType::F64).local_bytes(nullptr) == 8);
}

TEST_CASE("types print in the type syntax, keyed by position", "[gir]") {
    Module module;
    module.meshes.push_back(pod());
    CHECK(type_to_string(module, scalar()) == "f32");
    CHECK(type_to_string(module, scalar(ast::DType::I64)) == "i64");
    TensorType unplaced;
    unplaced.shape = {8, 16};
    unplaced.layout = ir::Layout::replicated(2);
    CHECK(type_to_string(module, unplaced) == "Tensor f32 [8, 16]");
    CHECK(type_to_string(module, tensor({8, 16}, {{}, {}})) == "Tensor f32 [8, 16] on Pod");
    CHECK(type_to_string(module, tensor({8, 16}, {{D}, {}}, kModel)) ==
          "Tensor f32 [8, 16] on Pod with {0: data} partial {model}");
    CHECK(type_to_string(module, tensor({}, {}, kData | kModel, ast::DType::BF16)) ==
          "Tensor bf16 [] on Pod partial {data, model}");
    CHECK(type_to_string(module, tensor({8, 16}, {{}, {M, D}})) == "Tensor f32 [8, 16] on Pod with {1: (model, data)}");
    // Broken types still print (the verifier's messages show them).
    CHECK(type_to_string(module, tensor({8}, {{7}})) == "Tensor f32 [8] on Pod with {0: #7}");
    TensorType elsewhere = tensor({8}, {{}});
    elsewhere.mesh = 3;
    CHECK(type_to_string(module, elsewhere) == "Tensor f32 [8] on <mesh #3>");
}

// ---------------------------------------------------------------- printer

TEST_CASE("the complete-example MLP of docs/language.md prints as GIR", "[gir][print]") {
    Fixture fx = mlp_module();
    std::string text = fx.print();
    const char* mlp =
        "mesh Pod = [data: 2, model: 4]\n"
        "\n"
        "func @mlp(%0 /*x*/: Tensor f32 [8, 16] on Pod with {0: data}, "
        "%1 /*w1*/: Tensor f32 [16, 32] on Pod with {1: model}, "
        "%2 /*w2*/: Tensor f32 [32, 16] on Pod with {0: model}) -> (Tensor f32 [8, 16] on Pod with {0: data}) {  @mlp.msh:4:1+6\n"
        "  %3 = contract \"bd,dh->bh\" %0, %1 : Tensor f32 [8, 32] on Pod with {0: data, 1: model}  @9:18+6\n"
        "  %4 /*h*/ = elementwise relu %3 : Tensor f32 [8, 32] on Pod with {0: data, 1: model}  @9:13+12\n"
        "  %5 = contract \"bh,hd->bd\" %4, %2 : Tensor f32 [8, 16] on Pod with {0: data} partial {model}  @10:5+6\n"
        "  %6 = all_reduce sum over (model) %5 : Tensor f32 [8, 16] on Pod with {0: data}  @10:5+6"
        "  // inserted: the result must have mlp's return type\n"
        "  return %6\n"
        "}\n";
    INFO(text);
    CHECK(text.rfind(mlp, 0) == 0);
    const char* main =
        "\n"
        "func @main() {  @mlp.msh:13:1+7\n"
        "  %0 /*x*/ = create random_normal seed 1 : Tensor f32 [8, 16] on Pod with {0: data}  @14:14+15\n"
        "  %1 = create random_normal seed 2 : Tensor f32 [16, 32] on Pod with {1: model}  @15:14+15\n"
        "  %2 = constant 0.1 : f32  @15:43+3\n"
        "  %3 /*w1*/ = elementwise mul %1, %2 : Tensor f32 [16, 32] on Pod with {1: model}  @15:41+5\n"
        "  %4 = create random_normal seed 3 : Tensor f32 [32, 16] on Pod with {0: model}  @16:14+15\n"
        "  %5 = constant 0.1 : f32  @16:43+3\n"
        "  %6 /*w2*/ = elementwise mul %4, %5 : Tensor f32 [32, 16] on Pod with {0: model}  @16:41+5\n"
        "  %7 /*y*/ = call @mlp(%0, %3, %6) : Tensor f32 [8, 16] on Pod with {0: data}  @17:13+14\n"
        "  %8 = reduce sum dims [0, 1] %7 : Tensor f32 [] on Pod partial {data}  @18:18+6\n"
        "  %9 = all_reduce sum over (data) %8 : Tensor f32 [] on Pod  @18:18+6  // inserted: print shows the global value\n"
        "  print \"sum\" %9  @18:5+6\n"
        "  save \"y.npy\" %7  @19:5+5\n"
        "}\n";
    CHECK(text.substr(std::strlen(mlp)) == main);
}

TEST_CASE("the printer shows instances, multi-result ops, collectives' attributes and links", "[gir][print]") {
    Fixture fx;
    fx.module.meshes[0].axes[1].latency = 1e-6;
    fx.module.meshes[0].axes[1].bandwidth = 3e11;
    Function pair;
    pair.name = "pair";
    pair.instance = {{"D", 16}, {"B", 8}};
    ValueId a = pair.add_value(tensor({8, 16}, {{}, {M}}), "a");
    pair.params = {a};
    ValueId n = pair.add_value(tensor({8, 16}, {{}, {M}}));
    Op neg = fx.op(OpKind::Elementwise, {n}, {a}, Span{});
    neg.ew = Ew::Neg;
    pair.ops.push_back(neg);
    ValueId g = pair.add_value(tensor({8, 16}, {{}, {}}));
    Op gather = fx.op(OpKind::AllGather, {g}, {n}, Span{});
    gather.axes = kModel;
    gather.dim = 1;
    pair.ops.push_back(gather);
    ValueId t = pair.add_value(tensor({8, 16}, {{M}, {}}));
    Op a2a = fx.op(OpKind::AllToAll, {t}, {a}, Span{});
    a2a.axes = kModel;
    a2a.dim = 1;
    a2a.dim2 = 0;
    a2a.inserted = true;
    pair.ops.push_back(a2a);
    ValueId p = pair.add_value(tensor({8, 16}, {{}, {}}, kModel));
    Op mp = fx.op(OpKind::MakePartial, {p}, {t}, Span{});
    mp.axes = kModel;
    pair.ops.push_back(mp);
    ValueId z = pair.add_value(tensor({8, 16}, {{D}, {}}));
    Op full = fx.op(OpKind::Create, {z}, {}, Span{});
    full.create = CreateKind::Full;
    full.number = 2.5;
    pair.ops.push_back(full);
    ValueId l = pair.add_value(tensor({8, 16}, {{}, {}}));
    Op load = fx.op(OpKind::Load, {l}, {}, Span{});
    load.text = "dir/\"q\".npy";
    pair.ops.push_back(load);
    ValueId sl = pair.add_value(tensor({8, 16}, {{D}, {}}));
    Op slice = fx.op(OpKind::LocalSlice, {sl}, {l}, Span{});
    slice.axes = kData;
    slice.dim = 0;
    pair.ops.push_back(slice);
    pair.results = {n, g};
    fx.module.functions.push_back(pair);

    Function caller;
    caller.name = "caller";
    ValueId c = caller.add_value(tensor({8, 16}, {{}, {M}}), "c");
    caller.params = {c};
    ValueId r1 = caller.add_value(tensor({8, 16}, {{}, {M}}), "u");
    ValueId r2 = caller.add_value(tensor({8, 16}, {{}, {}}), "v");
    Op call = fx.op(OpKind::Call, {r1, r2}, {c}, fx.span("mlp(x, w1, w2)"));
    call.callee = 0;
    caller.ops.push_back(call);
    fx.module.functions.push_back(caller);

    std::string text = fx.print();
    INFO(text);
    CHECK(text.find("mesh Pod = [data: 2, model: 4 {latency: 1e-06, bandwidth: 3e+11}]\n") == 0);
    CHECK(text.find("func @pair[B = 8, D = 16](%0 /*a*/: Tensor f32 [8, 16] on Pod with {1: model}) -> "
                    "(Tensor f32 [8, 16] on Pod with {1: model}, Tensor f32 [8, 16] on Pod) {\n") !=
          std::string::npos);
    CHECK(text.find("  %1 = elementwise neg %0 : Tensor f32 [8, 16] on Pod with {1: model}\n") != std::string::npos);
    CHECK(text.find("  %2 = all_gather over (model) dim 1 %1 : Tensor f32 [8, 16] on Pod\n") != std::string::npos);
    CHECK(text.find("  %3 = all_to_all over (model) dim 1 -> 0 %0 : Tensor f32 [8, 16] on Pod with {0: model}"
                    "  // inserted\n") != std::string::npos);
    CHECK(text.find("  %4 = make_partial over (model) %3 : Tensor f32 [8, 16] on Pod partial {model}\n") !=
          std::string::npos);
    CHECK(text.find("  %5 = create full 2.5 : ") != std::string::npos);
    CHECK(text.find("  %6 = load \"dir/\\\"q\\\".npy\" : Tensor f32 [8, 16] on Pod\n") != std::string::npos);
    CHECK(text.find("  %7 = local_slice over (data) dim 0 %6 : Tensor f32 [8, 16] on Pod with {0: data}\n") !=
          std::string::npos);
    CHECK(text.find("  return %1, %2\n") != std::string::npos);
    CHECK(text.find("  %1 /*u*/, %2 /*v*/ = call @pair[B = 8, D = 16](%0) : (Tensor f32 [8, 16] on Pod with "
                    "{1: model}, Tensor f32 [8, 16] on Pod)  @17:13+14\n") != std::string::npos);
    CHECK(verify_module(fx.module).empty());
}

// ---------------------------------------------------------------- verifier

TEST_CASE("the verifier accepts the MLP and its reduce_scatter variant", "[gir][verify]") {
    Fixture fx = mlp_module();
    auto problems = verify_module(fx.module);
    INFO(joined(problems));
    CHECK(problems.empty());
    Fixture rs = mlp_module(true);
    auto rs_problems = verify_module(rs.module);
    INFO(joined(rs_problems));
    CHECK(rs_problems.empty());
}

TEST_CASE("the verifier rejects broken MLPs", "[gir][verify]") {
    struct Case {
        const char* what;
        std::function<void(Module&)> breakit;
        const char* expected;
        bool scatter = false;
    };
    auto mlp = [](Module& m) -> Function& { return m.functions[0]; };
    auto main_fn = [](Module& m) -> Function& { return m.functions[1]; };
    std::vector<Case> cases = {
        {"operand out of range", [&](Module& m) { mlp(m).ops[0].operands[1] = 99; },
         "@mlp: op 0 (contract): operand %99 has no type"},
        {"use before definition", [&](Module& m) { mlp(m).ops[0].operands[0] = 4; },
         "@mlp: op 0 (contract): operand %4 (h) is used before it is defined"},
        {"result defined twice", [&](Module& m) { mlp(m).ops[1].results[0] = 3; }, "%3 is defined more than once"},
        {"parameter defined twice", [&](Module& m) { mlp(m).params[2] = 0; }, "%0 (x) is defined more than once"},
        {"layout rank", [&](Module& m) { mlp(m).types[3].layout.dims.pop_back(); },
         "@mlp: %3: layout has 1 dims for a tensor of rank 2"},
        {"unknown axis", [&](Module& m) { mlp(m).types[0].layout.dims[0] = {7}; },
         "%0 (x): axis #7 is not an axis of mesh Pod"},
        {"unknown partial axis", [&](Module& m) { mlp(m).types[5].layout.partial |= ir::axis_bit(9); },
         "axis #9 is not an axis of mesh Pod"},
        {"axis split and partial", [&](Module& m) { mlp(m).types[5].layout.partial |= kData; },
         "%5: axis data is used more than once"},
        {"axis split twice", [&](Module& m) { mlp(m).types[3].layout.dims[1] = {D}; },
         "%3: axis data is used more than once"},
        {"indivisible split", [&](Module& m) { mlp(m).types[1].shape[1] = 30; },
         "%1 (w1): dim 1 of size 30 is split into 4 pieces, which does not divide it"},
        {"mesh index", [&](Module& m) { mlp(m).types[2].mesh = 3; }, "%2 (w2): mesh index 3 out of range"},
        {"split without a mesh", [&](Module& m) { mlp(m).types[2].mesh = -1; }, "split or partial without a mesh"},
        {"value names", [&](Module& m) { mlp(m).names.pop_back(); }, "has 6 value names for 7 values"},
        {"all_reduce of a non-partial value",
         [&](Module& m) { mlp(m).types[5].layout.partial = 0; },
         "op 3 (all_reduce): operand %5 is not partial over {model}"},
        {"all_reduce result still partial", [&](Module& m) { mlp(m).types[6].layout.partial = kModel; },
         "op 3 (all_reduce): result %6 should be partial over {}"},
        {"all_reduce changes a split", [&](Module& m) { mlp(m).types[6].layout.dims[1] = {M}; },
         "op 3 (all_reduce): result %6 is split as Tensor f32 [8, 16] on Pod with {0: data, 1: model}, but the rule gives"},
        {"collective changes the shape",
         [&](Module& m) {
             mlp(m).types[6].shape = {8, 8};
         },
         "result %6 has shape [8, 8], but the rule gives [8, 16]"},
        {"collective without axes", [&](Module& m) { mlp(m).ops[3].axes = 0; }, "is empty or names axes"},
        {"reduce_scatter without the dim gaining the axes",
         [&](Module& m) { mlp(m).types[6].layout.dims[1] = {}; },
         "op 3 (reduce_scatter): result %6 is split as Tensor f32 [8, 16] on Pod with {0: data}, but the rule gives Tensor f32 [8, 16] on Pod with {0: data, 1: model}", true},
        {"reduce_scatter dim out of range", [&](Module& m) { mlp(m).ops[3].dim = 5; },
         "op 3 (reduce_scatter): dim 5 is not a dim", true},
        {"contract result not partial", [&](Module& m) { mlp(m).types[5].layout.partial = 0; },
         "op 2 (contract): result %5 should be partial over {model}"},
        {"contract index sizes", [&](Module& m) { mlp(m).ops[0].text = "bd,dh->bd"; },
         "op 0 (contract): result %3 has shape [8, 32], but the rule gives [8, 16]"},
        {"contract splits disagree", [&](Module& m) { mlp(m).types[4].layout.dims[1] = {}; },
         "index 'h' is split differently"},
        {"contract spec arity", [&](Module& m) { mlp(m).ops[0].text = "bd->bd"; }, "has 1 inputs for 2 operands"},
        {"elementwise arity", [&](Module& m) { mlp(m).ops[1].operands.push_back(0); }, "has 2 operands, expected 1"},
        {"elementwise shape", [&](Module& m) { mlp(m).types[4].shape = {8, 64}; },
         "op 1 (elementwise): result %4 (h) has shape [8, 64], but the rule gives [8, 32]"},
        {"relu of a partial value", [&](Module& m) { mlp(m).types[3].layout.partial = kModel; },
         "operands of relu with these pending sums need a reduction first"},
        {"call argument type", [&](Module& m) { main_fn(m).types[0].layout.dims[0] = {}; },
         "@main: op 7 (call): argument 0 %0 (x) has type Tensor f32 [8, 16] on Pod, but @mlp expects "
         "Tensor f32 [8, 16] on Pod with {0: data}"},
        {"call result type", [&](Module& m) { main_fn(m).types[7].layout.dims[0] = {}; }, "result 0 %7 (y) has type"},
        {"call arity", [&](Module& m) { main_fn(m).ops[7].operands.pop_back(); }, "@mlp takes 3 arguments"},
        {"callee index", [&](Module& m) { main_fn(m).ops[7].callee = 5; }, "callee #5 is not a function"},
        {"reduce partial", [&](Module& m) { main_fn(m).types[8].layout.partial = 0; },
         "op 8 (reduce): result %8 should be partial over {data}"},
        {"reduce dims", [&](Module& m) { main_fn(m).ops[8].ints = {0, 2}; }, "invalid reduced dims [0, 2]"},
        {"result never defined", [&](Module& m) { mlp(m).results = {42}; }, "@mlp: result %42 is never defined"},
        {"result of a later op", [&](Module& m) { mlp(m).ops.pop_back(); }, "@mlp: result %6 is never defined"},
    };
    for (const Case& c : cases) {
        Fixture fx = mlp_module(c.scatter);
        c.breakit(fx.module);
        auto problems = verify_module(fx.module);
        INFO(c.what << "\n" << joined(problems));
        CHECK(mentions(problems, c.expected));
        // The printer copes with whatever the verifier rejects.
        CHECK(!fx.print().empty());
    }
}

TEST_CASE("the verifier checks each coercion against the coercion table of docs/language.md", "[gir][verify]") {
    struct Case {
        const char* what;
        OpKind kind;
        TensorType from, to;
        AxisSet axes;
        int32_t dim, dim2;
        const char* expected;  // nullptr: valid
    };
    std::vector<Case> cases = {
        {"all_gather of the minor-most axis", OpKind::AllGather, tensor({8, 32}, {{}, {D, M}}),
         tensor({8, 32}, {{}, {D}}), kModel, 1, -1, nullptr},
        {"all_gather of two axes", OpKind::AllGather, tensor({8, 32}, {{}, {D, M}}), tensor({8, 32}, {{}, {}}),
         kData | kModel, 1, -1, nullptr},
        {"all_gather of the major axis", OpKind::AllGather, tensor({8, 32}, {{}, {D, M}}),
         tensor({8, 32}, {{}, {M}}), kData, 1, -1, "dim 1 must lose {data}, its minor-most axes"},
        {"all_gather keeps pending sums", OpKind::AllGather, tensor({8, 32}, {{}, {M}}, kData),
         tensor({8, 32}, {{}, {}}), kModel, 1, -1, "result %1 (y) should be partial over {data}"},
        {"all_to_all", OpKind::AllToAll, tensor({8, 16}, {{M}, {}}), tensor({8, 16}, {{}, {M}}), kModel, 0, 1,
         nullptr},
        {"all_to_all to the same dim", OpKind::AllToAll, tensor({8, 16}, {{M}, {}}), tensor({8, 16}, {{M}, {}}),
         kModel, 0, 0, "from and to are the same dim 0"},
        {"all_to_all that does not leave", OpKind::AllToAll, tensor({8, 16}, {{M}, {}}),
         tensor({8, 16}, {{M}, {M}}), kModel, 0, 1, "but the rule gives Tensor f32 [8, 16] on Pod with {1: model}"},
        {"all_to_all that does not enter", OpKind::AllToAll, tensor({8, 16}, {{M}, {}}), tensor({8, 16}, {{}, {}}),
         kModel, 0, 1, "result %1 (y) is split as Tensor f32 [8, 16] on Pod, but the rule gives Tensor f32 [8, 16] on Pod with {1: model}"},
        {"local_slice", OpKind::LocalSlice, tensor({8, 16}, {{D}, {}}), tensor({8, 16}, {{D}, {M}}), kModel, 1, -1,
         nullptr},
        {"local_slice as minor-most", OpKind::LocalSlice, tensor({8, 16}, {{}, {D}}), tensor({8, 16}, {{}, {D, M}}),
         kModel, 1, -1, nullptr},
        {"local_slice as major", OpKind::LocalSlice, tensor({8, 16}, {{}, {D}}), tensor({8, 16}, {{}, {M, D}}),
         kModel, 1, -1, "but the rule gives Tensor f32 [8, 16] on Pod with {1: (data, model)}"},
        {"local_slice of a split axis", OpKind::LocalSlice, tensor({8, 16}, {{M}, {}}), tensor({8, 16}, {{M}, {M}}),
         kModel, 1, -1, "is not replicated over {model}"},
        {"local_slice of a partial axis", OpKind::LocalSlice, tensor({8, 16}, {{}, {}}, kModel),
         tensor({8, 16}, {{}, {M}}, kModel), kModel, 1, -1, "is not replicated over {model}"},
        {"make_partial of a replicated value", OpKind::MakePartial, tensor({8, 16}, {{D}, {}}),
         tensor({8, 16}, {{D}, {}}, kModel), kModel, -1, -1, nullptr},
        {"make_partial of a split value", OpKind::MakePartial, tensor({8, 16}, {{M}, {}}),
         tensor({8, 16}, {{}, {}}, kModel), kModel, -1, -1, nullptr},
        {"make_partial that is not partial", OpKind::MakePartial, tensor({8, 16}, {{}, {}}),
         tensor({8, 16}, {{}, {}}), kModel, -1, -1, "result %1 (y) should be partial over {model}"},
        {"make_partial keeping the split", OpKind::MakePartial, tensor({8, 16}, {{M}, {}}),
         tensor({8, 16}, {{M}, {}}, kModel), kModel, -1, -1, "axis model is used more than once"},
        {"make_partial of a partial value", OpKind::MakePartial, tensor({8, 16}, {{}, {}}, kModel),
         tensor({8, 16}, {{}, {}}, kModel), kModel, -1, -1, "is already partial over {model}"},
        {"all_reduce over two axes", OpKind::AllReduce, tensor({8, 16}, {{}, {}}, kData | kModel),
         tensor({8, 16}, {{}, {}}), kData | kModel, -1, -1, nullptr},
        {"all_reduce of one of two pending sums", OpKind::AllReduce, tensor({8, 16}, {{}, {}}, kData | kModel),
         tensor({8, 16}, {{}, {}}, kData), kModel, -1, -1, nullptr},
        {"collective across meshes", OpKind::AllReduce, tensor({8, 16}, {{}, {}}, kModel), [] {
             TensorType t = tensor({8, 16}, {{}, {}});
             t.mesh = -1;
             return t;
         }(), kModel, -1, -1, "result %1 (y) is on mesh #-1, but the rule puts it on mesh #0"},
    };
    for (const Case& c : cases) {
        Fixture fx = coercion_module(c.kind, c.from, c.to, c.axes, c.dim, c.dim2);
        auto problems = verify_module(fx.module);
        INFO(c.what << "\n" << joined(problems));
        if (c.expected) {
            CHECK(mentions(problems, c.expected));
        } else {
            CHECK(problems.empty());
        }
    }
}

// ---------------------------------------------------------------- explain

TEST_CASE("explain --format=json: the MLP has exactly one all_reduce of 256 bytes", "[explain]") {
    Fixture fx = mlp_module();
    std::string out = fx.json("mlp");
    INFO(out);
    auto doc = nlohmann::ordered_json::parse(out);
    REQUIRE(doc.size() == 2);
    REQUIRE(doc["functions"].size() == 1);
    // One run of main: every instance's collectives times its runs.
    auto every = nlohmann::ordered_json::parse(fx.json(""));
    double collectives = 0, bytes = 0;
    for (const auto& f : every["functions"]) {
        collectives += f["runs"].get<double>() * f["per_run"]["collectives"].get<double>();
        bytes += f["runs"].get<double>() * f["per_run"]["sent_bytes"].get<double>();
    }
    CHECK(collectives == 2);
    CHECK(doc["program"]["collectives"].get<double>() == collectives);
    CHECK(doc["program"]["sent_bytes"].get<double>() == bytes);
    const auto& fn = doc["functions"][0];
    std::vector<std::string> keys;
    for (const auto& item : fn.items()) keys.push_back(item.key());
    CHECK(keys == std::vector<std::string>{"name", "instance", "collectives", "total_cost_s", "label", "mesh_instance",
                                           "free", "layouts", "derived", "runs", "runs_exact", "per_run", "peak_bytes",
                                           "cost_s", "compute_s", "communication_s", "memory"});
    // Compute plus communication; the communication is the one all_reduce.
    CHECK(fn["communication_s"].get<double>() == Approx(6 * 5e-6 + 384 / 1e11));
    CHECK(fn["cost_s"].get<double>() == Approx(fn["compute_s"].get<double>() + fn["communication_s"].get<double>()));
    CHECK(fn["compute_s"].get<double>() > 0);
    CHECK(fn["memory"]["peak_bytes"].get<int64_t>() == fn["peak_bytes"].get<int64_t>());
    CHECK(fn["runs"].get<double>() == 1);
    CHECK(fn["per_run"]["collectives"].get<double>() == 1);
    CHECK(fn["per_run"]["backward_collectives"].get<double>() == 0);
    CHECK(fn["collectives"][0]["pass"] == "forward");
    CHECK(fn["label"] == "mlp");
    CHECK(fn["mesh_instance"].empty());
    CHECK(fn["total_cost_s"].get<double>() == Approx(6 * 5e-6 + 384 / 1e11));
    // Every value with a layout, parameters first.
    REQUIRE(!fn["layouts"].empty());
    CHECK(fn["layouts"][0]["parameter"] == true);
    CHECK(fn["layouts"][0]["type"].get<std::string>().find("on Pod") != std::string::npos);
    CHECK(fn["name"] == "mlp");
    CHECK(fn["instance"].is_object());
    CHECK(fn["instance"].empty());
    REQUIRE(fn["collectives"].size() == 1);
    const auto& c = fn["collectives"][0];
    keys.clear();
    for (const auto& item : c.items()) keys.push_back(item.key());
    CHECK(keys == std::vector<std::string>{"kind", "op", "axes", "dtype", "shape", "bytes", "cost_s", "line", "col",
                                           "sent_bytes", "inserted", "reason", "pass", "count", "call_path"});
    CHECK(c["sent_bytes"].get<double>() == Approx(384));
    CHECK(c["inserted"] == true);
    CHECK(c["reason"].is_string());
    CHECK(c["kind"] == "all_reduce");
    CHECK(c["op"] == "sum");
    CHECK(c["axes"] == nlohmann::ordered_json::array({"model"}));
    CHECK(c["dtype"] == "f32");
    CHECK(c["shape"] == nlohmann::ordered_json::array({8, 16}));
    CHECK(c["bytes"] == 256);
    CHECK(c["cost_s"].get<double>() == Approx(6 * 5e-6 + 384 / 1e11));
    CHECK(c["line"] == 10);
    CHECK(c["col"] == 5);

    // Without a filter: main too, with its all_reduce of the f32 sum over data.
    auto all = nlohmann::json::parse(fx.json());
    REQUIRE(all["functions"].size() == 2);
    CHECK(all["functions"][1]["name"] == "main");
    REQUIRE(all["functions"][1]["collectives"].size() == 1);
    const auto& s = all["functions"][1]["collectives"][0];
    CHECK(s["axes"] == nlohmann::json::array({"data"}));
    CHECK(s["shape"] == nlohmann::json::array());
    CHECK(s["bytes"] == 4);
    CHECK(s["cost_s"].get<double>() == Approx(2 * 5e-6 + 4 / 1e11));
    CHECK(s["line"] == 18);
    CHECK(s["col"] == 18);

    // No function of that name: an empty list.
    CHECK(nlohmann::json::parse(fx.json("nope"))["functions"].empty());
}

TEST_CASE("explain: a reduce_scatter's buffer is its input, an all_gather's its output", "[explain]") {
    Fixture rs = mlp_module(true);
    auto doc = nlohmann::json::parse(rs.json("mlp"));
    REQUIRE(doc["functions"][0]["collectives"].size() == 1);
    const auto& c = doc["functions"][0]["collectives"][0];
    CHECK(c["kind"] == "reduce_scatter");
    CHECK(c["op"] == "sum");
    CHECK(c["bytes"] == 256);  // the input: 4x16 f32 on each device
    CHECK(c["cost_s"].get<double>() == Approx(3 * 5e-6 + 192 / 1e11));

    // [8, 32] {0: data, 1: model} -> all_gather(model, dim 1) -> {0: data}: each device
    // ends with a 4x32 f32 slice (512 bytes), not the 4x8 (128 bytes) it starts with.
    Fixture ag = coercion_module(OpKind::AllGather, tensor({8, 32}, {{D}, {M}}), tensor({8, 32}, {{D}, {}}), kModel, 1);
    ag.module.functions[0].instance = {{"B", 8}, {"H", 32}};
    REQUIRE(verify_module(ag.module).empty());
    auto gdoc = nlohmann::ordered_json::parse(ag.json());
    const auto& fn = gdoc["functions"][0];
    CHECK(fn["instance"] == nlohmann::ordered_json({{"B", 8}, {"H", 32}}));
    const auto& g = fn["collectives"][0];
    CHECK(g["kind"] == "all_gather");
    CHECK(g["op"].is_null());
    CHECK(g["shape"] == nlohmann::ordered_json::array({8, 32}));
    CHECK(g["bytes"] == 512);
    CHECK(g["cost_s"].get<double>() == Approx(3 * 5e-6 + 384 / 1e11));

    // all_to_all: either side; a group of two axes is listed in mesh order.
    Fixture a2a = coercion_module(OpKind::AllToAll, tensor({8, 16}, {{M, D}, {}}), tensor({8, 16}, {{}, {D, M}}),
                                  kData | kModel, 0, 1);
    auto problems = verify_module(a2a.module);
    INFO(joined(problems));
    CHECK(problems.empty());
    auto tdoc = nlohmann::json::parse(a2a.json());
    const auto& t = tdoc["functions"][0]["collectives"][0];
    CHECK(t["kind"] == "all_to_all");
    CHECK(t["axes"] == nlohmann::json::array({"data", "model"}));
    CHECK(t["bytes"] == 8 * 2 * 4);
    CHECK(t["cost_s"].get<double>() == Approx(7 * 5e-6 + 7.0 / 8 * 64 / 1e11));
}

TEST_CASE("explain as text: layouts, collectives with buffer and cost, free slices", "[explain]") {
    Fixture fx = mlp_module();
    std::string text = fx.text("mlp");
    INFO(text);
    CHECK(text.rfind("fn mlp  (runs 1 times per run of main)\n  layouts:\n", 0) == 0);
    CHECK(text.find("    %0 x: Tensor f32 [8, 16] on Pod with {0: data}  (parameter)\n") != std::string::npos);
    CHECK(text.find("    %4 h: Tensor f32 [8, 32] on Pod with {0: data, 1: model}  9:13\n") != std::string::npos);
    CHECK(text.find("    %5: Tensor f32 [8, 16] on Pod with {0: data} partial {model}  10:5\n") != std::string::npos);
    CHECK(text.find("  collectives: 1, 30.004 us in all\n"
                    "    10:5  all_reduce sum over (model) of f32 [8, 16]: b = 256 bytes per device, sends 384 bytes,"
                    " 30.004 us  (inserted: the result must have mlp's return type)\n") != std::string::npos);
    CHECK(text.find("fn main") == std::string::npos);

    std::string everything = fx.text("");
    CHECK(everything.find("\nfn main  (runs 1 times per run of main)\n") != std::string::npos);
    CHECK(everything.find("\nprogram (one run of main): 2 collectives (0 backward), 388 bytes sent per device") != std::string::npos);
    CHECK(everything.find("%2: Tensor") == std::string::npos);  // scalars have no layout

    Fixture ls = coercion_module(OpKind::LocalSlice, tensor({8, 16}, {{D}, {}}), tensor({8, 16}, {{D}, {M}}), kModel, 1);
    ls.module.functions[0].ops[0].inserted = true;
    ls.module.functions[0].ops[0].reason = "y is split over model at its use";
    std::string slices = ls.text("");
    INFO(slices);
    CHECK(slices.find("  collectives: none\n  local slices (free):\n"
                      "    10:5  local_slice over (model) dim 1 of f32 [8, 16]: no communication"
                      "  (inserted: y is split over model at its use)\n") != std::string::npos);
    CHECK(nlohmann::json::parse(ls.json())["functions"][0]["collectives"].empty());
}

// ---------------------------------------------------------------- reader (ir/gir_parse.h)

namespace {

struct Read {
    std::optional<Module> module;
    std::string errors;  // "line:col: message" per E0712
    std::string reprinted;
};

Read read_gir(SourceManager& sm, std::string text) {
    DiagnosticEngine diags;
    FileId gir = sm.add_file("in.gir", std::move(text));
    Read r;
    r.module = parse_module(sm, gir, diags);
    for (const Diagnostic& d : diags.diagnostics()) {
        CHECK(d.code == DiagCode::E0712);
        LineCol lc = sm.line_col(d.span.file, d.span.begin);
        r.errors += fmt::format("{}:{}: {}\n", lc.line, lc.col, d.message);
    }
    if (r.module) {
        std::ostringstream out;
        print_module(out, sm, *r.module);
        r.reprinted = out.str();
    }
    return r;
}

}  // namespace

TEST_CASE("GIR text reads back as the module it was printed from", "[gir][parse]") {
    for (bool scatter : {false, true}) {
        Fixture fx = mlp_module(scatter);
        std::string text = fx.print();
        Read r = read_gir(fx.sm, text);
        INFO(r.errors);
        REQUIRE(r.module);
        CHECK(r.reprinted == text);
        CHECK(verify_module(*r.module).empty());
        // The positions are the source's: `@9:18+6` is `x @ w1` of mlp.msh again.
        const Op& contract = r.module->functions[0].ops[0];
        CHECK(fx.sm.path(contract.span.file) == "mlp.msh");
        CHECK(fx.sm.text(contract.span) == "x @ w1");
        CHECK(r.module->functions[1].ops.back().kind == OpKind::Save);
        CHECK(r.module->functions[1].ops[7].callee == 0);  // `call @mlp`
    }
}

TEST_CASE("GIR text: positions in the GIR file, in a file that cannot be read, and regions", "[gir][parse]") {
    SourceManager sm;
    // No position on the header: `@L:C` is in the GIR file itself (line 4 is the op's own).
    std::string text =
        "mesh Pod = [data: 2]\n"
        "\n"
        "func @f(%0 /*x*/: Tensor f32 [8] on Pod with {0: data}, %1: i64) -> (Tensor f32 [8] on Pod with {0: data}) {\n"
        "  %2 = elementwise neg %0 : Tensor f32 [8] on Pod with {0: data}  @4:3+4  // backward\n"
        "  %3 = constant 0 : i64\n"
        "  %6 = for %3, %1, %2 : Tensor f32 [8] on Pod with {0: data}  @/nonexistent/dir/m.msh:7:5+3 via @/nonexistent/dir/m.msh:2:1\n"
        "    region(%4 /*i*/: i64, %5: Tensor f32 [8] on Pod with {0: data}) {\n"
        "      %7 = all_gather over (data) dim 0 %5 : Tensor f32 [8] on Pod  // inserted: why not\n"
        "      %8 = local_slice over (data) dim 0 %7 : Tensor f32 [8] on Pod with {0: data}  // inserted\n"
        "      yield %8\n"
        "    }\n"
        "  return %6\n"
        "}\n";
    Read r = read_gir(sm, text);
    INFO(r.errors);
    REQUIRE(r.module);
    // Printed again, the function has its position in the GIR file.
    std::string again = text;
    again.replace(again.find(" {\n"), 3, " {  @in.gir:3:1\n");
    CHECK(r.reprinted == again);
    if (r.reprinted != again) WARN(r.reprinted);
    CHECK(verify_module(*r.module).empty());
    const Function& f = r.module->functions[0];
    CHECK(sm.text(f.ops[0].span) == "%2 =");
    CHECK(f.ops[0].backward);
    const Op& loop = f.ops[2];
    CHECK(sm.path(loop.span.file) == "/nonexistent/dir/m.msh");  // stood in for by blank lines
    CHECK(sm.line_col(loop.span.file, loop.span.begin).line == 7);
    REQUIRE(loop.call_path.size() == 1);
    REQUIRE(loop.regions.size() == 1);
    CHECK(loop.regions[0].args == std::vector<ValueId>{4, 5});
    CHECK(f.names[4] == "i");
    CHECK(loop.regions[0].ops[0].inserted);
    CHECK(loop.regions[0].ops[0].reason == "why not");
    CHECK(loop.regions[0].ops[0].axes == axis_bit(0));
    CHECK(loop.regions[0].ops[1].reason.empty());
}

TEST_CASE("malformed GIR text is E0712 at the offending token", "[gir][parse]") {
    struct Case {
        const char* text;
        const char* error;  // "line:col: message" (a prefix of it)
    };
    const Case cases[] = {
        {"func @f() {\n  %0 = frobnicate : f32\n}\n", "2:8: `frobnicate` is not a GIR op"},
        {"func @f() -> (f32) {\n  return %3\n}\n", "2:10: value %3 is used and never defined"},
        {"func @f(%0: Tensor f32 [8] on Pad) {\n}\n", "1:31: no mesh `Pad` is declared above"},
        {"mesh Pod = [data: 2]\nfunc @f(%0: Tensor f32 [8] on Pod with {0: model}) {\n}\n",
         "2:44: mesh `Pod` has no axis `model`"},
        {"mesh Pod = [data: 2]\nfunc @f(%0: Tensor f32 [8] on Pod with {1: data}) {\n}\n",
         "2:41: dim 1 is not a dim of a rank-1 tensor"},
        {"func @f() {\n  call @g()\n}\n", "2:9: no function `@g` is defined in this module"},
        {"func @f() {\n  %0 = constant 1 : f32\n  %0 = constant 2 : f32\n}\n", "3:3: value %0 is defined twice"},
        {"func @f() {\n  %0 = constant 1 : f32\n", "1:12: function `@f` is not closed with `}`"},
        {"func @f() -> (i64) {\n  %0 = constant 1 : f32\n  return %0\n}\n",
         "3:10: result 0 is %0, of type f32, and the header says i64"},
        {"func @f() {\n}\nfunc @f() {\n}\n", "3:7: function `@f` is defined twice"},
        {"func @f() {\n  %0 = constant 1 : f32  @0:3\n}\n", "2:27: lines and columns count from 1"},
        {"func @f() {\n  %0 = constant 1 : f32\n  %1 = if %0 : f32\n}\n", "4:1: expected `region(` here"},
        {"tensor x\n", "1:1: expected `device`, `mesh`, `arg` or `func`"},
        {"func @f() {\n  %0 = load arg \"data\" \"x.npy\" : f32\n}\n",
         "2:17: no program argument \"data\" is declared above"},
        {"func @f() {\n  %0 = constant 1 : f32  @/a.msh:1:1+2 via @q\n}\n", "2:45: expected a position"},
    };
    for (const Case& c : cases) {
        SourceManager sm;
        Read r = read_gir(sm, c.text);
        INFO(c.text);
        CHECK_FALSE(r.module);
        CHECK(r.errors.rfind(c.error, 0) == 0);
        if (r.errors.rfind(c.error, 0) != 0) WARN(r.errors);
    }
}

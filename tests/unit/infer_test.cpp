// Unit tests for inference as unification: sizes and meshes bound from arguments at each
// call (one instance per binding), struct generics bound from fields, layouts flowing
// backwards into creation ops, and mismatches reported rather than bound twice.
#include <catch2/catch.hpp>

#include "sema/infer.h"
#include "sema/resolve.h"
#include "syntax/parser.h"

using namespace meshc;

namespace {

struct Checked {
    ir::Module gir;
    std::vector<std::string> codes;
};

Checked check(const std::string& text) {
    SourceManager sm;
    DiagnosticEngine diags;
    FileId f = sm.add_file("t.msh", text);
    sema::Program program;
    program.modules.push_back(syntax::parse_file(sm, f, diags));
    sema::resolve_program(sm, program, diags);
    Checked out;
    if (!diags.has_errors()) out.gir = sema::infer_program(sm, program, diags, {});
    for (const Diagnostic& d : diags.diagnostics()) out.codes.emplace_back(diag_code_info(d.code).name);
    return out;
}

const ir::Function* find(const ir::Module& m, const std::string& name, int64_t b) {
    for (const ir::Function& f : m.functions) {
        auto it = f.instance.find("B");
        if (f.name == name && it != f.instance.end() && it->second == b) return &f;
    }
    return nullptr;
}

}  // namespace

TEST_CASE("each call binds the callee's sizes from its arguments: one instance per binding", "[infer]") {
    auto c = check(
        "fn id(x: Tensor f32 [B, D]) -> Tensor f32 [B, D] { x }\n"
        "fn main() {\n"
        "  let a = id(zeros([4, 8]));\n"
        "  let b = id(zeros([6, 8]));\n"
        "  let c = id(zeros([4, 8]));\n"
        "}\n");
    REQUIRE(c.codes.empty());
    const ir::Function* f4 = find(c.gir, "id", 4);
    const ir::Function* f6 = find(c.gir, "id", 6);
    REQUIRE(f4);
    REQUIRE(f6);
    CHECK(f4->instance.at("D") == 8);
    CHECK(f4->types[f4->params[0]].shape == std::vector<int64_t>{4, 8});
    CHECK(f6->types[f6->params[0]].shape == std::vector<int64_t>{6, 8});
    size_t instances = 0;
    for (const ir::Function& f : c.gir.functions) instances += f.name == "id" ? 1 : 0;
    CHECK(instances == 2);  // the third call reuses the first instance
}

TEST_CASE("a size bound by one argument must agree with the others", "[infer]") {
    auto c = check(
        "fn add(x: Tensor f32 [B], y: Tensor f32 [B]) -> Tensor f32 [B] { x + y }\n"
        "fn main() { let z = add(zeros([4]), zeros([8])); }\n");
    CHECK(c.codes == std::vector<std::string>{"E0307"});
}

TEST_CASE("mesh parameters bind to the argument's mesh", "[infer]") {
    auto c = check(
        "mesh A = [x: 2];\n"
        "mesh B2 = [x: 4];\n"
        "fn f[M: Mesh](v: Tensor f32 [N] on M with {N: x}) -> Tensor f32 [N] on M { v }\n"
        "fn main() {\n"
        "  let a: Tensor f32 [8] on A with {0: x} = zeros([8]);\n"
        "  let b: Tensor f32 [8] on B2 with {0: x} = zeros([8]);\n"
        "  let p = f(a);\n"
        "  let q = f(b);\n"
        "}\n");
    REQUIRE(c.codes.empty());
    std::vector<std::string> meshes;
    for (const ir::Function& f : c.gir.functions) {
        if (f.name == "f") meshes.push_back(f.mesh_instance.at("M"));
    }
    CHECK(meshes == std::vector<std::string>{"A", "B2"});
}

TEST_CASE("struct generics bind from the fields of a literal", "[infer]") {
    auto c = check(
        "mesh Pod = [data: 2];\n"
        "struct P[M: Mesh, D] { w: Tensor f32 [D, D] on M }\n"
        "fn norm(p: P[Pod, D]) -> Tensor f32 [D, D] on Pod { p.w }\n"
        "fn main() {\n"
        "  let w: Tensor f32 [16, 16] on Pod = zeros([16, 16]);\n"
        "  let y = norm(P { w: w });\n"
        "}\n");
    REQUIRE(c.codes.empty());
    bool found = false;
    for (const ir::Function& f : c.gir.functions) {
        if (f.name == "norm") {
            found = true;
            CHECK(f.instance.at("D") == 16);
        }
    }
    CHECK(found);
}

TEST_CASE("creation ops take their layout from their first consumer", "[infer]") {
    auto c = check(
        "mesh Pod = [data: 2, model: 4];\n"
        "fn f(x: Tensor f32 [8, 16] on Pod with {0: data}) -> Tensor f32 [8, 16] on Pod with {0: data} { x }\n"
        "fn main() { let y = f(random_normal(1, [8, 16]) * 0.5); }\n");
    REQUIRE(c.codes.empty());
    const ir::Function* main_fn = nullptr;
    for (const ir::Function& f : c.gir.functions) {
        if (f.name == "main") main_fn = &f;
    }
    REQUIRE(main_fn);
    for (const ir::Op& op : main_fn->ops) {
        CHECK(op.kind != ir::OpKind::LocalSlice);  // created in place: nothing to slice
        if (op.kind == ir::OpKind::Create) {
            const ir::TensorType& t = main_fn->types[op.results[0]];
            REQUIRE(t.layout.dims.size() == 2);
            CHECK(t.layout.dims[0] == sema::AxisList{0});
            CHECK(t.layout.dims[1].empty());
        }
    }
}

TEST_CASE("element types unify; literals take the type they meet", "[infer]") {
    CHECK(check("fn f(x: Tensor bf16 [4]) -> Tensor bf16 [4] { x * 2 + 1.5 }").codes.empty());
    CHECK(check("fn f(x: Tensor f32 [4], y: Tensor i64 [4]) -> Tensor f32 [4] { x + y }").codes ==
          std::vector<std::string>{"E0308"});
    CHECK(check("fn f(x: Tensor i64 [4]) -> Tensor i64 [4] { x + 1.5 }").codes ==
          std::vector<std::string>{"E0308"});
}

// Typed global IR (GIR): the checker's output. SSA values with full tensor types (element
// type, concrete shape, mesh, layout including `partial`); every coercion the checker
// inserted is an explicit collective op carrying its source span and reason. One Function
// per instantiation of a source function (sizes concrete). Produced by sema/check/;
// consumed by the GIR printer (--emit=gir), `meshc explain`, and later the SPMD partitioner.
#pragma once

#include <cstdint>
#include <deque>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/device_model.h"
#include "ir/layout.h"
#include "support/dtype.h"
#include "support/source_manager.h"

namespace meshc::ir {

using ValueId = uint32_t;
inline constexpr ValueId kNoValue = UINT32_MAX;

size_t dtype_bytes(DType t);

struct TensorType {
    DType dtype = DType::F32;
    std::vector<int64_t> shape;  // global shape
    int32_t mesh = -1;           // index into Module::meshes; -1: not placed (scalars)
    Layout layout;               // layout.dims.size() == shape.size()

    size_t rank() const { return shape.size(); }
    int64_t elements() const;
    /// Bytes of this value's per-device piece, with every split applied.
    int64_t local_bytes(const Mesh* mesh) const;
    bool operator==(const TensorType& o) const = default;
};

enum class OpKind : uint8_t {
#define MESHC_OP(name, text) name,
#include "ir/ops.def"
#undef MESHC_OP
};
std::string_view op_name(OpKind kind);

/// The element-wise functions (ew.def; their rules: ir/op_rules.h, `ew_rule`).
enum class Ew : uint8_t {
#define MESHC_EW(name, text, operands, pending, result, flops, domain) name,
#include "ir/ew.def"
#undef MESHC_EW
};
std::string_view ew_name(Ew ew);

enum class CreateKind : uint8_t { Zeros, Ones, Full, Iota, RandomNormal, RandomUniform, Permutation };
std::string_view create_name(CreateKind kind);

enum class ReduceKind : uint8_t { Sum, Mean, Max };
std::string_view reduce_name(ReduceKind kind);

struct Op;

/// A nested block of ops (the body of `for`, the branches of `if`): its arguments, its
/// ops, and the values it yields to the op that owns it.
struct Region {
    std::vector<ValueId> args;
    std::vector<Op> ops;
    std::vector<ValueId> yields;
};

struct Op {
    OpKind kind;
    std::vector<ValueId> results;
    std::vector<ValueId> operands;
    Span span;  // the source construct this op comes from
    // Attributes (which ones an op uses: ops.def; its rules: ir/op_rules.h).
    Ew ew = Ew::Add;
    CreateKind create = CreateKind::Zeros;
    ReduceKind reduce = ReduceKind::Sum;
    /// Reduce: the reduced dims stay, with size 1.
    bool keep_dims = false;
    /// Elementwise `cast`: the element type it converts to.
    DType dtype = DType::F32;
    std::string text;
    double number = 0;
    int64_t seed = 0;
    std::vector<int64_t> ints;
    /// Load and Save of a .safetensors file: the tensor names (Load: one; Save: one per
    /// operand). Empty for .npy.
    std::vector<std::string> names;
    AxisSet axes = 0;
    int32_t dim = -1;
    int32_t dim2 = -1;
    int32_t callee = -1;
    /// Collectives and local slices: inserted by the checker (a coercion) rather than
    /// written by the user, and why.
    bool inserted = false;
    std::string reason;
    /// Made by autodiff (transform/autodiff.cpp) for the backward pass; `span` is then the
    /// forward construct it differentiates.
    bool backward = false;
    /// The calls autodiff inlined this op through (outermost first), when a derived
    /// function holds it: a layer called twice gives its ops two paths. Empty otherwise.
    std::vector<Span> call_path;
    /// In a derived function, an op inlined from a callee (or differentiating one): the
    /// function instance of its innermost call, and which inlined call that was (1, 2, ...
    /// in the derived function: the calls of a loop autodiff unrolled are apart). The
    /// effects check holds each call to its callee's declared bound. -1 and 0 otherwise.
    int32_t inlined_callee = -1;
    uint32_t inlined_call = 0;
    std::vector<Region> regions;  // For, If
};

/// Calls `fn(op)` for every op of `ops`, nested ones (in regions) included, in order.
template <typename F>
void for_each_op(const std::vector<Op>& ops, F&& fn) {
    for (const Op& op : ops) {
        fn(op);
        for (const Region& r : op.regions) for_each_op(r.ops, fn);
    }
}

struct Function {
    std::string name;
    std::map<std::string, int64_t> instance;  // size variables of a generic function
    std::map<std::string, std::string> mesh_instance;  // its mesh parameters: `M` -> `Pod`
    std::map<std::string, std::string> dtype_instance;  // its element types: `T` -> `bf16`
    std::vector<ValueId> params;
    std::vector<ValueId> results;
    /// Indexed by ValueId. A deque: adding a value never moves the others, so a reference
    /// to a value's type stays valid while the checker builds the function.
    std::deque<TensorType> types;
    std::vector<std::string> names; // source name of each value, "" for temporaries
    std::vector<Op> ops;
    Span span;
    /// Made by autodiff from the function of the same name: "grad" or "value_and_grad"
    /// (empty for a function written in the source).
    std::string derived;
    /// `@checkpoint`: when differentiated through, its forward pass is run again in the
    /// backward pass instead of keeping its values (transform/autodiff.cpp).
    bool checkpoint = false;
    /// The checker reported an error while building it (or a function it instantiated):
    /// its ops may be incomplete. Only diagnostics passes (autodiff's) look at such a
    /// module, and they leave these functions and their callers alone.
    bool has_errors = false;

    ValueId add_value(TensorType type, std::string name = {}) {
        types.push_back(std::move(type));
        names.push_back(std::move(name));
        return static_cast<ValueId>(types.size() - 1);
    }
};

/// A program argument, `arg("steps", 100)`: set on the command line (`./prog --steps=12`).
/// Int: an i64 scalar, Float: f32, Bool: bool, Path: a file name for `load` and `save`.
struct ProgramArg {
    enum Kind : uint8_t { Int, Float, Bool, Path } kind = Int;
    std::string name;
    std::string default_text;  // the default as the command line would write it
    double number = 0;         // Int, Float, Bool: the default's value
    Span span;                 // the first `arg` call that declares it
};

struct Module {
    std::vector<Mesh> meshes;
    std::vector<ProgramArg> args;  // indexed by the `ints[0]` of Arg ops and of Load/Save with an argument path
    std::vector<Function> functions;
    /// The device every mesh position is, for compute costs (ir/compute_cost.h).
    DeviceModel device;
    const Mesh* mesh(int32_t index) const { return index < 0 ? nullptr : &meshes[index]; }
};

/// `Tensor f32 [8, 16] on Pod with {0: data} partial {model}`, or `f32` for a scalar.
std::string type_to_string(const Module& module, const TensorType& type);
/// The textual form (--emit=gir).
void print_module(std::ostream& out, const SourceManager& sources, const Module& module);
/// Checks invariants (operand/result types consistent, layouts valid); returns the
/// problems found (empty when valid). A problem is a compiler bug, not a user error.
std::vector<std::string> verify_module(const Module& module);
/// The same for one function of `module` (which need not be in it yet).
std::vector<std::string> verify_function(const Module& module, const Function& function);

/// A function instance's name with its sizes: `mlp`, or `f[B = 8, D = 16]` for a generic one
/// (used by the printer, the verifier's messages and `meshc explain`).
std::string function_label(const Function& function);

}  // namespace meshc::ir

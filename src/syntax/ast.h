// The abstract syntax tree. Produced by the parser (parser.cpp); consumed by the AST
// printer (--emit=ast), name resolution (sema/resolve.cpp) and, later, type inference.
// Nodes are owned by their Module's arena and never change after parsing. Every node
// has a span; identifiers are views into the SourceManager's text.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/dtype.h"
#include "support/source_manager.h"

namespace meshc::ast {

struct Ident {
    std::string_view name;
    Span span;
};

using meshc::DType;
using meshc::dtype_name;

// ---------------------------------------------------------------- dim expressions
// Sizes in shapes, generic arguments and where clauses.

enum class DimKind : uint8_t { Int, Var, Axis, Binary };
enum class DimOp : uint8_t { Add, Sub, Mul, Div, Mod };

struct Dim {
    DimKind kind;
    Span span;
    int64_t value = 0;        // Int
    Ident name;               // Var: the size variable; Axis: the mesh
    Ident axis;               // Axis: the mesh axis (`M.data`)
    DimOp op = DimOp::Add;    // Binary
    const Dim* lhs = nullptr; // Binary
    const Dim* rhs = nullptr; // Binary
};

enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
std::string_view cmp_op_spelling(CmpOp op);

/// `where` clause: lhs op rhs over dims.
struct Constraint {
    const Dim* lhs;
    CmpOp op;
    const Dim* rhs;
    Span span;
};

// ---------------------------------------------------------------- types

/// One entry of a `with {...}` layout or a layout literal: key (a size-variable name or
/// a dim position) mapped to mesh axes, major first.
struct LayoutEntry {
    std::optional<Ident> key_name;  // set when keyed by name
    int64_t key_pos = -1;           // set (>= 0) when keyed by position
    Span key_span;
    std::vector<Ident> axes;
    Span span;
};

struct Layout {
    std::vector<LayoutEntry> entries;
    Span span;
};

enum class TypeKind : uint8_t { Scalar, Tensor, Tuple, Named };

struct Type {
    TypeKind kind;
    Span span;
    DType dtype = DType::F32;                 // Scalar, Tensor
    std::optional<Ident> dtype_var;           // Tensor: `Tensor T [...]` (a `T: Float` generic)
    std::vector<const Dim*> shape;            // Tensor
    std::optional<Ident> mesh;                // Tensor: `on M`
    std::optional<Layout> layout;             // Tensor: `with {...}`
    bool any_layout = false;                  // Tensor: `with _` (the layout of the value)
    // Tensor: `with auto`, a layout the compiler chooses (src/autopar/). Until the solver
    // has written one in, the checker reads it as `with _` (any_layout is set too).
    bool auto_layout = false;
    Span auto_span;                           // the `auto` token
    std::optional<std::vector<Ident>> partial;// Tensor: `partial {...}`
    Span partial_span;
    std::vector<const Type*> elements;        // Tuple
    std::optional<Ident> module;              // Named: `nn.Mlp`
    Ident name;                               // Named
    std::vector<const Dim*> args;             // Named: `Mlp[Pod, 64]`
};

// ---------------------------------------------------------------- expressions

enum class ExprKind : uint8_t {
    IntLit, FloatLit, BoolLit, StringLit, DTypeName, Name,
    Unary, Binary, Call, Field, Tuple, List, LayoutLit, StructLit, If
};

enum class UnaryOp : uint8_t { Neg, Not };
enum class BinaryOp : uint8_t {
    Or, And, Eq, Ne, Lt, Le, Gt, Ge, Add, Sub, Mul, Div, Mod, MatMul
};
std::string_view binary_op_spelling(BinaryOp op);

struct Expr;
struct Block;

struct Arg {
    std::optional<Ident> label;  // named argument `axis: 1`
    const Expr* value;
    Span span;
};

struct FieldInit {
    Ident name;
    const Expr* value;
};

struct Expr {
    ExprKind kind;
    Span span;
    uint32_t height = 1;                 // tree height, bounded by the parser (E0107)
    int64_t int_value = 0;               // IntLit
    double float_value = 0;              // FloatLit
    bool bool_value = false;             // BoolLit
    std::string string_value;            // StringLit (decoded)
    DType dtype = DType::F32;            // DTypeName
    Ident name;                          // Name, Field (the field), StructLit (the struct)
    UnaryOp unary_op = UnaryOp::Neg;     // Unary
    BinaryOp binary_op = BinaryOp::Add;  // Binary
    Span op_span;                        // Unary, Binary: the operator token
    const Expr* lhs = nullptr;           // Unary operand, Binary lhs, Call callee, Field base
    const Expr* rhs = nullptr;           // Binary rhs
    std::vector<Arg> args;               // Call
    std::vector<const Expr*> elements;   // Tuple, List
    const Layout* layout = nullptr;      // LayoutLit
    std::vector<FieldInit> fields;       // StructLit
    const Expr* cond = nullptr;          // If
    const Block* then_block = nullptr;   // If
    const Block* else_block = nullptr;   // If: `else { }`
    const Expr* else_if = nullptr;       // If: `else if ...`
};

// ---------------------------------------------------------------- statements

enum class PatternKind : uint8_t { Name, Wildcard, Tuple };

struct Pattern {
    PatternKind kind;
    Span span;
    Ident name;                            // Name
    std::vector<const Pattern*> elements;  // Tuple
};

enum class StmtKind : uint8_t { Let, Var, Assign, For, Return, Expr, Empty };

struct Stmt {
    StmtKind kind;
    Span span;
    const Pattern* pattern = nullptr;  // Let
    Ident name;                        // Var, For (induction variable)
    const Type* type = nullptr;        // Let, Var: annotation
    const Expr* value = nullptr;       // Let, Var, Assign (rhs), Return (may be null), Expr
    const Expr* target = nullptr;      // Assign
    const Expr* range_begin = nullptr; // For
    const Expr* range_end = nullptr;   // For
    const Block* body = nullptr;       // For
};

struct Block {
    std::vector<const Stmt*> stmts;
    /// The block's value: a trailing expression without `;`, or a trailing `if` with an
    /// `else` (which is then not in stmts).
    const Expr* tail = nullptr;
    Span span;
};

// ---------------------------------------------------------------- items

struct GenericParam {
    Ident name;
    std::optional<Ident> kind;  // `M: Mesh`, `B: Dim`; checked by name resolution
    Span span;
};

struct Param {
    Ident name;
    const Type* type;
    Span span;
};

struct Attribute {
    Ident name;
    Span span;
};

struct MeshAxisDecl {
    Ident name;
    int64_t size = 0;
    Span size_span;
    struct LinkProp {
        Ident key;
        double value;
        Span span;
    };
    std::vector<LinkProp> link;
    Span span;
};

/// A function's communication effect, after its result type (docs/language.md, "Effects"):
/// `! nocomm`, or `! comm(model, data <= 4 * B * D)`: collectives over these axes only,
/// each device sending at most the bound (bytes, a dim expression of the function's sizes)
/// over an axis that has one.
struct EffectAxis {
    Ident axis;
    const Dim* bound = nullptr;  // null: no bound
};
struct Effect {
    bool declared = false;
    bool nocomm = false;
    std::vector<EffectAxis> axes;  // comm(...)
    Span span;                     // from `!` to the end
};

enum class ItemKind : uint8_t { Import, Mesh, Struct, Fn };

struct Item {
    ItemKind kind;
    Span span;
    Ident name;                             // Mesh, Struct, Fn; Import: the alias
    std::vector<std::string_view> doc;      // doc comment lines, `///` removed
    std::vector<Attribute> attrs;
    std::vector<Ident> path;                // Import: module path
    bool has_alias = false;                 // Import: `as name` written
    std::vector<MeshAxisDecl> axes;         // Mesh
    std::vector<GenericParam> generics;     // Struct, Fn
    std::vector<Param> fields;              // Struct
    std::vector<Param> params;              // Fn
    const Type* result = nullptr;           // Fn (null: returns nothing)
    Effect effect;                          // Fn: `! nocomm`, `! comm(...)` (declared: false when not written)
    std::vector<Constraint> where;          // Fn
    const Block* body = nullptr;            // Fn
};

/// A parsed file. Owns every node reachable from `items`.
class Module {
public:
    FileId file = kNoFile;
    std::vector<const Item*> items;
    /// Names declared by items and `let`/`var` statements that failed to parse (and so
    /// are not in the tree). Name resolution does not report their uses as unknown: the
    /// syntax error was reported, and the unknown name would be a cascade of it.
    std::vector<std::string_view> recovered_names;

    Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    ~Module() {
        for (auto it = destructors_.rbegin(); it != destructors_.rend(); ++it) it->destroy(it->node);
    }

    /// Moves `value` into the module's arena. Nodes are bump-allocated in large chunks
    /// (a million small heap blocks made parsing and freeing a 10,000-layer program
    /// malloc-bound); nodes with non-trivial destructors are destroyed with the module.
    template <typename T>
    T* make(T value) {
        void* memory = allocate(sizeof(T), alignof(T));
        T* node = new (memory) T(std::move(value));
        if constexpr (!std::is_trivially_destructible_v<T>) {
            if (owns_memory(*node)) destructors_.push_back({node, [](void* p) { static_cast<T*>(p)->~T(); }});
        }
        return node;
    }

private:
    // Whether destroying a node frees anything. Most expressions (names, literals,
    // operators) own no heap memory: registering no destructor for them keeps parsing
    // a big file from being dominated by bookkeeping.
    template <typename T>
    static bool owns_memory(const T&) {
        return true;
    }
    static bool owns_memory(const Expr& e) {
        return e.args.capacity() || e.elements.capacity() || e.fields.capacity() ||
               e.string_value.capacity() > std::string().capacity();
    }

    void* allocate(size_t size, size_t align) {
        size_t offset = (chunk_used_ + align - 1) & ~(align - 1);
        if (chunks_.empty() || offset + size > chunk_size_) {
            chunk_size_ = std::max<size_t>(kChunkBytes, size + align);
            chunks_.push_back(std::unique_ptr<std::byte[]>(new std::byte[chunk_size_]));  // no zeroing
            offset = 0;
        }
        chunk_used_ = offset + size;
        return chunks_.back().get() + offset;
    }

    static constexpr size_t kChunkBytes = 256 * 1024;
    struct Destructor {
        void* node;
        void (*destroy)(void*);
    };
    std::vector<std::unique_ptr<std::byte[]>> chunks_;
    size_t chunk_used_ = 0;
    size_t chunk_size_ = 0;
    std::vector<Destructor> destructors_;
};

}  // namespace meshc::ast

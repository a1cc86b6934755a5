// What name resolution found: for every name it resolved, where the name is used and
// where it is declared. Filled by resolve_program (resolve.cpp) when given an index;
// consumed by the language server (src/lsp/) for definition, references, semantic
// tokens and hover. Declarations are recorded as uses of themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "support/source_manager.h"

namespace meshc::sema {

enum class SymbolKind : uint8_t {
    Function, Struct, Field, Mesh, MeshAxis, Module, Parameter, Variable, LoopVariable, SizeVariable, MeshParameter, TypeParameter, ElementType
};

struct NameRef {
    Span use;  // the identifier as written
    Span def;  // the declaring identifier
    SymbolKind kind;
    bool declaration = false;  // use == def
};

struct NameIndex {
    std::vector<NameRef> refs;

    void add(Span use, Span def, SymbolKind kind) {
        if (!use.valid() || !def.valid()) return;
        refs.push_back(NameRef{use, def, kind, use.file == def.file && use.begin == def.begin && use.end == def.end});
    }
    void declare(Span at, SymbolKind kind) { add(at, at, kind); }
};

}  // namespace meshc::sema

// libFuzzer target: any byte string through the lexer, the parser, the AST printer and
// both diagnostic renderers must not crash, hang or leak. Seed corpus: tests/fuzz/corpus
// (the examples and grammar tests); dictionary: tests/fuzz/mesh.dict.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "support/diagnostics.h"
#include "syntax/ast_printer.h"
#include "syntax/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    meshc::SourceManager sources;
    meshc::DiagnosticEngine diags;
    meshc::FileId file =
        sources.add_file("fuzz.msh", std::string(reinterpret_cast<const char*>(data), size));
    auto module = meshc::syntax::parse_file(sources, file, diags);
    std::ostringstream out;
    meshc::syntax::print_ast(out, sources, *module);
    meshc::render_human(out, sources, diags.diagnostics());
    meshc::render_json(out, sources, diags.diagnostics());
    return 0;
}

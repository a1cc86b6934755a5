// libFuzzer target: any byte string through the whole checker — lexer, parser, AST
// printer, name resolution, refinements, type/shape/sharding inference, the GIR verifier
// and printer, and both diagnostic renderers — must not crash, hang, leak, or produce
// GIR the verifier rejects. Seed corpus: tests/fuzz/corpus; dictionary: tests/fuzz/mesh.dict.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "ir/gir.h"
#include "sema/infer.h"
#include "sema/refine.h"
#include "sema/resolve.h"
#include "support/diagnostics.h"
#include "syntax/ast_printer.h"
#include "syntax/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    meshc::SourceManager sources;
    meshc::DiagnosticEngine diags;
    meshc::FileId file =
        sources.add_file("fuzz.msh", std::string(reinterpret_cast<const char*>(data), size));
    std::ostringstream out;
    try {
        meshc::sema::Program program;
        program.modules.push_back(meshc::syntax::parse_file(sources, file, diags));
        meshc::syntax::print_ast(out, sources, *program.modules[0]);
        bool has_import = false;
        for (const auto* item : program.modules[0]->items) {
            has_import |= item->kind == meshc::ast::ItemKind::Import;
        }
        if (!diags.has_errors() && !has_import) {
            meshc::sema::resolve_program(sources, program, diags);
            if (!diags.has_errors()) meshc::sema::check_refinements(sources, program, diags);
            if (!diags.has_errors()) {
                meshc::ir::Module gir = meshc::sema::infer_program(sources, program, diags, {});
                if (!diags.has_errors()) {
                    auto problems = meshc::ir::verify_module(gir);
                    if (!problems.empty()) {
                        for (const auto& p : problems) std::cerr << "GIR verifier: " << p << "\n";
                        std::abort();
                    }
                    meshc::ir::print_module(out, sources, gir);
                }
            }
        }
    } catch (const meshc::InternalError& e) {
        std::cerr << "internal compiler error: " << e.message << "\n";
        std::abort();
    }
    meshc::render_human(out, sources, diags.diagnostics());
    meshc::render_json(out, sources, diags.diagnostics());
    return 0;
}

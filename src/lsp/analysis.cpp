// The checker run for the language server; see analysis.h. Mirrors run_check in
// src/driver/main.cpp phase for phase, so the editor shows what `meshc check` prints.
#include "lsp/analysis.h"

#include <filesystem>
#include <new>

#include "sema/infer.h"
#include "sema/refine.h"
#include "sema/resolve.h"
#include "sema/lint.h"
#include "transform/autodiff.h"
#include "transform/combine_collectives.h"

namespace meshc::lsp {

std::string canonical_path(const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : p.string();
}

std::unique_ptr<Analysis> analyse(const std::string& path, const std::map<std::string, std::string>& overlays,
                                  const AnalysisOptions& options) {
    auto a = std::make_unique<Analysis>();
    try {
        sema::LoadOptions load{options.stdlib_dir, &overlays};
        a->program = std::make_unique<sema::Program>(sema::load_program(a->sources, a->diags, path, load));
        if (a->program->modules.empty()) return a;
        a->root = a->program->modules.front()->file;
        sema::resolve_program(a->sources, *a->program, a->diags, &a->names);
        if (a->diags.has_errors()) return a;
        sema::check_refinements(a->sources, *a->program, a->diags);
        if (a->diags.has_errors()) return a;
        sema::InferOptions infer_options;
        infer_options.strict_comm = options.strict_comm;
        auto gir = std::make_unique<ir::Module>(sema::infer_program(a->sources, *a->program, a->diags, infer_options));
        if (a->diags.has_errors()) {
            a->gir = std::move(gir);  // what was inferred still serves hovers
            return a;
        }
        if (!ir::verify_module(*gir).empty()) {
            a->internal_error = "the checker produced invalid GIR";
            a->gir = std::move(gir);
            return a;
        }
        // Autodiff (when there is a `grad`) on a copy: its errors (E06, backward
        // --strict-comm) are the check's, and the checker's GIR stays for hovers if it fails.
        bool has_grad = false;
        for (const ir::Function& f : gir->functions) {
            ir::for_each_op(f.ops, [&](const ir::Op& op) { has_grad = has_grad || op.kind == ir::OpKind::Grad; });
        }
        if (!has_grad) {
            sema::lint_module(a->sources, *a->program, *gir, a->diags, sema::LintOptions{});
            a->gir = std::move(gir);
            return a;
        }
        auto derived = std::make_unique<ir::Module>(*gir);
        transform::AutodiffOptions ad_options;
        ad_options.strict_comm = options.strict_comm;
        transform::autodiff(*derived, a->sources, a->diags, ad_options);
        if (!a->diags.has_errors()) transform::combine_collectives(*derived);
        if (!a->diags.has_errors()) sema::lint_module(a->sources, *a->program, *derived, a->diags, sema::LintOptions{});
        a->gir = a->diags.has_errors() ? std::move(gir) : std::move(derived);
    } catch (const InternalError& e) {
        a->internal_error = e.message;
    } catch (const std::bad_alloc&) {
        a->internal_error = "out of memory";
    }
    return a;
}

}  // namespace meshc::lsp

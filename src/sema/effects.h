// Communication effects (docs/language.md, "Effects"): what each function instance sends,
// over which mesh axes and how many bytes per device, inferred from its collectives and
// its callees'; and the check of the effects functions declare (`! nocomm`,
// `! comm(model <= 4 * B * D)`) against them, for the forward pass and for the backward
// pass autodiff derives. Run by the pass list as `effects` (after combine-collectives);
// read by `meshc explain --effects`.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "ir/gir.h"
#include "sema/loader.h"
#include "support/diagnostics.h"

namespace meshc::sema {

/// Bytes each device sends per call, by mesh axis name (a collective over several axes
/// counts against each of them). Empty: the function does not communicate.
struct CommEffect {
    std::map<std::string, double> bytes;
    bool exact = true;  // false where a loop's trip count is not a constant (counted once)
};

/// The effect of every function of `module`, indexed like module.functions.
std::vector<CommEffect> infer_effects(const ir::Module& module);

/// `! nocomm` or `! comm(data <= 4 bytes, model <= 1024 bytes)`.
std::string effect_to_string(const CommEffect& effect);

/// E0408 at the first collective that a declared effect does not allow (an axis it does
/// not name, or the bytes past a bound), with the calls that lead there; E0409 for a
/// declaration that names an axis no mesh has or a size the function does not have.
void check_effects(const SourceManager& sources, const Program& program, const ir::Module& module,
                   DiagnosticEngine& diags);

/// `meshc explain --effects`: every function instance's inferred effect and its
/// declaration (text, or JSON with `--format=json`).
void print_effects(std::ostream& out, const SourceManager& sources, const Program& program, const ir::Module& module,
                   bool json);

}  // namespace meshc::sema

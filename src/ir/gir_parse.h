// Reads the textual GIR back: the form `print_module` writes (--emit=gir, --emit=gir-checked,
// --dump-after), so that one pass can be run on a file and tested from GIR in to GIR out
// (`meshc opt`, docs/cli.md). Printing a module read from a printed one gives the same
// text (tests/conformance/gir_roundtrip.py checks it on every example and end-to-end
// program).
//
// Positions: an op's `@L:C` is in its function's file (the `@PATH:L:C` after the function
// header's `{`), `@PATH:L:C` in another. A file that can be read is loaded, so that a
// pass's diagnostics quote the source; one that cannot is stood in for by blank lines. A
// function without a position (a hand-written test) has its ops' `@L:C` in the GIR file
// itself. Lines that are only a `//` comment (a lit test's RUN and CHECK lines) are skipped.
#pragma once

#include <optional>

#include "ir/gir.h"
#include "support/diagnostics.h"
#include "support/source_manager.h"

namespace meshc::ir {

/// Parses `file` of `sources` (more files may be added for the positions it names). A
/// malformed text is reported as E0712 at the offending token; nullopt then. The module is
/// not verified (run verify_module).
std::optional<Module> parse_module(SourceManager& sources, FileId file, DiagnosticEngine& diags);

}  // namespace meshc::ir

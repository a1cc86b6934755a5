// Diagnostics as data: every phase emits into a DiagnosticEngine; the driver renders the
// collected bundle once, as human text (clang/rustc style) or as JSON lines. The language
// server will consume the same bundle.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "support/source_manager.h"

namespace meshc {

enum class Severity : uint8_t { Error, Warning, Note };

enum class DiagCode : uint16_t {
#define MESHC_DIAG(code, severity, title) code,
#include "support/diagnostic_codes.def"
#undef MESHC_DIAG
};

/// Static facts about a code, from diagnostic_codes.def.
struct DiagCodeInfo {
    std::string_view name;  // "E0104"
    Severity severity;
    std::string_view title;
};
const DiagCodeInfo& diag_code_info(DiagCode code);
/// Every code in table order (for docs and the coverage test).
const std::vector<DiagCode>& all_diag_codes();

struct DiagNote {
    Span span;  // may be invalid: a note without a location
    std::string message;
    /// A call that instantiated the function the error is in ("in `f` (called with N = 6),
    /// instantiated here"): the chain leads from the error out to the user's call.
    bool instantiation = false;
};

struct Diagnostic {
    DiagCode code;
    Severity severity;
    Span span;
    std::string message;
    std::vector<DiagNote> notes;

    Diagnostic& note(std::string message, Span span = {}) {
        notes.push_back(DiagNote{span, std::move(message)});
        return *this;
    }
};

class DiagnosticEngine {
public:
    /// Records a diagnostic; the returned reference is valid until the next emit().
    Diagnostic& emit(DiagCode code, Span span, std::string message);
    /// `--deny CODE`: a warning of this code is reported as an error from now on.
    void deny(DiagCode code) { denied_.push_back(code); }

    const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
    /// The i-th diagnostic, to add notes or move it (a callee's error to its call site).
    Diagnostic& diagnostic(size_t i) { return diagnostics_[i]; }
    size_t error_count() const { return error_count_; }
    bool has_errors() const { return error_count_ > 0; }

    /// Drops the diagnostics emitted after the first `count` (a phase that redoes work
    /// after a better choice discards what the first try reported).
    void truncate(size_t count);

    /// Diagnostics sorted by file and position (stable for equal positions).
    std::vector<Diagnostic> sorted() const;

private:
    std::vector<Diagnostic> diagnostics_;
    std::vector<DiagCode> denied_;
    size_t error_count_ = 0;
};

/// `file:line:col: error[E0104]: message`, the source line, carets under the span, notes.
void render_human(std::ostream& out, const SourceManager& sources,
                  const std::vector<Diagnostic>& diagnostics);
/// One JSON object per line: {"severity","code","message","file","line","col",
/// "end_line","end_col","notes":[{"message","file","line","col","end_line","end_col"}]}.
void render_json(std::ostream& out, const SourceManager& sources,
                 const std::vector<Diagnostic>& diagnostics);
/// render_human with ANSI colours (for a terminal).
void render_human_colored(std::ostream& out, const SourceManager& sources,
                          const std::vector<Diagnostic>& diagnostics);
/// `file:line:col: error[E0104]: message`, one line per diagnostic, no snippet or notes
/// (what editors' problem matchers read); `meshc: error[E0701]: ...` without a location.
void render_short(std::ostream& out, const SourceManager& sources,
                  const std::vector<Diagnostic>& diagnostics);

/// A broken compiler invariant (never a user error). The driver turns it into
/// "internal compiler error" and exit status 2.
struct InternalError {
    std::string message;
};
[[noreturn]] void internal_error(std::string message, const char* file, int line);

}  // namespace meshc

#define MESHC_ASSERT(cond, msg)                                             \
    do {                                                                    \
        if (!(cond)) ::meshc::internal_error((msg), __FILE__, __LINE__);    \
    } while (false)

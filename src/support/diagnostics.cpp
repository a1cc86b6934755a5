// Diagnostic code table and the two renderers; see diagnostics.h.
#include "support/diagnostics.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace meshc {

namespace {

const DiagCodeInfo kCodeInfos[] = {
#define MESHC_DIAG(code, severity, title) {#code, Severity::severity, title},
#include "support/diagnostic_codes.def"
#undef MESHC_DIAG
};

std::string_view severity_name(Severity s) {
    switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
    }
    return "error";
}

// Expands tabs so that carets line up with what a terminal shows.
std::string expand_tabs(std::string_view line, uint32_t upto, uint32_t* visual_col) {
    std::string out;
    for (uint32_t i = 0; i < line.size(); ++i) {
        if (i == upto) *visual_col = static_cast<uint32_t>(out.size());
        if (line[i] == '\t') {
            out.append(4 - out.size() % 4, ' ');
        } else {
            out.push_back(line[i]);
        }
    }
    if (upto >= line.size()) *visual_col = static_cast<uint32_t>(out.size()) + (upto - static_cast<uint32_t>(line.size()));
    return out;
}

// A source line longer than this many bytes is shown as a window of this width around
// the start of the span, `...` marking what is cut off on either side: a diagnostic's
// output stays small however long the line (a minified file, a file of NUL bytes).
constexpr uint32_t kMaxSnippetBytes = 120;
// How much of the line before the span such a window shows.
constexpr uint32_t kSnippetContextBefore = 40;

void render_snippet(std::ostream& out, const SourceManager& sources, Span span, bool color = false) {
    LineCol start = sources.line_col(span.file, span.begin);
    LineCol stop = sources.line_col(span.file, span.end);
    std::string_view line = sources.line_text(span.file, start.line);
    uint32_t begin = start.col - 1;
    // Underline to the end of the span, or to the end of the line for multi-line spans.
    uint32_t end = stop.line == start.line ? stop.col - 1 : static_cast<uint32_t>(line.size());
    std::string_view before_marker, after_marker;
    if (line.size() > kMaxSnippetBytes) {
        auto size = static_cast<uint32_t>(line.size());
        uint32_t lo = begin > kSnippetContextBefore ? begin - kSnippetContextBefore : 0;
        uint32_t hi = std::min(size, lo + kMaxSnippetBytes);
        if (hi - lo < kMaxSnippetBytes) lo = hi > kMaxSnippetBytes ? hi - kMaxSnippetBytes : 0;
        lo = std::min(lo, begin);
        // Do not cut a UTF-8 sequence in two.
        auto continuation = [&](uint32_t i) { return i < size && (static_cast<unsigned char>(line[i]) & 0xC0) == 0x80; };
        while (lo < begin && continuation(lo)) ++lo;
        while (hi > lo && hi > begin && continuation(hi)) --hi;
        if (lo > 0) before_marker = "...";
        if (hi < size) after_marker = "...";
        line = line.substr(lo, hi - lo);
        begin -= lo;
        end = std::min(end, hi) - lo;
    }
    uint32_t caret_begin = 0;
    uint32_t caret_end = 0;
    std::string shown = expand_tabs(line, begin, &caret_begin);
    expand_tabs(line, end, &caret_end);
    uint32_t width = caret_end > caret_begin ? caret_end - caret_begin : 1;
    caret_begin += static_cast<uint32_t>(before_marker.size());
    std::string number = std::to_string(start.line);
    std::string gutter(number.size(), ' ');
    out << fmt::format(" {} | {}{}{}\n", number, before_marker, shown, after_marker);
    out << fmt::format(" {} | {}{}^{}{}\n", gutter, std::string(caret_begin, ' '), color ? "\033[1;32m" : "",
                       std::string(width - 1, '~'), color ? "\033[0m" : "");
}

void add_location(nlohmann::ordered_json& j, const SourceManager& sources, Span span) {
    if (!span.valid()) {
        j["file"] = nullptr;
        j["line"] = nullptr;
        j["col"] = nullptr;
        j["end_line"] = nullptr;
        j["end_col"] = nullptr;
        return;
    }
    LineCol start = sources.line_col(span.file, span.begin);
    LineCol stop = sources.line_col(span.file, span.end);
    j["file"] = sources.path(span.file);
    j["line"] = start.line;
    j["col"] = start.col;
    j["end_line"] = stop.line;
    j["end_col"] = stop.col;
}

}  // namespace

const DiagCodeInfo& diag_code_info(DiagCode code) {
    return kCodeInfos[static_cast<size_t>(code)];
}

const std::vector<DiagCode>& all_diag_codes() {
    static const std::vector<DiagCode> codes = [] {
        std::vector<DiagCode> v;
        for (size_t i = 0; i < std::size(kCodeInfos); ++i) v.push_back(static_cast<DiagCode>(i));
        return v;
    }();
    return codes;
}

Diagnostic& DiagnosticEngine::emit(DiagCode code, Span span, std::string message) {
    Severity severity = diag_code_info(code).severity;
    if (severity == Severity::Warning && std::find(denied_.begin(), denied_.end(), code) != denied_.end()) {
        severity = Severity::Error;
    }
    if (severity == Severity::Error) ++error_count_;
    diagnostics_.push_back(Diagnostic{code, severity, span, std::move(message), {}});
    return diagnostics_.back();
}

void DiagnosticEngine::truncate(size_t count) {
    if (count >= diagnostics_.size()) return;
    diagnostics_.resize(count);
    error_count_ = 0;
    for (const Diagnostic& d : diagnostics_) error_count_ += d.severity == Severity::Error ? 1 : 0;
}

std::vector<Diagnostic> DiagnosticEngine::sorted() const {
    std::vector<Diagnostic> result = diagnostics_;
    std::stable_sort(result.begin(), result.end(), [](const Diagnostic& a, const Diagnostic& b) {
        if (a.span.file != b.span.file) return a.span.file < b.span.file;
        return a.span.begin < b.span.begin;
    });
    // The same diagnostic reported twice (one type checked in two places, e.g. a struct
    // field's type in each function that uses the struct; an error in a generic body that
    // does not depend on the instance, found in each instance) is shown once, with the
    // first one's instantiation notes.
    auto same_span = [](Span a, Span b) { return a.file == b.file && a.begin == b.begin && a.end == b.end; };
    auto own_notes = [](const Diagnostic& d) {
        std::vector<const DiagNote*> notes;
        for (const DiagNote& n : d.notes) {
            if (!n.instantiation) notes.push_back(&n);
        }
        return notes;
    };
    auto same = [&](const Diagnostic& a, const Diagnostic& b) {
        if (a.code != b.code || a.severity != b.severity || !same_span(a.span, b.span) || a.message != b.message) return false;
        auto an = own_notes(a), bn = own_notes(b);
        if (an.size() != bn.size()) return false;
        for (size_t i = 0; i < an.size(); ++i) {
            if (!same_span(an[i]->span, bn[i]->span) || an[i]->message != bn[i]->message) return false;
        }
        return true;
    };
    std::vector<Diagnostic> unique;
    unique.reserve(result.size());
    for (Diagnostic& d : result) {
        bool seen = false;
        // Equal diagnostics have equal positions, so they are neighbours after the sort
        // (up to others at the same position).
        for (size_t i = unique.size(); i-- > 0 && unique[i].span.file == d.span.file &&
                                       unique[i].span.begin == d.span.begin;) {
            if (same(unique[i], d)) {
                seen = true;
                break;
            }
        }
        if (!seen) unique.push_back(std::move(d));
    }
    return unique;
}

namespace {

// ANSI colours of the human format (only where the driver asks for them): locations and
// messages bold, the severity red (error) or yellow (warning), notes cyan, carets green.
struct Palette {
    bool on;
    const char* bold() const { return on ? "\033[1m" : ""; }
    const char* severity(Severity s) const {
        if (!on) return "";
        return s == Severity::Error ? "\033[1;31m" : s == Severity::Warning ? "\033[1;33m" : "\033[1;36m";
    }
    const char* note() const { return on ? "\033[1;36m" : ""; }
    const char* reset() const { return on ? "\033[0m" : ""; }
};

void render_human_impl(std::ostream& out, const SourceManager& sources,
                       const std::vector<Diagnostic>& diagnostics, bool color) {
    Palette p{color};
    for (const Diagnostic& d : diagnostics) {
        std::string_view code = diag_code_info(d.code).name;
        if (d.span.valid()) {
            LineCol lc = sources.line_col(d.span.file, d.span.begin);
            out << fmt::format("{}{}:{}:{}: {}{}[{}]: {}{}{}{}\n", p.bold(), sources.path(d.span.file), lc.line,
                               lc.col, p.severity(d.severity), severity_name(d.severity), code, p.reset(),
                               p.bold(), d.message, p.reset());
            render_snippet(out, sources, d.span, color);
        } else {
            out << fmt::format("{}{}[{}]: {}{}{}{}\n", p.severity(d.severity), severity_name(d.severity), code,
                               p.reset(), p.bold(), d.message, p.reset());
        }
        for (const DiagNote& n : d.notes) {
            if (n.span.valid()) {
                LineCol lc = sources.line_col(n.span.file, n.span.begin);
                out << fmt::format("{}{}:{}:{}: {}note:{} {}\n", p.bold(), sources.path(n.span.file), lc.line,
                                   lc.col, p.note(), p.reset(), n.message);
                render_snippet(out, sources, n.span, color);
            } else {
                out << fmt::format("  = {}note:{} {}\n", p.note(), p.reset(), n.message);
            }
        }
    }
}

}  // namespace

void render_human(std::ostream& out, const SourceManager& sources,
                  const std::vector<Diagnostic>& diagnostics) {
    render_human_impl(out, sources, diagnostics, false);
}

void render_human_colored(std::ostream& out, const SourceManager& sources,
                          const std::vector<Diagnostic>& diagnostics) {
    render_human_impl(out, sources, diagnostics, true);
}

void render_short(std::ostream& out, const SourceManager& sources,
                  const std::vector<Diagnostic>& diagnostics) {
    for (const Diagnostic& d : diagnostics) {
        std::string_view code = diag_code_info(d.code).name;
        std::string message = d.message;
        std::replace(message.begin(), message.end(), '\n', ' ');
        if (d.span.valid()) {
            LineCol lc = sources.line_col(d.span.file, d.span.begin);
            out << fmt::format("{}:{}:{}: {}[{}]: {}\n", sources.path(d.span.file), lc.line, lc.col,
                               severity_name(d.severity), code, message);
        } else {
            out << fmt::format("meshc: {}[{}]: {}\n", severity_name(d.severity), code, message);
        }
    }
}

void render_json(std::ostream& out, const SourceManager& sources,
                 const std::vector<Diagnostic>& diagnostics) {
    for (const Diagnostic& d : diagnostics) {
        nlohmann::ordered_json j;
        j["severity"] = severity_name(d.severity);
        j["code"] = diag_code_info(d.code).name;
        j["message"] = d.message;
        add_location(j, sources, d.span);
        j["notes"] = nlohmann::ordered_json::array();
        for (const DiagNote& n : d.notes) {
            nlohmann::ordered_json note;
            note["message"] = n.message;
            add_location(note, sources, n.span);
            j["notes"].push_back(std::move(note));
        }
        // Invalid UTF-8 in a message (from a hostile source file) must not throw.
        out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
}

void internal_error(std::string message, const char* file, int line) {
    throw InternalError{fmt::format("{} ({}:{})", message, file, line)};
}

}  // namespace meshc

// The language server's answers, computed from one Analysis (analysis.h): diagnostics,
// hover, definition, references, document symbols, inlay hints, semantic tokens and
// code actions, as LSP JSON. Called by server.cpp; each function only reads.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "lsp/analysis.h"
#include "lsp/protocol.h"

namespace meshc::lsp {

/// Positions in the files of one analysis: the root's text is the document's.
class Positions {
public:
    Positions(const Analysis& analysis, bool utf16) : a_(analysis), utf16_(utf16) {}
    const LineIndex& index(FileId file);
    json range(Span span);
    json location(Span span);
    std::string uri(FileId file) const;

private:
    const Analysis& a_;
    bool utf16_;
    std::map<FileId, std::unique_ptr<LineIndex>> indexes_;
};

json diagnostics_json(const Analysis& a, Positions& pos);
json hover(const Analysis& a, Positions& pos, uint32_t offset);
json definition(const Analysis& a, Positions& pos, uint32_t offset);
json references(const Analysis& a, Positions& pos, uint32_t offset, bool include_declaration);
json document_symbols(const Analysis& a, Positions& pos);
json inlay_hints(const Analysis& a, Positions& pos, uint32_t begin, uint32_t end);
/// The legend advertised in `initialize`.
json semantic_tokens_legend();
json semantic_tokens(const Analysis& a, Positions& pos);
/// Quick fixes in [begin, end): "make this communication explicit" for each
/// collective the checker inserted (and each E0406) there.
json code_actions(const Analysis& a, Positions& pos, const std::string& uri, uint32_t begin, uint32_t end);

}  // namespace meshc::lsp

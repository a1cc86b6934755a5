// The lexer: source text -> tokens. Produced from a SourceManager file; consumed by the
// parser. Lexical errors (E0101-E0105, E0108, E0111) are reported here and the lexer
// recovers (an invalid character is skipped, an unterminated string ends at its line).
#pragma once

#include <vector>

#include "support/diagnostics.h"
#include "syntax/token.h"

namespace meshc::syntax {

/// Source files larger than this are rejected with E0111 (hostile-input limit).
inline constexpr size_t kMaxSourceBytes = 16u << 20;

/// Tokenizes a whole file. The result always ends with an Eof token. Doc comments are
/// kept as DocComment tokens; ordinary comments and whitespace are dropped.
std::vector<Token> lex(const SourceManager& sources, FileId file, DiagnosticEngine& diags);

/// The value of an integer literal token's text ("1_000" -> 1000). A literal too large
/// for int64 (reported by the lexer, E0105) gives INT64_MAX.
int64_t int_literal_value(std::string_view text);
/// Whether an integer literal token's text fits in int64.
bool int_literal_fits(std::string_view text);
/// The value of a float literal token's text.
double float_literal_value(std::string_view text);
/// The value of a string literal token's text, quotes removed and escapes decoded.
std::string string_literal_value(std::string_view text);

}  // namespace meshc::syntax

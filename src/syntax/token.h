// Tokens: produced by the lexer (lexer.cpp), consumed by the parser (parser.cpp).
#pragma once

#include <cstdint>
#include <string_view>

#include "support/source_manager.h"

namespace meshc::syntax {

enum class TokenKind : uint8_t {
#define MESHC_TOKEN(name, spelling) name,
#include "syntax/token_kinds.def"
};

/// How diagnostics name a token kind: "`;`", "identifier", "end of file".
std::string_view token_spelling(TokenKind kind);
bool is_dtype_keyword(TokenKind kind);

struct Token {
    TokenKind kind = TokenKind::Eof;
    uint32_t begin = 0;  // byte offsets into the file
    uint32_t end = 0;
};

}  // namespace meshc::syntax

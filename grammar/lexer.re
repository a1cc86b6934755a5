// lexer.re — re2c source of the reference grammar's lexer (LEXICAL in
// docs/grammar-spec.txt). Input: one file's bytes followed by a '\0' sentinel.
// Output: mesh::grammar::Parser tokens with 1-based line/byte-column locations for
// grammar/mesh.y; the first lexical error goes into the Lexer's Diagnostic and the
// scanner returns YYerror, which makes the parser stop without a message of its own.

#include <cstdint>
#include <limits>
#include <utility>

#include "mesh.tab.hpp"

namespace mesh::grammar {

namespace {
using token = Parser::token;
}  // namespace

/*!re2c
  re2c:define:YYCTYPE = "unsigned char";
  re2c:define:YYCURSOR = cur_;
  re2c:define:YYMARKER = mar_;
  re2c:define:YYLIMIT = lim_;
  re2c:yyfill:enable = 0;
  re2c:eof = 0;

  digit     = [0-9];
  int_lit   = digit+ ("_" digit+)*;
  exponent  = [eE] [+-]? digit+;
  float_lit = int_lit "." digit+ ("_" digit+)* exponent? | int_lit exponent;
  ident     = [A-Za-z_] [A-Za-z0-9_]*;
*/

Lexer::Lexer(const char* begin, std::size_t size)
    : cur_(reinterpret_cast<const unsigned char*>(begin)),
      lim_(cur_ + size),
      line_start_(cur_) {}

void Lexer::report(int line, int column, std::string message) {
  if (diag_.set) return;
  diag_.set = true;
  diag_.line = line;
  diag_.column = column;
  diag_.message = std::move(message);
}

Parser::token_kind_type Lexer::error_at(const unsigned char* at, const char* message) {
  report(line_, column_of(at), message);
  return token::TOK_YYerror;
}

Parser::token_kind_type Lexer::next(Parser::location_type& loc) {
  const Parser::token_kind_type kind = scan(loc);
  loc.end.line = line_;
  loc.end.column = column_of(cur_);
  previous_ = last_;
  previous_loc_ = last_loc_;
  last_ = kind;
  last_loc_ = loc;
  return kind;
}

Parser::token_kind_type Lexer::scan(Parser::location_type& loc) {
  for (;;) {
    tok_ = cur_;
    loc.begin.line = line_;
    loc.begin.column = column_of(tok_);
    /*!local:re2c
      $         { return token::TOK_YYEOF; }
      [ \t\r]+  { continue; }
      "\n"      { newline_at(tok_); continue; }

      // '///' followed by anything but '/' (or by the end of the line) is a doc comment;
      // on a tie with the ordinary-comment rule below the earlier rule wins.
      "///" ([^/\n] [^\n]*)?  { return token::TOK_DOC_COMMENT; }
      "//" [^\n]*              { continue; }
      [/][*]    { if (block_comment()) continue; return token::TOK_YYerror; }

      "import"  { return token::TOK_IMPORT; }
      "as"      { return token::TOK_AS; }
      "mesh"    { return token::TOK_MESH; }
      "struct"  { return token::TOK_STRUCT; }
      "fn"      { return token::TOK_FN; }
      "let"     { return token::TOK_LET; }
      "var"     { return token::TOK_VAR; }
      "for"     { return token::TOK_FOR; }
      "in"      { return token::TOK_IN; }
      "if"      { return token::TOK_IF; }
      "else"    { return token::TOK_ELSE; }
      "return"  { return token::TOK_RETURN; }
      "where"   { return token::TOK_WHERE; }
      "with"    { return token::TOK_WITH; }
      "on"      { return token::TOK_ON; }
      "partial" { return token::TOK_PARTIAL; }
      "auto"    { return token::TOK_AUTO; }
      "Tensor"  { return token::TOK_TENSOR; }
      "true"    { return token::TOK_TRUE; }
      "false"   { return token::TOK_FALSE; }
      "bool" | "i32" | "i64" | "f16" | "bf16" | "f32" | "f64"
                { return token::TOK_DTYPE; }
      "_"       { return token::TOK_UNDERSCORE; }
      ident     { return token::TOK_IDENT; }

      int_lit   { return integer(); }
      float_lit { return token::TOK_FLOAT; }
      ["]       { return string_literal(); }

      "("  { return token::TOK_LPAREN; }
      ")"  { return token::TOK_RPAREN; }
      "["  { return token::TOK_LBRACKET; }
      "]"  { return token::TOK_RBRACKET; }
      "{"  { return token::TOK_LBRACE; }
      "}"  { return token::TOK_RBRACE; }
      ","  { return token::TOK_COMMA; }
      ":"  { return token::TOK_COLON; }
      ";"  { return token::TOK_SEMI; }
      "."  { return token::TOK_DOT; }
      ".." { return token::TOK_DOTDOT; }
      "->" { return token::TOK_ARROW; }
      "="  { return token::TOK_ASSIGN; }
      "==" { return token::TOK_EQ; }
      "!=" { return token::TOK_NE; }
      "<"  { return token::TOK_LT; }
      "<=" { return token::TOK_LE; }
      ">"  { return token::TOK_GT; }
      ">=" { return token::TOK_GE; }
      "+"  { return token::TOK_PLUS; }
      "-"  { return token::TOK_MINUS; }
      "*"  { return token::TOK_STAR; }
      "/"  { return token::TOK_SLASH; }
      "%"  { return token::TOK_PERCENT; }
      "@"  { return token::TOK_AT; }
      "!"  { return token::TOK_BANG; }
      "&&" { return token::TOK_ANDAND; }
      "||" { return token::TOK_OROR; }

      "&"  { return error_at(tok_, "'&' is not an operator (logical and is '&&')"); }
      "|"  { return error_at(tok_, "'|' is not an operator (logical or is '||')"); }
      [\x00]      { return error_at(tok_, "NUL byte outside a string or comment"); }
      [\x80-\xff] { return error_at(tok_, "non-ASCII byte outside a string or comment"); }
      *           { return error_at(tok_, "unexpected character"); }
    */
  }
}

// tok_ .. cur_ is an int_lit; its value (underscores ignored) must fit in int64.
Parser::token_kind_type Lexer::integer() {
  constexpr std::uint64_t max = std::numeric_limits<std::int64_t>::max();
  std::uint64_t value = 0;
  for (const unsigned char* p = tok_; p != cur_; ++p) {
    if (*p == '_') continue;
    const std::uint64_t digit = *p - '0';
    if (value > (max - digit) / 10)
      return error_at(tok_, "integer literal does not fit in i64");
    value = value * 10 + digit;
  }
  return token::TOK_INT;
}

// Skips a (nesting) block comment whose '/*' is tok_ .. cur_. Returns false after
// reporting an error.
bool Lexer::block_comment() {
  const int open_line = line_;
  const int open_column = column_of(tok_);
  int depth = 1;
  for (;;) {
    const unsigned char* start = cur_;
    /*!local:re2c
      [/][*] { ++depth; continue; }
      [*][/] { if (--depth == 0) return true; continue; }
      "\n"   { newline_at(start); continue; }
      $      { report(open_line, open_column, "unterminated block comment"); return false; }
      *      { continue; }
    */
  }
}

// Scans a string literal whose opening quote is tok_ (cur_ is just past it).
Parser::token_kind_type Lexer::string_literal() {
  for (;;) {
    const unsigned char* start = cur_;
    /*!local:re2c
      ["]          { return token::TOK_STRING; }
      [\\] ["\\n]  { continue; }
      [\\]         { return error_at(start, "invalid escape in string literal (only \\\" \\\\ \\n)"); }
      "\n"         { return error_at(tok_, "unterminated string literal"); }
      $            { return error_at(tok_, "unterminated string literal"); }
      *            { continue; }
    */
  }
}

Parser::token_kind_type yylex(Parser::value_type* /*value*/, Parser::location_type* loc,
                              Lexer& lexer) {
  return lexer.next(*loc);
}

}  // namespace mesh::grammar

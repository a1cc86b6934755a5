// mesh.y — the reference grammar of Mesh's surface syntax (docs/grammar-spec.txt).
// Input: tokens from grammar/lexer.re. Output: accept/reject only (no AST); used by
// grammar/recognize.cpp and by tests/conformance, which compares it with src/syntax/.
//
// The grammar is conflict-free LALR(1): %expect 0 makes any conflict a build error
// (for a deterministic parser Bison also rejects every reduce/reduce conflict under
// %expect; %expect-rr exists only for GLR parsers). Two context rules of the spec are
// encoded by duplicating the expression nonterminals, not by precedence declarations
// (docs/grammar.md explains both):
//   *_e   full expressions;
//   *_ns  "no struct": a struct literal may not appear at the top level (if / for);
//   *_st  "statement start": the expression may not begin with 'if'.

%require "3.8"
%language "c++"
%define api.namespace {mesh::grammar}
%define api.parser.class {Parser}
%define api.token.prefix {TOK_}
%define api.location.file none
%define api.value.type {int}
%define parse.error custom
%locations
%param {mesh::grammar::Lexer& lexer}

%expect 0

%code requires {
#include <cstddef>
#include <string>
namespace mesh::grammar {
class Lexer;
}
}

%code provides {
namespace mesh::grammar {

// The first error found in one file, by the lexer or the parser.
struct Diagnostic {
  bool set = false;
  int line = 0;
  int column = 0;
  std::string message;
};

// Scans one file held in memory. The byte at begin[size] must be '\0' (re2c's
// end-of-input sentinel); a '\0' before it is an ordinary byte (allowed in strings
// and comments, an error elsewhere).
class Lexer {
 public:
  Lexer(const char* begin, std::size_t size);
  Parser::token_kind_type next(Parser::location_type& loc);
  // Records an error unless one was recorded already (the first error wins).
  void report(int line, int column, std::string message);
  const Diagnostic& diagnostic() const { return diag_; }
  // The token before the one returned last (a doc comment, when the file ends right
  // after one), for Parser::report_syntax_error.
  Parser::token_kind_type previous_token() const { return previous_; }
  const Parser::location_type& previous_location() const { return previous_loc_; }

 private:
  Parser::token_kind_type scan(Parser::location_type& loc);
  Parser::token_kind_type error_at(const unsigned char* at, const char* message);
  Parser::token_kind_type integer();
  bool block_comment();
  Parser::token_kind_type string_literal();
  int column_of(const unsigned char* p) const {
    return static_cast<int>(p - line_start_) + 1;
  }
  void newline_at(const unsigned char* p) {
    ++line_;
    line_start_ = p + 1;
  }

  const unsigned char* cur_;
  const unsigned char* lim_;
  const unsigned char* mar_ = nullptr;
  const unsigned char* tok_ = nullptr;
  const unsigned char* line_start_;
  int line_ = 1;
  Parser::token_kind_type last_ = Parser::token::TOK_YYEOF;
  Parser::location_type last_loc_;
  Parser::token_kind_type previous_ = Parser::token::TOK_YYEOF;
  Parser::location_type previous_loc_;
  Diagnostic diag_;
};

Parser::token_kind_type yylex(Parser::value_type* value, Parser::location_type* loc,
                              Lexer& lexer);

}  // namespace mesh::grammar
}

%code {
namespace mesh::grammar {
namespace {

// Punctuation and keywords are quoted ("unexpected ','"); token classes are not
// ("unexpected identifier").
std::string describe(Parser::symbol_kind_type kind) {
  using S = Parser::symbol_kind;
  const std::string name = Parser::symbol_name(kind);
  switch (kind) {
    case S::S_YYEOF: case S::S_YYerror: case S::S_YYUNDEF: case S::S_DOC_COMMENT:
    case S::S_IDENT: case S::S_INT: case S::S_FLOAT: case S::S_STRING: case S::S_DTYPE:
      return name;
    default:
      return "'" + name + "'";
  }
}

}  // namespace

void Parser::report_syntax_error(const context& ctx) const {
  const symbol_kind_type unexpected = ctx.token();
  if (unexpected == symbol_kind::S_YYEOF &&
      lexer.previous_token() == token::TOK_DOC_COMMENT) {
    const location_type& doc = lexer.previous_location();
    lexer.report(doc.begin.line, doc.begin.column,
                 "doc comment at end of file: it must be followed by an item");
    return;
  }
  if (unexpected == symbol_kind::S_DOC_COMMENT) {
    lexer.report(ctx.location().begin.line, ctx.location().begin.column,
                 "doc comment is only allowed directly before an item");
    return;
  }
  std::string message = "syntax error";
  if (unexpected != symbol_kind::S_YYEMPTY) message += ": unexpected " + describe(unexpected);
  // At most four alternatives are listed (none when there are more), as Bison does.
  symbol_kind_type expected[4];
  const int count = ctx.expected_tokens(expected, 4);
  for (int i = 0; i < count; ++i)
    message += (i == 0 ? ", expecting " : " or ") + describe(expected[i]);
  lexer.report(ctx.location().begin.line, ctx.location().begin.column, message);
}

void Parser::error(const location_type& loc, const std::string& message) {
  lexer.report(loc.begin.line, loc.begin.column, message);
}

}  // namespace mesh::grammar
}

%token DOC_COMMENT "doc comment"
%token IDENT "identifier"
%token INT "integer literal"
%token FLOAT "float literal"
%token STRING "string literal"
%token DTYPE "element type"

%token IMPORT "import" AS "as" MESH "mesh" STRUCT "struct" FN "fn" LET "let" VAR "var"
       FOR "for" IN "in" IF "if" ELSE "else" RETURN "return" WHERE "where" WITH "with" AUTO "auto"
       ON "on" PARTIAL "partial" TENSOR "Tensor" TRUE "true" FALSE "false"

%token LPAREN "(" RPAREN ")" LBRACKET "[" RBRACKET "]" LBRACE "{" RBRACE "}"
       COMMA "," COLON ":" SEMI ";" DOT "." DOTDOT ".." ARROW "->" ASSIGN "="
       EQ "==" NE "!=" LT "<" LE "<=" GT ">" GE ">="
       PLUS "+" MINUS "-" STAR "*" SLASH "/" PERCENT "%" AT "@" BANG "!"
       ANDAND "&&" OROR "||" UNDERSCORE "_"

%start module

%%

// ---------------------------------------------------------------- items

module
  : %empty
  | module item
  ;

// DOC_COMMENT is accepted here and nowhere else.
item
  : docs attrs item_body
  ;

docs
  : %empty
  | docs DOC_COMMENT
  ;

attrs
  : %empty
  | attrs "@" IDENT
  ;

item_body
  : import
  | mesh
  | struct
  | fn
  ;

opt_comma
  : %empty
  | ","
  ;

import
  : "import" module_path ";"
  | "import" module_path "as" IDENT ";"
  ;

module_path
  : IDENT
  | module_path "." IDENT
  ;

mesh
  : "mesh" IDENT "=" "[" axes_decl opt_comma "]" ";"
  ;

axes_decl
  : axis_decl
  | axes_decl "," axis_decl
  ;

axis_decl
  : IDENT ":" INT
  | IDENT ":" INT "{" linkprops opt_comma "}"
  ;

linkprops
  : linkprop
  | linkprops "," linkprop
  ;

linkprop
  : IDENT ":" INT
  | IDENT ":" FLOAT
  ;

struct
  : "struct" IDENT opt_generics "{" "}"
  | "struct" IDENT opt_generics "{" fields opt_comma "}"
  ;

fields
  : field
  | fields "," field
  ;

field
  : IDENT ":" type
  ;

fn
  : "fn" IDENT opt_generics "(" params ")" opt_ret opt_effect opt_where block
  ;

// `! nocomm` or `! comm(axis [<= dim], ...)`: the function's communication effect
// (`nocomm` and `comm` are identifiers; meshc checks which).
opt_effect
  : %empty
  | "!" IDENT
  | "!" IDENT "(" effect_axes opt_comma ")"
  ;

effect_axes
  : effect_axis
  | effect_axes "," effect_axis
  ;

effect_axis
  : IDENT
  | IDENT "<=" dim
  ;

params
  : %empty
  | param_list opt_comma
  ;

param_list
  : param
  | param_list "," param
  ;

param
  : IDENT ":" type
  ;

opt_ret
  : %empty
  | "->" type
  ;

opt_generics
  : %empty
  | "[" gparams opt_comma "]"
  ;

gparams
  : gparam
  | gparams "," gparam
  ;

gparam
  : IDENT
  | IDENT ":" IDENT
  ;

opt_where
  : %empty
  | "where" constraints opt_comma
  ;

constraints
  : constraint
  | constraints "," constraint
  ;

constraint
  : dim cmpop dim
  ;

cmpop
  : "==" | "!=" | "<" | "<=" | ">" | ">="
  ;

// ---------------------------------------------------------------- types

type
  : DTYPE
  | tensor_type
  | "(" type ")"
  | "(" type "," ")"
  | "(" type "," types opt_comma ")"
  | IDENT opt_struct_dims
  | IDENT "." IDENT opt_struct_dims
  ;

types
  : type
  | types "," type
  ;

opt_struct_dims
  : %empty
  | "[" gargs opt_comma "]"
  ;

// A struct's generic arguments: sizes, meshes, parameter types, element types.
gargs
  : garg
  | gargs "," garg
  ;

garg
  : dim
  | DTYPE
  ;

// The element type: a keyword, or a generic `T: Float` (an identifier).
elem_type
  : DTYPE
  | IDENT
  ;

tensor_type
  : "Tensor" elem_type "[" "]" opt_on opt_with opt_partial
  | "Tensor" elem_type "[" dims opt_comma "]" opt_on opt_with opt_partial
  ;

dims
  : dim
  | dims "," dim
  ;

opt_on
  : %empty
  | "on" IDENT
  ;

opt_with
  : %empty
  | "with" layout
  | "with" "_"
  | "with" "auto"
  ;

opt_partial
  : %empty
  | "partial" "{" "}"
  | "partial" "{" idents opt_comma "}"
  ;

idents
  : IDENT
  | idents "," IDENT
  ;

layout
  : "{" "}"
  | "{" lentries opt_comma "}"
  ;

lentries
  : lentry
  | lentries "," lentry
  ;

lentry
  : IDENT ":" axes
  | INT ":" axes
  ;

axes
  : IDENT
  | "(" idents opt_comma ")"
  ;

dim
  : dimterm
  | dim "+" dimterm
  | dim "-" dimterm
  ;

dimterm
  : dimatom
  | dimterm "*" dimatom
  | dimterm "/" dimatom
  | dimterm "%" dimatom
  ;

dimatom
  : INT
  | IDENT
  | IDENT "." IDENT
  | "(" dim ")"
  ;

// ---------------------------------------------------------------- statements

block
  : "{" stmts "}"
  | "{" stmts expr_st "}"   // trailing value; may not start with 'if' (that is a stmt)
  ;

stmts
  : %empty
  | stmts stmt
  ;

stmt
  : "let" pattern "=" expr_e ";"
  | "let" pattern ":" type "=" expr_e ";"
  | "var" IDENT "=" expr_e ";"
  | "var" IDENT ":" type "=" expr_e ";"
  | "for" IDENT "in" expr_ns ".." expr_ns block
  | "return" ";"
  | "return" expr_e ";"
  | ifexpr                  // 'if' at the start of a statement is always a statement
  | ";"
  | expr_st "=" expr_e ";"
  | expr_st ";"
  ;

pattern
  : IDENT
  | "_"
  | "(" pattern ")"
  | "(" pattern "," ")"
  | "(" pattern "," patterns opt_comma ")"
  ;

patterns
  : pattern
  | patterns "," pattern
  ;

ifexpr
  : "if" expr_ns block
  | "if" expr_ns block "else" block
  | "if" expr_ns block "else" ifexpr
  ;

// ---------------------------------------------------------------- expressions
// Three copies of the precedence ladder  or > and > cmp > add > mul > unary >
// postfix > primary.  Only the leftmost operand of a _st expression is _st; every
// operand at the top level of a _ns expression is _ns.

// Full expressions.
expr_e   : or_e ;
or_e     : and_e | or_e "||" and_e ;
and_e    : cmp_e | and_e "&&" cmp_e ;
cmp_e    : add_e | add_e cmpop add_e ;           // non-associative
add_e    : mul_e | add_e "+" mul_e | add_e "-" mul_e ;
mul_e    : unary_e | mul_e mulop unary_e ;
unary_e  : "-" unary_e | "!" unary_e | postfix_e ;
postfix_e
  : primary_e
  | postfix_e "(" args ")"
  | postfix_e "." IDENT
  ;
primary_e
  : atom
  | struct_lit
  | ifexpr
  ;

// No struct literal at the top level ('if' conditions, 'for' bounds).
expr_ns  : or_ns ;
or_ns    : and_ns | or_ns "||" and_ns ;
and_ns   : cmp_ns | and_ns "&&" cmp_ns ;
cmp_ns   : add_ns | add_ns cmpop add_ns ;
add_ns   : mul_ns | add_ns "+" mul_ns | add_ns "-" mul_ns ;
mul_ns   : unary_ns | mul_ns mulop unary_ns ;
unary_ns : "-" unary_ns | "!" unary_ns | postfix_ns ;
postfix_ns
  : primary_ns
  | postfix_ns "(" args ")"
  | postfix_ns "." IDENT
  ;
primary_ns
  : atom
  | ifexpr
  ;

// Not starting with 'if' (expression statements, assignment targets, block values).
expr_st  : or_st ;
or_st    : and_st | or_st "||" and_e ;
and_st   : cmp_st | and_st "&&" cmp_e ;
cmp_st   : add_st | add_st cmpop add_e ;
add_st   : mul_st | add_st "+" mul_e | add_st "-" mul_e ;
mul_st   : unary_st | mul_st mulop unary_e ;
unary_st : "-" unary_e | "!" unary_e | postfix_st ;
postfix_st
  : primary_st
  | postfix_st "(" args ")"
  | postfix_st "." IDENT
  ;
primary_st
  : atom
  | struct_lit
  ;

mulop
  : "*" | "/" | "%" | "@"
  ;

// Primaries common to all three families. Brackets restore full expressions.
atom
  : INT
  | FLOAT
  | STRING
  | "true"
  | "false"
  | DTYPE
  | IDENT
  | "(" expr_e ")"
  | "(" expr_e "," ")"
  | "(" expr_e "," exprs opt_comma ")"
  | "[" "]"
  | "[" exprs opt_comma "]"
  ;

exprs
  : expr_e
  | exprs "," expr_e
  ;

struct_lit
  : IDENT "{" "}"
  | IDENT "{" finits opt_comma "}"
  ;

finits
  : finit
  | finits "," finit
  ;

finit
  : IDENT ":" expr_e
  ;

// Call arguments: all positional ones (expressions or layout literals) come first.
args
  : %empty
  | pos_args opt_comma
  | named_args opt_comma
  | pos_args "," named_args opt_comma
  ;

pos_args
  : pos_arg
  | pos_args "," pos_arg
  ;

pos_arg
  : expr_e
  | layout                  // layout literal, e.g. reshard(x, {B: data})
  ;

named_args
  : named_arg
  | named_args "," named_arg
  ;

named_arg
  : IDENT ":" expr_e
  ;

%%

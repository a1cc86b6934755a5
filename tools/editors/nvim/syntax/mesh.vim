" Vim syntax file for Mesh (meshc), the tensor language with sharding in the type.
if exists('b:current_syntax') | finish | endif

syn keyword meshKeyword import as mesh struct fn let var for in if else return where with on partial
syn keyword meshBoolean true false
syn keyword meshType Tensor bool i32 i64 f16 bf16 f32 f64 Mesh Dim
syn keyword meshCollective all_reduce reduce_scatter all_gather all_to_all reshard
syn match meshAttribute "@[A-Za-z_][A-Za-z0-9_]*"
syn match meshFunction "\<[A-Za-z_][A-Za-z0-9_]*\ze\s*("
syn match meshNumber "\<\d[0-9_]*\(\.\d[0-9_]*\)\=\([eE][+-]\=\d[0-9_]*\)\=\>"
syn region meshString start=+"+ skip=+\\\\\|\\"+ end=+"+ oneline
syn match meshOperator "->\|\.\.\|@\|[-+*/%=<>!&|]"
syn match meshComment "//.*$" contains=meshTodo
syn match meshDocComment "///.*$" contains=meshTodo
syn keyword meshTodo TODO FIXME XXX contained

hi def link meshKeyword Keyword
hi def link meshBoolean Boolean
hi def link meshType Type
hi def link meshCollective Special
hi def link meshAttribute PreProc
hi def link meshFunction Function
hi def link meshNumber Number
hi def link meshString String
hi def link meshOperator Operator
hi def link meshComment Comment
hi def link meshDocComment SpecialComment
hi def link meshTodo Todo

let b:current_syntax = 'mesh'

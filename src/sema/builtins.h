// The built-in functions of docs/language.md, "Built-in functions", as one table. Consumed by name
// resolution (they share the item namespace) and, later, by the sharding rules.
#pragma once

#include <string_view>

namespace meshc::sema {

enum class Builtin : uint8_t {
#define MESHC_BUILTIN(name, group) name,
#include "sema/builtins.def"
    Count
};

struct BuiltinInfo {
    std::string_view name;
    std::string_view group;  // create, elementwise, reduce, shape, contract, lookup, comm, ad, io, tree
};

const BuiltinInfo& builtin_info(Builtin b);
/// Looks a name up among the built-ins; returns Builtin::Count when it is not one.
Builtin find_builtin(std::string_view name);

}  // namespace meshc::sema

// Built-in table; see builtins.h.
#include "sema/builtins.h"

#include <iterator>

namespace meshc::sema {

namespace {
const BuiltinInfo kBuiltins[] = {
#define MESHC_BUILTIN(name, group) {#name, group},
#include "sema/builtins.def"
};
static_assert(std::size(kBuiltins) == static_cast<size_t>(Builtin::Count));
}  // namespace

const BuiltinInfo& builtin_info(Builtin b) { return kBuiltins[static_cast<size_t>(b)]; }

Builtin find_builtin(std::string_view name) {
    for (size_t i = 0; i < std::size(kBuiltins); ++i) {
        if (kBuiltins[i].name == name) return static_cast<Builtin>(i);
    }
    return Builtin::Count;
}

}  // namespace meshc::sema

// Built-in table; see builtins.h.
#include "sema/builtins.h"

#include <iterator>
#include <unordered_map>

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
    // Every name of every program is looked up here: a hash table, built once.
    static const std::unordered_map<std::string_view, Builtin> kByName = [] {
        std::unordered_map<std::string_view, Builtin> m;
        for (size_t i = 0; i < std::size(kBuiltins); ++i) m.emplace(kBuiltins[i].name, static_cast<Builtin>(i));
        return m;
    }();
    auto it = kByName.find(name);
    return it == kByName.end() ? Builtin::Count : it->second;
}

}  // namespace meshc::sema

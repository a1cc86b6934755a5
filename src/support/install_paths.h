// Where meshc's own files are: the folder of the running executable (/proc/self/exe),
// so that a build tree or an installed prefix can be moved and still find its runtime
// library and standard library. Consumed by the driver (stdlib) and codegen (runtime).
#pragma once

#include <initializer_list>
#include <string>

namespace meshc {

/// The folder of the running executable, without a trailing '/'; empty when it cannot
/// be found (no /proc).
std::string executable_dir();

/// The first of `relative` (paths relative to executable_dir(), e.g. "../lib/x.a") that
/// exists, made absolute and normalised; empty when none does.
std::string find_beside_executable(std::initializer_list<const char*> relative);

}  // namespace meshc

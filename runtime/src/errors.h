// Fatal errors and the temporary-file registry. Every failure in the runtime ends in
// fail(): one "error: device D: MESSAGE" line, temporary outputs removed, exit status 1
// (meshrt_fail in the C ABI is the same function).
#pragma once

#include <string>

#include "meshrt.h"

namespace meshrt {

/// Ends the process (see meshrt_fail); dev may be null for errors outside any device.
[[noreturn]] void fail(meshrt_device* dev, const std::string& message);

/// A file meshrt_save is writing (PATH.tmp.PID): removed if the run fails before it is
/// renamed. Process-wide, because a failure on any device ends the whole process.
void register_temp_file(const std::string& path);
void unregister_temp_file(const std::string& path);

} // namespace meshrt

// Fatal errors and the temporary-file registry. Every failure in the runtime ends in
// fail(): one "error: device D: MESSAGE" line, temporary outputs removed, exit status 1
// (meshrt_fail in the C ABI is the same function). Under MPI the run ends through
// MPI_Abort, so every rank of the job stops; SIGTERM and SIGINT (how mpirun stops the
// other ranks, and Ctrl-C) remove the temporary outputs too.
#pragma once

#include <signal.h>

#include <string>

#include "meshrt.h"

namespace meshrt {

/// Ends the process (see meshrt_fail); dev may be null for errors outside any device.
[[noreturn]] void fail(meshrt_device* dev, const std::string& message);

/// How fail() ends the process once its message is out and the temporary files are
/// gone: null (the default) is _exit(status). The MPI handler installs MPI_Abort so that
/// the whole job ends; the hook must not return.
using FailExit = void (*)(int status);
void set_fail_exit(FailExit hook);

/// A file meshrt_save is writing (PATH.tmp.PID): removed if the run fails or is killed by
/// SIGTERM/SIGINT before it is renamed. Process-wide, because a failure on any device ends
/// the whole process. The paths live in a fixed table (the signal handler may only read
/// memory that is never reallocated): false when the table is full or the path longer
/// than PATH_MAX, and then the caller must not create the file.
bool register_temp_file(const std::string& path);
void unregister_temp_file(const std::string& path);

/// Installs the SIGTERM and SIGINT handlers that remove the registered temporary files
/// and then let the signal end the process as it would have (signals the process
/// ignores stay ignored), and starts a thread that does nothing but wait, so that there
/// is always a thread to run them (once per process). Called by meshrt_main.
void install_signal_cleanup();

/// Blocks SIGTERM and SIGINT in the calling thread while alive. A write(2) to a file is
/// not interrupted by a signal that has a handler: a thread inside a long write would
/// run the cleanup only after it, and mpirun sends SIGKILL one second after SIGTERM.
/// Blocked here, the signal goes to another thread (install_signal_cleanup's at least).
class SignalDeferral {
public:
    SignalDeferral();
    ~SignalDeferral();
    SignalDeferral(const SignalDeferral&) = delete;
    SignalDeferral& operator=(const SignalDeferral&) = delete;

private:
    sigset_t old_;
};

} // namespace meshrt

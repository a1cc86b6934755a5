#!/bin/sh
# A run that fails on one device while device 0 is writing a save must end with status
# 1, name the device, and leave no file behind (not the output, not its temporary).
# Usage: check_abort_during_save.sh [LAUNCHER...] PROGRAM [OPTIONS...]
#   e.g. check_abort_during_save.sh build/runtime/meshrt-mpi-check
#        check_abort_during_save.sh mpirun -np 8 build/runtime/meshrt-mpi-check --comm=mpi
dir=$(mktemp -d /tmp/meshrt-abort-XXXXXX) || exit 1
err="$dir.err"
"$@" -- abort-during-save "$dir" 2>"$err"
status=$?
left=$(ls -A "$dir")
ok=1
if [ "$status" -ne 1 ]; then
    echo "FAIL: exit status $status, want 1"; ok=0
fi
if ! grep -q "error: device 3: stopping while device 0 saves" "$err"; then
    echo "FAIL: stderr lacks 'error: device 3: stopping while device 0 saves'"; ok=0
fi
if [ -n "$left" ]; then
    echo "FAIL: files left behind: $left"; ok=0
fi
[ "$ok" = 1 ] || { echo "stderr:"; cat "$err"; }
rm -rf "$dir" "$err"
[ "$ok" = 1 ] && echo "ok: status 1, device 3 named, nothing left in the output directory"
[ "$ok" = 1 ]

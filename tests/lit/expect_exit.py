#!/usr/bin/env python3
"""`expect_exit.py N CMD [ARGS...]`: runs CMD with this process's stdin, stdout and
stderr, and exits 0 when CMD exited with status N, else 1 (with a message on stderr).
Used by lit tests as `%expect-exit N`."""
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        print("usage: expect_exit.py N CMD [ARGS...]", file=sys.stderr)
        return 2
    want = int(sys.argv[1])
    got = subprocess.run(sys.argv[2:]).returncode
    if got != want:
        print(f"expect_exit: `{' '.join(sys.argv[2:])}` exited {got}, expected {want}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""endless_stdin.py MESHC: `meshc check -` fed an endless standard input must stop
reading past the 16 MiB source limit and report E0111 (not read until it runs out of
memory). Feeds comment lines without end; fails after 60 s."""
import subprocess
import sys
import threading


def main():
    proc = subprocess.Popen([sys.argv[1], "check", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    chunk = b"// an endless comment line, fed until meshc stops reading\n" * 1024
    fed = [0]

    def feed():
        try:
            while True:
                proc.stdin.write(chunk)
                fed[0] += len(chunk)
        except (BrokenPipeError, ValueError, OSError):
            pass

    threading.Thread(target=feed, daemon=True).start()
    # Not communicate(): it would close standard input at once.
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        print("FAIL: meshc check - still reading after 60 s")
        return 1
    err = proc.stderr.read().decode()
    if proc.returncode != 1 or "E0111" not in err:
        print(f"FAIL: exit {proc.returncode}, stderr:\n{err}")
        return 1
    # It stopped near the limit: what was fed is at most the limit plus the pipe's buffer.
    if fed[0] > 64 * 2**20:
        print(f"FAIL: {fed[0]} bytes were read")
        return 1
    print(err.strip().splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Installs every Debian package meshc needs to build and test. Idempotent: packages
# already present are skipped, so a second run costs about a second.
# Run as root (CI and the developer machines are root); otherwise it uses sudo.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ python3 git
  llvm-19-dev llvm-19-tools clang-19 libclang-rt-19-dev libzstd-dev
  libz3-dev z3 libfmt-dev catch2 re2c bison
  libopenmpi-dev openmpi-bin libopenblas-dev iproute2 procps
  nlohmann-json3-dev libcli11-dev python3-numpy
  # the layout solver of `with auto` (CBC, found with pkg-config)
  coinor-libcbc-dev pkg-config
  neovim
  # compiler cache for tools/test.sh: the CUDA build reuses the gcc build's objects
  ccache
  # examples/gpt's training text, and the PyTorch reference of its test (tests/gpt;
  # python3-torch: about 50 MB of packages, a minute to install)
  fortunes python3-torch
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi
# The end-to-end tests compute their references with NumPy, in whichever python3 is
# first on PATH (CMake's Python3 finds the same one); Debian's python3-numpy serves
# /usr/bin/python3, pip serves any other interpreter.
if ! python3 -c "import numpy" 2>/dev/null; then
  python3 -m pip install -q numpy 2>/dev/null || python3 -m pip install -q --break-system-packages numpy
fi



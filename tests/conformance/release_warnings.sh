#!/usr/bin/env bash
# The files GCC 12 once warned about only when optimising (-Wrestrict false positives at
# -O3, which broke `cmake -DCMAKE_BUILD_TYPE=Release` while warnings were errors by
# default) compile without a warning at -O3 -Werror, with the build's own compiler.
# Usage: release_warnings.sh CXX ROOT
set -euo pipefail
cxx=$1
root=$2
for f in src/syntax/ast_printer.cpp src/ir/gir.cpp; do
  "$cxx" -std=c++20 -O3 -DNDEBUG -DFMT_SHARED -I"$root/src" -Wall -Wextra -Wpedantic -Wno-unused-parameter \
    -Wno-missing-field-initializers -Wno-deprecated-declarations -Werror -c "$root/$f" -o /dev/null
  echo "ok: $f at -O3 -Werror"
done

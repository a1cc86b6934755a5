#!/usr/bin/env bash
# install-relocate: `cmake --install` into a temporary prefix, move the prefix, and build
# and run a program that imports std.nn from another folder, with a clean environment
# (no MESHC_STDLIB / MESHC_RUNTIME): the moved meshc must find its stdlib and runtime
# relative to its own executable.
# Usage: relocate.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/first" >/dev/null
for f in bin/meshc lib/libmeshrt.a include/meshrt.h share/meshc/stdlib/std/nn.msh \
         share/meshc/editors/vscode/package.json; do
    [[ -e "$tmp/first/$f" ]] || { echo "not installed: $f"; exit 1; }
done
mv "$tmp/first" "$tmp/moved"
# Marks that only the moved prefix has: a stdlib function, and (below) a runtime library
# that does not link. Finding them shows meshc looked beside itself, not at the paths
# of the build it came from (which still exist here).
cat >> "$tmp/moved/share/meshc/stdlib/std/nn.msh" <<'MSH'

/// Only in the relocated copy (tests/install/relocate.sh).
fn relocated_scale(x: f32) -> f32 { x * 2.0 }
MSH

mkdir "$tmp/work"
cat > "$tmp/work/prog.msh" <<'MSH'
import std.nn;
mesh Pod = [data: 2, model: 2];

fn main() {
    let x: Tensor f32 [4, 8] on Pod with {0: data} = ones([4, 8]);
    let w: Tensor f32 [8, 3] on Pod = ones([8, 3]) * 0.5;
    let b: Tensor f32 [3] on Pod = ones([3]);
    print("linear", nn.relocated_scale(sum(nn.linear(x, w, b))));
}
MSH
cd "$tmp/work"
env -i PATH=/usr/bin:/bin "$tmp/moved/bin/meshc" check prog.msh
cp "$tmp/moved/lib/libmeshrt.a" "$tmp/libmeshrt.a.good"
echo "not an archive" > "$tmp/moved/lib/libmeshrt.a"
if env -i PATH=/usr/bin:/bin "$tmp/moved/bin/meshc" build prog.msh -o prog 2>/dev/null; then
    echo "meshc did not link with the moved prefix's runtime library"; exit 1
fi
cp "$tmp/libmeshrt.a.good" "$tmp/moved/lib/libmeshrt.a"
env -i PATH=/usr/bin:/bin "$tmp/moved/bin/meshc" build prog.msh -o prog
out=$(env -i PATH=/usr/bin:/bin ./prog)
echo "$out"
# 4 x 3 outputs, each 8 * 0.5 + 1 = 5: the sum is 60, doubled.
[[ "$out" == "linear 120" ]] || { echo "unexpected output: $out"; exit 1; }
echo "install-relocate: ok"

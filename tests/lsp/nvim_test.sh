#!/usr/bin/env bash
# Neovim headless test of `meshc lsp` (tests/lsp/nvim_test.lua). Exit 77 (skipped) when
# nvim is not installed. Usage: tests/lsp/nvim_test.sh MESHC
set -euo pipefail
meshc=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! command -v nvim >/dev/null 2>&1; then
  echo "nvim not found: skipped (tools/setup.sh installs neovim)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/model.msh" <<'MSH'
mesh Pod = [data: 2, model: 4];

fn mlp(x:  Tensor f32 [B, D] on Pod with {B: data},
       w1: Tensor f32 [D, H] on Pod with {H: model},
       w2: Tensor f32 [H, D] on Pod with {H: model})
    -> Tensor f32 [B, D] on Pod with {B: data}
{
    let h = relu(x @ w1);
    h @ w2
}

fn main() {
    let x  = random_normal(1, [8, 16]);
    let w1 = random_normal(2, [16, 32]) * 0.1;
    let w2 = random_normal(3, [32, 16]) * 0.1;
    let z = mlp(x, w1, w2);
    print("sum", sum(z @ w1 @ w1));
}
MSH
export MESHC="$meshc" MESH_FILE="$work/model.msh" MESHC_STDLIB="$root/stdlib" EDITORS="$root/tools/editors"
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_STATE_HOME="$work/state" XDG_CACHE_HOME="$work/cache"
timeout 120 nvim --headless --clean -n -c "luafile $here/nvim_test.lua"

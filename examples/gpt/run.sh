#!/usr/bin/env bash
# examples/gpt/run.sh: trains the byte-level GPT of gpt.msh on Debian's fortunes.
#
#   examples/gpt/run.sh [--steps N] [--one-device] [--bf16] [--mpi] [--gpu] [--work DIR]
#                       [--meshc PATH] [-- PROGRAM ARGS...]
#
# 1. prepares the data (prepare.py: fortunes -> train.npy, val.npy, prompt.npy and the
#    initial parameters init.safetensors) in WORK/data;
# 2. builds gpt.msh with $MESHC (default: build/meshc of this repository) into WORK,
#    on its mesh Pod = [data: 2, model: 4] (8 devices), or with --one-device rebound to
#    `--mesh Pod=data:1,model:1`;
# 3. trains: `step S loss L` every step (with its seconds and tokens per second),
#    `val step S loss L` every 20 steps and at the end, a checkpoint
#    WORK/data/gpt_ckpt.safetensors, and `sample:` the greedy continuation of a prompt.
#
# Options:
#   --steps N      training steps (default 60)
#   --one-device   rebind every mesh axis to 1 (the same program on one device)
#   --bf16         gpt_bf16.msh: bf16 compute with f32 master weights and optimizer state
#   --mpi          one process per device under OpenMPI (`mpirun -np 8 ... --comm=mpi`)
#   --gpu          build with `meshc build --gpu` and run with `--device=cuda
#                  --comm=nccl` (a runtime built with CUDA and one GPU per mesh device:
#                  8, or 1 with --one-device; see docs/running.md)
#   --work DIR     where data and executables go (default: build/gpt in the repository)
#   --meshc PATH   the compiler (default: $MESHC, else build/meshc)
#   -- ARGS        passed to the program (e.g. -- --lr=0.001 --seed=3; ./gpt --help)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
STEPS=60
ONE=0
SRC=gpt.msh
MPI=0
GPU=0
WORK="$ROOT/build/gpt"
MESHC="${MESHC:-$ROOT/build/meshc}"
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --steps=*) STEPS="${1#*=}"; shift ;;
    --one-device) ONE=1; shift ;;
    --bf16) SRC=gpt_bf16.msh; shift ;;
    --mpi) MPI=1; shift ;;
    --gpu) GPU=1; shift ;;
    --work) WORK="$2"; shift 2 ;;
    --work=*) WORK="${1#*=}"; shift ;;
    --meshc) MESHC="$2"; shift 2 ;;
    --meshc=*) MESHC="${1#*=}"; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$MESHC" ]; then
  echo "run.sh: no compiler at $MESHC (build it, or pass --meshc / set MESHC)" >&2
  exit 2
fi
PY=python3
mkdir -p "$WORK/data"
WORK="$(cd "$WORK" && pwd)"

# 1. data and initial parameters
"$PY" "$HERE/prepare.py" --out "$WORK/data"

# 2. build (again only when a source or the compiler is newer than the executable)
BUILD_FLAGS=()
EXE="$WORK/${SRC%.msh}"
if [ "$ONE" = 1 ]; then BUILD_FLAGS+=(--mesh Pod=data:1,model:1); EXE="$EXE-one-device"; fi
if [ "$GPU" = 1 ]; then BUILD_FLAGS+=(--gpu); EXE="$EXE-gpu"; fi
if [ ! -x "$EXE" ] || [ -n "$(find "$HERE" "$MESHC" -newer "$EXE" \( -name '*.msh' -o -path "$MESHC" \) 2>/dev/null)" ]; then
  echo "build: $MESHC build $HERE/$SRC -o $EXE ${BUILD_FLAGS[*]:-}"
  t0=$(date +%s)
  "$MESHC" build "$HERE/$SRC" -o "$EXE" "${BUILD_FLAGS[@]}"
  echo "build: $(( $(date +%s) - t0 )) s"
fi

# 3. train
RUN=("$EXE")
if [ "$MPI" = 1 ]; then
  NP=$("$EXE" --help | sed -n 's/.*it runs on \([0-9]*\) devices\{0,1\}\..*/\1/p' | head -1)
  NP=${NP:-$([ "$ONE" = 1 ] && echo 1 || echo 8)}
  RUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
       --mca btl_vader_single_copy_mechanism none -np "$NP" "$EXE" --comm=mpi)
fi
if [ "$GPU" = 1 ]; then RUN+=(--device=cuda --comm=nccl); fi
RUN+=(--steps="$STEPS" --prompt-len="$(cat "$WORK/data/prompt_len.txt")")
cd "$WORK/data"
echo "run: ${RUN[*]} ${EXTRA[*]:-}"
# The filter adds each step's time and tokens per second (16 windows of 128 bytes a
# step) and prints the sample's bytes as text.
"${RUN[@]}" "${EXTRA[@]}" | "$PY" -u -c '
import re, sys, time
tokens = 16 * 128
last = time.time()
for line in sys.stdin:
    line = line.rstrip("\n")
    now = time.time()
    if re.match(r"^step \d+ loss ", line):
        print("%s  (%.2f s, %.0f tokens/s)" % (line, now - last, tokens / max(now - last, 1e-9)), flush=True)
        last = now
    elif line.startswith("sample:"):
        import numpy as np
        ids = [int(t) for t in re.findall(r"\d+", line[len("sample:"):])]
        n = int(open("prompt_len.txt").read())
        prompt = bytes(np.load("prompt.npy")[0, :n].astype(np.uint8).tolist())
        print("sample (byte values):" + line[len("sample:"):], flush=True)
        print("sample: %r + %r" % (prompt.decode("utf-8", "replace"), bytes(ids).decode("utf-8", "replace")), flush=True)
    else:
        print(line, flush=True)
        if line.startswith("val step"):
            last = time.time()
'

#!/bin/bash
# Multi-host runs on one machine: two hosts made of network namespaces joined by a veth
# pair, OpenMPI over TCP between them, mpirun launching the second host's daemon through
# an rsh agent that enters that namespace (docs/testing.md, "Multi-host").
#
# Usage: tests/multihost/run.sh --build BUILD_DIR [--source SRC_DIR] [--quick] [--keep]
#                               [--only SECTIONS] [--exec COMMAND]
#   --only S[,S]  only these sections: placement, failure, programs, lost
#   --quick  placement and failure only (leaves out the programs and the lost host)
#   --keep   keep the work directory (logs, builds)
#   --exec   instead of the checks, run COMMAND (bash) while the two hosts exist, with
#            $MULTIHOST_MPIRUN the mpirun across them (e.g. the MPI benchmark:
#            --exec 'python3 tests/bench/mpi/run_mpi_bench.py --mpirun $MULTIHOST_MPIRUN');
#            its status is the script's
# Needs root, `ip netns` and OpenMPI's mpirun; without them it exits 77 (ctest: skipped).
#
# What it checks, in both orders of rank placement (--map-by slot: ranks 0-3 on host 1
# and 4-7 on host 2, so a mesh's major axis spans the hosts; --map-by node: ranks
# alternate, so every group over a minor axis spans them):
#   - --print-topology names the host and node of every device, as placed;
#   - meshrt-mpi-check: every collective bitwise (blocked placement), and the NCCL
#     bootstrap path (the group's id broadcast across hosts, with a CPU stand-in for
#     ncclGetUniqueId);
#   - e2e programs (tests/e2e, run_e2e.py --comm mpi): bitwise the simulated mesh's
#     results; examples/mlp.msh and examples/data_parallel_training.msh (training),
#     stdout bitwise that of the simulated mesh;
#   - --comm-timeout: a device on the other host that stalls, and a mismatch of
#     collectives, end the job with a message naming the collective, its group and the
#     device that did not answer;
#   - SIGTERM to mpirun, and to a rank on the other host, end the whole job promptly;
#     a rank stopped while saving leaves no file behind;
#   - the lost host: its link cut in the middle of a long run with --comm-timeout=15,
#     the job ends within 60 s, non-zero, with a message, and no process is left in
#     either namespace (checked before the cleanup).
# Everything it starts runs inside the two namespaces; on exit (success, failure or
# signal) every process in them is killed and the namespaces are deleted.
set -u

BUILD=""
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
QUICK=0
KEEP=0
EXEC=""
ONLY="placement,failure,programs,lost"
while [ $# -gt 0 ]; do
    case "$1" in
    --build) BUILD="$(cd "$2" && pwd)"; shift 2 ;;
    --source) SRC="$(cd "$2" && pwd)"; shift 2 ;;
    --quick) QUICK=1; ONLY="placement,failure"; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --exec) EXEC="$2"; shift 2 ;;
    *) echo "usage: $0 --build BUILD_DIR [--source SRC_DIR] [--quick] [--keep]" >&2; exit 2 ;;
    esac
done
[ -n "$BUILD" ] || { echo "usage: $0 --build BUILD_DIR [--source SRC_DIR] [--quick] [--keep]" >&2; exit 2; }

skip() { echo "multihost: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip(8)"
MPIRUN="$(command -v mpirun)" || skip "no mpirun"
"$MPIRUN" --version 2>/dev/null | grep -q "Open MPI" || skip "mpirun is not OpenMPI's"
CHECK="$BUILD/runtime/meshrt-mpi-check"
MESHC="$BUILD/meshc"
[ -x "$CHECK" ] || { echo "multihost: no $CHECK (build meshrt-mpi-check)"; exit 2; }
[ "$QUICK" = 1 ] || [ -n "$EXEC" ] || [ -x "$MESHC" ] || { echo "multihost: no $MESHC (build meshc)"; exit 2; }

# Names unique to this run (two runs at once do not meet: each has its namespaces).
TAG="$$"
NS1="meshc-h1-$TAG"
NS2="meshc-h2-$TAG"
IF1="mhv${TAG}a"
IF2="mhv${TAG}b"
NET=10.213.0
IP1=$NET.1
IP2=$NET.2
WORK="$(mktemp -d /tmp/meshc-multihost-XXXXXX)"

kill_all_in() { # namespace
    local pids
    for _ in 1 2 3; do
        pids="$(ip netns pids "$1" 2>/dev/null)"
        [ -n "$pids" ] || return 0
        kill -9 $pids 2>/dev/null
        sleep 0.2
    done
}
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    for ns in "$NS1" "$NS2"; do
        if ip netns list | grep -qw "$ns"; then
            kill_all_in "$ns"
            ip netns del "$ns" 2>/dev/null
        fi
    done
    if [ "$KEEP" = 1 ]; then echo "multihost: work directory kept: $WORK"; else rm -rf "$WORK"; fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$NS1" || skip "cannot create a network namespace"
ip netns add "$NS2" || exit 1
ip -n "$NS1" link set lo up && ip -n "$NS2" link set lo up || exit 1
ip link add "$IF1" netns "$NS1" type veth peer name "$IF2" netns "$NS2" || exit 1
ip -n "$NS1" addr add $IP1/24 dev "$IF1" && ip -n "$NS1" link set "$IF1" up || exit 1
ip -n "$NS2" addr add $IP2/24 dev "$IF2" && ip -n "$NS2" link set "$IF2" up || exit 1
# TCP gives up on unacknowledged data after about 13 s (5 retries) instead of about 15
# minutes (15), in these namespaces only: a daemon whose messages to a lost host are
# pending learns of the loss (keepalive only probes idle connections). See
# docs/running.md ("Across hosts"): the same setting bounds a lost host on a cluster.
for ns in "$NS1" "$NS2"; do
    ip netns exec "$ns" sh -c 'echo 5 > /proc/sys/net/ipv4/tcp_retries2' || exit 1
done

# The rsh agent: `agent [ssh options] HOST COMMAND...` runs COMMAND in HOST's namespace.
cat >"$WORK/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case "\$host" in
$IP1) ns=$NS1 ;;
$IP2) ns=$NS2 ;;
*) echo "multihost agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
printf '%s slots=4\n%s slots=4\n' $IP1 $IP2 >"$WORK/hostfile"
# mpirun across the two hosts, started on host 1. The flags run_e2e.py passes for one
# host (the shared-memory transport only) are replaced by TCP, within a host too: the
# two hosts share /dev/shm and their host name, so OpenMPI's shared-memory segments
# (named after the host) would collide. The
# OOB keepalive makes mpirun notice a lost host within 40 s (docs/running.md).
# $MULTIHOST_MAP: slot (blocked) or node (round-robin).
cat >"$WORK/mpirun" <<EOF
#!/bin/bash
args=()
while [ \$# -gt 0 ]; do
    if [ "\$1" = --mca ] && [ \$# -ge 3 ] && [ "\$2" = btl ]; then shift 3; continue; fi
    if [ "\$1" = --mca ] && [ \$# -ge 3 ] && [ "\$2" = btl_vader_single_copy_mechanism ]; then shift 3; continue; fi
    args+=("\$1"); shift
done
exec ip netns exec $NS1 $MPIRUN --allow-run-as-root --oversubscribe \\
    --hostfile $WORK/hostfile --mca plm_rsh_agent $WORK/agent \\
    --mca btl tcp,self \\
    --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 \\
    --mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 10 \\
    --mca oob_tcp_keepalive_probes 3 \\
    --map-by \${MULTIHOST_MAP:-slot} "\${args[@]}"
EOF
chmod +x "$WORK/agent" "$WORK/mpirun"
MPI="$WORK/mpirun"

if [ -n "$EXEC" ]; then
    export MULTIHOST_MPIRUN="$MPI"
    bash -c "$EXEC"
    exit $?
fi

FAILS=0
want() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
T0=$(date +%s)
stamp() { printf '[%4ds]' $(($(date +%s) - T0)); }
fail() { echo "$(stamp) FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "$(stamp) ok: $*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
less_than() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# Processes (other than the test's own) left in a namespace.
left_in() { ip netns pids "$1" 2>/dev/null | xargs -r ps -o pid=,comm= -p 2>/dev/null; }
# Waits up to $2 seconds for namespace $1 to have no process; prints what is left.
wait_empty() {
    local i
    for i in $(seq 1 $(($2 * 5))); do
        [ -z "$(ip netns pids "$1" 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    left_in "$1"
    return 1
}

echo "multihost: hosts $IP1 ($NS1), $IP2 ($NS2); mpirun $($MPIRUN --version | head -1)"

# ---------------------------------------------------------------- placement, collectives
want placement && for map in slot node; do
    export MULTIHOST_MAP=$map
    out="$WORK/topology-$map.txt"
    if ! "$MPI" -np 8 "$CHECK" --comm=mpi --print-topology >"$out" 2>&1; then
        fail "[$map] --print-topology failed:"; cat "$out"
    else
        bad=0
        for d in 0 1 2 3 4 5 6 7; do
            if [ $map = slot ]; then node=$((d / 4)); else node=$((d % 2)); fi
            grep -q "^device $d: rank $d, host .*, node $node, Pod\[data=$((d / 4)), model=$((d % 4))\]" "$out" || bad=1
        done
        [ $bad = 0 ] && pass "[$map] --print-topology: devices on the nodes of --map-by $map" ||
            { fail "[$map] --print-topology does not show the placement:"; cat "$out"; }
    fi
    # Every collective once, in the blocked placement (the e2e programs below run in
    # both): 3805 checks take two to four minutes over TCP on a loaded 2-core machine.
    if [ $map = slot ] && "$MPI" -np 8 "$CHECK" --comm=mpi >"$WORK/check-$map.txt" 2>&1 &&
        grep -q "checks passed" "$WORK/check-$map.txt"; then
        pass "[$map] meshrt-mpi-check: $(grep 'checks passed' "$WORK/check-$map.txt")"
    elif [ $map = slot ]; then
        fail "[$map] meshrt-mpi-check across the hosts:"; tail -20 "$WORK/check-$map.txt"
    fi
    if "$MPI" -np 8 "$CHECK" --comm=mpi -- bootstrap >"$WORK/bootstrap-$map.txt" 2>&1 &&
        grep -q "groups checked" "$WORK/bootstrap-$map.txt"; then
        pass "[$map] NCCL bootstrap path (CPU stand-in): $(grep 'groups checked' "$WORK/bootstrap-$map.txt")"
    else
        fail "[$map] bootstrap across the hosts:"; tail -20 "$WORK/bootstrap-$map.txt"
    fi
done
export MULTIHOST_MAP=node

# ---------------------------------------------------------------- bounded failure
if want failure; then
# Device 5 (host 2 in both placements) stalls before an all_reduce over all of Pod.
start=$(now)
MESHRT_COMM_ABORT_GRACE=0 "$MPI" -x MESHRT_COMM_ABORT_GRACE -np 8 "$CHECK" --comm=mpi \
    --comm-timeout=3 -- stall 5 60 >"$WORK/stall.txt" 2>&1
rc=$?
t=$(elapsed "$start")
if [ $rc -ne 0 ] && grep -q "all_reduce at stall.msh:12:9 over Pod axes data,model (devices 0, 1, 2, 3, 4, 5, 6, 7; this one is rank [0-7]) made no progress for 3" "$WORK/stall.txt" &&
    grep -q "no answer from device 5 (node 1" "$WORK/stall.txt" &&
    grep -q "devices [0-7] (node [01], host [^)]*), [0-7] (node" "$WORK/stall.txt" &&
    less_than "$t" 30; then
    pass "a stalled device: exit $rc after $t s, message: $(grep -m1 'made no progress' "$WORK/stall.txt" | cut -c1-160)..."
else
    fail "stalled device: exit $rc after $t s:"; cat "$WORK/stall.txt"
fi
"$MPI" -np 8 "$CHECK" --comm=mpi --comm-timeout=3 -- mismatch 6 >"$WORK/mismatch.txt" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "every other member answered" "$WORK/mismatch.txt" &&
    grep -Eq "waits in all_reduce over Pod axes data(,model)?, its collective #3\): the members do not make the same collectives" "$WORK/mismatch.txt"; then
    pass "mismatched collectives: exit $rc, the members' answers named"
else
    fail "mismatched collectives: exit $rc:"; cat "$WORK/mismatch.txt"
fi

# SIGTERM to mpirun, then to a rank on host 2: the whole job ends promptly.
for target in mpirun rank; do
    "$MPI" -np 8 "$CHECK" --comm=mpi -- loop 300 >"$WORK/sig-$target.txt" 2>&1 &
    pid=$!
    for _ in $(seq 1 150); do grep -qs "loop: 2 s" "$WORK/sig-$target.txt" && break; sleep 0.2; done
    start=$(now)
    if [ $target = mpirun ]; then
        kill -TERM $pid
    else
        victim=$(ip netns pids "$NS2" | xargs -r ps -o pid=,comm= -p | awk '$2 ~ /^meshrt-mpi/ {print $1; exit}')
        [ -n "$victim" ] && kill -TERM "$victim" || fail "no rank found on host 2"
    fi
    for _ in $(seq 1 150); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    if kill -0 $pid 2>/dev/null; then
        fail "SIGTERM to the $target: mpirun still runs after 15 s"; kill -9 $pid
    fi
    wait $pid
    rc=$?
    t=$(elapsed "$start")
    if [ $rc -ne 0 ] && wait_empty "$NS1" 10 && wait_empty "$NS2" 10; then
        pass "SIGTERM to the $target: the job ended in $t s (exit $rc), no process left"
    else
        fail "SIGTERM to the $target: exit $rc after $t s"; tail -5 "$WORK/sig-$target.txt"
    fi
done
# A rank stopped while device 0 saves (host 1) leaves no file, across hosts too. It races
# mpirun's SIGTERM against the end of a 512 MiB write: on a loaded machine the write may
# win (the file is then complete, not lost), so one failed try is tried once more.
if sh "$SRC/runtime/tests/check_abort_during_save.sh" "$MPI" -np 8 "$CHECK" --comm=mpi \
    >"$WORK/abort-save.txt" 2>&1 ||
   sh "$SRC/runtime/tests/check_abort_during_save.sh" "$MPI" -np 8 "$CHECK" --comm=mpi \
    >"$WORK/abort-save.txt" 2>&1; then
    pass "a failure during a save: $(tail -1 "$WORK/abort-save.txt" | cut -c5-)"
else
    fail "failure during a save:"; cat "$WORK/abort-save.txt"
fi
wait_empty "$NS1" 10 >/dev/null; wait_empty "$NS2" 10 >/dev/null
fi

# ---------------------------------------------------------------- programs
want programs && E2E="mlp_reduce_scatter,collectives,ring8,cube3,multi_axis_order,transformer_block,io_roundtrip,train_ckpt,bad_load"
want programs && for map in slot node; do
    export MULTIHOST_MAP=$map
    if python3 -u "$SRC/tests/e2e/run_e2e.py" --meshc "$MESHC" --work "$WORK/e2e-$map" --comm mpi \
        --mpirun "$MPI" --only "$E2E" --mpi-timeout 300 >"$WORK/e2e-$map.txt" 2>&1; then
        pass "[$map] e2e across the hosts: $(grep "e2e summary" "$WORK/e2e-$map.txt")"
    else
        fail "[$map] e2e across the hosts:"; tail -40 "$WORK/e2e-$map.txt"
    fi
    for ex in mlp data_parallel_training; do
        dir="$WORK/ex-$map-$ex"
        mkdir -p "$dir"
        exe="$dir/$ex"
        if ! "$MESHC" build "$SRC/examples/$ex.msh" -o "$exe" >"$dir/build.txt" 2>&1; then
            fail "meshc build examples/$ex.msh:"; cat "$dir/build.txt"; continue
        fi
        n=$("$exe" --help | sed -n 's/.*it runs on \([0-9]*\) device.*/\1/p')
        (cd "$dir" && "$exe" >sim.txt 2>&1) || fail "examples/$ex.msh on the simulated mesh"
        (cd "$dir" && "$MPI" -np "$n" "$exe" --comm=mpi >mpi.txt 2>mpi-err.txt)
        rc=$?
        if [ $rc -eq 0 ] && cmp -s "$dir/sim.txt" "$dir/mpi.txt"; then
            pass "[$map] examples/$ex.msh on $n ranks across the hosts: stdout bitwise the simulated mesh's ($(tail -1 "$dir/mpi.txt"))"
        else
            fail "[$map] examples/$ex.msh across the hosts (exit $rc):"; diff "$dir/sim.txt" "$dir/mpi.txt" | head; tail -5 "$dir/mpi-err.txt"
        fi
    done
done
export MULTIHOST_MAP=node

# ---------------------------------------------------------------- the lost host
if want lost; then
"$MPI" -np 8 "$CHECK" --comm=mpi --comm-timeout=15 -- loop 600 >"$WORK/lost.txt" 2>&1 &
pid=$!
for _ in $(seq 1 150); do grep -qs "loop: 4 s" "$WORK/lost.txt" && break; sleep 0.2; done
ip -n "$NS2" link set "$IF2" down
cut=$(now)
for _ in $(seq 1 900); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
ended=1
if kill -0 $pid 2>/dev/null; then ended=0; fi
t=$(elapsed "$cut")
[ $ended = 1 ] || kill -9 $pid
wait $pid
rc=$?
left1="$(wait_empty "$NS1" 5)"
left2="$(wait_empty "$NS2" 45)"
t2=$(elapsed "$cut")
msg=$(grep -m1 "made no progress" "$WORK/lost.txt" | cut -c1-220)
echo "multihost: lost host: mpirun ended $t s after the cut (exit $rc); host 2 empty $t2 s after it"
echo "multihost: lost host: first message: $msg"
if [ $ended = 1 ] && [ $rc -ne 0 ] && less_than "$t" 60 && [ -n "$msg" ] &&
    [ -z "$left1" ] && [ -z "$left2" ]; then
    pass "lost host: the job ended $t s after the link was cut, exit $rc, no process left on either host"
else
    fail "lost host: ended=$ended exit $rc after $t s; left on host 1: ${left1:-none}; left on host 2: ${left2:-none}"
    tail -30 "$WORK/lost.txt"
fi
fi

[ $FAILS = 0 ] && { echo "multihost: all passed ($ONLY)"; exit 0; }
echo "multihost: $FAILS failed"
exit 1

#!/usr/bin/env bash
# The launcher under failure: a rank that exits non-zero, one killed with SIGKILL, one stuck
# outside a collective (and one that also ignores SIGTERM), and SIGTERM or SIGKILL to the launcher.
# Each case must end with a non-zero exit within the collective timeout plus the kill grace
# (plus slack for a loaded 2-core machine), name the failed rank, and leave no process behind.
#
#   fault_test.sh ZEROTRAIN FAULT_RANK BACKEND
set -u
ZT=$1 FAULT=$2 BACKEND=$3
TIMEOUT_S=4 GRACE_S=2 SLACK_S=10
pass=0 fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/     | /' "$out/err" | tail -25; }

# run NAME EXPECTED_RC PATTERN NPROC MODE VICTIM
run() {
  local name=$1 want_rc=$2 pattern=$3 nproc=$4 mode=$5 victim=$6
  local marker="zt-fault-$$-$name"
  local start end rc elapsed
  start=$(date +%s.%N)
  "$ZT" launch --nproc_per_node "$nproc" --backend "$BACKEND" --timeout_s $TIMEOUT_S --kill_grace_s $GRACE_S \
    -- "$FAULT" "$mode" "$victim" "$marker" >"$out/out" 2>"$out/err"
  rc=$?
  end=$(date +%s.%N)
  elapsed=$(awk "BEGIN{printf \"%.1f\", $end - $start}")
  sleep 0.5
  if [ "$rc" != "$want_rc" ]; then bad "$name: exit code $rc, expected $want_rc"; return; fi
  if ! grep -q -- "$pattern" "$out/err"; then bad "$name: stderr does not say '$pattern'"; return; fi
  if awk "BEGIN{exit !($elapsed > $TIMEOUT_S + $GRACE_S + $SLACK_S)}"; then
    bad "$name: took ${elapsed}s, more than timeout+grace+slack"; return
  fi
  if pgrep -f "$marker" >/dev/null; then
    bad "$name: processes left behind: $(pgrep -af "$marker")"; pkill -9 -f "$marker"; return
  fi
  ok "$name (exit $rc in ${elapsed}s)"
}

run exit 3 "rank 1 failed first: it exited with code 3" 3 exit 1
run sigkill 137 "rank 2 failed first: it was killed by signal 9 (SIGKILL)" 3 kill 2
# The other ranks time out in their next all_reduce and name rank 1 as missing.
run stuck 6 "ranks that did not arrive: 1" 3 stuck 1
run stubborn 6 "ranks that did not arrive: 1" 2 stubborn 1
# A rank that never joins: the others time out at start-up, naming it.
run late 6 "ranks that did not arrive: 1" 3 late 1
# Debug mode: a rank that issues a different collective is named instead of corrupting data.
ZEROTRAIN_COMM_DEBUG=1 run mismatch 5 "the ranks issued different collectives" 3 mismatch 2

# SIGTERM to the launcher reaches every rank; the launcher exits 128+15.
marker="zt-fault-$$-sigterm"
start=$(date +%s.%N)
"$ZT" launch --nproc_per_node 2 --backend "$BACKEND" --timeout_s 60 --kill_grace_s $GRACE_S \
  -- "$FAULT" stuck 1 "$marker" >"$out/out" 2>"$out/err" &
launcher=$!
for _ in $(seq 100); do grep -q "is stuck" "$out/out" && break; sleep 0.1; done
kill -TERM $launcher
wait $launcher
rc=$?
elapsed=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
sleep 0.5
if [ "$rc" != 143 ]; then
  bad "sigterm: exit code $rc, expected 143"
elif pgrep -f "$marker" >/dev/null; then
  bad "sigterm: processes left behind"; pkill -9 -f "$marker"
elif ! grep -q "got SIGTERM" "$out/err"; then
  bad "sigterm: the launcher did not say it got SIGTERM"
else
  ok "sigterm (exit $rc in ${elapsed}s)"
fi

# SIGKILL to the launcher cannot be forwarded: the ranks must still go (PR_SET_PDEATHSIG).
marker="zt-fault-$$-launcher-killed"
"$ZT" launch --nproc_per_node 2 --backend "$BACKEND" --timeout_s 60 \
  -- "$FAULT" stuck 1 "$marker" >"$out/out" 2>"$out/err" &
launcher=$!
for _ in $(seq 100); do grep -q "is stuck" "$out/out" && break; sleep 0.1; done
kill -KILL $launcher
wait $launcher 2>/dev/null
for _ in $(seq 30); do pgrep -f "$marker" >/dev/null || break; sleep 0.1; done
if pgrep -f "$marker" >/dev/null; then
  bad "launcher killed: processes left behind: $(pgrep -af "$marker")"; pkill -9 -f "$marker"
else
  ok "launcher killed with SIGKILL: no rank left"
fi

# Shared memory leaves nothing behind, whatever the ranks' end: the segment is a memfd that
# lives only as long as a process of its job (each case above checked none is left), and
# nothing of ours is named in /dev/shm (other tests may run beside this one: only our names
# are looked at).
if [ "$BACKEND" = shm ]; then
  if ls /dev/shm 2>/dev/null | grep -qi zerotrain; then
    bad "shm: /dev/shm holds $(ls /dev/shm | grep -i zerotrain | tr '\n' ' ')"
  else
    ok "shm: nothing named in /dev/shm"
  fi
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# The launcher at its edges (docs/launch.md, "Edges"): ranks that each lead a session; a
# large rank count that ends well, fails, or is stopped mid-start by SIGTERM or SIGKILL (the
# signal can come before a rank has made its session); a rank that leaves a daemon behind;
# a descriptor limit too low for the count (refused before anything starts) or a soft
# limit that is raised; and, under mpirun, one report that names the one rank that failed
# first, without mpirun's banners, and an mpirun that does not exit once every rank has
# ended. Every case must leave no process behind: every process of a rank has a marker in
# its argv (rank.sh below), checked with pgrep.
#
#   launch_edges_test.sh ZEROTRAIN BACKEND   (gloo or mpi; mpi exits 77 without mpirun)
set -u
ZT=$1 BACKEND=$2
NPROC=200 GRACE_S=2
pass=0 fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "$BACKEND" = mpi ] && ! command -v mpirun >/dev/null; then
  echo "SKIP: no mpirun on the PATH"
  exit 77
fi

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/     | /' "$out/err" | tail -25; }
now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
# leftovers MARKER: waits up to 10 s for the processes with MARKER in their argv to go
# (after a SIGKILL to the launcher they go asynchronously), then names those still there.
leftovers() {
  for _ in $(seq 100); do pgrep -f "$1" >/dev/null || return 1; sleep 0.1; done
  pgrep -af "$1" | head -5
  pkill -9 -f "$1"
  return 0
}
launch() { "$ZT" launch --backend "$BACKEND" --kill_grace_s $GRACE_S "$@"; }

# rank.sh MODE MARKER: one rank. Its processes carry MARKER in their argv (exec -a).
cat >"$out/rank.sh" <<'EOF'
#!/usr/bin/env bash
mode=$1 marker=$2
case $mode in
  ok) exec -a "zt-rank $marker" sleep 1 ;;
  sleep) exec -a "zt-rank $marker" sleep 60 ;;
  fail)
    if [ "$RANK" = 150 ]; then echo "rank 150 gives up" >&2; exit 3; fi
    exec -a "zt-rank $marker" sleep 60 ;;
  session)   # leads its own session (Linux shares the CPU between sessions, not processes)
    read -r stat </proc/$$/stat
    set -- ${stat##*) }   # after "(comm) ": state ppid pgrp session
    if [ "$4" != $$ ] || [ "$3" != $$ ]; then echo "rank $RANK: session $4, group $3, pid $$" >&2; exit 4; fi ;;
  daemon)   # in its own session, out of the rank's process group, holding the rank's output
    setsid bash -c "exec -a 'zt-daemon $marker' sleep 60" &
    exit 0 ;;
esac
EOF
chmod +x "$out/rank.sh"

# A large count that ends well.
marker="zt-edges-$$-ok"
start=$(now)
launch --nproc_per_node $NPROC -- "$out/rank.sh" ok "$marker" >"$out/out" 2>"$out/err"
rc=$? elapsed=$(since "$start")
if [ $rc != 0 ]; then bad "ok: exit code $rc"
elif grep -v '^zerotrain launch: OMP_NUM_THREADS=' "$out/err" | grep -q .; then bad "ok: something on stderr besides the threads note"
elif awk "BEGIN{exit !($elapsed > 30)}"; then bad "ok: took ${elapsed}s"
elif leftovers "$marker"; then bad "ok: processes left behind"
else ok "$NPROC ranks end well (${elapsed}s)"; fi

# Each rank leads its own session and process group (gloo: the launcher starts the ranks).
if [ "$BACKEND" = gloo ]; then
  launch --nproc_per_node 4 -- "$out/rank.sh" session none >"$out/out" 2>"$out/err"
  rc=$?
  if [ $rc != 0 ]; then bad "session: exit code $rc"
  else ok "each rank leads its own session"; fi
fi

# One rank fails: it is named once, with its line, and the other ranks are stopped.
marker="zt-edges-$$-fail"
start=$(now)
launch --nproc_per_node $NPROC -- "$out/rank.sh" fail "$marker" >"$out/out" 2>"$out/err"
rc=$? elapsed=$(since "$start")
if [ $rc != 3 ]; then bad "fail: exit code $rc, expected 3"
elif [ "$(grep -c 'failed first' "$out/err")" != 1 ] || ! grep -q "rank 150 failed first: it exited with code 3" "$out/err"; then
  bad "fail: not one report naming rank 150"
elif [ "$(grep -c '^\[rank 150\] rank 150 gives up$' "$out/err")" != 1 ]; then bad "fail: the rank's line is not there once"
elif awk "BEGIN{exit !($elapsed > 30 + $GRACE_S)}"; then bad "fail: took ${elapsed}s"
elif leftovers "$marker"; then bad "fail: processes left behind"
else ok "one of $NPROC ranks fails: exit 3 in ${elapsed}s, one report"; fi

# SIGTERM and SIGKILL to the launcher while it starts the ranks.
for signal in TERM KILL; do
  marker="zt-edges-$$-$signal"
  start=$(now)
  # Not through the launch function: $! would be a subshell's pid.
  "$ZT" launch --backend "$BACKEND" --kill_grace_s $GRACE_S --nproc_per_node $NPROC -- "$out/rank.sh" sleep "$marker" \
    >"$out/out" 2>"$out/err" &
  launcher=$!
  # The first rank is up (not the launcher or mpirun, whose argv has the marker too).
  for _ in $(seq 500); do pgrep -f "^zt-rank $marker" >/dev/null && break; sleep 0.02; done
  running=$(pgrep -fc "^zt-rank $marker")
  kill -$signal $launcher
  wait $launcher 2>/dev/null
  rc=$? elapsed=$(since "$start")
  want=$([ $signal = TERM ] && echo 143 || echo 137)
  if [ $rc != "$want" ]; then bad "sig$signal: exit code $rc, expected $want"
  elif [ $signal = TERM ] && ! grep -q "got SIGTERM" "$out/err"; then bad "sigterm: the launcher did not say it got SIGTERM"
  elif awk "BEGIN{exit !($elapsed > 30 + $GRACE_S)}"; then bad "sig$signal: took ${elapsed}s"
  elif leftovers "$marker"; then bad "sig$signal: processes left behind"
  else ok "SIG$signal to the launcher with $running of $NPROC ranks up: exit $rc in ${elapsed}s, nothing left"; fi
done

# A rank that leaves a daemon behind, holding its output: the job still ends, and the
# daemon goes with it (the launcher is the subreaper of what its ranks leave).
marker="zt-edges-$$-daemon"
start=$(now)
launch --nproc_per_node 2 -- "$out/rank.sh" daemon "$marker" >"$out/out" 2>"$out/err"
rc=$? elapsed=$(since "$start")
if [ $rc != 0 ]; then bad "daemon: exit code $rc"
elif awk "BEGIN{exit !($elapsed > 20)}"; then bad "daemon: took ${elapsed}s (waited for the daemon?)"
elif leftovers "$marker"; then bad "daemon: left behind"
else ok "a rank's daemon does not outlive the job (${elapsed}s)"; fi

# Too few descriptors: refused before any rank starts, naming the limit; a soft limit
# below what the count needs is raised up to the hard limit.
marker="zt-edges-$$-limit"
(ulimit -n 128 && exec "$ZT" launch --backend "$BACKEND" --nproc_per_node $NPROC -- sh -c "touch $out/started.\$RANK # $marker") \
  >"$out/out" 2>"$out/err"
rc=$?
if [ $rc != 2 ]; then bad "limit: exit code $rc, expected 2"
elif ! grep -q "open files, but the hard limit of \`ulimit -n\` here is 128" "$out/err"; then bad "limit: the message"
elif ls "$out"/started.* >/dev/null 2>&1; then bad "limit: ranks started before the refusal"
else ok "descriptor limit 128 for $NPROC ranks: refused before any start"; fi
if [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4096 ]; then
  (ulimit -Sn 128 && exec "$ZT" launch --backend "$BACKEND" --nproc_per_node $NPROC -- true) >"$out/out" 2>"$out/err"
  rc=$?
  if [ $rc != 0 ]; then bad "soft limit: exit code $rc"; else ok "soft descriptor limit 128: raised for $NPROC ranks"; fi
fi

if [ "$BACKEND" = mpi ]; then
  # A failure under mpirun is reported once: each rank's own line at most once (the first
  # failure stops the ranks that have not failed yet), one report naming one rank whose
  # line is there, none of mpirun's banners.
  zt_lines() { grep -c -v -e '^\[rank [0-9]*\] ' "$out/err"; }
  launch --nproc_per_node 3 -- "$ZT" config check "$out/no-such-config.json" >"$out/out" 2>"$out/err"
  rc=$?
  first=$(sed -n 's/^zerotrain launch: rank \([0-9]*\) failed first: it exited with code 3.*/\1/p' "$out/err")
  if [ $rc != 3 ]; then bad "mpi every rank fails: exit code $rc, expected 3"
  elif [ "$(grep -c 'failed first' "$out/err")" != 1 ] || [ -z "$first" ]; then bad "mpi every rank fails: not one report"
  elif [ "$(grep -c "^\[rank $first\] .*cannot read the config file" "$out/err")" != 1 ]; then
    bad "mpi every rank fails: the line of rank $first is not there once"
  elif [ -n "$(grep '^\[rank ' "$out/err" | sort | uniq -d)" ]; then bad "mpi every rank fails: a rank's line twice"
  elif [ "$(zt_lines)" != 2 ]; then bad "mpi every rank fails: lines besides the ranks' (mpirun's banners?)"
  else ok "mpi: every rank fails: one report naming rank $first, $(wc -l <"$out/err") lines"; fi

  marker="zt-edges-$$-mpi-one"
  launch --nproc_per_node 3 -- sh -c '[ $RANK = 1 ] && { echo "rank 1 gives up"; exit 3; }; exec "$0" sleep "$1"' \
    "$out/rank.sh" "$marker" >"$out/out" 2>"$out/err"
  rc=$?
  if [ $rc != 3 ]; then bad "mpi one rank fails: exit code $rc, expected 3"
  elif [ "$(grep -c 'failed first' "$out/err")" != 1 ] || ! grep -q "rank 1 failed first" "$out/err"; then
    bad "mpi one rank fails: not one report naming rank 1"
  elif [ "$(zt_lines)" != 2 ]; then bad "mpi one rank fails: lines besides the ranks' (mpirun's banners?)"
  elif leftovers "$marker"; then bad "mpi one rank fails: left behind"
  else ok "mpi: rank 1 fails: one report naming it"; fi

  # An mpirun that does not exit after its ranks have ended (OpenMPI 4.1.4's mpirun hangs
  # so when 100 processes exit at once) is stopped: a stand-in on the PATH runs the ranks,
  # then sleeps.
  mkdir -p "$out/bin"
  cat >"$out/bin/mpirun" <<'EOF'
#!/usr/bin/env bash
np=1
while [ $# -gt 0 ]; do
  case $1 in -np) np=$2; shift 2 ;; -x | --bind-to | --hostfile) shift 2 ;; --mca) shift 3 ;; -*) shift ;; *) break ;; esac
done
for ((r = 0; r < np; r++)); do OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$np "$@" & done
wait
exec -a "$0-after-its-ranks" sleep 300
EOF
  chmod +x "$out/bin/mpirun"
  start=$(now)
  PATH="$out/bin:$PATH" launch --nproc_per_node 3 -- true >"$out/out" 2>"$out/err"
  rc=$? elapsed=$(since "$start")
  if [ $rc != 0 ]; then bad "mpirun that hangs: exit code $rc, expected 0"
  elif ! grep -q "every rank has ended, but mpirun did not exit" "$out/err"; then bad "mpirun that hangs: no note"
  elif leftovers "$out/bin/mpirun"; then bad "mpirun that hangs: left behind"
  else ok "mpi: an mpirun that hangs after its ranks is stopped (${elapsed}s)"; fi
fi

# Threads per rank: without OMP_NUM_THREADS each of N ranks of a host gets the host's usable
# CPUs / N (at least 1), and the launcher says so once; a value the user set reaches every
# rank unchanged, without the note. One CPU (taskset) shared by 3 ranks gives 1 each.
threads_case() {  # threads_case NAME EXPECTED NOTES [launch prefix and flags...]
  local name=$1 expected=$2 notes=$3
  shift 3
  "$@" -- sh -c 'echo "threads=${OMP_NUM_THREADS-unset}"' >"$out/out" 2>"$out/err"
  local rc=$? got
  got=$(sed -n 's/.*threads=//p' "$out/out" "$out/err" | sort -u | tr '\n' ' ')
  if [ $rc != 0 ]; then bad "threads, $name: exit code $rc"
  elif [ "$got" != "$expected " ]; then bad "threads, $name: the ranks saw '$got', expected '$expected'"
  elif [ "$(grep -c 'zerotrain launch: OMP_NUM_THREADS=' "$out/err")" != "$notes" ]; then
    bad "threads, $name: $(grep -c 'zerotrain launch: OMP_NUM_THREADS=' "$out/err") notes, expected $notes"
  else ok "threads, $name: each rank has $expected"; fi
}
cpus=$(nproc)
per2=$((cpus / 2)); [ $per2 -lt 1 ] && per2=1
# Under mpirun each rank's wrapper decides on its host, and says nothing.
[ "$BACKEND" = mpi ] && notes=0 || notes=1
threads_case "2 ranks on $cpus CPUs" $per2 $notes env -u OMP_NUM_THREADS "$ZT" launch --backend "$BACKEND" --nproc_per_node 2
threads_case "3 ranks on one CPU" 1 $notes env -u OMP_NUM_THREADS taskset -c 0 "$ZT" launch --backend "$BACKEND" --nproc_per_node 3
threads_case "the user's OMP_NUM_THREADS=3" 3 0 env OMP_NUM_THREADS=3 "$ZT" launch --backend "$BACKEND" --nproc_per_node 2
threads_case "one rank" unset 0 env -u OMP_NUM_THREADS "$ZT" launch --backend "$BACKEND" --nproc_per_node 1

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

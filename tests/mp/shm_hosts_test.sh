#!/usr/bin/env bash
# Shared memory across pretend hosts on one machine: ZEROTRAIN_HOST_ID gives each rank a
# host name, so the ranks of each "host" share a segment and one rank per host crosses over
# gloo (the path a real multi-host job takes). Hosts even, uneven, interleaved in rank order,
# and one rank per host; the engine's parity check across hosts; two jobs at once.
#
#   shm_hosts_test.sh ZEROTRAIN COMM_CHECK ENGINE_CHECK
set -u
ZT=$1 CHECK=$2 ENGINE=$3
pass=0 fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/     | /' "$out/$2" | tail -20; }

# comm NAME HOSTS BACKEND EXPECTED_LINE: comm_check at one rank per entry of HOSTS.
comm() {
  local name=$1 hosts=$2 backend=$3 want=$4
  local n
  n=$(echo "$hosts" | tr ',' '\n' | wc -l)
  ZEROTRAIN_HOST_ID=$hosts "$ZT" launch --nproc_per_node "$n" --backend "$backend" --timeout_s 60 \
    -- "$CHECK" --large >"$out/$name" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then bad "$name: exit code $rc" "$name"; return; fi
  if ! grep -q "$want" "$out/$name"; then bad "$name: no line '$want'" "$name"; return; fi
  ok "$name"
}

comm two_by_two a,a,b,b shm "comm_check: shm world 4: .* 0 failed"
comm three_and_one a,a,a,b shm "comm_check: shm world 4: .* 0 failed"
comm interleaved a,b,a,b shm "comm_check: shm world 4: .* 0 failed"
comm three_hosts a,b,b,c,c shm "comm_check: shm world 5: .* 0 failed"
# One rank per host: nothing to share. Automatic falls back to gloo; "shm" insists, and says why.
comm alone_auto a,b,c gloo "comm_check: gloo world 3: .* 0 failed"
ZEROTRAIN_HOST_ID=a,b "$ZT" launch --nproc_per_node 2 --backend shm --timeout_s 60 -- "$CHECK" >"$out/alone" 2>&1
if [ $? = 0 ] || ! grep -q "no two of the 2 ranks share a host" "$out/alone"; then
  bad "alone_shm: expected a refusal naming the cause" alone
else
  ok "alone_shm: refused (no two ranks share a host)"
fi

# The engine across pretend hosts trains to the same numbers as on one rank.
ZEROTRAIN_HOST_ID=a,a,b,b "$ZT" launch --nproc_per_node 4 --backend shm --timeout_s 120 -- "$ENGINE" >"$out/engine" 2>&1
if [ $? = 0 ]; then ok "engine across two hosts"; else bad "engine across two hosts" engine; fi

# Two jobs at once on the same machine: no crosstalk between their segments.
"$ZT" launch --nproc_per_node 2 --backend shm --timeout_s 60 -- "$CHECK" --large >"$out/job1" 2>&1 &
job1=$!
"$ZT" launch --nproc_per_node 2 --backend shm --timeout_s 60 -- "$CHECK" --large >"$out/job2" 2>&1
rc2=$?
wait $job1
rc1=$?
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && grep -q "0 failed" "$out/job1" && grep -q "0 failed" "$out/job2"; then
  ok "two jobs at once"
else
  bad "two jobs at once: exit codes $rc1 and $rc2" job1
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

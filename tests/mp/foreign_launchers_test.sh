#!/usr/bin/env bash
# The same program without `zerotrain launch`: under a plain `mpirun -np 2`, and with the
# variables torchrun (or DeepSpeed's launcher) sets, exported by hand.
# Either way the two ranks share this host, so they talk over shared memory.
#
#   foreign_launchers_test.sh COMM_CHECK
set -u
CHECK=$1
pass=0 fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${holder_PID:-}" ] && kill "$holder_PID" 2>/dev/null' EXIT

# torchrun-style: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
coproc holder { python3 "$(dirname "$0")/hold_port.py"; }
read -r port <&"${holder[0]}"
pids=()
for r in 0 1; do
  env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    ZEROTRAIN_COMM_TIMEOUT_S=60 "$CHECK" >"$out/torchrun$r" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && grep -q "shm world 2: .* 0 failed" "$out/torchrun0"; then
  pass=$((pass + 1)); echo "ok   torchrun-style environment (gloo, shared memory)"
else
  fail=$((fail + 1)); echo "FAIL torchrun-style environment: exit $rc0/$rc1"; cat "$out/torchrun0" "$out/torchrun1"
fi

if command -v mpirun >/dev/null; then
  root=""; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
  if mpirun $root --oversubscribe -np 2 -x ZEROTRAIN_COMM_TIMEOUT_S=60 "$CHECK" >"$out/mpirun" 2>&1 &&
     grep -q "shm world 2: .* 0 failed" "$out/mpirun"; then
    pass=$((pass + 1)); echo "ok   plain mpirun -np 2 (mpi, shared memory)"
  else
    fail=$((fail + 1)); echo "FAIL plain mpirun"; cat "$out/mpirun"
  fi
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# What a job exposes to the network, and what it does with strangers (docs/launch.md,
# "Network exposure"). A job of 2 ranks on this host (MASTER_ADDR=127.0.0.1) whose rank 1
# comes 3 s late, so rank 0 holds the rendezvous open meanwhile:
#   - the store listens on loopback only, and so do the ranks' own links (Gloo; MPI: none);
#   - random bytes, a connection that never speaks, one that says a huge length: the job
#     still ends well;
#   - a rank of another job (another token, or none) reaching its port is refused (exit 5)
#     before it writes anything, and so is a second rank 0 on the port (in use);
# and, without a launcher, rank 0 refuses a MASTER_ADDR that is not its host's, and in a job
# across hosts a hostname that is loopback here.
#
#   network_exposure_test.sh ZEROTRAIN FAULT_RANK BACKEND
set -u
ZT=$1 FAULT=$2 BACKEND=$3
SOCKETS="$(dirname "$0")/listening_sockets.py"
pass=0 fail=0
out=$(mktemp -d)
launcher=""
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  [ -n "${stranger:-}" ] && kill "$stranger" 2>/dev/null
  [ -n "${holder_PID:-}" ] && kill "$holder_PID" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export OMP_NUM_THREADS=1

if [ "$BACKEND" = mpi ] && ! command -v mpirun >/dev/null; then echo "skipped: no mpirun"; exit 77; fi
# Held by a helper until this script ends, so that no other socket takes it meanwhile.
coproc holder { python3 "$(dirname "$0")/hold_port.py"; }
read -r port <&"${holder[0]}"
"$ZT" launch --nproc_per_node 2 --backend "$BACKEND" --master_port "$port" --timeout_s 30 -- "$FAULT" slow 1 \
  >"$out/job" 2>&1 &
launcher=$!

# The store, as soon as it listens.
for _ in $(seq 100); do
  [ -n "$(python3 "$SOCKETS" --port "$port")" ] && break
  sleep 0.1
done
python3 "$SOCKETS" --port "$port" >"$out/store"
if [ ! -s "$out/store" ]; then
  bad "$BACKEND: nothing listens on MASTER_PORT $port"
elif grep -q exposed "$out/store"; then
  bad "$BACKEND: the store listens beyond loopback with MASTER_ADDR=127.0.0.1: $(tr '\n' ';' <"$out/store")"
else
  ok "$BACKEND: the store listens on loopback only ($(awk '{print $1}' "$out/store" | tr '\n' ' '))"
fi

# Strangers, while rank 0 waits for rank 1: they must not disturb the job. One connection
# stays open, silent, until the job has ended.
python3 - "$port" <<'EOF' &
import os, socket, struct, sys, time
port = int(sys.argv[1])
def connect():
    return socket.create_connection(("127.0.0.1", port), timeout=5)
for payload in (os.urandom(65536), b"\x00" * 7, struct.pack("<BQ", 1, 2**64 - 1) + b"key",
                b"GET / HTTP/1.0\r\n\r\n", bytes(range(256)) * 64):
    try:
        s = connect()
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(1)
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    except OSError:
        pass
silent = connect()   # a half-open peer that never speaks
time.sleep(20)
EOF
stranger=$!

# A rank of another job on the same port: another token, and none (torchrun's environment).
for token in other-job-token ""; do
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    ZEROTRAIN_COMM_BACKEND=gloo ZEROTRAIN_COMM_TIMEOUT_S=10 ZEROTRAIN_JOB_TOKEN=$token \
    "$FAULT" ok 9 >"$out/foreign" 2>&1
  rc=$?
  if [ $rc = 5 ] && grep -q "belongs to another job" "$out/foreign"; then
    ok "$BACKEND: a rank of another job (token '${token:-none}') is refused (exit 5)"
  else
    bad "$BACKEND: a rank of another job (token '${token:-none}'): exit $rc"; sed 's/^/     | /' "$out/foreign" | tail -5
  fi
done
env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  ZEROTRAIN_COMM_BACKEND=gloo ZEROTRAIN_COMM_TIMEOUT_S=10 "$FAULT" ok 9 >"$out/foreign" 2>&1
rc=$?
if [ $rc = 5 ] && grep -q "port is in use" "$out/foreign"; then
  ok "$BACKEND: a second rank 0 on the port is refused (exit 5)"
else
  bad "$BACKEND: a second rank 0 on the port: exit $rc"; sed 's/^/     | /' "$out/foreign" | tail -5
fi

# The ranks' own listeners once every rank has joined (they then wait 3 s). mpirun's own are
# OpenMPI's (docs/launch.md says what they are).
for _ in $(seq 150); do
  grep -q "rank 1 joined" "$out/job" && break
  sleep 0.1
done
python3 "$SOCKETS" --under "$launcher" --skip mpirun >"$out/ranks"
if grep -q exposed "$out/ranks"; then
  bad "$BACKEND: the ranks listen beyond loopback: $(grep exposed "$out/ranks" | tr '\n' ';')"
else
  ok "$BACKEND: the ranks listen on loopback only ($(awk '{print $3 "@" $1}' "$out/ranks" | sort -u | tr '\n' ' '))"
fi

wait "$launcher"
rc=$?
launcher=""
if [ $rc = 0 ]; then
  ok "$BACKEND: the job ended well (exit 0)"
else
  bad "$BACKEND: the job exited $rc"; sed 's/^/     | /' "$out/job" | tail -15
fi

# Rank 0 alone, no launcher: an address that is not this host's is refused at once.
env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=203.0.113.7 MASTER_PORT="$(free_port)" \
  ZEROTRAIN_COMM_BACKEND=gloo ZEROTRAIN_COMM_TIMEOUT_S=10 "$FAULT" ok 9 >"$out/alone" 2>&1
rc=$?
if [ $rc = 5 ] && grep -q "not an address of this host" "$out/alone"; then
  ok "$BACKEND: rank 0 refuses a MASTER_ADDR that is not its host's (exit 5)"
else
  bad "$BACKEND: MASTER_ADDR of another host: exit $rc"; sed 's/^/     | /' "$out/alone" | tail -5
fi
# A job across hosts (LOCAL_WORLD_SIZE < WORLD_SIZE) whose MASTER_ADDR is a name that rank 0's
# host maps to loopback: refused, not left for the other hosts to time out on. Where this
# host's name resolves to a network address, the case does not arise.
name=$(hostname)
if getent hosts "$name" | awk '{print $1}' | grep -qE '^(127\.|::1$)'; then
  env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$name" MASTER_PORT="$(free_port)" \
    ZEROTRAIN_COMM_BACKEND=gloo ZEROTRAIN_COMM_TIMEOUT_S=10 "$FAULT" ok 9 >"$out/alone" 2>&1
  rc=$?
  if [ $rc = 5 ] && grep -q "loopback address that the ranks on other hosts cannot reach" "$out/alone"; then
    ok "$BACKEND: rank 0 of a job across hosts refuses MASTER_ADDR '$name', loopback here (exit 5)"
  else
    bad "$BACKEND: MASTER_ADDR '$name' (loopback) across hosts: exit $rc"; sed 's/^/     | /' "$out/alone" | tail -5
  fi
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair, two ranks in
# each, started per node (--nnodes 2 --node_rank R --master_addr A) as on a real cluster.
# Rendezvous and every collective cross the veth link. Exits 77 (skipped) where network
# namespaces cannot be created (not root, or no CAP_NET_ADMIN in a container).
#
#   two_hosts_test.sh ZEROTRAIN COMM_CHECK
set -u
ZT=$1 CHECK=$2
A="zt-a-$$" B="zt-b-$$"
ADDR_A=10.231.$(( $$ % 250 )).1 ADDR_B=10.231.$(( $$ % 250 )).2
out=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

if ! ip netns add "$A" 2>"$out/why"; then
  echo "SKIP: cannot create a network namespace ($(cat "$out/why")); this test needs root or CAP_NET_ADMIN"
  exit 77
fi
ip netns add "$B"
ip link add "va$$" type veth peer name "vb$$"
ip link set "va$$" netns "$A"
ip link set "vb$$" netns "$B"
ip -n "$A" addr add "$ADDR_A/24" dev "va$$"
ip -n "$B" addr add "$ADDR_B/24" dev "vb$$"
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
done
ip -n "$A" link set "va$$" up
ip -n "$B" link set "vb$$" up

node() {  # node RANK NAMESPACE
  ip netns exec "$2" "$ZT" launch --nnodes 2 --node_rank "$1" --nproc_per_node 2 --master_addr "$ADDR_A" \
    --master_port 29500 --backend gloo --timeout_s 60 -- "$CHECK"
}
node 0 "$A" >"$out/a" 2>&1 &
pid_a=$!
node 1 "$B" >"$out/b" 2>&1
rc_b=$?
wait $pid_a
rc_a=$?
cat "$out/a" "$out/b"
if [ $rc_a != 0 ] || [ $rc_b != 0 ]; then
  echo "FAIL: node 0 exited $rc_a, node 1 exited $rc_b"
  exit 1
fi
if ! grep -q "comm_check: shm world 4: .* 0 failed" "$out/a"; then
  echo "FAIL: rank 0 did not report a passing world of 4"
  exit 1
fi
echo "ok: 4 ranks on two network namespaces passed every collective"

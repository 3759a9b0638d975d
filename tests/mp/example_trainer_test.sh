#!/usr/bin/env bash
# docs/trainer.md's C++ example (examples/cpp/trainer_fashion_mnist.cpp) under `zerotrain
# launch` on 2 ranks: it must exit 0 and print a test accuracy well above chance (10%).
# Both, since a run can print the accuracy and then crash; skipped where Fashion-MNIST is
# not installed.
#
#   example_trainer_test.sh ZEROTRAIN EXAMPLE DS_CONFIG TRAIN_SAMPLES
set -u
ZT=$1 EXAMPLE=$2 CONFIG=$3 SAMPLES=$4
fail() { echo "FAIL: $*"; exit 1; }
data=/usr/share/datasets/fashion-mnist   # zerotrain/data/open.h: kFashionMnistDir
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [ -f "$data/$f" ] || { echo "SKIP: Fashion-MNIST is not installed ($data/$f is missing; Debian package dataset-fashion-mnist)"; exit 77; }
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$ZT" launch --nproc_per_node 2 --backend gloo --timeout_s 120 -- "$EXAMPLE" "$CONFIG" "$SAMPLES" >"$log" 2>&1
rc=$?
tail -5 "$log"
[ "$rc" -eq 0 ] || { tail -40 "$log"; fail "the example exited $rc"; }
grep -Eq 'test accuracy 0\.[4-9]' "$log" || fail "no 'test accuracy' line at or above 0.4"
echo "ok: the example exited 0 with $(grep -Eo 'test accuracy [0-9.]+' "$log" | tail -1)"

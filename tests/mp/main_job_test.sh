#!/usr/bin/env bash
# The README's first command, scripts/main.sh, end to end on a subset of Fashion-MNIST (2,000
# training and 2,000 test images, 1 epoch): it sets up (quick when everything is there),
# trains the ConvNet with ZeRO-2 on 2 ranks, and must reach an accuracy well above chance
# (10%), write its metrics, TensorBoard logs and checkpoint, and consolidate the checkpoint
# into a safetensors file that the safetensors package reads back with the ConvNet's tensors.
#
#   main_job_test.sh REPO_ROOT BUILD_DIR PYTHON
set -u
ROOT=$1 BUILD=$2 PYTHON=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  { echo "SKIP: Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)"; exit 77; }

ZEROTRAIN_BUILD=$BUILD ZEROTRAIN_MAIN_OUT="$out/run" ZEROTRAIN_MAIN_EPOCHS=1 ZEROTRAIN_MIN_ACCURACY=0.4 \
  ZEROTRAIN_MAIN_ARGS="--max_train_samples 2000 --max_eval_samples 2000" \
  bash "$ROOT/scripts/main.sh" >"$out/log" 2>&1 || { tail -40 "$out/log"; fail "scripts/main.sh exited $?"; }
cat "$out/log" | grep -v '^\[rank 0\]   ' | tail -25

grep -q '^main job: test accuracy 0\.[4-9]' "$out/log" || fail "no accuracy line above 0.4"
grep -q '"eval_accuracy"' "$out/run/metrics.jsonl" || fail "no evaluation in the metrics file"
grep -q '"event":"end"' "$out/run/metrics.jsonl" || fail "no end line in the metrics file"
ls "$out/run/tensorboard"/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard event file"
ls -d "$out/run"/checkpoint-* >/dev/null 2>&1 || fail "no checkpoint folder"
for where in "metrics (JSON lines)" "TensorBoard logs" "checkpoint:" "consolidated weights"; do
  grep -q "$where" "$out/log" || fail "the job does not say where its $where went"
done
grep -q "precision: \(bf16\|fp32\), because" "$out/log" || fail "the start-up log does not say which precision and why"
"$PYTHON" - "$out/run/model/model.safetensors" <<'PY' || fail "the consolidated model does not load"
import sys
from safetensors.numpy import load_file
tensors = load_file(sys.argv[1])
names = sorted(tensors)
expected = sorted(f"{layer}.module.{p}" for layer in ("conv1", "conv2", "fc1", "fc2") for p in ("weight", "bias"))
assert names == expected, names
assert tensors["conv1.module.weight"].shape == (32, 1, 3, 3), tensors["conv1.module.weight"].shape
assert tensors["fc2.module.weight"].shape == (10, 128), tensors["fc2.module.weight"].shape
print("consolidated:", ", ".join(f"{n} {tuple(tensors[n].shape)}" for n in names))
PY
# --report_to tensorboard: TensorBoard's own reader finds the training and evaluation scalars.
"$PYTHON" - "$out/run/tensorboard" <<'PY' || fail "TensorBoard cannot read the event files"
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
events = EventAccumulator(sys.argv[1])
events.Reload()
tags = events.Tags()["scalars"]
for tag in ("train/loss", "train/learning_rate", "train/epoch", "eval/loss", "eval/accuracy"):
    assert tag in tags, (tag, tags)
accuracy = events.Scalars("eval/accuracy")[-1].value
assert 0.4 <= accuracy <= 1.0, accuracy
print("tensorboard:", len(tags), "scalar tags; eval/accuracy", round(accuracy, 4))
PY
echo "PASS"

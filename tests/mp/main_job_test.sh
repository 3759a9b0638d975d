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
# The closing lines say where each output went: each must name this run's own file or
# folder, which must exist (the label alone is echoed whatever happened).
printed() { sed -n "s/^  $1: *\([^ ]*\).*/\1/p" "$out/log" | tail -1; }
[ "$(printed 'metrics (JSON lines)')" = "$out/run/metrics.jsonl" ] || fail "the metrics path printed is not $out/run/metrics.jsonl"
[ "$(printed 'TensorBoard logs')" = "$out/run/tensorboard" ] || fail "the TensorBoard path printed is not $out/run/tensorboard"
[ "$(printed 'consolidated weights')" = "$out/run/model/model.safetensors" ] ||
  fail "the consolidated weights path printed is not $out/run/model/model.safetensors"
printed_checkpoint=$(printed checkpoint)
case "$printed_checkpoint" in
  "$out/run"/checkpoint-*) [ -d "$printed_checkpoint" ] || fail "the checkpoint printed, $printed_checkpoint, is no folder" ;;
  *) fail "the checkpoint path printed, '$printed_checkpoint', is not a checkpoint of this run" ;;
esac
# --bf16_if_native trains in bf16 exactly where the first "flags" line of /proc/cpuinfo has
# avx512_bf16 or amx_bf16 (fp32 otherwise), and gives the reason `zerotrain report` gives.
if grep -m1 '^flags[[:space:]]*:' /proc/cpuinfo | grep -qwE 'avx512_bf16|amx_bf16'; then want=bf16; else want=fp32; fi
expected=$("$BUILD/tools/zerotrain" report --json 2>/dev/null | "$PYTHON" -c '
import json, sys
cpu = json.load(sys.stdin)["cpu"]
choice, reason = cpu["bf16_choice"].split(": ", 1)
assert choice == ("bf16" if cpu["bf16_native"] else "fp32"), cpu
print(f"precision: {choice}, because {reason}")') || fail "zerotrain report --json gives no consistent bf16 choice"
case "$expected" in
  "precision: $want, because "*) ;;
  *) fail "zerotrain report says '$expected', but /proc/cpuinfo calls for $want" ;;
esac
grep -qF "$expected" "$out/log" || fail "the start-up log does not say '$expected'"
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

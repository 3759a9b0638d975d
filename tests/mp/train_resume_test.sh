#!/usr/bin/env bash
# Stop a `zerotrain train` run and resume it on another number of ranks (docs/engine.md,
# "Checkpoints"). The uninterrupted run trains the tiny GPT for 8 steps at world 2, ZeRO
# stage 2, fp32, saving every 4 steps. Resumed from its checkpoint-4, the runs must log the
# uninterrupted run's losses and global gradient norms for steps 5..8 (from --metrics_file):
#   - bit for bit at world 2, stage 2 (the same setting), ending with the same rank files;
#   - within 1e-5 relative at world 4, stage 3 and at world 1, stage 0 (resharded: the
#     ranks sum their gradients in another order);
#   - and a bf16 run at world 4, resumed at world 2, within 2^-5 relative of its own steps.
# Also: HF's layout (checkpoint-<step>/global_step<step>/ and latest, a save at every
# multiple of --save_steps and at the last step), --save_total_limit keeping the newest
# folders, and --resume_from_checkpoint true taking the newest complete folder.
#
#   train_resume_test.sh ZEROTRAIN REPO_ROOT
set -u
ZT=$1 ROOT=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
config="$ROOT/examples/ds_config_train_zero2.json"
sed 's/"stage": 2/"stage": 0/' "$config" >"$out/zero0.json"
sed 's/"stage": 2/"stage": 3, "stage3_param_persistence_threshold": 0/' "$config" >"$out/zero3.json"
fail() { echo "FAIL: $*"; exit 1; }

train() {  # train NAME NPROC CONFIG [FLAGS...]: a global batch of 8, 8 steps, every step logged
  local name=$1 nproc=$2 config=$3
  shift 3
  "$ZT" launch --nproc_per_node "$nproc" --backend gloo --timeout_s 120 -- "$ZT" train --model gpt \
    --deepspeed "$config" --per_device_train_batch_size $((8 / nproc)) --learning_rate 3e-3 --max_steps 8 \
    --logging_steps 1 --seed 3 --metrics_file "$out/$name.jsonl" "$@" >"$out/$name.log" 2>&1 ||
    { echo "FAIL: $name exited $?"; tail -30 "$out/$name.log"; exit 1; }
}

train base 2 "$config" --output_dir "$out/base" --save_steps 4
for step in 4 8; do
  folder="$out/base/checkpoint-$step"
  [ "$(cat "$folder/latest")" = "global_step$step" ] || fail "$folder/latest does not name global_step$step"
  for f in manifest.json rank_00000.safetensors rank_00001.safetensors; do
    [ -f "$folder/global_step$step/$f" ] || fail "$folder/global_step$step/$f is missing"
  done
done
train ws2_stage2 2 "$config" --output_dir "$out/ws2_stage2" --save_steps 4 --resume_from_checkpoint "$out/base/checkpoint-4"
train ws4_stage3 4 "$out/zero3.json" --resume_from_checkpoint "$out/base/checkpoint-4"
train ws1_stage0 1 "$out/zero0.json" --resume_from_checkpoint "$out/base/checkpoint-4/"
train bf16_ws4 4 "$config" --bf16 --output_dir "$out/bf16" --save_steps 4
train bf16_ws2 2 "$config" --bf16 --resume_from_checkpoint "$out/bf16/checkpoint-4"
# The resumed run saves at step 8 (the multiple and the last step), not at 4 again.
[ -f "$out/ws2_stage2/checkpoint-8/latest" ] && [ ! -e "$out/ws2_stage2/checkpoint-4" ] ||
  fail "the resumed run's folders: $(ls "$out/ws2_stage2")"
# In the same setting it ends where the uninterrupted run ended: the same rank files, byte for
# byte (weights, optimizer moments, generator states).
for f in rank_00000.safetensors rank_00001.safetensors; do
  cmp "$out/base/checkpoint-8/global_step8/$f" "$out/ws2_stage2/checkpoint-8/global_step8/$f" ||
    fail "checkpoint-8/global_step8/$f differs from the uninterrupted run's"
done

# Every 2 steps, keeping 2: checkpoint-6 and checkpoint-8 remain. Saving must not change
# training, so this run too logs the base run's losses bit for bit.
train rotated 2 "$config" --output_dir "$out/rotated" --save_steps 2 --save_total_limit 2
[ "$(cd "$out/rotated" && echo checkpoint-*)" = "checkpoint-6 checkpoint-8" ] ||
  fail "--save_total_limit 2 left: $(ls "$out/rotated")"
# `true` takes the newest complete folder: not checkpoint-8 once its latest is gone (a save
# that did not finish), nor an empty checkpoint-12; so checkpoint-6, and steps 7 and 8.
rm "$out/rotated/checkpoint-8/latest"
mkdir "$out/rotated/checkpoint-12"
train newest 2 "$config" --output_dir "$out/rotated" --save_steps 0 --resume_from_checkpoint true
grep -q "resumed from .*/checkpoint-6/global_step6 at global step 6" "$out/newest.log" ||
  fail "--resume_from_checkpoint true did not take checkpoint-6: $(grep resumed "$out/newest.log")"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def rows(name):
    lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    assert lines[-1].get("event") == "end" and lines[-1]["steps"] == 8, f"{name}: end event {lines[-1]}"
    return {r["step"]: r["loss"] for r in lines if "loss" in r}
def norms(name):
    lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    return {r["step"]: r["grad_norm"] for r in lines if "loss" in r}
def compare(name, reference, first, rel, label):
    for what, read in (("losses", rows), ("gradient norms", norms)):
        got, want = read(name), read(reference)
        assert list(got) == list(range(first, 9)), f"{name}: logged steps {list(got)}, want {first}..8"
        assert all(want[s] > 0 for s in got), f"{reference}: {what} {want}"
        worst = max(abs(got[s] - want[s]) / abs(want[s]) for s in got)
        assert worst <= rel, f"{name}: {what} {worst:.3g} relative from {reference}'s (bound {rel:.3g}): {got} vs {want}"
        print(f"ok: {name}: {what}, steps {first}..8 {label} ({worst:.3g} relative)")
base = rows("base")
assert list(base) == list(range(1, 9)), f"base logged steps {list(base)}"
compare("ws2_stage2", "base", 5, 0.0, "bit for bit")
compare("ws4_stage3", "base", 5, 1e-5, "within 1e-5")
compare("ws1_stage0", "base", 5, 1e-5, "within 1e-5")
compare("bf16_ws2", "bf16_ws4", 5, 2.0**-5, "within 2^-5")
compare("rotated", "base", 1, 0.0, "bit for bit (saving every 2 steps)")
compare("newest", "base", 7, 0.0, "bit for bit")
print("losses, steps 5..8:")
for name in ("base", "ws2_stage2", "ws4_stage3", "ws1_stage0", "bf16_ws4", "bf16_ws2"):
    print(f"  {name:11s}", " ".join(f"{rows(name)[s]:.9f}" for s in range(5, 9)))
PY

#!/usr/bin/env bash
# `zerotrain train` end to end: world 1 with accumulation 4, world 2 with accumulation 2 and
# world 4 with accumulation 1 see the same global batches, so their metrics files must log
# the same losses (stage 2, and stage 0 at world 2); and the loss must fall.
#
#   train_test.sh ZEROTRAIN REPO_ROOT
set -u
ZT=$1 ROOT=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
config="$ROOT/examples/ds_config_train_zero2.json"
sed 's/"stage": 2/"stage": 0/' "$config" >"$out/zero0.json"

train() {  # train NAME NPROC ACCUMULATION CONFIG
  "$ZT" launch --nproc_per_node "$2" --backend gloo --timeout_s 120 -- "$ZT" train --model gpt \
    --deepspeed "$4" --per_device_train_batch_size $((8 / $2 / $3)) --gradient_accumulation_steps "$3" \
    --learning_rate 3e-3 --max_steps 30 --logging_steps 5 --seed 3 --metrics_file "$out/$1.jsonl" \
    >"$out/$1.log" 2>&1 || { echo "FAIL: $1 exited $?"; cat "$out/$1.log"; exit 1; }
}
train ws1 1 4 "$config"
train ws2 2 2 "$config"
train ws4 4 1 "$config"
train ws2_stage0 2 2 "$out/zero0.json"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def losses(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    steps = [r for r in rows if "loss" in r]
    assert rows[-1].get("event") == "end", f"{name}: no end event"
    for key in ("step", "loss", "lr", "grad_norm", "loss_scale", "skipped", "samples_per_s", "elapsed_s",
                "model_state_bytes", "peak_rss_bytes"):
        assert key in steps[0], f"{name}: metrics lack {key}"
    return [r["loss"] for r in steps]
base = losses("ws1")
assert base[-1] < 0.75 * base[0], f"the loss did not fall: {base}"
for other in ("ws2", "ws4", "ws2_stage0"):
    got = losses(other)
    worst = max(abs(a - b) for a, b in zip(base, got))
    assert len(got) == len(base) and worst < 1e-4, f"{other} differs from ws1 by {worst}: {got} vs {base}"
print(f"ok: losses {base[0]:.3f} -> {base[-1]:.3f}, identical at world 1, 2, 4 and stages 0, 2")
PY

#!/usr/bin/env bash
# Fine-tunes a tiny GPT-2 and a tiny Llama, made offline, with `zerotrain train --model hf:DIR`
# at ZeRO stage 3 on two ranks, and loads each result back into transformers to generate a
# line (docs/finetune.md).
#
#   bash examples/finetune/run.sh [WORK_DIR] [STEPS]
#
# Needs the build (bash scripts/setup.sh) and its Python environment; ZEROTRAIN_BIN and
# ZEROTRAIN_PYTHON override where they are.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${1:-${TMPDIR:-/tmp}/zerotrain-finetune}"
steps="${2:-40}"
zerotrain="${ZEROTRAIN_BIN:-$root/build/tools/zerotrain}"
python="${ZEROTRAIN_PYTHON:-${ZEROTRAIN_HOME:-$HOME/.cache/zerotrain}/venv/bin/python}"
[ -x "$zerotrain" ] || { echo "run.sh: $zerotrain is missing; build first: bash scripts/setup.sh" >&2; exit 1; }

mkdir -p "$work"
"$python" "$here/make_models.py" "$work" 2>&1 | grep -v "Writing model shards"
for model in gpt2 llama; do
  out="$work/out-$model"
  rm -rf "$out"
  OMP_NUM_THREADS=1 "$zerotrain" launch --nproc_per_node 2 "$zerotrain" train \
    --model "hf:$work/$model" --model_config block_size=128 --dataset "jsonl:$work/kjv.jsonl" \
    --zero_stage 3 --max_steps "$steps" --per_device_train_batch_size 4 --learning_rate 3e-3 \
    --warmup_steps 4 --logging_steps 10 --save_strategy no --output_dir "$out" --disable_tqdm
  "$python" "$here/generate.py" "$out" "Genesis 1" 2>&1 | grep -v "Loading weights"
done

#!/usr/bin/env bash
# The main job: set up and build, show what this build is, then train the built-in GPT with
# ZeRO stage 2 on two ranks in bf16 (a DeepSpeed config with HF-style "auto" values).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${ZEROTRAIN_BUILD:-build}
"$BUILD_DIR/tools/zerotrain" report
"$BUILD_DIR/tools/zerotrain" launch --nproc_per_node 2 -- "$BUILD_DIR/tools/zerotrain" train \
  --model gpt --model_config preset=tiny --dataset synthetic --deepspeed examples/ds_config_train_zero2.json \
  --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --learning_rate 3e-3 --warmup_steps 10 \
  --max_steps 100 --logging_steps 20 --bf16 --metrics_file "$BUILD_DIR/train_metrics.jsonl"

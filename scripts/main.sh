#!/usr/bin/env bash
# The main job: set up and build the zerotrain command (not the tests), then train the
# ConvNet on Fashion-MNIST with ZeRO stage 2 on two ranks for two epochs, evaluating after
# each, with a checkpoint at the end, consolidated into one safetensors file. bf16 where
# this CPU computes it natively (AVX512-BF16 or AMX), fp32 otherwise (docs/trainer.md).
#
#   ZEROTRAIN_MAIN_OUT      where the run's outputs go (default: runs/fashion-mnist)
#   ZEROTRAIN_MAIN_ARGS     extra `zerotrain train` flags (the CI test trains on a subset)
#   ZEROTRAIN_MAIN_EPOCHS   epochs (default: 2)
#   ZEROTRAIN_MIN_ACCURACY  the test accuracy the run must reach (default: 0.88)
set -euo pipefail
cd "$(dirname "$0")/.."
ZEROTRAIN_BUILD_TARGETS=${ZEROTRAIN_BUILD_TARGETS:-"zerotrain zerotrain_python"} bash scripts/setup.sh
BUILD_DIR=${ZEROTRAIN_BUILD:-build}
OUT=${ZEROTRAIN_MAIN_OUT:-runs/fashion-mnist}
MIN_ACCURACY=${ZEROTRAIN_MIN_ACCURACY:-0.88}
ZT="$BUILD_DIR/tools/zerotrain"

"$ZT" report
rm -rf "$OUT"
mkdir -p "$OUT"
start=$(date +%s)
# shellcheck disable=SC2086  # ZEROTRAIN_MAIN_ARGS holds several flags
"$ZT" launch --nproc_per_node 2 -- "$ZT" train \
  --model convnet --dataset fashion-mnist --deepspeed examples/ds_config_fashion_zero2.json \
  --per_device_train_batch_size 32 --learning_rate 2e-3 --num_train_epochs "${ZEROTRAIN_MAIN_EPOCHS:-2}" --bf16_if_native \
  --eval_strategy epoch --save_strategy epoch --save_total_limit 1 --output_dir "$OUT" --logging_steps 200 \
  --report_to tensorboard --logging_dir "$OUT/tensorboard" --metrics_file "$OUT/metrics.jsonl" \
  ${ZEROTRAIN_MAIN_ARGS:-}
trained=$(date +%s)

checkpoint=$(ls -d "$OUT"/checkpoint-* | sort -t- -k2 -n | tail -1)
"$ZT" zero-to-fp32 "$checkpoint" "$OUT/model"

# The last evaluation's accuracy, from the metrics file.
accuracy=$(sed -n 's/.*"eval_accuracy":\([0-9.eE+-]*\).*/\1/p' "$OUT/metrics.jsonl" | tail -1)
echo
echo "main job: test accuracy $accuracy after ${ZEROTRAIN_MAIN_EPOCHS:-2} epoch(s), trained in $((trained - start)) s (the bar: $MIN_ACCURACY)"
echo "  metrics (JSON lines):  $OUT/metrics.jsonl"
echo "  TensorBoard logs:      $OUT/tensorboard   (tensorboard --logdir $OUT/tensorboard)"
echo "  checkpoint:            $checkpoint   (zerotrain checkpoint inspect $checkpoint)"
echo "  consolidated weights:  $OUT/model/model.safetensors"
awk -v a="$accuracy" -v m="$MIN_ACCURACY" 'BEGIN { exit !(a + 0 >= m + 0) }' || {
  echo "main job: the accuracy $accuracy is below $MIN_ACCURACY" >&2
  exit 1
}

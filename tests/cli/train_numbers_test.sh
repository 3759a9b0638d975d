#!/usr/bin/env bash
# `zerotrain train`'s numeric flags: each is read as the config reads a number (no clamping,
# no octal, no nan), checked as the config key it fills is checked, and the run's length is
# planned in checked arithmetic; every refusal names the flag, none runs or exits 0 with
# nothing trained. Usage: train_numbers_test.sh ZEROTRAIN_BINARY REPO_ROOT
set -uo pipefail
zt=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

train=("$zt" train --model mlp --deepspeed "$root/examples/ds_config_train_zero2.json" --disable_tqdm)
int_range="expected an integer from -2^63 to 2^63-1"

# Zero and negative batch sizes and accumulation: refused as the same value in the config is (3).
for v in 0 -1 -8; do
  expect "micro_batch_$v" 3 "train_micro_batch_size_per_gpu: must be at least 1, got $v (filled from --per_device_train_batch_size)" -- \
    "${train[@]}" --max_steps 1 --per_device_train_batch_size "$v"
  expect "accumulation_$v" 3 "gradient_accumulation_steps: must be at least 1, got $v (filled from --gradient_accumulation_steps)" -- \
    "${train[@]}" --max_steps 1 --gradient_accumulation_steps "$v"
  expect "eval_batch_$v" 2 "--per_device_eval_batch_size $v: must be at least 1" -- \
    "${train[@]}" --max_steps 1 --per_device_eval_batch_size "$v"
done
# Negative counts whose 0 means "all" or "off": only the documented sentinel is accepted.
expect max_train_samples_negative 2 "--max_train_samples -5: must be at least 0 (0: all samples)" -- \
  "${train[@]}" --max_steps 1 --max_train_samples -5
expect max_eval_samples_negative 2 "--max_eval_samples -1: must be at least 0" -- \
  "${train[@]}" --max_steps 1 --max_eval_samples -1
expect max_steps_negative 2 "--max_steps -2: must be at least 1, or -1" -- "${train[@]}" --max_steps -2
expect max_steps_zero 2 "--max_steps 0: must be at least 1" -- "${train[@]}" --max_steps 0
expect local_rank_negative 2 "--local_rank -3: must be at least 0" -- "${train[@]}" --max_steps 1 --local_rank -3

# Texts that are no number in range: an error naming the flag, never a clamped or octal value.
expect max_steps_beyond_int64 2 "--max_steps 99999999999999999999: $int_range" -- \
  "${train[@]}" --max_steps 99999999999999999999
expect max_steps_2_to_64 2 "--max_steps 18446744073709551616: $int_range" -- \
  "${train[@]}" --max_steps 18446744073709551616
expect micro_batch_beyond_int64 2 "--per_device_train_batch_size 9223372036854775808: $int_range" -- \
  "${train[@]}" --max_steps 1 --per_device_train_batch_size 9223372036854775808
expect seed_1e30 2 "--seed 1e30: $int_range" -- "${train[@]}" --max_steps 1 --seed 1e30
expect octal 2 "--max_steps 010: $int_range" -- "${train[@]}" --max_steps 010
expect fraction 2 "--gradient_accumulation_steps 1.5: $int_range" -- \
  "${train[@]}" --max_steps 1 --gradient_accumulation_steps 1.5
expect lr_nan 2 "--learning_rate nan: expected a finite number" -- "${train[@]}" --max_steps 1 --learning_rate nan
expect lr_overflow 2 "--learning_rate 1e999: expected a finite number" -- "${train[@]}" --max_steps 1 --learning_rate 1e999
expect local_rank_beyond_int 2 "--local_rank 4294967296: expected an integer from -2^31 to 2^31-1" -- \
  "${train[@]}" --max_steps 1 --local_rank 4294967296

# Products and derived counts that overflow 64 bits, or plan no step.
expect samples_overflow 2 "--max_steps 9223372036854775807 x the global batch 8" "more samples than a 64-bit counter holds" -- \
  "${train[@]}" --max_steps 9223372036854775807
expect samples_overflow_near 2 "--max_steps 2305843009213693952 x the global batch 4" -- \
  "${train[@]}" --max_steps 2305843009213693952 --per_device_train_batch_size 2 --gradient_accumulation_steps 2 \
  --max_train_samples 64
expect batch_product_overflow 3 "--per_device_train_batch_size * --gradient_accumulation_steps does not fit in a 64-bit integer" -- \
  "${train[@]}" --max_steps 1 --per_device_train_batch_size 4611686018427387904 --gradient_accumulation_steps 4
expect epochs_overflow 2 "--num_train_epochs 1e+300 x 8192 steps per epoch" -- "${train[@]}" --num_train_epochs 1e300
expect epochs_nan 2 "--num_train_epochs nan: expected a finite number" -- "${train[@]}" --num_train_epochs nan

# Accumulation longer than an epoch: refused up front with the batch count, not an internal error.
expect accumulation_beyond_epoch 2 "--gradient_accumulation_steps 4: one optimizer step accumulates 4 micro-batches, but an epoch has only 2 per rank" \
  "give --gradient_accumulation_steps 2 or less" -- \
  "${train[@]}" --max_train_samples 4 --per_device_train_batch_size 2 --gradient_accumulation_steps 4
expect accumulation_huge 2 "--gradient_accumulation_steps 9223372036854775807: one optimizer step accumulates" -- \
  "${train[@]}" --max_train_samples 4 --per_device_train_batch_size 1 --gradient_accumulation_steps 9223372036854775807

# What stays accepted: an accumulation of a whole epoch, integral floats as the config takes them.
expect accumulation_whole_epoch 0 "1 steps per epoch, 2 steps" "done: 2 steps" -- \
  "${train[@]}" --max_train_samples 8 --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --num_train_epochs 2
expect integral_float 0 "done: 3 steps" -- "${train[@]}" --max_steps 3e0 --max_train_samples 16 --logging_steps 1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

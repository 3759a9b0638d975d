#!/usr/bin/env bash
# `zerotrain train`'s checkpoint flags (--output_dir, --save_steps, --save_total_limit,
# --resume_from_checkpoint) at world 1: what is refused, with which exit code and message,
# and when saves happen (every --save_steps steps and at the last step, as HF's Trainer).
# Usage: train_checkpoint_flags_test.sh ZEROTRAIN_BINARY REPO_ROOT
set -uo pipefail
zt=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

train=("$zt" train --model mlp --deepspeed "$root/examples/ds_config_train_zero2.json" --logging_steps 1)

expect help 0 "--output_dir" "--save_steps" "--save_total_limit" "--resume_from_checkpoint" -- "$zt" train --help
expect save_steps_negative 2 "--save_steps -1: must be at least 0 (0 saves no checkpoint)" -- \
  "${train[@]}" --max_steps 1 --output_dir "$tmp/neg" --save_steps -1
expect save_total_limit_negative 2 "--save_total_limit -2: must be at least 0 (0 keeps every checkpoint)" -- \
  "${train[@]}" --max_steps 1 --output_dir "$tmp/neg" --save_total_limit -2
expect save_steps_not_a_number 2 "--save_steps" -- "${train[@]}" --max_steps 1 --output_dir "$tmp/neg" --save_steps 0.5
expect save_steps_without_output_dir 2 "--save_steps 4 saves checkpoints into --output_dir: give --output_dir DIR" -- \
  "${train[@]}" --max_steps 1 --save_steps 4
check nothing_created test ! -e "$tmp/neg"
expect output_dir_unwritable 7 "--output_dir $tmp/file/sub: cannot create it" -- \
  sh -c "touch '$tmp/file' && exec \"\$@\"" sh "${train[@]}" --max_steps 1 --output_dir "$tmp/file/sub"

# Saves at every multiple of --save_steps and at the last step; none without --output_dir.
expect saves 0 "step 5/" -- "${train[@]}" --max_steps 5 --output_dir "$tmp/run" --save_steps 2
check saves_at_2_4_and_last test "$(cd "$tmp/run" && echo checkpoint-*)" = "checkpoint-2 checkpoint-4 checkpoint-5"
check layout test "$(cat "$tmp/run/checkpoint-5/latest")" = global_step5 -a -f "$tmp/run/checkpoint-5/global_step5/manifest.json"
expect no_save_steps_saves_at_end 0 "step 3/" -- "${train[@]}" --max_steps 3 --output_dir "$tmp/end_only"
check default_save_steps_is_hf_500 test "$(cd "$tmp/end_only" && echo checkpoint-*)" = checkpoint-3
expect save_steps_0 0 "step 2/" -- "${train[@]}" --max_steps 2 --output_dir "$tmp/none" --save_steps 0
check save_steps_0_saves_nothing test ! -e "$tmp/none"

# --resume_from_checkpoint: what is not a checkpoint folder, and why.
expect resume_true_without_output_dir 2 "--resume_from_checkpoint true resumes from the newest checkpoint-<step> folder of --output_dir: give --output_dir DIR" -- \
  "${train[@]}" --max_steps 6 --resume_from_checkpoint true
expect resume_true_missing_dir 8 "--output_dir $tmp/nowhere does not exist" -- \
  "${train[@]}" --max_steps 6 --output_dir "$tmp/nowhere" --resume_from_checkpoint true
mkdir "$tmp/empty"
expect resume_true_nothing_complete 8 "no complete checkpoint-<step> folder in $tmp/empty" -- \
  "${train[@]}" --max_steps 6 --output_dir "$tmp/empty" --resume_from_checkpoint true
expect resume_missing 8 "--resume_from_checkpoint $tmp/run/checkpoint-9: does not exist" \
  "the newest complete one beside it is $tmp/run/checkpoint-5" -- \
  "${train[@]}" --max_steps 6 --resume_from_checkpoint "$tmp/run/checkpoint-9"
expect resume_file 8 "$tmp/file: is not a directory" -- "${train[@]}" --max_steps 6 --resume_from_checkpoint "$tmp/file"
expect resume_tag_dir 8 "is a tag directory" "give the folder above it, $tmp/run/checkpoint-5, which holds \`latest\`" -- \
  "${train[@]}" --max_steps 6 --resume_from_checkpoint "$tmp/run/checkpoint-5/global_step5"
mkdir -p "$tmp/run/checkpoint-7/.global_step7.partial"
expect resume_unfinished 8 "has no \`latest\` file: it is not a checkpoint folder, or its save did not finish" -- \
  "${train[@]}" --max_steps 6 --resume_from_checkpoint "$tmp/run/checkpoint-7"
expect resume_true_skips_unfinished 0 "resumed from $tmp/run/checkpoint-5/global_step5 at global step 5" "step 6/" -- \
  "${train[@]}" --max_steps 6 --output_dir "$tmp/run" --save_steps 0 --resume_from_checkpoint true
expect resume_done 0 "nothing to train: the run is at global step 5 and --max_steps is 5" -- \
  "${train[@]}" --max_steps 5 --resume_from_checkpoint "$tmp/run/checkpoint-5"
expect resume_other_seed 0 "with --seed 9 but it was saved with --seed 42" -- \
  "${train[@]}" --max_steps 6 --seed 9 --resume_from_checkpoint "$tmp/run/checkpoint-5"
expect resume_other_batch 0 "with a global batch of 4 but it was saved with 8" -- \
  "${train[@]}" --max_steps 6 --per_device_train_batch_size 4 --resume_from_checkpoint "$tmp/run/checkpoint-5"
expect resume_other_model 8 "the checkpoint is of a different model" -- \
  "${train[@]}" --max_steps 6 --model_config n_hidden=32 --resume_from_checkpoint "$tmp/run/checkpoint-5"

# --save_async: the same checkpoints, written in the background; --save_total_limit keeps
# complete folders only (the one being written is extra until it is published).
expect saves_async 0 "step 5/" "in the background" -- \
  "${train[@]}" --max_steps 5 --output_dir "$tmp/async" --save_steps 2 --save_async --save_total_limit 2
check async_rotation_keeps_2 test "$(cd "$tmp/async" && echo checkpoint-*)" = "checkpoint-4 checkpoint-5"
check async_same_bytes_as_sync cmp "$tmp/run/checkpoint-5/global_step5/rank_00000.safetensors" \
  "$tmp/async/checkpoint-5/global_step5/rank_00000.safetensors"
check async_nothing_left test -z "$(cd "$tmp/async/checkpoint-5" && ls -A | grep -v '^global_step5$' | grep -v '^latest$')"
printf '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "checkpoint": {"async_save": false}}' \
  >"$tmp/sync_config.json"
expect save_async_config_says_false 3 "checkpoint.async_save =false vs hf save_async=true" -- \
  "$zt" train --model mlp --deepspeed "$tmp/sync_config.json" --max_steps 1 --output_dir "$tmp/mismatch" --save_async

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

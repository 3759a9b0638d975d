#!/usr/bin/env bash
# End-to-end checks of the `zerotrain` command: exit codes and what a user reads.
# Usage: cli_test.sh ZEROTRAIN_BINARY REPO_ROOT
set -uo pipefail
zt=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

expect version 0 "zerotrain 0.1.0" "LibTorch 2." -- "$zt" --version
expect report 0 "LibTorch" "CPU kernels (ATen)" "SIMD" "ds_config parsing and validation" "communication backends" "gloo ...." -- "$zt" report
expect report_json 0 '"libtorch"' '"simd"' -- "$zt" report --json
expect no_command 2 "Subcommands" -- "$zt"
expect bad_flag 2 "--bogus" -- "$zt" config check --bogus x.json

expect example_ok 0 "OK at world size 2" "values that are not defaults" "  file: " "  derived: " \
  "gradient_accumulation_steps=" -- "$zt" config check "$root/examples/ds_config_zero2.json" --world_size 2
expect example_effective 0 "OK at world size 2" "effective config (value [source])" "[derived]" "[file]" "[default]" -- \
  "$zt" config check "$root/examples/ds_config_zero2.json" --world_size 2 --effective

cat >"$tmp/typo.json" <<'JSON'
{"train_batch_size": 8,
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memroy": true}}}
JSON
expect typo_three_deep 3 "zero_optimization.offload_optimizer.pin_memroy: unknown key; did you mean pin_memory?" -- \
  "$zt" config check "$tmp/typo.json"

cat >"$tmp/three.json" <<'JSON'
{"train_batch_size": 8,
 "zero_optimization": {"stage": 7, "stage3_max_live_parameter": 10},
 "optimizer": {"type": "AdamW", "params": {"lr": "fast"}}}
JSON
expect three_errors 3 "3 problems" "zero_optimization.stage: must be between 0 and 3, got 7" \
  "zero_optimization.stage3_max_live_parameter: unknown key; did you mean stage3_max_live_parameters?" \
  "optimizer.params.lr: expected a finite number or \"auto\", got \"fast\" (a string)" -- "$zt" config check "$tmp/three.json"

expect json_output 3 '"ok": false' '"severity": "error"' '"path": "zero_optimization.stage"' -- \
  "$zt" config check "$tmp/three.json" --json

cat >"$tmp/unsupported.json" <<'JSON'
{"train_batch_size": 8, "sparse_attention": {"mode": "fixed"}}
JSON
expect not_supported 4 "not supported: sparse_attention: sparse attention is not implemented by zerotrain" -- \
  "$zt" config check "$tmp/unsupported.json"

cat >"$tmp/batch.json" <<'JSON'
{"train_batch_size": 33, "train_micro_batch_size_per_gpu": 17}
JSON
expect batch_triangle 3 "Gradient accumulation steps: 0 has to be greater than 0" -- \
  "$zt" config check "$tmp/batch.json" --world_size 2

cat >"$tmp/unknown.json" <<'JSON'
{"train_batch_size": 8, "some_future_key": 1}
JSON
expect unknown_is_error 3 "some_future_key: unknown key" -- "$zt" config check "$tmp/unknown.json"
expect unknown_opt_out 0 "warning: some_future_key: unknown key, ignored" -- \
  "$zt" config check "$tmp/unknown.json" --allow_unknown_keys

printf '{"a": 1,\n "a": 2}' >"$tmp/dup.json"
expect duplicate_keys 3 "duplicate keys" -- "$zt" config check "$tmp/dup.json"
expect duplicate_keys_json 3 '"ok": false' "duplicate keys" -- "$zt" config check "$tmp/dup.json" --json
expect missing_file 3 "no such file" -- "$zt" config check "$tmp/nope.json"
# The IO engine's bounds are the schema's: what `train` would refuse, `config check` refuses.
echo '{"aio": {"block_size": 1099511627776, "queue_depth": 2147483648, "intra_op_parallelism": 1000000}}' >"$tmp/aio.json"
expect aio_bounds 3 "aio.block_size: must be between 4096 and 1073741824" "aio.queue_depth: must be between 1 and 4096" \
  "aio.intra_op_parallelism: must be between 1 and 256" -- "$zt" config check "$tmp/aio.json"
expect bad_world_size 2 "--world_size must be at least 1" -- "$zt" config check "$tmp/unknown.json" --world_size 0

# The reader on any file: deep nesting, non-regular files (a FIFO is not waited on), and
# batch arithmetic beyond 64 bits.
python3 -c "print('[' * 50000 + ']' * 50000)" >"$tmp/deep.json"
expect deep_nesting 3 "deep.json: nested deeper than 64 levels" -- "$zt" config check "$tmp/deep.json"
mkfifo "$tmp/fifo.json"
expect fifo_config 3 "fifo.json: cannot read the config file: is a FIFO (named pipe)" -- \
  timeout 20 "$zt" config check "$tmp/fifo.json"
expect dir_hostfile 2 "cannot read the hostfile $tmp: is a directory" -- "$zt" launch --hostfile "$tmp" -- true
# `config check -`: the config on standard input, validated as a file is.
expect config_stdin 0 "standard input: OK at world size 2" -- \
  sh -c "'$zt' config check - --world_size 2 <'$root/examples/ds_config_zero2.json'"
echo '{"train_batch_size": "x"}' >"$tmp/bad_stdin.json"
expect config_stdin_bad 3 "standard input: 1 problem" 'train_batch_size: expected an integer' -- \
  sh -c "'$zt' config check - <'$tmp/bad_stdin.json'"
expect config_stdin_empty 3 "standard input: no config came" -- sh -c "'$zt' config check - </dev/null"

# The launcher as DeepSpeed's: each rank sees the slots --include chose as CUDA_VISIBLE_DEVICES
# (a variable the user set is kept when nothing was chosen), and a Python program gets
# --local_rank=N before its arguments (the launcher goes by the name: show.py is a shell script).
printf '#!/bin/sh\necho "argv=$* cvd=${CUDA_VISIBLE_DEVICES-unset}"\n' >"$tmp/show.py"
chmod +x "$tmp/show.py"
cp "$tmp/show.py" "$tmp/show"
expect launch_include 0 "[rank 0] argv=--local_rank=0 a cvd=1,3" "[rank 1] argv=--local_rank=1 a cvd=1,3" -- \
  env -u CUDA_VISIBLE_DEVICES "$zt" launch --backend gloo --include localhost:1,3 -- "$tmp/show.py" a
expect launch_no_local_rank 0 "[rank 1] argv=a cvd=1,3" -- \
  "$zt" launch --backend gloo --include localhost:1,3 --no_local_rank -- "$tmp/show.py" a
expect launch_not_python 0 "[rank 1] argv=a cvd=5,6" -- \
  env CUDA_VISIBLE_DEVICES=5,6 "$zt" launch --backend gloo --nproc_per_node 2 -- "$tmp/show" a
expect launch_python_c 0 "[rank 1] args=--local_rank=1 a" -- \
  "$zt" launch --backend gloo --nproc_per_node 2 -- python3 -c 'import sys; print("args=" + " ".join(sys.argv[1:]))' a
expect launch_backend_nccl 0 "[rank 1] backend=nccl" -- \
  "$zt" launch --backend nccl --nproc_per_node 2 -- sh -c 'echo "backend=$ZEROTRAIN_COMM_BACKEND"'
echo '{"train_micro_batch_size_per_gpu": 9223372036854775807}' >"$tmp/huge_batch.json"
expect batch_overflow 3 "9223372036854775807 * 2 does not fit in a 64-bit integer" -- \
  "$zt" config check "$tmp/huge_batch.json" --world_size 2

# Trainer arguments are checked as the config keys they fill, whatever the config has.
# (A text that is no finite number, such as nan, is refused as the flag is read: train_numbers_test.sh.)
expect train_lr_negative 3 "optimizer.params.lr: must be at least 0, got -1" "filled from --learning_rate" -- \
  "$zt" train --model mlp --deepspeed "$root/examples/ds_config_train_zero2.json" --learning_rate -1 --max_steps 1
expect train_clip_negative 3 "gradient_clipping: must be at least 0, got -1" -- \
  "$zt" train --model mlp --deepspeed "$root/examples/ds_config_train_zero2.json" --max_grad_norm -1 --max_steps 1
expect train_seed_negative 3 "--seed must be between 0 and 2**32 - 1, got -5" -- \
  "$zt" train --model mlp --deepspeed "$root/examples/ds_config_train_zero2.json" --seed -5 --max_steps 1

# Errors are messages: a job that cannot fit in memory, gradients that are not finite in
# fp32, output that cannot be written.
train2=("$zt" train --model mlp --deepspeed "$root/examples/ds_config_train_zero2.json")
expect memory_refused 10 "[memory] the job does not fit in memory" "is available (ZEROTRAIN_MEMORY_AVAILABLE)" \
  "--skip_memory_check" -- env ZEROTRAIN_MEMORY_AVAILABLE=1MiB "$zt" train --model gpt \
  --deepspeed "$root/examples/ds_config_train_zero2.json" --max_steps 1
expect memory_skipped 0 "step 1/" -- env ZEROTRAIN_MEMORY_AVAILABLE=1MiB "${train2[@]}" --max_steps 1 \
  --skip_memory_check
# The check counts the activations the run will keep: gpt small at micro-batch 8 needs about
# 0.2 GiB, 0.12 GiB with gradient checkpointing (zerotrain estimate --detailed). In 160 MiB the
# plain run is refused with the flag that fits, and the run with it trains.
train_small=("$zt" train --model gpt --model_config preset=small --deepspeed "$root/examples/ds_config_train_zero2.json"
             --per_device_train_batch_size 8 --max_steps 1)
expect memory_refused_checkpointing_fits 10 "With gradient checkpointing (--gradient_checkpointing) it needs" \
  -- env ZEROTRAIN_MEMORY_AVAILABLE=160MiB "${train_small[@]}"
expect memory_fits_checkpointed 0 "step 1/" -- env ZEROTRAIN_MEMORY_AVAILABLE=160MiB "${train_small[@]}" \
  --gradient_checkpointing
expect nan_loss 9 "[numerics] step" "the gradients are not finite" "The weights were not updated" -- \
  "${train2[@]}" --learning_rate 1e30 --max_grad_norm 0 --max_steps 30 --logging_steps 1
expect metrics_device 7 "cannot write --metrics_file /dev/full: is a character device; give the path of a regular file" -- \
  "${train2[@]}" --max_steps 1 --metrics_file /dev/full
expect metrics_dir 7 "cannot write --metrics_file $tmp: is a directory" -- "${train2[@]}" --max_steps 1 --metrics_file "$tmp"
expect stdout_full 7 "cannot write the standard output: No space left on device" -- \
  sh -c "'$zt' config check '$root/examples/ds_config_zero2.json' >/dev/full"
expect oom_libtorch 10 "[memory] out of memory in LibTorch" "zerotrain advise" -- \
  "$zt" train --model mlp --model_config n_in=4194304,n_hidden=4194304 --deepspeed "$root/examples/ds_config_train_zero2.json" \
  --max_steps 1 --skip_memory_check

expect model_field_bound 2 "--model_config n_layer=9223372036854775807: give a positive integer, at most 16384" -- \
  "${train2[@]}" --model_config n_layer=9223372036854775807 --max_steps 1

mkdir "$tmp/logs" && ln -s /dev/full "$tmp/logs/rank0.log"
expect launch_log_full 7 "cannot write the log $tmp/logs/rank0.log: No space left on device" "[rank 0] hi" \
  "logs are incomplete" -- "$zt" launch --backend gloo --log_dir "$tmp/logs" -- echo hi

# What DeepSpeed's and HF's users type: --local_rank=N, --log_level, sizes as 16gb or 16G.
expect local_rank 0 "step 1/" -- "${train2[@]}" --max_steps 1 --local_rank=0
expect local_rank_mismatch 2 "--local_rank=1 but LOCAL_RANK=0" -- env LOCAL_RANK=0 "${train2[@]}" --max_steps 1 --local_rank=1
expect log_level_bad 2 "--log_level loud: give one of" -- "${train2[@]}" --max_steps 1 --log_level loud
expect config_logged 0 "config (values that are not defaults" "  file: " "zero_optimization.stage=2" \
  "auto: train_batch_size=8" -- "${train2[@]}" --max_steps 1
expect config_logged_debug 0 "effective config (value [source])" "[default]" -- "${train2[@]}" --max_steps 1 --log_level debug
# Quieter levels train (exit 0: a level refused would also log no config) without the config.
for level in warning error ERROR warn; do
  if quiet=$("${train2[@]}" --max_steps 1 --log_level "$level" 2>&1) && ! grep -q "config (values" <<<"$quiet"; then
    passed=$((passed + 1))
  else
    echo "FAIL log_level_$level: refused, or the effective config is logged at --log_level $level"
    echo "$quiet" | tail -3
    failed=$((failed + 1))
  fi
done
# A start fits on a screen (at most 40 lines before the first step), with a config or without
# one (HF's run without DeepSpeed: every value "auto", ZeRO stage 0, or --zero_stage N); the
# whole effective config goes to <output_dir>/effective_config.json.
lines_before_first_step() { "$@" 2>&1 | awk '/step 1\//{found=1; exit} {n++} END{print found ? n : 999}'; }
for run in with_config without_config zero_stage_3; do
  case $run in
    with_config) cmd=("${train2[@]}") ;;
    without_config) cmd=("$zt" train --model mlp) ;;
    zero_stage_3) cmd=("$zt" train --model mlp --zero_stage 3) ;;
  esac
  n=$(lines_before_first_step "${cmd[@]}" --max_steps 1 --logging_steps 1 --output_dir "$tmp/start_$run")
  check "start_lines_$run ($n lines)" test "$n" -le 40
  check "effective_config_$run" grep -q '"sources"' "$tmp/start_$run/effective_config.json"
done
check effective_config_stage grep -q '"zero_optimization.stage": "argument"' "$tmp/start_zero_stage_3/effective_config.json"
# It is not worth the run: a FIFO in its place is reported and training goes on.
mkdir "$tmp/fifo_out" && mkfifo "$tmp/fifo_out/effective_config.json"
expect effective_config_refused 0 "the effective config was not written" "training goes on" "step 1/" -- \
  "$zt" train --model mlp --max_steps 1 --logging_steps 1 --output_dir "$tmp/fifo_out"
expect no_deepspeed_stage0 0 "ZeRO stage 0" "auto: train_batch_size=8" -- "$zt" train --model mlp --max_steps 1
expect zero_stage_range 2 "--zero_stage 4: give a ZeRO stage from 0 to 3" -- "$zt" train --model mlp --zero_stage 4
expect zero_stage_mismatch 2 "--zero_stage 3 but $root/examples/ds_config_train_zero2.json sets zero_optimization.stage 2" \
  -- "${train2[@]}" --zero_stage 3 --max_steps 1
echo '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"}' >"$tmp/no_stage.json"
echo '{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": true}' >"$tmp/zero_bool.json"
expect zero_stage_boolean_zero 2 "--zero_stage 1 but $tmp/zero_bool.json has \"zero_optimization\": true, not a block" \
  -- "$zt" train --model mlp --deepspeed "$tmp/zero_bool.json" --zero_stage 1 --max_steps 1
expect zero_stage_fills 0 "ZeRO stage 1" "argument: zero_optimization.stage=1" -- \
  "$zt" train --model mlp --deepspeed "$tmp/no_stage.json" --zero_stage 1 --max_steps 1
for size in 16gb 16GB 16G 16GiB 16g; do
  expect "advise_$size" 0 "Use ZeRO stage" -- "$zt" advise --model gpt --memory_per_rank "$size"
done

# zerotrain train in half precision: the flags, and an fp16 run that cannot recover.
expect train_fp16_and_bf16 2 "excludes" -- \
  "$zt" train --deepspeed "$root/examples/ds_config_train_zero2.json" --fp16 --bf16
expect train_bf16 0 "gpt (n_layer 2" "bf16, ZeRO stage 2" "step 2/" -- "$zt" train --model gpt \
  --deepspeed "$root/examples/ds_config_train_zero2.json" --bf16 --max_steps 2 --logging_steps 1
cat >"$tmp/fp16_hopeless.json" <<'JSON'
{"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
 "fp16": {"enabled": "auto", "initial_scale_power": 40, "hysteresis": 1, "max_consecutive_skipped_steps": 4}}
JSON
expect train_fp16_overflow_stops 9 "Grad overflow on iteration 0" \
  "Reducing dynamic loss scale from 1099511627776 to 549755813888.0" "[zerotrain] step 1: inf/nan gradients in" \
  "[fp16] stopping: 4 steps in a row were skipped" "Parameters whose gradients overflowed first" "ln_f.bias: step 0; 4" \
  "no step has succeeded yet" "train in bf16 instead" -- "$zt" train --model gpt --deepspeed "$tmp/fp16_hopeless.json" --fp16 --max_steps 10

# The Trainer's flags (docs/trainer.md): datasets, models that cannot train on them, HF's
# flags that fix a mismatched config, the blocks it creates, timers, gradient checkpointing.
expect dataset_unknown 2 "unknown dataset \"fashion_mnist\"" "did you mean fashion-mnist?" -- "${train2[@]}" --dataset fashion_mnist --max_steps 1
expect dataset_missing_file 7 "$tmp/none.txt" -- "$zt" train --model gpt --dataset "text:$tmp/none.txt" \
  --deepspeed "$root/examples/ds_config_train_zero2.json" --max_steps 1
expect convnet_on_synthetic 2 "--model convnet has no synthetic data" -- "$zt" train --model convnet --dataset synthetic \
  --deepspeed "$root/examples/ds_config_train_zero2.json" --max_steps 1
expect classes_disagree 2 "--model_config n_classes=5 but fashion-mnist has n_classes=10" -- "$zt" train --model convnet \
  --model_config n_classes=5 --dataset fashion-mnist --deepspeed "$root/examples/ds_config_train_zero2.json" --max_steps 1
expect strategy_typo 2 "--eval_strategy epochs: give no, steps or epoch" -- "${train2[@]}" --eval_strategy epochs --max_steps 1
expect scheduler_type_bad 2 "--lr_scheduler_type polynomial: give linear, cosine" -- "$zt" train --model mlp \
  --deepspeed "$root/examples/ds_config_fashion_zero2.json" --lr_scheduler_type polynomial --max_steps 1
# examples/ds_config_zero2.json sets betas (0.9, 0.95), weight decay 0.1, 1000 steps with 100 of
# warmup: HF's defaults mismatch it, and the flags that match it train it.
zero2=("$zt" train --model mlp --deepspeed "$root/examples/ds_config_zero2.json" --per_device_train_batch_size 8
  --gradient_accumulation_steps 4 --bf16 --learning_rate 3e-4 --weight_decay 0.1 --warmup_steps 100 --max_steps 1000
  --logging_steps 500)
expect example_zero2_mismatch 3 "optimizer.params.betas=[0.9, 0.95] vs hf adam_beta1+adam_beta2=[0.9, 0.999]" -- "${zero2[@]}"
expect example_zero2_trains 0 "step 1000/1000" -- "${zero2[@]}" --adam_beta2 0.95
# No optimizer or scheduler block: AdamW and the linear schedule from the flags.
expect blocks_created 0 "  auto: " "optimizer.type=\"AdamW\"" "scheduler.type=\"WarmupDecayLR\"" -- "$zt" train --model mlp \
  --deepspeed "$root/examples/ds_config_fashion_zero2.json" --max_steps 2
# --device (docs/gpu.md): its spellings, HF's --use_cpu, and a GPU asked for where none is.
fashion=("$zt" train --model mlp --deepspeed "$root/examples/ds_config_fashion_zero2.json" --max_steps 1 --logging_steps 1)
expect device_typo 2 "--device bogus: not a device; use auto" -- "${fashion[@]}" --device bogus
expect device_use_cpu 0 "device: cpu (--device cpu)" "step 1/1" -- "${fashion[@]}" --use_cpu
expect device_both 2 "excludes" -- "${fashion[@]}" --use_cpu --device cpu
if ! "$zt" report --json | grep -q '"capability"'; then
  expect device_cuda_absent 2 "--device cuda: no GPU is visible to this process" "use --device cpu" -- \
    "${fashion[@]}" --device cuda
  expect device_auto_cpu 0 "device: cpu (no GPU visible)" -- "${fashion[@]}"
  expect report_gpus 0 "GPUs" "CUDA runtime loaded" "GPU paths tested here ................. no" -- "$zt" report
  # LibTorch's CUDA half loads after LibTorch itself (as on a GPU machine) and registers:
  # training on the CPU is unchanged.
  expect cuda_half_not_loaded 0 '"cuda_half_loaded": false' -- "$zt" report --json
  expect cuda_half_forced 0 '"cuda_half_loaded": true' -- env ZEROTRAIN_CUDA_LOAD=1 "$zt" report --json
  expect cuda_half_forced_trains 0 "step 1/1" -- env ZEROTRAIN_CUDA_LOAD=1 "${fashion[@]}"
fi
cat >"$tmp/timers.json" <<'JSON'
{"train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": true, "steps_per_print": 2}
JSON
expect wall_clock_breakdown 0 "time (ms) | forward: " "| backward: " "| step: " -- "$zt" train --model mlp \
  --deepspeed "$tmp/timers.json" --max_steps 4
expect gradient_checkpointing_gpt 0 "step 2/2" -- "$zt" train --model gpt --dataset kjv --model_config block_size=64 \
  --deepspeed "$root/examples/ds_config_train_zero2.json" --gradient_checkpointing --max_steps 2 --logging_steps 1
expect gradient_checkpointing_convnet 2 "--gradient_checkpointing: --model convnet does not support it" -- \
  "$zt" train --model convnet --dataset fashion-mnist --deepspeed "$root/examples/ds_config_fashion_zero2.json" \
  --gradient_checkpointing --max_steps 1
expect convnet_on_text 2 "--model convnet trains on images" -- "$zt" train --model convnet --dataset kjv \
  --deepspeed "$root/examples/ds_config_train_zero2.json" --max_steps 1
expect estimate_convnet 0 "convnet (1x28x28 -> conv 32, conv 64 -> 128 -> 10)" -- "$zt" estimate --detailed --model convnet
expect report_bf16_choice 0 "bf16 in hardware" "--bf16_if_native picks" -- "$zt" report
# Which kernels a 1024^3 fp32 product ran and its speed against the core's peak; an unknown
# ZEROTRAIN_MATMUL is refused where training starts, not by the report.
expect report_matmul 0 "fp32 matmul 1024^3" "GFLOP/s on 1 thread" -- "$zt" report

# zerotrain estimate and advise.
expect estimate_guide 0 "SW: Model with 2783M total params, 65M largest layer params." \
  "   70.00GB |   0.25GB | offload_param=cpu , offload_optimizer=cpu , zero_init=1" \
  "   15.56GB |  46.91GB | offload_param=none, offload_optimizer=none, zero_init=0" -- \
  "$zt" estimate zero3 --params 2783959040 --largest_layer_params 65798144
expect estimate_zero2 0 "HW: Setup with 2 nodes, 4 GPUs per node." "offload_optimizer=none" -- \
  "$zt" estimate zero2 --params 7e9 --num_gpus_per_node 4 --num_nodes 2
expect estimate_model 0 "SW: Model with 0M total params, 0M largest layer params." -- \
  "$zt" estimate zero3 --model gpt --model_config preset=tiny
expect estimate_zero3_needs_l 2 "zero3 needs --largest_layer_params" -- "$zt" estimate zero3 --params 1e9
expect estimate_bad_count 2 "--params: '3B' is not a count" -- "$zt" estimate zero2 --params 3B
expect estimate_no_stage 2 "zerotrain estimate zero2|zero3" -- "$zt" estimate --params 1e9
expect estimate_detailed 0 "| stage 2 |" "bf16: activations" "with activation checkpointing" \
  "| stage 3, offload_optimizer=nvme, offload_param=nvme |" -- \
  "$zt" estimate --detailed --model gpt --model_config preset=small --world_size 2 --micro_batch 8
expect estimate_detailed_needs_model 2 "needs a model for its activations" "hf:DIR" -- "$zt" estimate --detailed --params 1e9
# A Hugging Face folder is counted from its config.json alone (TinyLlama's shape: 1.1B
# parameters, grouped-query attention); its activations are counted too, never 0.
mkdir -p "$tmp/tinyllama"
cat >"$tmp/tinyllama/config.json" <<'JSON'
{"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
 "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
 "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
JSON
expect estimate_detailed_hf 0 "32 heads / 4 kv heads" "1100048384 parameters" "sequence 512" "with activation checkpointing" \
  -- "$zt" estimate --detailed --model "hf:$tmp/tinyllama" --model_config block_size=512 --micro_batch 2
check estimate_detailed_hf_activations bash -c "'$zt' estimate --detailed --model 'hf:$tmp/tinyllama' \
  --model_config block_size=512 | grep -Eq '^fp32: activations [1-9][0-9]*\.[0-9] MiB'"
expect estimate_hf_seq_len_too_long 2 "block_size" -- \
  "$zt" estimate --detailed --model "hf:$tmp/tinyllama" --model_config block_size=512 --seq_len 1024
expect advise_stage 0 "Use ZeRO stage" "\"zero_optimization\": {\"stage\":" "stage 0: " -- \
  "$zt" advise --model gpt --model_config preset=small --world_size 2 --micro_batch 8 --memory_per_rank 300MiB
expect advise_nothing_fits 1 "Nothing fits in 10MiB per rank" -- \
  "$zt" advise --model gpt --memory_per_rank 10MiB
expect advise_bad_size 2 "--memory_per_rank: '16 gigs' is not a size" -- \
  "$zt" advise --model gpt --memory_per_rank "16 gigs"

# zerotrain launch: argument errors, the hostfile and the ssh pre-flight.
expect launch_no_program 2 "no program to launch" -- "$zt" launch --nproc_per_node 2
expect launch_nnodes_needs_rank 2 "needs --node_rank" -- "$zt" launch --nnodes 2 --master_addr 10.0.0.1 -- true
expect launch_bad_backend 3 "unknown communication backend 'glo'" -- "$zt" launch --backend glo -- true
expect launch_env 0 "[rank 1] 1 2 1" -- "$zt" launch --nproc_per_node 2 -- sh -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK'
expect launch_no_dashes 0 "[rank 0] hi" -- "$zt" launch --num_gpus 1 echo hi
expect launch_missing_program 127 "rank 0 failed first" "cannot run ./no-such-program" -- \
  "$zt" launch -- ./no-such-program
printf 'worker-0 slots=2\nworker-1 slots:2\n' >"$tmp/hostfile.bad"
expect hostfile_bad_line 2 "hostfile.bad:2: bad hostfile entry" -- "$zt" launch --hostfile "$tmp/hostfile.bad" -- true
printf 'localhost slots=2\n' >"$tmp/hostfile.local"
expect hostfile_local 0 "[rank 1] 1 2" -- "$zt" launch --hostfile "$tmp/hostfile.local" -- sh -c 'echo $RANK $WORLD_SIZE'
expect hostfile_include_slot 2 "host 'localhost' has no slot 5" -- \
  "$zt" launch --hostfile "$tmp/hostfile.local" --include localhost:5 -- true
printf 'localhost slots=1\nno-such-host.invalid slots=2\n' >"$tmp/hostfile.remote"
expect ssh_preflight 5 "pre-flight: cannot ssh to host 'no-such-host.invalid'" -- \
  "$zt" launch --hostfile "$tmp/hostfile.remote" --master_addr 127.0.0.1 -- true

# Every numeric launch flag is range-checked as it is parsed: a value given is refused (exit
# 2, naming the flag and the range), never replaced by a default; the program never starts.
for bad in "--nproc_per_node 0" "--nproc_per_node -1" "--num_gpus 0" "--nnodes 0" "--node_rank -1" \
  "--master_port 0" "--master_port 65536" "--ssh_port 0" "--timeout_s 0" "--timeout_s nan" "--timeout_s inf" \
  "--kill_grace_s -1" "--kill_grace_s nan" "--rank_offset -1" "--world_size 0"; do
  read -r flag value <<<"$bad"
  named=$flag
  [ "$flag" = --num_gpus ] && named=--nproc_per_node   # reported under the option's first name
  expect "launch_range_${flag#--}_$value" 2 "$named: must be " ", got $value" -- \
    "$zt" launch "$flag" "$value" --backend gloo -- touch "$tmp/launch_started"
done
[ ! -e "$tmp/launch_started" ] && passed=$((passed + 1)) || { echo "FAIL launch_range: a rank started"; failed=$((failed + 1)); }
expect launch_timeout_rounds_up 0 "[rank 0] 1" -- \
  "$zt" launch --timeout_s 0.25 --backend gloo -- sh -c 'echo $ZEROTRAIN_COMM_TIMEOUT_S'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# Where outputs go (docs/io.md, "Where outputs go"), end to end: every file the project writes
# refuses a FIFO, a link, an input of the run and (unless allowed) an existing file, at once and
# without changing it; nvme_path is never created, and a refused one is left as it was; a
# checkpoint folder that is a link is not followed; io-bench removes its file when killed.
# Usage: output_paths_test.sh ZEROTRAIN_BINARY REPO_ROOT SCRATCH_DIR (a directory on a disk)
set -uo pipefail
zt=$1
root=$2
mkdir -p "$3"
tmp=$(mktemp -d "$3/output_paths_XXXXXX")
shm=""
trap 'rm -rf "$tmp" ${shm:+"$shm"}' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

cp "$root/examples/ds_config_train_zero2.json" "$tmp/ds.json"
train=("$zt" train --model mlp --deepspeed "$tmp/ds.json" --max_steps 1 --logging_steps 1 --disable_tqdm)
# A writer that waited on a FIFO would hang: `timeout` turns that into exit 124.
limit=(timeout 120)

# --metrics_file: a FIFO, a device, a link, the run's own config, an earlier run's file.
mkfifo "$tmp/fifo"
expect metrics_fifo 7 "cannot write --metrics_file $tmp/fifo: is a FIFO (named pipe); give the path of a regular file" -- \
  "${limit[@]}" "${train[@]}" --metrics_file "$tmp/fifo"
expect metrics_device 7 "cannot write --metrics_file /dev/null: is a character device" -- \
  "${limit[@]}" "${train[@]}" --metrics_file /dev/null
echo precious >"$tmp/elsewhere.txt"
ln -s "$tmp/elsewhere.txt" "$tmp/link.jsonl"
expect metrics_link 7 "cannot write --metrics_file $tmp/link.jsonl: it is a symbolic link" -- \
  "${limit[@]}" "${train[@]}" --metrics_file "$tmp/link.jsonl"
check metrics_link_target_kept test "$(cat "$tmp/elsewhere.txt")" = precious
cp "$tmp/ds.json" "$tmp/ds.json.orig"
expect metrics_is_config 7 "cannot write --metrics_file $tmp/ds.json: it is this run's config file $tmp/ds.json" -- \
  "${limit[@]}" "${train[@]}" --metrics_file "$tmp/ds.json" --overwrite_output_dir
ln "$tmp/ds.json" "$tmp/hard_link.json"
expect metrics_is_config_hard_link 7 "it is this run's config file $tmp/ds.json" -- \
  "${limit[@]}" "${train[@]}" --metrics_file "$tmp/hard_link.json" --overwrite_output_dir
check config_kept cmp -s "$tmp/ds.json" "$tmp/ds.json.orig"
echo '{"step": 1}' >"$tmp/earlier.jsonl"
expect metrics_exists 2 "--metrics_file $tmp/earlier.jsonl already exists (12 bytes)" "add --overwrite_output_dir" -- \
  "${limit[@]}" "${train[@]}" --metrics_file "$tmp/earlier.jsonl"
check metrics_exists_kept test "$(cat "$tmp/earlier.jsonl")" = '{"step": 1}'
expect metrics_overwrite 0 "step 1/1" -- "${limit[@]}" "${train[@]}" --metrics_file "$tmp/earlier.jsonl" --overwrite_output_dir
check metrics_overwritten grep -q '"loss"' "$tmp/earlier.jsonl"

# --output_dir: checkpoints of an earlier run are not replaced silently; a checkpoint folder,
# a tag folder or `latest` that is a link is refused, and nothing is written where it points
# (inside the engine's save, as every failed save, a CheckpointError: exit 8).
expect first_run 0 "step 1/1" -- "${train[@]}" --output_dir "$tmp/out"
expect earlier_checkpoints 2 "--output_dir $tmp/out holds checkpoints of an earlier run (checkpoint-1)" \
  "--resume_from_checkpoint true" "--overwrite_output_dir" -- "${train[@]}" --output_dir "$tmp/out"
mkdir -p "$tmp/elsewhere" "$tmp/linked"
ln -s "$tmp/elsewhere" "$tmp/linked/checkpoint-1"
expect checkpoint_folder_link 7 "checkpoint folder $tmp/linked/checkpoint-1 is a symbolic link (to $tmp/elsewhere)" -- \
  "${limit[@]}" "${train[@]}" --output_dir "$tmp/linked" --overwrite_output_dir
check checkpoint_folder_link_nothing_written test -z "$(ls -A "$tmp/elsewhere")"
mkdir -p "$tmp/tag_link/checkpoint-1"
ln -s "$tmp/elsewhere" "$tmp/tag_link/checkpoint-1/global_step1"
expect tag_folder_link 8 "checkpoint tag folder $tmp/tag_link/checkpoint-1/global_step1 is a symbolic link" -- \
  "${limit[@]}" "${train[@]}" --output_dir "$tmp/tag_link" --overwrite_output_dir
check tag_folder_link_nothing_written test -z "$(ls -A "$tmp/elsewhere")"
mkdir -p "$tmp/latest_link/checkpoint-1"
ln -s "$tmp/elsewhere.txt" "$tmp/latest_link/checkpoint-1/latest"
expect latest_link 8 "cannot write checkpoint \`latest\` file $tmp/latest_link/checkpoint-1/latest: it is a symbolic link" -- \
  "${limit[@]}" "${train[@]}" --output_dir "$tmp/latest_link" --overwrite_output_dir
check latest_link_kept test -L "$tmp/latest_link/checkpoint-1/latest" -a "$(cat "$tmp/elsewhere.txt")" = precious
check latest_link_no_tag test ! -e "$tmp/latest_link/checkpoint-1/global_step1"

# nvme_path: never created (a typo, an unmounted disk), refused on tmpfs with nothing left.
nvme_config() {  # nvme_config PATH: stage 2 with the optimizer's states on NVMe at PATH
  cat >"$tmp/nvme.json" <<EOF
{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
 "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "$1"}}}
EOF
}
nvme_train=("$zt" train --model mlp --deepspeed "$tmp/nvme.json" --max_steps 1 --disable_tqdm)
for missing in "$tmp/typo" "$tmp/unmounted/nvme/swap"; do
  nvme_config "$missing"
  expect "nvme_missing_${missing##*/}" 7 \
    "offload_optimizer.nvme_path $missing does not exist; create it or fix the path (is the disk mounted?)" -- \
    "${limit[@]}" "${nvme_train[@]}"
done
check nvme_missing_not_created test ! -e "$tmp/typo" -a ! -e "$tmp/unmounted"
if [ -d /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ]; then
  shm=$(mktemp -d /dev/shm/zt_output_paths_XXXXXX)
  nvme_config "$shm"
  expect nvme_tmpfs 7 "$shm is on tmpfs, which is memory, not a disk" -- "${limit[@]}" "${nvme_train[@]}"
  check nvme_tmpfs_nothing_left test -z "$(ls -A "$shm")"
fi
mkdir "$tmp/nvme"
nvme_config "$tmp/nvme"
expect nvme_ok 0 "step 1/1" -- "${limit[@]}" "${nvme_train[@]}"

# io-bench: killed by an interrupt, a termination or a hang-up, it removes its test file and
# dies of the signal (exit status 128 + N). `env --default-signal`: a background job of a
# script starts with SIGINT ignored, which the command rightly keeps.
mkdir "$tmp/bench"
for sig in INT TERM HUP; do
  env --default-signal=INT,TERM,HUP "$zt" io-bench --path "$tmp/bench" --size_mib 64 --block_sizes 1M \
    --queue_depths 1 --threads 1 --rounds 1000 >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -n "$(ls -A "$tmp/bench")" ] && break; sleep 0.05; done
  check "io_bench_${sig}_started" test -n "$(ls -A "$tmp/bench")"
  kill -s "$sig" "$pid"
  { wait "$pid"; } 2>/dev/null   # without bash's "Hangup" notice
  rc=$?
  check "io_bench_${sig}_exit_status" test "$rc" -eq $((128 + $(kill -l "$sig")))
  check "io_bench_${sig}_file_removed" test -z "$(ls -A "$tmp/bench")"
  rm -f "$tmp"/bench/*
done
expect io_bench_missing_path 7 "--path $tmp/nope does not exist; create it or fix the path" -- \
  "$zt" io-bench --path "$tmp/nope" --size_mib 4
check io_bench_missing_not_created test ! -e "$tmp/nope"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

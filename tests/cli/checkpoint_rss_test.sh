#!/usr/bin/env bash
# Peak memory of `zerotrain zero-to-fp32` (docs/checkpoints-tools.md, "Memory"): on a
# checkpoint of 1.5 GiB written without training (4 rank files; 2 parameters of 64M fp32
# elements, 256 MiB each, with two optimizer states), the peak resident set must stay within
#
#     baseline + largest tensor (256 MiB) + 64 MiB
#
# where the baseline is the peak RSS of `zerotrain --version`: the binary links LibTorch,
# whose libraries and static initialisers cost the same whatever the checkpoint. A
# consolidation that held the whole model (512 MiB) or mmapped the rank files (which counts
# what it touches in RSS) fails. Run for fp32 output in one file, and bf16 in shards. The
# LibTorch-free `zerotrain-checkpoint zero-to-fp32` must stay within the largest tensor +
# 64 MiB with no baseline at all.
# Usage: checkpoint_rss_test.sh ZEROTRAIN MAKE_SYNTHETIC_CHECKPOINT WORK_DIR ZEROTRAIN_CHECKPOINT
set -uo pipefail
zt=$1
make_synthetic=$2
work=$3
light=$4
numel=$((64 << 20))
largest=$((numel * 4))
slack=$((64 << 20))

[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time is missing (apt-get install time; scripts/setup.sh does)"; exit 77; }
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
failed=0

peak_rss_bytes() {   # peak_rss_bytes LOG CMD...: runs CMD under /usr/bin/time; prints its peak RSS in bytes
  local log=$1
  shift
  /usr/bin/time -f 'peak_rss_kb=%M' -o "$log.time" "$@" >"$log" 2>&1 || { cat "$log"; echo "FAIL: $*" >&2; return 1; }
  echo $(($(sed -n 's/^peak_rss_kb=//p' "$log.time") * 1024))
}

start=$(date +%s)
"$make_synthetic" "$work/ckpt" 4 2 "$numel" >"$work/make.json" || { echo "FAIL: make_synthetic_checkpoint"; exit 1; }
files_bytes=$(du -sb "$work/ckpt/global_step3" | cut -f1)
echo "checkpoint: $(cat "$work/make.json"); tag directory $files_bytes bytes ($(($(date +%s) - start)) s to write)"
[ "$files_bytes" -ge 1000000000 ] || { echo "FAIL: the checkpoint is under 1 GB"; exit 1; }

baseline=$(peak_rss_bytes "$work/version.log" "$zt" --version) || exit 1
bound=$((baseline + largest + slack))
echo "baseline (zerotrain --version): $((baseline >> 20)) MiB; bound: $((bound >> 20)) MiB"

run_case() {   # run_case NAME WANT_OUTPUT_BYTES ARGS...
  run_binary "$zt" "$bound" "$@"
}
run_binary() {   # run_binary BINARY BOUND NAME WANT_OUTPUT_BYTES ARGS...
  local bin=$1 bound=$2 name=$3 want=$4
  shift 4
  local t0 peak out_bytes
  t0=$(date +%s)
  peak=$(peak_rss_bytes "$work/$name.log" "$bin" zero-to-fp32 "$work/ckpt" "$work/out_$name" "$@") || { failed=1; return; }
  out_bytes=$(du -cb "$work/out_$name"/*.safetensors | tail -1 | cut -f1)
  echo "$name: peak RSS $((peak >> 20)) MiB (baseline + $(((peak - baseline) >> 20)) MiB), output $out_bytes bytes," \
    "$(($(date +%s) - t0)) s"
  if ((peak > bound)); then
    echo "FAIL $name: peak RSS $peak bytes is above the bound $bound (largest tensor $largest + $slack, plus $zt's baseline $baseline unless LibTorch-free)"
    failed=1
  fi
  # The tensors are all there: the output holds at least their bytes.
  if ((out_bytes < want)); then
    echo "FAIL $name: the output is $out_bytes bytes, less than the $want bytes of its tensors"
    failed=1
  fi
  rm -rf "$work/out_$name"
}
run_case fp32 $((2 * largest))
run_case bf16_sharded $((largest)) --dtype bf16 --max_shard_size 200MB
run_binary "$light" $((largest + slack)) fp32_without_libtorch $((2 * largest))

if ((failed)); then exit 1; fi
echo "peak RSS within the bound"

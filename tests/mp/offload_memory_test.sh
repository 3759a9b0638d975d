#!/usr/bin/env bash
# ZeRO-Infinity's memory: `zerotrain train` on a 160M-parameter GPT in bf16 at stage 3 with
# the optimizer states and the parameters offloaded to NVMe. Its peak RSS must be within 15%
# of `zerotrain estimate --detailed` for that run plus the runtime's own memory, measured in
# the same test as the peak of the same command on a tiny model (less the tiny model's own
# estimate). At this size the model states dominate (about 720 MiB of gradients and swap
# buffers, 300 MiB of gathered units, against 160 MiB for the runtime).
#
# Both runs use a fixed glibc mmap threshold (MALLOC_MMAP_THRESHOLD_): without it glibc
# raises its threshold after the first large free, serves the 25 MB unit and read buffers
# from its heap afterwards and keeps their pages when they are freed, and this run's peak
# is about 60% above the engine's allocations (docs/estimator.md, "Predicted against
# measured"). The test measures the engine's memory, not the allocator's retention.
#
# The swap files' bytes are not sampled here: estimate_engine_test checks the estimate's
# `disk` against the engine's own count of its files to the byte.
#
#   offload_memory_test.sh ZEROTRAIN
set -u
ZT=$1
# The swap folder must be on a disk (O_DIRECT refuses tmpfs): under the working directory.
out=$(mktemp -d "$PWD/zt_offload_memory.XXXXXX")
trap 'rm -rf "$out"' EXIT
mkdir "$out/swap"
BIG=preset=small,n_layer=12,n_embd=1024,n_head=16,vocab_size=8192,block_size=64
TINY=preset=tiny
# Every bucket size explicit ("auto" would follow each model's hidden size), the same for
# the estimate; sub-groups of 1e7 elements keep the swap buffers at 3 x 3 x 40 MB.
mkdir -p "$out/swap"   # nvme_path must exist: zerotrain does not create it
cat >"$out/nvme.json" <<EOF
{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
 "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 1000000,
   "stage3_prefetch_bucket_size": 1000000, "stage3_param_persistence_threshold": 10000, "sub_group_size": 1e7,
   "offload_optimizer": {"device": "nvme", "nvme_path": "$out/swap", "pipeline_read": true, "pipeline_write": true},
   "offload_param": {"device": "nvme", "nvme_path": "$out/swap"}}}
EOF

train() {  # train NAME MODEL_CONFIG
  MALLOC_MMAP_THRESHOLD_=1048576 OMP_NUM_THREADS=2 "$ZT" train --model gpt --model_config "$2" \
    --deepspeed "$out/nvme.json" --bf16 --per_device_train_batch_size 1 --max_steps 2 --logging_steps 1 \
    --metrics_file "$out/$1.jsonl" >"$out/$1.log" 2>&1 ||
    { echo "FAIL: $1 exited $?"; cat "$out/$1.log"; exit 1; }
}
estimate() {  # estimate NAME MODEL_CONFIG: the estimate's rows, without the runtime
  "$ZT" estimate --detailed --json --model gpt --model_config "$2" --world_size 1 --micro_batch 1 \
    --reduce_bucket_size 1000000 --prefetch_bucket_size 1000000 --param_persistence_threshold 10000 --overlap_comm \
    --sub_group_size 1e7 --pipeline_read --pipeline_write --runtime_bytes 0 >"$out/$1.estimate.json" ||
    { echo "FAIL: estimate $1"; exit 1; }
}
train tiny "$TINY"
train big "$BIG"
estimate tiny "$TINY"
estimate big "$BIG"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
mib = 1 << 20
def measured(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    steps = [r for r in rows if "loss" in r]
    assert rows[-1].get("event") == "end" and steps, f"{name}: the run did not finish"
    return max(r["peak_rss_bytes"][0] for r in steps), steps[-1]["model_state_bytes"][0]
def predicted(name):
    rows = json.load(open(f"{out}/{name}.estimate.json"))["rows"]
    return next(r for r in rows if r["precision"] == "bf16" and r["stage"] == 3
                and r["offload_optimizer_device"] == "nvme" and r["offload_param_device"] == "nvme")
tiny_rss, _ = measured("tiny")
big_rss, big_states = measured("big")
tiny, big = predicted("tiny"), predicted("big")
runtime = tiny_rss - tiny["peak"]   # LibTorch, the data, the logs: what a tiny model's run holds beyond its model
expected = big["peak"] + runtime
error = big_rss / expected - 1
print(f"peak RSS: measured {big_rss / mib:.0f} MiB, predicted {expected / mib:.0f} MiB "
      f"({big['peak'] / mib:.0f} MiB estimated + {runtime / mib:.0f} MiB runtime measured), error {error:+.1%}; "
      f"model states: measured {big_states / mib:.1f} MiB, predicted {big['model_states'] / mib:.1f} MiB; "
      f"swap files predicted {big['disk'] / mib:.0f} MiB")
assert big["model_states"] > 3 * runtime, "the model is too small for its states to dominate"
assert abs(big_states / big["model_states"] - 1) < 0.01, "the engine's model states differ from the estimate"
assert abs(error) <= 0.15, f"peak RSS {error:+.1%} from the estimate (limit 15%)"
PY

#!/usr/bin/env bash
# `zerotrain zero-to-fp32` and `zerotrain checkpoint inspect` end to end
# (docs/checkpoints-tools.md): on a checkpoint the engine saved at ZeRO stage 3 on 2 ranks,
# the output read back by the safetensors package and compared bit for bit with the
# engine's weights; what inspect prints; and every error a user can meet, with its exit code.
# Usage: checkpoint_tools_test.sh ZEROTRAIN MAKE_CHECKPOINT PYTHON REPO_ROOT
set -uo pipefail
zt=$1
make_checkpoint=$2
python=$3
root=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

"$python" -c 'import safetensors, torch' 2>/dev/null || {
  echo "FAIL: $python cannot import safetensors and torch; run scripts/setup.sh (it installs the pinned safetensors)"
  exit 1
}
"$make_checkpoint" "$tmp/ckpt" 2 3 fp32 >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; echo "FAIL: make_checkpoint"; exit 1; }
tag_dir=$tmp/ckpt/global_step3

# --- inspect ------------------------------------------------------------------------------
expect inspect 0 "checkpoint   $tag_dir (tag global_step3, named by $tmp/ckpt/latest)" \
  "world size 2, ZeRO stage 3, model dtype fp32" "optimizer    AdamW" "states: exp_avg, exp_avg_sq" \
  "global_steps 3, global_samples 72, skipped_steps 0, micro_steps 3" "schedule     WarmupLR at iteration 2" \
  "loss scale   none (no fp16)" "5 trained (202 elements, 808 B in fp32), 1 frozen (64 B), 0 buffers (0 B)" "2 rank files" "rank_00001.safetensors" \
  "status       complete and intact" "other tags   none" -- "$zt" checkpoint inspect "$tmp/ckpt"
"$zt" checkpoint inspect "$tmp/ckpt" --json >"$tmp/inspect.json" 2>&1
check inspect_json "$python" - "$tmp/inspect.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = (r["intact"] and r["complete"] and r["problems"] == [] and r["run"]["world_size"] == 2
      and r["run"]["zero_stage"] == 3 and r["parameters"]["trained"] == 5 and r["parameters"]["frozen"] == 1
      and [f["name"] for f in r["files"]] == ["rank_00000.safetensors", "rank_00001.safetensors"]
      and r["run"]["counters"]["global_steps"] == 3 and r["tag"] == "global_step3")
print("inspect --json:", "ok" if ok else json.dumps(r, indent=1)[:3000])
sys.exit(0 if ok else 1)
PY

# --- zero-to-fp32: the output as safetensors reads it, against the engine's weights -------
expect consolidate_fp32 0 "saved by 2 ranks at ZeRO stage 3" "5 parameters, 1 frozen, 0 buffers: 218 parameter elements" \
  "wrote $tmp/out/model.safetensors" -- "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/out"
check fp32_identical "$python" "$root/tests/cli/check_consolidated.py" "$tmp/ckpt/expected.json" "$tmp/out" fp32
for dtype in bf16 fp16; do
  expect "consolidate_$dtype" 0 "as $dtype" -- "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/out_$dtype" --dtype "$dtype"
  check "${dtype}_identical" "$python" "$root/tests/cli/check_consolidated.py" "$tmp/ckpt/expected.json" "$tmp/out_$dtype" "$dtype"
done
expect consolidate_shards 0 "model-00001-of-" "model.safetensors.index.json" \
  "removed $tmp/out/model.safetensors (from an earlier consolidation)" -- \
  "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/out" --max_shard_size 300B --tag global_step3
check shards_identical "$python" "$root/tests/cli/check_consolidated.py" "$tmp/ckpt/expected.json" "$tmp/out" fp32 --sharded
expect consolidate_tag_dir 0 "wrote $tmp/out_direct/model.safetensors" -- "$zt" zero-to-fp32 "$tag_dir" "$tmp/out_direct"
check tag_dir_identical "$python" "$root/tests/cli/check_consolidated.py" "$tmp/ckpt/expected.json" "$tmp/out_direct" fp32

# --- what the command line can get wrong (exit 2, nothing read) -----------------------------
expect bad_dtype 2 "--dtype fp64: give fp32, bf16 or fp16" -- "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/o" --dtype fp64
expect bad_shard_size 2 "--max_shard_size: '5 gigs' is not a size" -- \
  "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/o" --max_shard_size "5 gigs"
expect zero_shard_size 2 "--max_shard_size 0: give a positive size" -- "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/o" --max_shard_size 0
expect missing_output_arg 2 "output_dir" -- "$zt" zero-to-fp32 "$tmp/ckpt"
expect inspect_no_subcommand 2 "A subcommand is required" -- "$zt" checkpoint

# --- checkpoints that are not there, incomplete or damaged (exit 8) -----------------------
expect no_dir 8 "$tmp/nope: no such checkpoint directory" -- "$zt" zero-to-fp32 "$tmp/nope" "$tmp/o"
expect no_tag 8 "$tmp/ckpt/global_step9: no such tag; tags in $tmp/ckpt: global_step3" -- \
  "$zt" checkpoint inspect "$tmp/ckpt" --tag global_step9
cp -r "$tag_dir" "$tmp/ckpt/global_step1"
mkdir "$tmp/ckpt/.global_step6.partial"
expect other_tags 0 "other tags   global_step1" "unfinished   .global_step6.partial" -- "$zt" checkpoint inspect "$tmp/ckpt"
mkdir -p "$tmp/nolatest" && cp -r "$tag_dir" "$tmp/nolatest/"
expect no_latest 8 "$tmp/nolatest/latest: missing, so the tag to use is unknown; pass --tag (tags in $tmp/nolatest: global_step3)" -- \
  "$zt" zero-to-fp32 "$tmp/nolatest" "$tmp/o"
mkdir -p "$tmp/unfinished/global_step4" && echo global_step4 >"$tmp/unfinished/latest"
expect no_manifest 8 "manifest.json" "a save that did not finish" -- "$zt" checkpoint inspect "$tmp/unfinished"

cp -r "$tmp/ckpt" "$tmp/damaged"
# One byte of rank 1's fp32 master of fc1.weight flips: both commands name the file.
"$python" - "$tmp/damaged/global_step3/rank_00001.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
key = next(k for k in header if k.startswith("fp32/fc1.") and "weight" in k)
at = 8 + n + header[key]["data_offsets"][0] + 2
data[at] ^= 0x20
open(path, "wb").write(data)
PY
expect inspect_damaged 8 "status       complete but DAMAGED" "rank_00001.safetensors: its checksum does not match the manifest" \
  "[checkpoint] $tmp/damaged/global_step3 is damaged" -- "$zt" checkpoint inspect "$tmp/damaged"
expect consolidate_damaged 8 "rank_00001.safetensors: tensor \"fp32/fc1." "does not match its checksum" -- \
  "$zt" zero-to-fp32 "$tmp/damaged" "$tmp/out_damaged"
# Nothing at all, not even a temporary file: the output folder is empty or absent.
empty_or_absent() { test -z "$(ls -A "$1" 2>/dev/null)"; }
check damaged_wrote_nothing empty_or_absent "$tmp/out_damaged"
rm "$tmp/damaged/global_step3/rank_00000.safetensors"
expect inspect_incomplete 8 "status       INCOMPLETE" "rank_00000.safetensors  MISSING" "is incomplete" -- \
  "$zt" checkpoint inspect "$tmp/damaged"
expect consolidate_incomplete 8 "rank_00000.safetensors: missing" -- "$zt" zero-to-fp32 "$tmp/damaged" "$tmp/out_damaged"
check incomplete_wrote_nothing empty_or_absent "$tmp/out_damaged"
echo "not a directory" >"$tmp/file"
expect output_is_a_file 7 "cannot create the output directory $tmp/file" -- "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/file"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

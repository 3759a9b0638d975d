#!/usr/bin/env bash
# World size 2 on one GPU: two ranks of `zerotrain train --device cuda:0` under `zerotrain
# launch` share the GPU over gloo (NCCL refuses two ranks on one device), at ZeRO stages
# 0-3, fp32 and bf16, accumulation 1 and 2, and must log the losses of the same runs with
# --device cpu: within 1e-4 relative in fp32 and 1% in bf16 (other kernels, the same
# formulas: tests/gpu/device_runs.h says why not bit for bit). The GPU runs' metrics must
# carry the CUDA allocator's bytes for each rank (proof that they ran there), the CPU runs'
# none. First, the collectives' values at world size 2 with CUDA tensors: comm_check
# --device cuda:0 over the same gloo (the nccl tests run at world size 1, where a reduction
# changes no value).
#
# Exits 77 (skipped) where the machine shows no NVIDIA GPU, and fails where it shows one that
# zerotrain cannot use, with the reason `zerotrain report` gives (zerotrain/cuda/availability.h).
#
#   train_ws2_gpu_test.sh ZEROTRAIN COMM_CHECK
set -u
ZT=$1
CHECK=${2:?usage: train_ws2_gpu_test.sh ZEROTRAIN COMM_CHECK}
# The report decides, as the C++ GPU tests do: "shown" is the machine's NVIDIA GPU (device
# nodes or nvidia-smi), "devices" what LibTorch's CUDA runtime sees, "unusable" why not.
report=$("$ZT" report --json 2>/dev/null)
verdict=$(python3 -c '
import json, sys
try:
    g = json.loads(sys.stdin.read())["gpu"]
except Exception as e:
    print("fail: `zerotrain report --json` gave no GPU section: %s" % e); sys.exit()
if g["devices"] and not g["unusable"]:
    print("run")
elif not g["shown"]:
    print("skip: no CUDA device visible, and this machine shows no NVIDIA GPU")
else:
    print("fail: " + (g["unusable"] or "the machine shows a GPU (%s) but zerotrain sees none" % g["shown_by"]))
' <<<"$report")
case $verdict in
  run) ;;
  skip:*) echo "SKIP: ${verdict#skip: }"; exit 77 ;;
  *) echo "FAIL: ${verdict#fail: }"; exit 1 ;;
esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for stage in 0 1 2 3; do
  extra=""
  [ "$stage" -eq 3 ] && extra=', "stage3_param_persistence_threshold": 0'
  cat >"$out/zero$stage.json" <<JSON
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
 "gradient_clipping": "auto", "bf16": {"enabled": "auto"},
 "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
 "zero_optimization": {"stage": $stage, "overlap_comm": true, "reduce_bucket_size": 20000$extra}}
JSON
done

train() {  # train NAME DEVICE STAGE ACCUMULATION [FLAGS...]
  local name=$1 device=$2 stage=$3 accumulation=$4
  shift 4
  "$ZT" launch --nproc_per_node 2 --backend gloo --timeout_s 300 -- "$ZT" train --device "$device" --model gpt \
    --deepspeed "$out/zero$stage.json" --per_device_train_batch_size $((8 / 2 / accumulation)) \
    --gradient_accumulation_steps "$accumulation" --learning_rate 3e-3 --max_steps 30 --logging_steps 5 --seed 3 \
    --metrics_file "$out/$name.jsonl" "$@" >"$out/$name.log" 2>&1 ||
    { echo "FAIL: $name exited $?"; cat "$out/$name.log"; exit 1; }
}
# The collectives' values at world size 2 on the GPU, every dtype and reduction.
"$ZT" launch --nproc_per_node 2 --backend gloo --timeout_s 300 -- "$CHECK" --large --device cuda:0 \
  >"$out/comm_check.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q "comm_check: shm world 2 on cuda:0: .* 0 failed" "$out/comm_check.log"; then
  echo "FAIL: comm_check --device cuda:0 at world size 2 exited $rc"
  cat "$out/comm_check.log"
  exit 1
fi
echo "ok: $(grep "comm_check:" "$out/comm_check.log")"

names=()
for stage in 0 1 2 3; do
  for dtype in fp32 bf16; do
    flags=()
    [ "$dtype" = bf16 ] && flags=(--bf16)
    for accumulation in 1 2; do
      name="stage${stage}_${dtype}_gas${accumulation}"
      train "${name}_cuda" cuda:0 "$stage" "$accumulation" "${flags[@]}"
      train "${name}_cpu" cpu "$stage" "$accumulation" "${flags[@]}"
      names+=("$name")
    done
  done
done

python3 - "$out" "${names[@]}" <<'PY'
import json, math, sys
out, names = sys.argv[1], sys.argv[2:]
def rows(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
    assert rows and rows[-1].get("event") == "end", f"{name}: no end event"
    return rows
failed = []
for name in names:
    gpu, cpu = rows(f"{name}_cuda"), rows(f"{name}_cpu")
    step_rows = [r for r in gpu if "loss" in r]
    peaks = step_rows[-1].get("gpu_peak_allocated_bytes")
    if not (isinstance(peaks, list) and len(peaks) == 2 and all(p > 0 for p in peaks)):
        failed.append(f"{name}: the cuda run's metrics have no GPU memory for both ranks: {peaks}")
    if any("gpu_peak_allocated_bytes" in r for r in cpu):
        failed.append(f"{name}: the cpu run's metrics report GPU memory")
    a = [r["loss"] for r in step_rows]
    b = [r["loss"] for r in cpu if "loss" in r]
    bound = 1e-2 if "_bf16_" in name else 1e-4
    if len(a) != len(b) or not a:
        failed.append(f"{name}: {len(a)} logged losses on cuda, {len(b)} on cpu")
        continue
    worst = max(abs(x - y) / abs(y) if math.isfinite(x) else math.inf for x, y in zip(a, b))
    line = f"{name}: worst relative loss difference {worst:.2e} (bound {bound:g})"
    print(("ok: " if worst <= bound else "FAIL: ") + line)
    if not worst <= bound:
        failed.append(f"{line}: cuda {a} vs cpu {b}")
    assert b[-1] < b[0], f"{name}: the cpu loss did not fall: {b}"
for f in failed:
    print("FAIL:", f)
sys.exit(1 if failed else 0)
PY

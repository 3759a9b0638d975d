#!/usr/bin/env bash
# Saving on a signal (docs/checkpoints.md, "Preemption"). A 2-rank `zerotrain train` run of
# the tiny GPT (ZeRO-2, fp32, every step logged) is signalled mid-epoch:
#   - SIGTERM to one rank: every rank finishes the step, saves checkpoint-K, exits 143, and
#     the launcher exits 143; resumed with --resume_from_checkpoint true, the run logs the
#     uninterrupted run's losses for steps K+1.. bit for bit;
#   - SIGUSR1 to the launcher: passed on to the ranks, which save and exit 143; the launcher
#     exits 128 + SIGUSR1;
#   - with --save_on_signal=false, SIGTERM ends a rank at once and nothing is saved.
#
#   preemption_test.sh ZEROTRAIN REPO_ROOT
set -u
ZT=$1 ROOT=$2
out=$(mktemp -d)
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -rf "$out"' EXIT
STEPS=150
config="$ROOT/examples/ds_config_train_zero2.json"
fail() { echo "FAIL: $*"; exit 1; }
train_args() {  # train_args NAME: the run's flags
  echo --model gpt --deepspeed "$config" --per_device_train_batch_size 4 --learning_rate 3e-3 --logging_steps 1 \
    --seed 3 --max_steps $STEPS --metrics_file "$out/$1.jsonl"
}
launch() {  # launch NAME [FLAGS...]: in the background; LAUNCHER is its pid
  local name=$1
  shift
  # shellcheck disable=SC2046
  "$ZT" launch --nproc_per_node 2 --backend gloo --timeout_s 120 --signal_grace_s 60 -- "$ZT" train \
    $(train_args "$name") "$@" >"$out/$name.log" 2>&1 &
  LAUNCHER=$!
}
wait_for_step() {  # wait_for_step NAME N: until the run has logged step N
  for _ in $(seq 600); do
    grep -q "\"step\":$2," "$out/$1.jsonl" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "$1 did not reach step $2: $(tail -5 "$out/$1.log")"
}
ranks_of() { pgrep -P "$1" | sort -n; }   # the launcher's children, rank 0 first

# The uninterrupted run.
launch base
wait "$LAUNCHER" || fail "the uninterrupted run exited $?: $(tail -20 "$out/base.log")"

# SIGTERM to rank 1 only.
launch stopped --output_dir "$out/stopped" --save_steps 0
wait_for_step stopped 5
kill -TERM "$(ranks_of "$LAUNCHER" | tail -1)"
wait "$LAUNCHER"
code=$?
[ "$code" = 143 ] || fail "the launcher exited $code, not 143, after SIGTERM to a rank: $(tail -20 "$out/stopped.log")"
folder=$(cd "$out/stopped" && echo checkpoint-*)
step=${folder#checkpoint-}
[ "$step" -ge 5 ] && [ "$step" -lt $STEPS ] || fail "the signal saved $folder (expected one checkpoint mid-run)"
[ "$(cat "$out/stopped/$folder/latest")" = "global_step$step" ] || fail "$folder/latest does not name global_step$step"
for rank in 0 1; do
  grep -q "^\[rank $rank\] .*got SIGTERM: saved checkpoint $out/stopped/$folder at global step $step" "$out/stopped.log" ||
    fail "rank $rank did not say it saved $folder: $(tail -10 "$out/stopped.log")"
done
grep -q "rank . stopped on a signal after saving a checkpoint (exit 143)" "$out/stopped.log" ||
  fail "the launcher did not report the stop: $(tail -5 "$out/stopped.log")"

# Resumed: the uninterrupted run's losses from step+1 on, bit for bit.
launch resumed --output_dir "$out/stopped" --save_steps 0 --resume_from_checkpoint true
wait "$LAUNCHER" || fail "the resumed run exited $?: $(tail -20 "$out/resumed.log")"
python3 - "$out" "$step" $STEPS <<'PY' || exit 1
import json, sys
out, first, last = sys.argv[1], int(sys.argv[2]) + 1, int(sys.argv[3])
def losses(name):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{out}/{name}.jsonl")) if "loss" in r}
base, resumed = losses("base"), losses("resumed")
assert sorted(resumed) == list(range(first, last + 1)), f"the resumed run logged steps {sorted(resumed)[:3]}..."
bad = [s for s in resumed if resumed[s] != base[s]]
assert not bad, f"step {bad[0]}: resumed loss {resumed[bad[0]]!r} != uninterrupted {base[bad[0]]!r}"
print(f"resumed from step {first - 1}: steps {first}..{last} equal the uninterrupted run's")
PY

# SIGUSR1 to the launcher: passed on; both ranks save and exit 143.
launch usr1 --output_dir "$out/usr1" --save_steps 0
wait_for_step usr1 5
kill -USR1 "$LAUNCHER"
wait "$LAUNCHER"
code=$?
[ "$code" = 138 ] || fail "the launcher exited $code after SIGUSR1, not 128 + 10: $(tail -20 "$out/usr1.log")"
[ "$(grep -c "got SIGUSR1: saved checkpoint" "$out/usr1.log")" = 2 ] ||
  fail "both ranks should say they saved on SIGUSR1: $(tail -10 "$out/usr1.log")"
ls "$out/usr1"/checkpoint-*/latest >/dev/null 2>&1 || fail "SIGUSR1 saved no checkpoint: $(ls "$out/usr1")"

# Without --save_on_signal the signal stops the rank as its default does: nothing is saved.
launch off --output_dir "$out/off" --save_steps 0 --save_on_signal=false
wait_for_step off 5
kill -TERM "$(ranks_of "$LAUNCHER" | tail -1)"
wait "$LAUNCHER"
code=$?
[ "$code" = 143 ] || fail "the launcher exited $code, not 128 + SIGTERM: $(tail -20 "$out/off.log")"
! grep -q "saved checkpoint" "$out/off.log" || fail "--save_on_signal=false saved a checkpoint"
[ -z "$(ls -A "$out/off" 2>/dev/null)" ] || fail "--save_on_signal=false left $(ls "$out/off")"
echo "PASS"

#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of a checkpoint save (DESIGN §5 and §7). Two ranks
# save global_step2, then in the save of global_step4 rank 1 kills itself right after its
# first write of its rank file (checkpoint_fault_rank.cpp). Then:
#   - the launcher stops the job, exits 137 and names rank 1, within the grace (plus slack),
#     and leaves no process behind;
#   - `latest` still names global_step2 and there is no global_step4, only its staging
#     directory .global_step4.partial;
#   - a second job loads global_step2 (global_steps 2), trains on and saves global_step4:
#     the staging directory is gone and `latest` names global_step4.
#
# With `async` the saves are checkpoint.async_save's: rank 1's background writer dies while
# the training threads go on, and the same must hold.
#
#   checkpoint_fault_test.sh ZEROTRAIN CHECKPOINT_FAULT_RANK BACKEND [async]
set -u
ZT=$1 PROGRAM=$2 BACKEND=$3 MODE=kill-in-second-save
[ "${4:-}" = async ] && MODE=kill-in-second-async-save
GRACE_S=2 SLACK_S=20
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ckpt="$out/ckpt"
fail() { echo "FAIL: $*"; exit 1; }

start=$(date +%s.%N)
"$ZT" launch --nproc_per_node 2 --backend "$BACKEND" --timeout_s 60 --kill_grace_s $GRACE_S \
  -- "$PROGRAM" "$ckpt" $MODE >"$out/kill.out" 2>"$out/kill.err"
rc=$?
elapsed=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
show() { echo "--- stdout"; tail -20 "$out/kill.out"; echo "--- stderr"; tail -20 "$out/kill.err"; }
[ "$rc" = 137 ] || { show; fail "the job exited $rc, want 137 (rank 1's SIGKILL)"; }
grep -q "rank 1 failed first: it was killed by signal 9 (SIGKILL)" "$out/kill.err" ||
  { show; fail "the launcher did not name rank 1 as killed by SIGKILL"; }
grep -qF "rank 1 dies writing $ckpt/.global_step4.partial/rank_00001.safetensors" "$out/kill.out" ||
  { show; fail "rank 1 did not die writing its file of the second save"; }
awk "BEGIN{exit !($elapsed > $GRACE_S + $SLACK_S)}" && fail "the job took ${elapsed}s to stop"
sleep 0.5
if pgrep -f "$ckpt" >/dev/null; then pgrep -af "$ckpt"; pkill -9 -f "$ckpt"; fail "processes left behind"; fi
echo "ok: the launcher stopped the job in ${elapsed}s (exit 137) and named rank 1"

[ "$(cat "$ckpt/latest")" = global_step2 ] || fail "latest names '$(cat "$ckpt/latest")', want global_step2"
[ -f "$ckpt/global_step2/manifest.json" ] || fail "global_step2 has no manifest"
[ ! -e "$ckpt/global_step4" ] || fail "global_step4 exists after a save that did not finish: $(ls -a "$ckpt/global_step4")"
[ -d "$ckpt/.global_step4.partial" ] || fail "no staging directory .global_step4.partial: $(ls -a "$ckpt")"
echo "ok: latest names global_step2; global_step4 is only a staging directory ($(ls -A "$ckpt/.global_step4.partial" | tr '\n' ' '))"

"$ZT" launch --nproc_per_node 2 --backend "$BACKEND" --timeout_s 60 -- "$PROGRAM" "$ckpt" resume \
  >"$out/resume.out" 2>"$out/resume.err" || { tail -20 "$out/resume.err"; fail "the resumed job exited $?"; }
grep -q "loaded global_steps=2" "$out/resume.out" || { cat "$out/resume.out"; fail "the resumed job did not load step 2"; }
grep -q "saved global_step4" "$out/resume.out" || fail "the resumed job did not save global_step4"
[ "$(cat "$ckpt/latest")" = global_step4 ] || fail "after the new save, latest names '$(cat "$ckpt/latest")'"
[ -f "$ckpt/global_step4/manifest.json" ] || fail "global_step4 has no manifest after the new save"
[ ! -e "$ckpt/.global_step4.partial" ] || fail "the new save left .global_step4.partial behind"
echo "ok: a second job loaded global_step2 and saved global_step4 over the staging directory"

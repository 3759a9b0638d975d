#!/usr/bin/env bash
# `zerotrain train --save_steps 1` onto a disk that cannot take the next
# checkpoint: a small tmpfs. Every case saves checkpoint-1 first, and the save of
# checkpoint-2 must fail with CheckpointError (exit 8) saying why and where to resume from,
# leave checkpoint-1 and its `latest` as they were, and leave nothing of checkpoint-2 (no
# staging directory, no empty folder).
#   full      a 2 MiB tmpfs: checkpoint-1 (1.3 MiB) fits, checkpoint-2 does not; the save
#             is refused before writing ("not enough disk space"). With --save_total_limit 1,
#             which deletes checkpoint-1 only once checkpoint-2 is complete (HF's order).
#   nearfull  room for the rank files of checkpoint-2 but not for its manifest, written
#             last: the check before any rank writes counts the manifest too, so the save is
#             refused before writing. (A disk that fills up during the writes is tested in
#             tests/unit/checkpoint_test.cpp, DiskFillingUpDuringTheWriteAbortsTheSaveEverywhere.)
#   readonly  the tmpfs remounted read-only after checkpoint-1 (or, where remounting is not
#             permitted, the output directory made immutable with chattr +i).
# Mounting needs root: elsewhere the test exits 77 (skipped) and says why.
#
#   checkpoint_disk_test.sh ZEROTRAIN REPO_ROOT full|nearfull|readonly
set -u
ZT=$1 ROOT=$2 MODE=$3
out=$(mktemp -d)
mnt="$out/mnt"
mkdir "$mnt"
cleanup() {
  chattr -i "$mnt/run" 2>/dev/null
  mountpoint -q "$mnt" && umount "$mnt"
  rm -rf "$out"
}
trap cleanup EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || skip "mounting a small tmpfs needs root (this runs as uid $(id -u))"
size=2m
[ "$MODE" = full ] || size=8m
mount -t tmpfs -o size=$size tmpfs "$mnt" 2>"$out/mount.err" ||
  skip "cannot mount a $size tmpfs here: $(cat "$out/mount.err")"

nproc=2
train() {  # train NAME MAX_STEPS [FLAGS...]: the tiny GPT, a global batch of 8, a checkpoint every step
  local name=$1 steps=$2
  shift 2
  "$ZT" launch --nproc_per_node $nproc --backend gloo --timeout_s 120 -- "$ZT" train --model gpt \
    --deepspeed "$ROOT/examples/ds_config_train_zero2.json" --per_device_train_batch_size $((8 / nproc)) --max_steps "$steps" \
    --logging_steps 1 --output_dir "$mnt/run" --save_steps 1 "$@" >"$out/$name.log" 2>&1
}

case $MODE in
  full)
    train full 2 --save_total_limit 1
    rc=$?
    want="not enough disk space for the checkpoint in $mnt/run/checkpoint-2/.global_step2.partial"
    ;;
  nearfull)
    train first 1 || { tail -20 "$out/first.log"; fail "the first save failed"; }
    # Leave exactly the blocks that checkpoint-1's rank file takes (checkpoint-2's is as large).
    block=$(stat -f -c %S "$mnt")
    need=0
    for f in "$mnt"/run/checkpoint-1/global_step1/rank_*.safetensors; do
      need=$((need + ($(stat -c %s "$f") + block - 1) / block))
    done
    free=$(stat -f -c %a "$mnt")
    head -c $(((free - need) * block)) /dev/zero >"$mnt/filler" 2>/dev/null
    [ "$(stat -f -c %a "$mnt")" = "$need" ] || fail "could not leave $need free blocks: $(stat -f -c %a "$mnt") are free"
    train full 2 --resume_from_checkpoint true
    rc=$?
    want="not enough disk space for the checkpoint in $mnt/run/checkpoint-2/.global_step2.partial"
    ;;
  readonly)
    train first 1 || { tail -20 "$out/first.log"; fail "the first save failed"; }
    if mount -o remount,ro "$mnt" 2>"$out/ro.err"; then
      how="the tmpfs remounted read-only"
      want="the file system is read-only (EROFS)"
    elif chattr +i "$mnt/run" 2>>"$out/ro.err"; then
      how="the output directory made immutable (chattr +i)"
      want="Operation not permitted"
    else
      skip "can neither remount the tmpfs read-only nor chattr +i: $(tr '\n' ' ' <"$out/ro.err")"
    fi
    train full 2 --resume_from_checkpoint true
    rc=$?
    ;;
  *) fail "unknown mode $MODE (full, nearfull or readonly)" ;;
esac

[ "$rc" = 8 ] || { tail -30 "$out/full.log"; fail "$MODE: the job exited $rc, want 8 (CheckpointError)"; }
grep -qF -- "$want" "$out/full.log" || { tail -30 "$out/full.log"; fail "$MODE: the error does not say: $want"; }
grep -qF -- "Training stopped at global step 2 (resume with --resume_from_checkpoint $mnt/run/checkpoint-1" \
  "$out/full.log" || { tail -30 "$out/full.log"; fail "$MODE: the error does not say where to resume from"; }
[ "$(cat "$mnt/run/checkpoint-1/latest")" = global_step1 ] || fail "$MODE: checkpoint-1/latest changed"
[ -f "$mnt/run/checkpoint-1/global_step1/manifest.json" ] || fail "$MODE: checkpoint-1 lost its manifest"
[ ! -e "$mnt/run/checkpoint-2" ] || fail "$MODE: the failed save left checkpoint-2: $(ls -A "$mnt/run/checkpoint-2")"
echo "ok: $MODE${how:+ ($how)}: exit 8, '$want', checkpoint-1 and its latest unchanged"
grep -F "  | " "$out/full.log" | tail -3

#!/usr/bin/env bash
# The standard descriptors of `zerotrain launch` and of the commands' own output: a launcher
# started with standard input, output or error closed runs its job as with /dev/null there
# (what it opens for itself never takes 0-2: its signal pipe once read the ranks' output as
# signals and stopped a healthy job); output that cannot be written (/dev/full) is IoError (7)
# for --help, --version and launch too.
# Usage: launch_descriptors_test.sh ZEROTRAIN_BINARY
set -uo pipefail
zt=$1
zt_checkpoint=$(dirname "$zt")/zerotrain-checkpoint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

# closing REDIRECTIONS CMD...: runs CMD with those descriptors closed ("0<&- 2>&-").
closing() {
  local redirections=$1
  shift
  bash -c 'eval "exec $0" && exec "$@"' "$redirections" "$@"
}

# holds NAME COND MESSAGE: counts a condition (a shell expression) checked by hand.
holds() {
  if eval "$2"; then passed=$((passed + 1)); else echo "FAIL $1: $3"; failed=$((failed + 1)); fi
}

# Each rank writes lines to both streams (any byte on the launcher's stderr was read as a
# signal) and reports what it got as standard input; --log_dir keeps what the console cannot.
rank_program='echo "out $RANK"; for i in 1 2 3; do echo "err $RANK $i" >&2; done; read -r line; echo "stdin $? $RANK"'
# Under mpirun (when built with MPI) each rank's wrapper is a zerotrain process too.
cases=("gloo 0<&- 2>&-" "gloo 1>&- 2>&-" "gloo 0<&- 1>&- 2>&-" "gloo 0<&- 1>&-" "gloo 2>&-")
"$zt" launch --backend mpi -- true >/dev/null 2>&1 && cases+=("mpi 0<&- 1>&- 2>&-")
for case in "${cases[@]}"; do
  read -r backend redirections <<<"$case"
  name="closed_${backend}_$(tr -dc '0-9' <<<"$redirections")"
  logs="$tmp/$name"
  expect "$name" 0 -- closing "$redirections" "$zt" launch --nproc_per_node 2 --backend "$backend" \
    --log_dir "$logs" -- sh -c "$rank_program"
  for rank in 0 1; do
    # Every line reached the log, and the rank read /dev/null (end of input), not the terminal.
    holds "${name}_rank$rank" "grep -qx 'out $rank' '$logs/rank$rank.log' && grep -qx 'err $rank 3' '$logs/rank$rank.log' &&
      grep -qx 'stdin 1 $rank' '$logs/rank$rank.log'" "rank $rank's log: $(cat "$logs/rank$rank.log" 2>&1)"
  done
done
# Standard output open, error closed: the ranks' lines still reach it, prefixed.
expect closed_stderr_shows_output 0 "[rank 1] out 1" "[rank 0] stdin 1 0" -- \
  closing "0<&- 2>&-" "$zt" launch --nproc_per_node 2 --backend gloo -- sh -c "$rank_program"

# A signal still stops the job with every descriptor closed: the signal pipe works, and is
# the launcher's alone.
closing "0<&- 1>&- 2>&-" "$zt" launch --nproc_per_node 2 --backend gloo -- \
  sh -c "touch '$tmp/started.'\$RANK; exec sleep 60" &
launcher=$!
for _ in $(seq 200); do [ -e "$tmp/started.0" ] && [ -e "$tmp/started.1" ] && break; sleep 0.05; done
holds signal_ranks_started "[ -e '$tmp/started.0' ] && [ -e '$tmp/started.1' ]" "the ranks did not start"
kill -TERM "$launcher"
wait "$launcher"
holds signal_with_closed_descriptors "[ $? -eq 143 ]" "the launcher did not stop on SIGTERM with exit 143"

# Output that cannot be written is IoError (7), for --help and --version as for any command.
for args in "--help" "--version" "launch --help" "config check --help"; do
  # shellcheck disable=SC2086
  expect "full_${args// /_}" 7 "cannot write the standard output: No space left on device" -- \
    sh -c "\"\$0\" $args >/dev/full" "$zt"
done
expect full_checkpoint_tool_help 7 "cannot write the standard output: No space left on device" -- \
  sh -c '"$0" --help >/dev/full' "$zt_checkpoint"
# A closed standard output is /dev/null: nothing is lost that the user wanted.
expect closed_version 0 -- closing "1>&-" "$zt" --version

# launch: a job whose output cannot be shown runs to its end, then exits 7 (its output is
# lost; the log keeps it); a failed job keeps its own exit code; a silent one loses nothing.
expect launch_full 7 "cannot write the standard output: No space left on device" \
  "the job succeeded, but its output could not all be shown" -- \
  sh -c '"$0" launch --nproc_per_node 2 --backend gloo --log_dir "$1" -- sh -c "echo out \$RANK; sleep 0.2; echo done \$RANK" >/dev/full' \
  "$zt" "$tmp/full_logs"
holds launch_full_ran_to_end "grep -qx 'done 1' '$tmp/full_logs/rank1.log'" "the job did not run to its end"
expect launch_full_failed 3 "rank 0 failed first: it exited with code 3" -- \
  sh -c '"$0" launch --backend gloo -- sh -c "echo hi; exit 3" >/dev/full' "$zt"
expect launch_full_silent 0 -- sh -c '"$0" launch --backend gloo -- true >/dev/full' "$zt"
expect launch_stderr_full 7 -- sh -c '"$0" launch --backend gloo -- sh -c "echo oops >&2" 2>/dev/full' "$zt"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

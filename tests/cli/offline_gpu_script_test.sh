#!/usr/bin/env bash
# scripts/offline_gpu.sh's own exit status: its test and gpu steps run stand-ins for ctest
# and `zerotrain report` (ZT_CTEST, ZT_ZEROTRAIN) that fail on demand, and the script must
# exit non-zero and name the step and the command that failed, or exit 0 and say so when
# nothing did. Needs no build and no GPU; a few seconds.
#
#   offline_gpu_script_test.sh [SCRIPT]   (default: scripts/offline_gpu.sh of this checkout)
set -u
script=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/offline_gpu.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The stand-in ctest: records its arguments, fails with 8 when they match $FAKE_CTEST_FAIL (an
# extended regex), and sleeps $FAKE_CTEST_SLEEP_S first when they match $FAKE_CTEST_SLOW.
cat >"$tmp/ctest" <<'SH'
#!/usr/bin/env bash
echo "$*" >>"$FAKE_CALLS"
if [ -n "${FAKE_CTEST_SLOW:-}" ] && grep -qE -- "$FAKE_CTEST_SLOW" <<<"$*"; then sleep "${FAKE_CTEST_SLEEP_S:-5}"; fi
if [ -n "${FAKE_CTEST_FAIL:-}" ] && grep -qE -- "$FAKE_CTEST_FAIL" <<<"$*"; then
  echo "fake ctest: 1 test failed out of 1"
  exit 8
fi
echo "fake ctest: 100% tests passed"
SH
# The stand-in zerotrain: `report` exits $FAKE_REPORT_RC (0 by default).
cat >"$tmp/zerotrain" <<'SH'
#!/usr/bin/env bash
echo "zerotrain $*" >>"$FAKE_CALLS"
echo "fake zerotrain report"
exit "${FAKE_REPORT_RC:-0}"
SH
chmod +x "$tmp/ctest" "$tmp/zerotrain"

passed=0
failed=0
out=""
rc=0
# run ENV... -- STEPS...: runs the script with the stand-ins and ENV; sets $out and $rc.
run() {
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  : >"$tmp/calls"
  rm -rf "$tmp/logs"
  out=$(env ${envs[@]+"${envs[@]}"} FAKE_CALLS="$tmp/calls" ZT_CTEST="$tmp/ctest" ZT_ZEROTRAIN="$tmp/zerotrain" \
        ZT_BUILD="$tmp/build" OUT="$tmp/logs" ZT_TEST_LIMIT_S="${LIMIT_S:-60}" bash "$script" "$@" 2>&1)
  rc=$?
}
# check NAME WANT_RC NEEDLE...: the last run exited WANT_RC ("nonzero": anything but 0) and
# printed every NEEDLE.
check() {
  local name=$1 want=$2 ok=1
  shift 2
  if [ "$want" = nonzero ]; then
    [ "$rc" -ne 0 ] || { echo "FAIL: $name: exited 0, want non-zero"; ok=0; }
  else
    [ "$rc" -eq "$want" ] || { echo "FAIL: $name: exited $rc, want $want"; ok=0; }
  fi
  for n in "$@"; do
    grep -qF -- "$n" <<<"$out" || { echo "FAIL: $name: output lacks: $n"; ok=0; }
  done
  if [ $ok -eq 1 ]; then
    echo "ok: $name (exit $rc)"
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "--- its output:"; echo "$out" | tail -20; echo "---"
  fi
}
# called NEEDLE: the stand-ins were called with NEEDLE among their arguments.
called() { grep -qF -- "$1" "$tmp/calls"; }

run -- gpu
check "gpu step, all passing" 0 "step gpu: ok" "all steps passed: gpu"
if ! { called "zerotrain report" && called "-L gpu" && called "--no-tests=error"; }; then
  echo "FAIL: the gpu step did not run the report and ctest -L gpu --no-tests=error"
  failed=$((failed + 1))
fi
grep -qF "fake ctest: 100% tests passed" "$tmp/logs/05-gpu.log" 2>/dev/null ||
  { echo "FAIL: 05-gpu.log lacks ctest's output"; failed=$((failed + 1)); }

run FAKE_CTEST_FAIL='-L gpu' -- gpu
check "gpu step, ctest -L gpu failing" nonzero "step gpu: FAILED (ctest -L gpu exited 8)" "FAILED steps: gpu"

run FAKE_REPORT_RC=1 -- gpu
check "gpu step, zerotrain report failing" nonzero "step gpu: FAILED (zerotrain report exited 1)" "FAILED steps: gpu"
called "-L gpu" || { echo "FAIL: ctest -L gpu did not run after the report failed"; failed=$((failed + 1)); }

run FAKE_REPORT_RC=1 FAKE_CTEST_FAIL='-L gpu' -- gpu
check "gpu step, both failing" nonzero "zerotrain report exited 1; ctest -L gpu exited 8"

LIMIT_S=1 run FAKE_CTEST_SLOW='-L gpu' FAKE_CTEST_SLEEP_S=5 -- gpu
check "gpu step, ctest past ZT_TEST_LIMIT_S" nonzero "step gpu: FAILED (ctest -L gpu exited 124)"

run -- test
check "test step, all passing" 0 "step test: ok"
run FAKE_CTEST_FAIL='unit\|conformance\|cli' -- test
check "test step, the CPU suites failing" nonzero "step test: FAILED (ctest -L 'unit|conformance|cli' exited 8)"
run FAKE_CTEST_FAIL='-R ' -- test
check "test step, the multi-process tests failing" nonzero "step test: FAILED (ctest -R '^mp_" "FAILED steps: test"

run FAKE_CTEST_FAIL='unit\|conformance\|cli' -- test gpu
check "test and gpu, test failing" nonzero "step test: FAILED" "step gpu: ok" "FAILED steps: test"
run -- test gpu
check "test and gpu, all passing" 0 "step test: ok" "step gpu: ok" "all steps passed: test gpu"

run -- bogus
check "an unknown step" 2 "usage:"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

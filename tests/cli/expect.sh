# Shared by the command-line tests (sourced): counters and the `expect` check.
# The test sets $tmp; it reports "$passed passed, $failed failed" and fails when $failed > 0.
passed=0
failed=0

# expect NAME WANT_RC NEEDLE... -- CMD...: runs CMD, checks the exit code and that the
# combined output contains every NEEDLE.
expect() {
  local name=$1 want=$2
  shift 2
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  local ok=1
  [ "$rc" -eq "$want" ] || { echo "FAIL $name: exit $rc, want $want"; ok=0; }
  for n in "${needles[@]}"; do
    grep -qF -- "$n" <<<"$out" || { echo "FAIL $name: output lacks: $n"; ok=0; }
  done
  if [ $ok -eq 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "$out" | head -40; fi
}

# check NAME CMD...: a condition checked by hand (on files, on an exit code), counted like
# expect; on failure it names the command and lists $tmp.
check() {
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $name: $*"; ls -laR "$tmp" | head -40; fi
}

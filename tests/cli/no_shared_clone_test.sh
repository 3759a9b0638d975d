#!/usr/bin/env bash
# A clone tests on its own: with no ../shared/conformance beside it, the tests that need the
# DeepSpeed config corpus report ctest's SKIP ("skipped: ../shared/conformance not found"),
# never a pass or a failure, and the rest runs. Checked two ways: a `git clone` of this
# repository into a temporary folder (so nothing is beside it), configured and its
# conformance tests built and run by ctest; and the engine's corpus test of this build
# pointed at a folder that does not exist.
# Usage: no_shared_clone_test.sh REPO_ROOT ENGINE_TESTS_BINARY TORCH_DIR PYTHON
set -uo pipefail
root=$1
engine_tests=$2
torch_dir=$3
python=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || { echo "skipped: $root is not a git clone"; exit 77; }
git clone --quiet "$root" "$tmp/clone" || fail "git clone $root"
[ ! -e "$tmp/shared" ] || fail "$tmp/shared exists"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$tmp/clone" -B "$tmp/clone/build" -G Ninja -DZEROTRAIN_TORCH_DIR="$torch_dir" -DZEROTRAIN_PYTHON="$python" \
  -DZEROTRAIN_BUILD_PYTHON=OFF "${launcher[@]}" >"$tmp/configure.log" 2>&1 ||
  { tail -30 "$tmp/configure.log"; fail "the clone does not configure without ../shared"; }
cmake --build "$tmp/clone/build" --target conformance_tests -j 2 >"$tmp/build.log" 2>&1 ||
  { tail -30 "$tmp/build.log"; fail "the clone's conformance tests do not build"; }
out=$(cd "$tmp/clone/build" && env -u ZEROTRAIN_CONFORMANCE_DIR ctest -L conformance -V 2>&1)
rc=$?
[ $rc -eq 0 ] || { echo "$out" | tail -30; fail "ctest -L conformance failed in the clone (exit $rc)"; }
skipped=$(grep -c "\*\*\*Skipped\|Skipped *[0-9.]* sec" <<<"$out")
ran=$(grep -c "Test *#[0-9]*: .*Passed" <<<"$out")
[ "$skipped" -gt 0 ] && [ "$ran" -eq 0 ] ||
  { echo "$out" | tail -30; fail "want every corpus test skipped, got $skipped skipped and $ran passed"; }
grep -q "skipped: ../shared/conformance not found" <<<"$out" || fail "the skip does not say why"
echo "ok: a clone without ../shared: $skipped corpus tests skipped, none failed"

out=$(ZEROTRAIN_CONFORMANCE_DIR="$tmp/none" "$engine_tests" --gtest_filter='CheckAgreesWithEngine.OnEveryConformanceConfig' 2>&1)
rc=$?
[ $rc -eq 0 ] && grep -q "\[  SKIPPED \]" <<<"$out" && grep -q "skipped: ../shared/conformance not found" <<<"$out" ||
  { echo "$out" | tail -20; fail "the engine's corpus test does not skip without the corpus"; }
echo "ok: the engine's corpus test skips without the corpus"

#!/usr/bin/env bash
# The installed library, used as another project uses it: `cmake --install` into a temporary
# prefix, examples/ configured as a CMake project of its own with find_package(zerotrain)
# and built against that prefix, and its programs run under `zerotrain launch`.
# Usage: install_test.sh BUILD_DIR REPO_ROOT ZEROTRAIN_BINARY
set -uo pipefail
build=$1
root=$2
zt=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" --strip >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
prefix=$tmp/prefix
# The API is one header; the headers it reaches are installed, the internals are not, and
# neither is the Python package (pip installs that component).
for f in include/zerotrain/zerotrain.h include/zerotrain/engine/engine.h include/zerotrain/trainer/trainer.h \
         include/zerotrain/version.h lib/cmake/zerotrain/zerotrainConfig.cmake lib/cmake/zerotrain/zerotrainTargets.cmake; do
  [ -f "$prefix/$f" ] || fail "$f is not installed"
done
for f in include/zerotrain/engine/engine_state.h include/zerotrain/stages/stage.h include/zerotrain/comm/backend.h \
         zerotrain/__init__.py; do
  [ ! -e "$prefix/$f" ] || fail "$f is installed; it is internal"
done
echo "ok: installed $(find "$prefix/include" -name '*.h' | wc -l) public headers and $(find "$prefix/lib" -name '*.a' | wc -l) libraries"

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root/examples" -B "$tmp/examples" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  "${launcher[@]}" >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configure examples/ against the prefix"; }
cmake --build "$tmp/examples" -j 2 >"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; fail "build examples/"; }
# Nothing of the source tree or the build tree on the include path: the prefix only.
if grep -q -e "-I$root" -e "-I$build" "$tmp/examples/build.ninja"; then fail "examples/ compiled with the source or build tree's headers"; fi
echo "ok: examples/ built against the prefix with find_package(zerotrain)"

out=$("$zt" launch --nproc_per_node 2 -- "$tmp/examples/engine_loop" "$root/examples/ds_config_zero2.json" "$tmp/ckpt" 2>&1) ||
  { echo "$out" | tail -20; fail "engine_loop under zerotrain launch"; }
line=$(grep -o "engine_loop: zerotrain [0-9.]*, ZeRO stage 2, world size 2, loss [0-9.]* -> [0-9.]*" <<<"$out") ||
  { echo "$out" | tail -20; fail "engine_loop printed no result line"; }
awk '{ if (!($(NF) < $(NF-2))) exit 1 }' <<<"$line" || fail "the loss did not fall: $line"
[ -f "$tmp/ckpt/latest" ] || fail "engine_loop saved no checkpoint"
echo "ok: $line"

out=$("$zt" launch --nproc_per_node 2 -- "$tmp/examples/trainer_fashion_mnist" \
  "$root/examples/ds_config_fashion_zero2.json" 256 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "fashion-mnist" <<<"$out" && grep -qi "not found\|no such\|install" <<<"$out"; then
  echo "skipped: the Trainer example needs Debian's dataset-fashion-mnist (scripts/setup.sh installs it)"
  exit 77
fi
[ $rc -eq 0 ] || { echo "$out" | tail -20; fail "trainer_fashion_mnist under zerotrain launch"; }
grep -q "trained [0-9]* steps; test accuracy 0\.[0-9]*" <<<"$out" || { echo "$out" | tail -10; fail "no accuracy line"; }
echo "ok: $(grep -o 'trained [0-9]* steps; test accuracy [0-9.]*' <<<"$out")"

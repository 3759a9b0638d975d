#!/usr/bin/env bash
# Builds and tests zerotrain on an offline CUDA machine: no apt, no pip, only a python3 with a
# CUDA torch wheel (the pinned 2.15 or the older 2.11 such machines carry), a compiler, CMake
# and Ninja. The project's Debian header/library packages travel with it as .debs, unpacked
# into a prefix (never into /). docs/gpu.md tells the whole procedure.
#
#   on a Debian 12 machine with apt:   bash scripts/offline_gpu.sh fetch-debs offline/debs
#   on the GPU machine:                bash scripts/offline_gpu.sh all
#
# Steps, one or several in order (default: all = facts build test gpu):
#   facts   the OS, compilers, torch, the CUDA runtime and NCCL files it will use, nvidia-smi
#   build   unpack the debs, configure (cmake/ZerotrainCuda.cmake finds libtorch_cuda and the
#           wheel's own NCCL and CUDA runtime: one copy of each in the process), build
#   test    the CPU suites: unit, conformance, cli, and the gloo multi-process tests
#   gpu     `zerotrain report` (its GPU probe trains each ZeRO stage on cuda:0 against the CPU)
#           and `ctest -L gpu` (skipped, with the reason, where no GPU is visible)
#   bench   bench/gpu_train.py (ZT_BENCH_ARGS, default `--models small --rounds 3`, DeepSpeed's
#           rows only where PYTHON has deepspeed) into docs/benchmarks.md, copied to the log
#           folder; not part of all
# Each step ends with a line "step NAME: ok" or "step NAME: FAILED (...)" naming the command
# that failed; the script exits 0 only when every step it ran passed (facts only informs).
# A failed build stops the steps after it.
# Environment: PYTHON (a python3 with torch; default python3), ZT_DEBS (offline/debs),
#   ZT_BUILD (/tmp/zt-build), ZT_DEPS (/tmp/zt-deps), OUT (log folder; default logs/offline-gpu),
#   JOBS (nproc), ZT_TARGETS (build only these targets, e.g. `ZT_TARGETS=gpu` for what the gpu
#   and bench steps run: a quarter of the full build), ZT_MPI=1 (let CMake find a system MPI and run the MPI tests too),
#   ZT_TEST_LIMIT_S (each ctest run, 600); ZT_CTEST and ZT_ZEROTRAIN replace the ctest and
#   zerotrain commands the test and gpu steps run (tests/cli/offline_gpu_script_test.sh gives
#   them failing stand-ins).
#
# Every logged command is `CMD 2>&1 | tee LOG`: pipefail makes such a pipeline fail when CMD
# does, and its status is read in this shell (never inside a `{ ...; } | tee` group, which is
# a subshell whose variables are lost).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
DEBS=${ZT_DEBS:-$ROOT/offline/debs}
BUILD=${ZT_BUILD:-/tmp/zt-build}
DEPS=${ZT_DEPS:-/tmp/zt-deps}
LOGS=${OUT:-$ROOT/logs/offline-gpu}
JOBS=${JOBS:-$(nproc)}
LIMIT=${ZT_TEST_LIMIT_S:-600}
CTEST=${ZT_CTEST:-ctest}
ZEROTRAIN=${ZT_ZEROTRAIN:-$BUILD/tools/zerotrain}
say() { printf '[offline_gpu %s] %s\n' "$(date +%T)" "$*"; }

# The Debian 12 packages of scripts/setup.sh that the build links or includes (about 3 MB).
DEB_PACKAGES=(nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 libgtest-dev libgmock-dev
              libbenchmark-dev libbenchmark1debian libhwy-dev libhwy1 libgloo-dev libxxhash-dev libxxhash0
              liburing-dev liburing2 libaio-dev libaio1 zlib1g-dev)

fetch_debs() {
  local dir=${1:-$DEBS}
  mkdir -p "$dir" && cd "$dir" || return 1
  say "downloading ${#DEB_PACKAGES[@]} packages into $dir"
  apt-get download "${DEB_PACKAGES[@]}"
}

# libspdlog's own need of libfmt is met through this (an executable's RUNPATH does not reach
# a library's needs).
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Each failed command is named here, so that the step's summary can say which one it was.
failures=()
failed() { failures+=("$*"); say "FAILED: $*"; }

torch_dir() { "$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))'; }

facts() {
  {
    echo "== os"; head -4 /etc/os-release 2>/dev/null; uname -srm
    echo "== toolchain"; g++ --version | head -1; cmake --version | head -1; echo "ninja $(ninja --version 2>/dev/null)"
    echo "== torch"
    "$PY" - <<'PY'
import os, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "dir", os.path.dirname(torch.__file__))
print("cuda available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("torch's nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "")
PY
    echo "== gpu"; nvidia-smi 2>&1 | head -15
  } 2>&1 | tee "$LOGS/01-facts.txt"
}

build() {
  local dir; dir=$(torch_dir) || { failed "no torch importable by $PY: set PYTHON"; return 2; }
  ls "$DEBS"/*.deb >/dev/null 2>&1 || { failed "no .debs in $DEBS: run 'fetch-debs' on a Debian 12 machine and carry them"; return 2; }
  say "unpacking $(ls "$DEBS"/*.deb | wc -l) debs into $DEPS"
  mkdir -p "$DEPS"
  for f in "$DEBS"/*.deb; do
    if command -v dpkg >/dev/null; then
      dpkg -x "$f" "$DEPS" || { failed "dpkg -x $f"; return 1; }
    else   # a .deb is an ar archive holding data.tar.*
      (t=$(mktemp -d) && cd "$t" && ar x "$f" && tar -xf data.tar.* -C "$DEPS" && rm -rf "$t") ||
        { failed "unpacking $f"; return 1; }
    fi
  done
  local mpi=-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON pymod=-DZEROTRAIN_BUILD_PYTHON=ON
  [ "${ZT_MPI:-0}" = 1 ] && mpi=
  # The Python module needs Python.h, which a Python without its development files lacks;
  # the GPU steps need only the zerotrain command and the C++ tests.
  if ! "$PY" -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
    say "$PY has no Python.h: the Python module is not built"
    pymod=-DZEROTRAIN_BUILD_PYTHON=OFF
  fi
  say "configuring $BUILD against $dir"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROTRAIN_TORCH_DIR="$dir" \
    -DZEROTRAIN_PYTHON="$(command -v "$PY")" -DCMAKE_PREFIX_PATH="$DEPS/usr" $mpi $pymod 2>&1 | tee "$LOGS/02-configure.log" ||
    { failed "cmake (configure) exited ${PIPESTATUS[0]}"; return 1; }
  local t0=$SECONDS rc=0 targets=()
  case ${ZT_TARGETS:-} in
    '') ;;
    gpu) targets=(--target zerotrain comm_check gpu_tests)
         # the nccl plugin and its tests exist where CMake found NCCL
         ninja -C "$BUILD" -t targets all 2>/dev/null | grep -q '^gpu_comm_tests:' &&
           targets+=(gpu_comm_tests zerotrain_nccl) ;;
    *) read -ra targets <<<"$ZT_TARGETS"; targets=(--target "${targets[@]}") ;;
  esac
  # -k 0: every compile error in one run, since a GPU machine's time is scarce
  cmake --build "$BUILD" -j "$JOBS" ${targets[@]+"${targets[@]}"} -- -k 0 2>&1 | tee "$LOGS/03-build.log" || { rc=${PIPESTATUS[0]}; failed "cmake --build exited $rc"; }
  say "build rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOGS/03-build.log"
  return "$rc"
}

# --no-tests=error: a ctest that selects nothing (a label or target missing from the build)
# must not pass as if its tests had.
tests() {
  local t0=$SECONDS log="$LOGS/04-ctest-cpu.log"
  : >"$log"
  timeout "$LIMIT" "$CTEST" --test-dir "$BUILD" -L 'unit|conformance|cli' -j "$JOBS" --timeout 300 --no-tests=error \
    --output-on-failure 2>&1 | tee -a "$log" || failed "ctest -L 'unit|conformance|cli' exited ${PIPESTATUS[0]}"
  local mp='^mp_(comm|engine).*gloo|^mp_faults_gloo$|^mp_train$'
  [ "${ZT_MPI:-0}" = 1 ] && mp="$mp|^mp_(comm|engine).*mpi|^mp_faults_mpi\$"
  timeout "$LIMIT" "$CTEST" --test-dir "$BUILD" -R "$mp" -j 4 --timeout 300 --no-tests=error --output-on-failure 2>&1 |
    tee -a "$log" || failed "ctest -R '$mp' exited ${PIPESTATUS[0]}"
  say "CPU tests in $((SECONDS - t0)) s" | tee -a "$log"
}

gpu() {
  local log="$LOGS/05-gpu.log"
  : >"$log"
  # The report exits non-zero when its GPU probe fails, or when the machine shows a GPU that
  # LibTorch cannot use (docs/gpu.md).
  "$ZEROTRAIN" report 2>&1 | tee -a "$log" || failed "zerotrain report exited ${PIPESTATUS[0]}"
  timeout "$LIMIT" "$CTEST" --test-dir "$BUILD" -L gpu --timeout 300 --no-tests=error --output-on-failure -V 2>&1 |
    tee -a "$log" || failed "ctest -L gpu exited ${PIPESTATUS[0]}"
}

# The GPU benchmark: its tables go into this checkout's docs/benchmarks.md, and a copy of that
# file into the log folder (the checkout may be a copy that is thrown away).
bench() {
  local log="$LOGS/06-bench.log" args peers
  # DeepSpeed where this Python has it; else its rows are left out (the bench would try to
  # install it from a package index that an offline machine does not have).
  if "$PY" -c 'import deepspeed' >/dev/null 2>&1; then
    peers="--ds_python $(command -v "$PY")"
  else
    say "no deepspeed in $PY: the bench runs PyTorch and zerotrain only"
    peers="--only torch,zt0,zt1,zt2,zt3,zt2off"
  fi
  read -ra args <<<"${ZT_BENCH_ARGS:---models small --rounds 3 $peers}"
  timeout "$LIMIT" "$PY" "$ROOT/bench/gpu_train.py" --build "$BUILD" --python "$(command -v "$PY")" "${args[@]}" --write 2>&1 |
    tee "$log" || failed "bench/gpu_train.py exited ${PIPESTATUS[0]}"
  cp "$ROOT/docs/benchmarks.md" "$LOGS/benchmarks.md"
}

# run_step NAME FUNCTION: runs it, says how it went; its status is 1 when any command failed.
run_step() {
  local name=$1 fn=$2
  failures=()
  "$fn"
  local rc=$?
  [ "$rc" -ne 0 ] && [ "${#failures[@]}" -eq 0 ] && failures=("exited $rc")
  if [ "${#failures[@]}" -eq 0 ]; then
    say "step $name: ok"
    return 0
  fi
  local why
  why=$(printf '%s; ' "${failures[@]}")
  say "step $name: FAILED (${why%; })"
  return 1
}

usage() { echo "usage: $0 fetch-debs DIR | [facts|build|test|gpu|bench|all]..."; exit 2; }
mkdir -p "$LOGS"
[ "${1:-}" = fetch-debs ] && { fetch_debs "${2:-}"; exit; }
steps=("$@")
[ "${#steps[@]}" -eq 0 ] && steps=(all)
[ "${steps[*]}" = all ] && steps=(facts build test gpu)
for step in "${steps[@]}"; do
  case $step in facts | build | test | gpu | bench) ;; *) usage ;; esac
done
bad=()
for step in "${steps[@]}"; do
  case $step in
    facts) facts ;;   # informs only: a missing nvidia-smi or torch is for the steps after to judge
    build) run_step build build || { bad+=(build); say "the build failed: the steps after it are not run"; break; } ;;
    test) run_step test tests || bad+=(test) ;;
    gpu) run_step gpu gpu || bad+=(gpu) ;;
    bench) run_step bench bench || bad+=(bench) ;;
  esac
done
if [ "${#bad[@]}" -gt 0 ]; then
  say "FAILED steps: ${bad[*]} (logs in $LOGS)"
  exit 1
fi
say "all steps passed: ${steps[*]}"

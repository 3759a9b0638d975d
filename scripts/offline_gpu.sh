#!/usr/bin/env bash
# Builds and tests zerotrain on an offline CUDA machine: no apt, no pip, only a python3 with a
# CUDA torch wheel (the pinned 2.15 or the older 2.11 such machines carry), a compiler, CMake
# and Ninja. The project's Debian header/library packages travel with it as .debs, unpacked
# into a prefix (never into /). docs/gpu.md tells the whole procedure.
#
#   on a Debian 12 machine with apt:   bash scripts/offline_gpu.sh fetch-debs offline/debs
#   on the GPU machine:                bash scripts/offline_gpu.sh all
#
# Steps (default: all = facts build test gpu):
#   facts   the OS, compilers, torch, the CUDA runtime and NCCL files it will use, nvidia-smi
#   build   unpack the debs, configure (cmake/ZerotrainCuda.cmake finds libtorch_cuda and the
#           wheel's own NCCL and CUDA runtime: one copy of each in the process), build
#   test    the CPU suites: unit, conformance, cli, and the gloo multi-process tests
#   gpu     `zerotrain report` (its GPU probe trains each ZeRO stage on cuda:0 against the CPU)
#           and `ctest -L gpu` (skipped, with the reason, where no GPU is visible)
# Environment: PYTHON (a python3 with torch; default python3), ZT_DEBS (offline/debs),
#   ZT_BUILD (/tmp/zt-build), ZT_DEPS (/tmp/zt-deps), OUT (log folder; default logs/offline-gpu),
#   JOBS (nproc), ZT_MPI=1 (let CMake find a system MPI and run the MPI tests too),
#   ZT_TEST_LIMIT_S (each ctest run, 600).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
DEBS=${ZT_DEBS:-$ROOT/offline/debs}
BUILD=${ZT_BUILD:-/tmp/zt-build}
DEPS=${ZT_DEPS:-/tmp/zt-deps}
LOGS=${OUT:-$ROOT/logs/offline-gpu}
JOBS=${JOBS:-$(nproc)}
LIMIT=${ZT_TEST_LIMIT_S:-600}
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
  local dir; dir=$(torch_dir) || { say "no torch importable by $PY: set PYTHON"; return 2; }
  ls "$DEBS"/*.deb >/dev/null 2>&1 || { say "no .debs in $DEBS: run 'fetch-debs' on a Debian 12 machine and carry them"; return 2; }
  say "unpacking $(ls "$DEBS"/*.deb | wc -l) debs into $DEPS"
  mkdir -p "$DEPS"
  for f in "$DEBS"/*.deb; do
    if command -v dpkg >/dev/null; then
      dpkg -x "$f" "$DEPS" || return 1
    else   # a .deb is an ar archive holding data.tar.*
      (t=$(mktemp -d) && cd "$t" && ar x "$f" && tar -xf data.tar.* -C "$DEPS" && rm -rf "$t") || return 1
    fi
  done
  local mpi=-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
  [ "${ZT_MPI:-0}" = 1 ] && mpi=
  say "configuring $BUILD against $dir"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROTRAIN_TORCH_DIR="$dir" \
    -DZEROTRAIN_PYTHON="$(command -v "$PY")" -DCMAKE_PREFIX_PATH="$DEPS/usr" $mpi 2>&1 | tee "$LOGS/02-configure.log"
  [ "${PIPESTATUS[0]}" = 0 ] || return 1
  local t0=$SECONDS
  cmake --build "$BUILD" -j "$JOBS" 2>&1 | tee "$LOGS/03-build.log"
  local rc=${PIPESTATUS[0]}
  say "build rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOGS/03-build.log"
  return "$rc"
}

tests() {
  local t0=$SECONDS rc=0
  timeout "$LIMIT" ctest --test-dir "$BUILD" -L 'unit|conformance|cli' -j "$JOBS" --timeout 300 --output-on-failure \
    2>&1 | tee "$LOGS/04-ctest-cpu.log" || rc=1
  local mp='^mp_(comm|engine).*gloo|^mp_faults_gloo$|^mp_train$'
  [ "${ZT_MPI:-0}" = 1 ] && mp="$mp|^mp_(comm|engine).*mpi|^mp_faults_mpi\$"
  timeout "$LIMIT" ctest --test-dir "$BUILD" -R "$mp" -j 4 --timeout 300 --output-on-failure 2>&1 |
    tee -a "$LOGS/04-ctest-cpu.log" || rc=1
  say "CPU tests in $((SECONDS - t0)) s, rc=$rc" | tee -a "$LOGS/04-ctest-cpu.log"
  return "$rc"
}

gpu() {
  local rc=0
  {
    "$BUILD/tools/zerotrain" report || rc=1
    timeout "$LIMIT" ctest --test-dir "$BUILD" -L gpu --timeout 300 --output-on-failure -V || rc=1
  } 2>&1 | tee "$LOGS/05-gpu.log"
  return "$rc"
}

mkdir -p "$LOGS"
case "${1:-all}" in
  fetch-debs) fetch_debs "${2:-}" ;;
  facts) facts ;;
  build) build ;;
  test) tests ;;
  gpu) gpu ;;
  all) facts; build && { tests; t=$?; gpu; g=$?; exit $((t || g)); } ;;
  *) echo "usage: $0 [fetch-debs DIR|facts|build|test|gpu|all]"; exit 2 ;;
esac

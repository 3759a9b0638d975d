#!/usr/bin/env bash
# Fuzzes one of zerotrain's readers with libFuzzer under ASan and UBSan (docs/fuzzing.md):
# the config reader (fuzz/config_reader_fuzz.cpp), the checkpoint reader
# (fuzz/checkpoint_reader_fuzz.cpp) or the DeepSpeed import's pickle reader
# (fuzz/torch_pickle_fuzz.cpp). Builds the fuzz project with clang, then runs the
# target over a temporary copy of its seed corpus, so the repository is never written to.
#
#   scripts/fuzz.sh [--target NAME] [--runs N | --time SECONDS] [--corpus DIR]... [-- LIBFUZZER_FLAGS...]
#
#   --target NAME   config_reader (the default), checkpoint_reader or torch_pickle
#   --runs N        stop after N inputs (bounded: what ctest -L fuzz runs)
#   --time SECONDS  stop after SECONDS (default: --time 60)
#   --corpus DIR    more seed inputs (repeatable); for config_reader the DeepSpeed
#                   conformance configs are added when present ($ZEROTRAIN_CONFORMANCE_DIR,
#                   default ../shared/conformance/ds_configs)
#   -- FLAGS        passed to libFuzzer after ours, so they win (e.g. -max_len=4096, -fork=2)
#
#   ZEROTRAIN_FUZZ_BUILD      build directory (default: build-fuzz)
#   ZEROTRAIN_FUZZ_CXX        the clang++ to build with (default: clang++; not $CXX, which
#                             may name the main build's compiler)
#   ZEROTRAIN_FUZZ_ARTIFACTS  where findings are written (default: $ZEROTRAIN_FUZZ_BUILD/artifacts)
#
# Exit status: 0 when nothing was found, 1 on a finding (its file is printed), 2 for a bad
# argument, 77 when clang or libFuzzer is missing (ctest counts that as skipped).
set -euo pipefail
CALLER_DIR=$PWD   # --corpus paths are the caller's
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf '[fuzz] %s\n' "$*"; }

limit=(-max_total_time=60)
target_name=config_reader
more_seeds=()
extra_flags=()
while (($#)); do
  case "$1" in
    --target) target_name=$2; shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    --corpus) more_seeds+=("$(cd "$CALLER_DIR" && realpath -e "$2")"); shift 2 ;;
    --) shift; extra_flags=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# Each target's seeds and dictionary.
case "$target_name" in
  config_reader)
    seed_dirs=("$ROOT/fuzz/corpus/config") dict=$ROOT/fuzz/config.dict
    conformance=${ZEROTRAIN_CONFORMANCE_DIR:-$ROOT/../shared/conformance/ds_configs} ;;
  checkpoint_reader)
    seed_dirs=("$ROOT/fuzz/corpus/checkpoint") dict=$ROOT/fuzz/checkpoint.dict conformance="" ;;
  torch_pickle)
    seed_dirs=("$ROOT/fuzz/corpus/pickle") dict=$ROOT/fuzz/pickle.dict conformance="" ;;
  *) echo "fuzz.sh: unknown --target '$target_name': give config_reader, checkpoint_reader or torch_pickle" >&2
     exit 2 ;;
esac
seed_dirs+=(${more_seeds[@]+"${more_seeds[@]}"})

BUILD_DIR=$(realpath -m "${ZEROTRAIN_FUZZ_BUILD:-build-fuzz}")
ARTIFACTS=$(realpath -m "${ZEROTRAIN_FUZZ_ARTIFACTS:-$BUILD_DIR/artifacts}")
work=$(mktemp -d "${TMPDIR:-/tmp}/zerotrain-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- clang with libFuzzer, or skip ----------------------------------------------------------
CXX=${ZEROTRAIN_FUZZ_CXX:-clang++}
command -v "$CXX" >/dev/null 2>&1 || { say "SKIP: $CXX not found (apt-get install clang)"; exit 77; }
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$work/probe.cpp"
if ! "$CXX" -fsanitize=fuzzer,address,undefined "$work/probe.cpp" -o "$work/probe" >/dev/null 2>&1; then
  say "SKIP: $CXX cannot link -fsanitize=fuzzer,address,undefined (apt-get install libclang-rt-14-dev)"
  exit 77
fi

# --- build ----------------------------------------------------------------------------------
generator=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
say "building ${target_name}_fuzz in $BUILD_DIR"
CXX=$CXX cmake -S fuzz -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_CXX_COMPILER="$CXX" >"$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${target_name}_fuzz"
target=$BUILD_DIR/${target_name}_fuzz

# --- run ------------------------------------------------------------------------------------
corpus=$work/corpus
mkdir -p "$corpus" "$ARTIFACTS"
for dir in "${seed_dirs[@]}"; do
  find "$dir" -maxdepth 1 -type f -exec cp -t "$corpus" {} +
done
if [ -n "$conformance" ] && [ -d "$conformance" ]; then   # its configs only, not SOURCES.md
  seed_dirs+=("$(realpath "$conformance")")
  find "$conformance" -maxdepth 1 -type f -name '*.json' -exec cp -t "$corpus" {} +
fi
say "seeds: $(find "$corpus" -type f | wc -l) files from ${seed_dirs[*]}"
touch "$work/started"
# libFuzzer's own exit codes default to 77 for a finding; ours must not read as "skipped".
set +e
"$target" -dict="$dict" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$ARTIFACTS/" -print_final_stats=1 \
  "${limit[@]}" "${extra_flags[@]}" "$corpus"
status=$?
set -e
if ((status != 0)); then
  say "FINDING (libFuzzer exit status $status); reproduce with: $target FILE"
  find "$ARTIFACTS" -type f -newer "$work/started" ! -name 'slow-unit-*' -printf '[fuzz]   %p\n'
  exit 1
fi
say "no findings"

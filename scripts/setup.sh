#!/usr/bin/env bash
# Installs everything zerotrain needs on a fresh Debian 12 machine, then configures and
# builds it. Idempotent: when everything is present it only runs an incremental build.
#
#   ZEROTRAIN_HOME   where the pinned Python environment (torch wheel, peers) lives,
#                    outside the clone so that every clone shares one multi-GB install
#                    (default: $HOME/.cache/zerotrain)
#   ZEROTRAIN_BUILD  build directory (default: build)
#   ZEROTRAIN_BUILD_TYPE  CMake build type (default: RelWithDebInfo)
#   ZEROTRAIN_BUILD_TARGETS  what to build (default: everything, the tests included);
#                    scripts/main.sh builds only the zerotrain command
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.15.0   # pinned: LibTorch (C++) and the Python peers come from this wheel
NUMPY_VERSION=2.4.6
SAFETENSORS_VERSION=0.8.0   # reads `zerotrain zero-to-fp32`'s output in tests/cli/checkpoint_tools_test.sh
TENSORBOARD_VERSION=2.20.0  # reads the event files of --report_to tensorboard in the tests
PYTEST_VERSION=9.2.0        # runs the Python package's tests (tests/python)
TRANSFORMERS_VERSION=5.24.0 # GPT-2 and Llama built from configs in the Python tests; zerotrain.hf
ACCELERATE_VERSION=1.15.0   # transformers' Trainer needs it (zerotrain.hf.Trainer subclasses it)
DATASETS_VERSION=5.2.0      # a datasets.Dataset as the Trainer's train_dataset, in the tests
ZEROTRAIN_HOME=${ZEROTRAIN_HOME:-$HOME/.cache/zerotrain}
BUILD_DIR=${ZEROTRAIN_BUILD:-build}
BUILD_TYPE=${ZEROTRAIN_BUILD_TYPE:-RelWithDebInfo}

say() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------------
APT_PACKAGES=(
  build-essential cmake ninja-build ccache git
  python3-venv python3-dev   # the pinned venv; Python.h for the extension module zerotrain._C
  nlohmann-json3-dev   # config parsing
  libcli11-dev         # command-line parsing
  libfmt-dev libspdlog-dev   # formatting and rank-aware logging
  libgtest-dev libgmock-dev  # tests
  libbenchmark-dev     # micro-benchmarks
  libhwy-dev           # Highway: the SIMD Adam kernel with run-time dispatch
  libgloo-dev          # Gloo headers for c10d's ProcessGroupGloo (the wheel ships none)
  libopenmpi-dev openmpi-bin   # the MPI backend and mpirun
  iproute2             # network namespaces for the two-host test
  clang libclang-rt-14-dev   # fuzzing the config and checkpoint readers (scripts/fuzz.sh)
  libxxhash-dev        # checkpoint checksums (XXH3-64)
  libpcre2-dev         # the pre-tokenizer regexes of tokenizer.json (zerotrain/text)
  libicu-dev           # Unicode normalization (NFC, NFKC) of tokenizer.json (zerotrain/text)
  liburing-dev libaio-dev   # the io_uring and libaio engines of NVMe offload (zerotrain/io)
  fio                       # the second baseline of bench/io_bandwidth.sh (our IO engine against fio and dd)
  zlib1g-dev           # gzip-compressed IDX files (zerotrain/data/idx.cpp); libopenmpi-dev also pulls it in
  time                 # /usr/bin/time: the peak memory of zerotrain zero-to-fp32 (tests/cli/checkpoint_rss_test.sh)
  dataset-fashion-mnist   # the main job's data: Fashion-MNIST (IDX, gzip) in /usr/share/datasets/fashion-mnist
  bible-kjv-text bible-kjv   # a real text corpus for --dataset kjv (the King James Bible; `bible` prints it)
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- pinned Python environment with the torch wheel ----------------------------------------
VENV="$ZEROTRAIN_HOME/venv"
STAMP="$VENV/.zerotrain-torch-$TORCH_VERSION"
if [ ! -f "$STAMP" ]; then
  say "creating $VENV with torch==$TORCH_VERSION (a CUDA wheel of several GB; done once per machine)"
  mkdir -p "$ZEROTRAIN_HOME"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION"
  "$VENV/bin/python" -c "import torch; assert torch.__version__.startswith('$TORCH_VERSION'), torch.__version__"
  touch "$STAMP"
fi
# Packages added after the torch stamp was made: checked on every run, installed when missing.
if ! "$VENV/bin/python" -c "import safetensors, sys; sys.exit(safetensors.__version__ != '$SAFETENSORS_VERSION')" 2>/dev/null; then
  say "installing safetensors==$SAFETENSORS_VERSION into $VENV"
  "$VENV/bin/pip" install -q "safetensors==$SAFETENSORS_VERSION"
fi
if ! "$VENV/bin/python" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '$TENSORBOARD_VERSION')" 2>/dev/null; then
  say "installing tensorboard==$TENSORBOARD_VERSION into $VENV"
  "$VENV/bin/pip" install -q "tensorboard==$TENSORBOARD_VERSION"
fi
# The Python package's tests: pytest runs them, and they build transformers' GPT-2 and Llama
# from small configs (nothing is downloaded from a model hub).
if ! "$VENV/bin/python" -c "import pytest, transformers, sys; sys.exit(pytest.__version__ != '$PYTEST_VERSION' or transformers.__version__ != '$TRANSFORMERS_VERSION')" 2>/dev/null; then
  say "installing pytest==$PYTEST_VERSION transformers==$TRANSFORMERS_VERSION into $VENV"
  "$VENV/bin/pip" install -q "pytest==$PYTEST_VERSION" "transformers==$TRANSFORMERS_VERSION"
fi
# zerotrain.hf: HF's Trainer runs on accelerate; the tests also feed it a datasets.Dataset and
# train a byte-level BPE tokenizer with `tokenizers` (which transformers brings).
if ! "$VENV/bin/python" -c "import accelerate, datasets, sys; sys.exit(accelerate.__version__ != '$ACCELERATE_VERSION' or datasets.__version__ != '$DATASETS_VERSION')" 2>/dev/null; then
  say "installing accelerate==$ACCELERATE_VERSION datasets==$DATASETS_VERSION into $VENV"
  "$VENV/bin/pip" install -q "accelerate==$ACCELERATE_VERSION" "datasets==$DATASETS_VERSION"
fi
TORCH_DIR=$("$VENV/bin/python" - <<'PY'
import importlib.util, os
print(os.path.dirname(importlib.util.find_spec("torch").origin))
PY
)

# --- configure and build ------------------------------------------------------------------
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  say "configuring $BUILD_DIR ($BUILD_TYPE)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DZEROTRAIN_TORCH_DIR="$TORCH_DIR" -DZEROTRAIN_PYTHON="$VENV/bin/python" >/dev/null
fi
TARGETS=${ZEROTRAIN_BUILD_TARGETS:-all}
say "building $TARGETS"
# shellcheck disable=SC2086  # several targets are several words
cmake --build "$BUILD_DIR" -j "$(nproc)" --target $TARGETS

# The Python package (python/zerotrain and its extension module) into the venv, so that
# "$ZEROTRAIN_HOME/venv/bin/python -c 'import zerotrain'" works; only when it was built.
if [ -f "$BUILD_DIR/python/zerotrain/__init__.py" ] && ls "$BUILD_DIR"/python/zerotrain/_C.*.so >/dev/null 2>&1; then
  SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  cmake --install "$BUILD_DIR" --component python --prefix "$SITE" >/dev/null
  say "installed the zerotrain Python package into $SITE"
fi

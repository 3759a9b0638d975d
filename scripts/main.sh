#!/usr/bin/env bash
# The main job: set up, build, then show what this build is, check an example config, and
# run the collectives across two processes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${ZEROTRAIN_BUILD:-build}
"$BUILD_DIR/tools/zerotrain" report
"$BUILD_DIR/tools/zerotrain" config check examples/ds_config_zero2.json --world_size 2
# Two ranks under the launcher run every collective against reference values.
"$BUILD_DIR/tools/zerotrain" launch --nproc_per_node 2 -- "$BUILD_DIR/tests/comm_check"

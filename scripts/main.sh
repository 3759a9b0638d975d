#!/usr/bin/env bash
# The main job: set up, build, then show what this build is and check an example config.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${ZEROTRAIN_BUILD:-build}
"$BUILD_DIR/tools/zerotrain" report
"$BUILD_DIR/tools/zerotrain" config check examples/ds_config_zero2.json --world_size 2

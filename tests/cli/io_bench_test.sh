#!/usr/bin/env bash
# `zerotrain io-bench` end to end on a small file: the sweep, the baseline, the `aio` block
# to paste, the test file removed, and the errors for a bad path.
# Usage: io_bench_test.sh ZEROTRAIN_BINARY SCRATCH_DIR (a directory on a disk, not tmpfs)
set -uo pipefail
zt=$1
mkdir -p "$2"
tmp=$(mktemp -d "$2/io_bench_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

expect io_bench_small 0 "raw O_DIRECT" "best write: " "best read: " '"aio": {' '"block_size": 1048576,' \
  '"queue_depth": 4,' '"use_gds": false' -- \
  "$zt" io-bench --path "$tmp" --size_mib 16 --block_sizes 1M --queue_depths 4 --threads 1 --rounds 1
expect io_bench_all_engines 0 "threads      256K" '"aio": {' -- \
  "$zt" io-bench --path "$tmp" --size_mib 4 --block_sizes 256K --queue_depths 2 --threads 1 --rounds 1 --engine all
expect io_bench_write_only 0 "best write: " '"aio": {' -- \
  "$zt" io-bench --path "$tmp" --size_mib 4 --block_sizes 1M --queue_depths 2 --threads 1 --rounds 1 --write
# Nothing is left behind.
if [ -z "$(ls -A "$tmp")" ]; then passed=$((passed + 1)); else echo "FAIL io_bench_cleanup: $(ls "$tmp")"; failed=$((failed + 1)); fi

expect io_bench_missing_dir 7 "[io] --path $tmp/nope does not exist; create it or fix the path (is the disk mounted?)" -- \
  "$zt" io-bench --path "$tmp/nope" --size_mib 4
if [ -d /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ]; then
  expect io_bench_tmpfs 7 "is on tmpfs, which is memory, not a disk: put nvme_path on a disk" -- \
    "$zt" io-bench --path /dev/shm --size_mib 4
fi
expect report_io_engines 0 "IO engines (NVMe offload)" "threads ......" "yes: pread/pwrite" -- "$zt" report
expect io_bench_bad_engine 2 'unknown io engine "uring"; use auto, io_uring, libaio or threads' -- \
  "$zt" io-bench --path "$tmp" --engine uring
expect io_bench_bad_block 2 "--block_sizes: 1000 must be a multiple of 4K" -- \
  "$zt" io-bench --path "$tmp" --block_sizes 1000

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

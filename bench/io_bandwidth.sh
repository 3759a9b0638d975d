#!/usr/bin/env bash
# Our IO engine against dd with O_DIRECT on the same disk, interleaved over rounds: each round
# runs `dd bs=1M count=1024 oflag=direct conv=notrunc` (write), `dd iflag=direct` (read), fio
# (libaio, O_DIRECT, the same block size, queue depth and jobs as ours) when it is installed,
# and one `zerotrain io-bench` at the given settings. Prints each round and the median of the
# per-round ratios ours/dd and ours/fio for write and read (for docs/benchmarks.md).
#
#   bench/io_bandwidth.sh ZEROTRAIN DIR [ROUNDS] [ENGINE] [BLOCK_SIZE] [QUEUE_DEPTH] [THREADS]
#   e.g. bench/io_bandwidth.sh build/tools/zerotrain /mnt/nvme/tmp 3 auto 1M 16 1
#
# DIR must be on the disk to measure (not tmpfs). dd writes from a 1 GiB file of random
# bytes (zeros may be short-cut by the host), made once on /dev/shm when it has room, else
# in DIR and read once so that it is cached.
set -euo pipefail
zt=${1:?usage: io_bandwidth.sh ZEROTRAIN DIR [ROUNDS] [ENGINE] [BLOCK_SIZE] [QUEUE_DEPTH] [THREADS]}
dir=${2:?usage: io_bandwidth.sh ZEROTRAIN DIR [ROUNDS] [ENGINE] [BLOCK_SIZE] [QUEUE_DEPTH] [THREADS]}
rounds=${3:-3}
engine=${4:-auto}
block=${5:-1M}
depth=${6:-16}
threads=${7:-1}
mib=1024

work=$(mktemp -d "$dir/io_bandwidth_XXXXXX")
src=""
cleanup() { rm -rf "$work"; [ -n "$src" ] && [ "${src#/dev/shm/}" != "$src" ] && rm -f "$src"; true; }
trap cleanup EXIT

shm_free_kib=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1 || echo 0)
if [ "${shm_free_kib:-0}" -gt $((2 * mib * 1024)) ]; then
  src=/dev/shm/zerotrain_io_bandwidth_src.$$
else
  src=$work/src
fi
head -c $((mib << 20)) /dev/urandom >"$src"
cat "$src" >/dev/null   # cached, so that dd's write measures the disk, not the source

# GB/s (1e9 bytes) from dd's "N bytes (...) copied, S s, ..." line.
dd_gbps() { awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") { print $1 / $(i-1) / 1e9; exit } }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "disk: $dir; ${mib} MiB per transfer; $rounds interleaved rounds; zerotrain io-bench --engine $engine" \
     "--block_sizes $block --queue_depths $depth --threads $threads"
# fio's bandwidth in GB/s (1e9 bytes) for one direction, on the file dd wrote.
fio_gbps() {
  fio --name=zt --filename="$work/f" --rw="$1" --bs="$block" --iodepth="$depth" --numjobs="$threads" \
      --ioengine=libaio --direct=1 --size=${mib}M --group_reporting --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j[sys.argv[1]]["bw_bytes"] / 1e9)' \
      "$( [ "$1" = write ] && echo write || echo read )"
}
have_fio=$(command -v fio >/dev/null && echo 1 || echo 0)
printf "%-6s %10s %10s %10s %10s %10s %10s %11s %11s %11s %11s\n" round "dd write" "fio write" "ours write" \
  "dd read" "fio read" "ours read" "w ours/dd" "r ours/dd" "w ours/fio" "r ours/fio"
# dd overwrites a file written once beforehand, as io-bench overwrites its reserved file and
# offload its reserved swap files: a first write into a new file also pays for allocating
# its blocks, which would compare unlike with like.
dd if="$src" of="$work/f" bs=1M count=$mib oflag=direct status=none
wr=() rr=() fw=() fr=()
for r in $(seq 1 "$rounds"); do
  dw=$(dd if="$src" of="$work/f" bs=1M count=$mib oflag=direct conv=notrunc 2>&1 | dd_gbps)
  dr=$(dd if="$work/f" of=/dev/null bs=1M count=$mib iflag=direct 2>&1 | dd_gbps)
  if [ "$have_fio" = 1 ]; then xw=$(fio_gbps write); xr=$(fio_gbps read); else xw=nan xr=nan; fi
  out=$("$zt" io-bench --path "$work" --size_mib $mib --engine "$engine" --block_sizes "$block" \
        --queue_depths "$depth" --threads "$threads" --rounds 1)
  ow=$(awk '/^best write:/ { for (i = 1; i <= NF; i++) if ($i == "GB/s,") { print $(i-1); exit } }' <<<"$out")
  or=$(awk '/^best read:/ { for (i = 1; i <= NF; i++) if ($i == "GB/s,") { print $(i-1); exit } }' <<<"$out")
  w=$(awk -v a="$ow" -v b="$dw" 'BEGIN { print a / b }')
  rd=$(awk -v a="$or" -v b="$dr" 'BEGIN { print a / b }')
  xwr=$(awk -v a="$ow" -v b="$xw" 'BEGIN { print (b == "nan") ? "nan" : a / b }')
  xrr=$(awk -v a="$or" -v b="$xr" 'BEGIN { print (b == "nan") ? "nan" : a / b }')
  wr+=("$w") rr+=("$rd") fw+=("$xwr") fr+=("$xrr")
  printf "%-6s %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %11.2f %11.2f %11.2f %11.2f\n" "$r" "$dw" "$xw" "$ow" "$dr" "$xr" "$or" \
    "$w" "$rd" "$xwr" "$xrr"
done
printf "median ratio ours/dd: write %.2f, read %.2f\n" "$(printf '%s\n' "${wr[@]}" | median)" \
  "$(printf '%s\n' "${rr[@]}" | median)"
if [ "$have_fio" = 1 ]; then
  printf "median ratio ours/fio: write %.2f, read %.2f\n" "$(printf '%s\n' "${fw[@]}" | median)" \
    "$(printf '%s\n' "${fr[@]}" | median)"
fi

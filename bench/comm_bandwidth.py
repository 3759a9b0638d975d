#!/usr/bin/env python3
"""Runs bench/comm_bandwidth for every CPU backend at world sizes 2 and 4, beside this
host's memcpy bandwidth, and prints the tables of docs/benchmarks.md (with --write, puts
them there between the comm_bandwidth markers).

    python3 bench/comm_bandwidth.py [--build build] [--max_bytes N] [--write]

Everything runs in one invocation, interleaved, so the ratios compare like with like on a
noisy machine; the absolute figures vary from run to run and are not the result.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

from docs_tables import replace_between_markers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ["all_reduce", "reduce_scatter", "all_gather"]
BACKENDS = ["gloo", "mpi"]
WORLD_SIZES = [2, 4]
# The bucket sizes the ZeRO stages use (DeepSpeed's reduce_bucket_size and
# allgather_bucket_size default to 5e8 elements; DDP's buckets are 25 MiB): the default
# backend is chosen on these.
BUCKET_RANGE = (1 << 20, 64 << 20)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        line = re.sub(r"^\[rank \d+\] ", "", line)
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def size_name(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--max_bytes", type=int, default=256 << 20)
    ap.add_argument("--min_time_s", type=float, default=0.3)
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args()
    zt = os.path.join(args.build, "tools", "zerotrain")
    bench = os.path.join(args.build, "bench", "comm_bandwidth")
    common = ["--max_bytes", str(args.max_bytes), "--min_time_s", str(args.min_time_s)]

    memcpy = []
    results = {}
    memcpy += run([bench, "--memcpy"] + common)
    for ws in WORLD_SIZES:
        for backend in BACKENDS:
            print(f"running {backend} at world size {ws} ...", file=sys.stderr)
            rows = run([zt, "launch", "--nproc_per_node", str(ws), "--backend", backend, "--timeout_s", "600", "--",
                        bench] + common)
            for r in rows:
                results[(backend, ws, r["op"], r["nbytes"])] = r["busbw_GBps"]
    memcpy += run([bench, "--memcpy"] + common)
    # The better of the two memcpy passes (before and after) for each size.
    limit = {}
    for r in memcpy:
        limit[r["nbytes"]] = max(limit.get(r["nbytes"], 0), r["busbw_GBps"])

    sizes = sorted(limit)
    lines = []
    cols = [(b, ws) for ws in WORLD_SIZES for b in BACKENDS]
    for op in OPS:
        lines.append(f"**{op}**: bus bandwidth in GB/s, and in brackets its ratio to memcpy at that size\n")
        lines.append("| size | memcpy GB/s | " + " | ".join(f"{b} ws={ws}" for b, ws in cols) + " |")
        lines.append("|---:|---:|" + "---:|" * len(cols))
        for n in sizes:
            cells = []
            for b, ws in cols:
                v = results.get((b, ws, op, n))
                cells.append("–" if v is None else f"{v:.2f} ({v / limit[n]:.2f})")
            lines.append(f"| {size_name(n)} | {limit[n]:.1f} | " + " | ".join(cells) + " |")
        lines.append("")
    # The choice: geometric mean of mpi/gloo over the bucket range, per op and world size.
    lines.append(f"**mpi / gloo**, geometric mean of the bus-bandwidth ratio over {size_name(BUCKET_RANGE[0])}–"
                 f"{size_name(BUCKET_RANGE[1])} (the bucket sizes the stages use):\n")
    lines.append("| op | " + " | ".join(f"ws={ws}" for ws in WORLD_SIZES) + " |")
    lines.append("|---|" + "---:|" * len(WORLD_SIZES))
    verdict = []
    for op in OPS:
        cells = []
        for ws in WORLD_SIZES:
            ratios = [results[("mpi", ws, op, n)] / results[("gloo", ws, op, n)] for n in sizes
                      if BUCKET_RANGE[0] <= n <= BUCKET_RANGE[1] and ("mpi", ws, op, n) in results
                      and ("gloo", ws, op, n) in results]
            g = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
            verdict.append(g)
            cells.append(f"{g:.2f}×")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    overall = math.exp(sum(map(math.log, verdict)) / len(verdict))
    lines.append("")
    lines.append(f"Over all three collectives and both world sizes, mpi moves {overall:.2f}× the bytes per second "
                 f"of gloo at bucket sizes.")
    table = "\n".join(lines)
    print(table)
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "comm_bandwidth", table)


if __name__ == "__main__":
    main()

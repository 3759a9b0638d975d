#!/usr/bin/env python3
"""Runs bench/comm_bandwidth for every CPU transport (shared memory, gloo and mpi alone) at
world sizes 2 and 4, beside this host's memcpy bandwidth, and prints the tables of
docs/benchmarks.md (with --write, puts them there between the comm_bandwidth markers).

    python3 bench/comm_bandwidth.py [--build build] [--max_bytes N] [--rounds 3] [--write]

Every round runs every transport and world size once, in an order rotated by the round, with
a memcpy pass at its start; a figure is the median over rounds, and a ratio the median over
rounds of that round's ratio, so the ratios compare like with like on a noisy machine.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.rounds import run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ["all_reduce", "reduce_scatter", "all_gather"]
BACKENDS = ["shm", "gloo", "mpi"]
# gloo and mpi alone: without ZEROTRAIN_SHM=0 the ranks of a host would use shared memory.
BACKEND_ENV = {"shm": {}, "gloo": {"ZEROTRAIN_SHM": "0"}, "mpi": {"ZEROTRAIN_SHM": "0"}}
WORLD_SIZES = [2, 4]
# The bucket sizes the ZeRO stages use (DeepSpeed's reduce_bucket_size and
# allgather_bucket_size default to 5e8 elements; DDP's buckets are 25 MiB): the default
# backend is chosen on these.
BUCKET_RANGE = (1 << 20, 64 << 20)


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))).stdout
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


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--max_bytes", type=int, default=256 << 20)
    ap.add_argument("--min_time_s", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args()
    zt = os.path.join(args.build, "tools", "zerotrain")
    bench = os.path.join(args.build, "bench", "comm_bandwidth")
    common = ["--max_bytes", str(args.max_bytes), "--min_time_s", str(args.min_time_s)]

    configs = [(b, ws) for ws in WORLD_SIZES for b in BACKENDS]
    rounds = []   # per round: {(backend, ws, op, nbytes): row}, and ("memcpy", nbytes): row

    def memcpy_pass(r, order):   # each round's own baseline, at its start
        rounds.append({("memcpy", row["nbytes"]): row for row in run([bench, "--memcpy"] + common)})

    def run_config(config, r):
        backend, ws = config
        print(f"[round {r + 1}/{args.rounds}] {backend} at world size {ws} ...", file=sys.stderr, flush=True)
        rows = run([zt, "launch", "--nproc_per_node", str(ws), "--backend", backend, "--timeout_s", "600", "--",
                    bench] + common, BACKEND_ENV[backend])
        rounds[r].update({(backend, ws, row["op"], row["nbytes"]): row for row in rows})

    run_rounds(args.rounds, configs, run_config, memcpy_pass)

    def bw(key):
        return median([rd[key]["busbw_GBps"] for rd in rounds if key in rd])

    def ratio(a_key, b_key, field="busbw_GBps"):
        return median_ratio([rd.get(a_key) for rd in rounds], [rd.get(b_key) for rd in rounds], field)

    sizes = sorted({k[1] for k in rounds[0] if k[0] == "memcpy"})
    lines = [f"{cpu_line()}; {args.rounds} interleaved rounds, medians; fp32 tensors.\n"]
    for op in OPS:
        lines.append(f"**{op}**: bus bandwidth in GB/s, and in brackets its ratio to memcpy at that size\n")
        lines.append("| size | memcpy GB/s | " + " | ".join(f"{b} ws={ws}" for b, ws in configs) + " |")
        lines.append("|---:|---:|" + "---:|" * len(configs))
        for n in sizes:
            cells = []
            for b, ws in configs:
                v = bw((b, ws, op, n))
                q = ratio((b, ws, op, n), ("memcpy", n))
                cells.append("–" if v is None else f"{v:.2f} ({q:.2f})")
            lines.append(f"| {size_name(n)} | {bw(('memcpy', n)):.1f} | " + " | ".join(cells) + " |")
        lines.append("")

    # Against the targets: shm / memcpy from 1 MiB, shm / gloo from 16 MiB, 1 KiB latency.
    lines.append("**Shared memory against the targets** (the smallest per-size median ratio over the range):\n")
    lines.append("| op | ws | shm ÷ memcpy, 1 MiB and up (≥ 0.6) | shm ÷ gloo, 16 MiB and up (≥ 10) | "
                 "shm ÷ mpi, 1–64 MiB (geometric mean) |")
    lines.append("|---|---:|---:|---:|---:|")
    for op in OPS:
        for ws in WORLD_SIZES:
            vs_memcpy = [ratio(("shm", ws, op, n), ("memcpy", n)) for n in sizes if n >= 1 << 20]
            vs_gloo = [ratio(("shm", ws, op, n), ("gloo", ws, op, n)) for n in sizes if n >= 16 << 20]
            vs_mpi = [ratio(("shm", ws, op, n), ("mpi", ws, op, n)) for n in sizes
                      if BUCKET_RANGE[0] <= n <= BUCKET_RANGE[1]]
            vs_memcpy, vs_gloo, vs_mpi = ([v for v in xs if v is not None] for xs in (vs_memcpy, vs_gloo, vs_mpi))
            lines.append(f"| {op} | {ws} | {min(vs_memcpy):.2f} | {min(vs_gloo):.1f} | {geomean(vs_mpi):.2f} |"
                         if vs_memcpy and vs_gloo else f"| {op} | {ws} | – | – | – |")
    lines.append("")
    small = min(sizes)
    lat = {(b, ws): median([rd[(b, ws, "all_reduce", small)]["time_s"] * 1e6 for rd in rounds
                            if (b, ws, "all_reduce", small) in rd]) for b, ws in configs}
    lines.append(f"**Latency** of a {size_name(small)} all_reduce, µs (median over rounds; target ≤ 5 µs for shm at "
                 "world size 2):\n")
    lines.append("| " + " | ".join(f"{b} ws={ws}" for b, ws in configs) + " |")
    lines.append("|" + "---:|" * len(configs))
    lines.append("| " + " | ".join("–" if lat[c] is None else f"{lat[c]:.1f}" for c in configs) + " |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "comm_bandwidth", table)


if __name__ == "__main__":
    main()

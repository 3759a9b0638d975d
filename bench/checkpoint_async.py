#!/usr/bin/env python3
"""The training time a checkpoint save costs, synchronous against checkpoint.async_save, on
the checkpoint benchmark's 134M-parameter MLP at world 1 and 2 (bench/checkpoint_async.cpp
runs one mode per process). Each round runs the three modes interleaved (the order rotates
from round to round): no save, a synchronous save, an asynchronous one. A save's lost time is
its pass's time less the same round's pass without a save; the async pass ends only when
its checkpoint is published, so time the background write takes from training counts too.
The ratio is the median over rounds of async lost ÷ sync lost.

    python3 bench/checkpoint_async.py [--build build] [--rounds 3] [--worlds 1,2] [--write]

--write replaces the table in docs/benchmarks.md (between the checkpoint_async markers).
"""
import argparse
import json
import os
import subprocess
import tempfile

from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.rounds import run_rounds
from lib.stats import median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("none", "sync", "async")


def one(args, work, mode, world):
    exe = os.path.join(args.build, "bench", "checkpoint_async")
    out = subprocess.run([exe, "--mode", mode, "--dir", os.path.join(work, "ckpt"), "--world", str(world), "--stage",
                          str(args.stage), "--layers", str(args.layers), "--width", str(args.width), "--steps",
                          str(args.steps)], check=True, capture_output=True, text=True,
                         env=dict(os.environ, ZEROTRAIN_LOG_LEVEL="warning", OMP_NUM_THREADS="1")).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worlds", default="1,2")
    ap.add_argument("--stage", type=int, default=1)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    med = median
    params = args.layers * (args.width * args.width + args.width)
    rows, size = [], 0
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "build")) as work:
        for world in [int(w) for w in args.worlds.split(",")]:
            def show(r, got):
                print(json.dumps({"world": world, "round": r, **got}), flush=True)
            by_mode = run_rounds(args.rounds, MODES, lambda m, r: one(args, work, m, world), end_round=show)
            rounds = [{m: by_mode[m][r] for m in MODES} for r in range(args.rounds)]
            size = rounds[-1]["sync"]["bytes"]
            lost = {m: [g[m]["pass_s"] - g["none"]["pass_s"] for g in rounds] for m in ("sync", "async")}
            ratios = [a / s for a, s in zip(lost["async"], lost["sync"])]
            rows.append(f"| {world} | {med([g['none']['pass_s'] for g in rounds]):.1f} s | "
                        f"{med(lost['sync']):.2f} s | {med([g['sync']['blocked_s'] for g in rounds]):.2f} s | "
                        f"{med(lost['async']):.2f} s | {med([g['async']['blocked_s'] for g in rounds]):.2f} s | "
                        f"**{med(ratios):.2f}** | {', '.join(f'{x:.2f}' for x in ratios)} |")
    table = "\n".join([
        f"MLP of {args.layers} x Linear({args.width}, {args.width}) ({params / 1e6:.0f}M parameters), AdamW, fp32, "
        f"ZeRO stage {args.stage}, checkpoint {size / 1e9:.2f} GB, ranks as threads of one process; {args.steps} "
        f"steps per pass with a save after step 2, the pass timed after a warm pass; {args.rounds} interleaved "
        f"rounds; {cpu_line()}", "",
        "| ranks | pass without a save | sync: lost | sync: save call | async: lost | async: save call | "
        "async lost ÷ sync lost (median) | per round |",
        "|---|---:|---:|---:|---:|---:|---:|---|", *rows])
    print(table)
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "checkpoint_async", table)


if __name__ == "__main__":
    main()

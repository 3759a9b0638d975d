#!/usr/bin/env python3
"""The Python front end against DeepSpeed: the same training script (bench/py_train.py),
with `import deepspeed` (0.19.8, CPU accelerator) and with `import zerotrain as deepspeed`,
on transformers' GPT-2 at two sizes, 2 ranks on this machine, one intra-op thread per rank,
both started by `zerotrain launch`. Each round runs every setup once, zerotrain and
DeepSpeed back to back (the setups' order and which of the two goes first rotated by the
round); the table gives per setup the median over rounds of each round's
ratio (samples/s, peak RSS per rank, time from process start to the end of the first step).
--peer fsdp2 compares with PyTorch FSDP2 (fully_shard per block, the same script's model and
data) instead; use it with --stages 3.

    python3 bench/python_vs_deepspeed.py [--models 10m,124m] [--stages 0,1,2,3] [--dtypes fp32,bf16]
        [--rounds 3] [--steps 6] [--warmup 2] [--micro 4] [--peer deepspeed|fsdp2] [--write]

DeepSpeed runs from $ZEROTRAIN_HOME/bench-venv, made on first use (bench/lib/peer_envs.py): a
venv that sees the pinned venv's packages (torch among them, not downloaded again) and adds
deepspeed==0.19.8.
--write puts the table into docs/benchmarks.md between the python_vs_<peer>:<models>[:<dtypes>]
markers (the dtypes when not fp32 alone).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from lib.cpu import cpu_line
from lib.docs_tables import write_block
from lib.peer_envs import PINNED_PYTHON as PINNED, ensure_ds_venv
from lib.rounds import rotated, run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORLD = 2


def run(impl, python, model, stage, dtype, steps, tmp, micro=4, warmup=2):
    out = os.path.join(tmp, f"{impl}-{model}-{stage}-{dtype}")
    cmd = [PINNED, "-m", "zerotrain.launcher", "--nproc_per_node", str(WORLD),
           "--", python, os.path.join(ROOT, "bench", "py_train.py"), "--impl", impl, "--model", model,
           "--stage", str(stage), "--dtype", dtype, "--steps", str(steps), "--micro", str(micro),
           "--warmup", str(warmup), "--out", out]
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(ROOT, "build", "python"))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if "Error" in l or "error" in l]
        return {"error": (lines[-1] if lines else proc.stderr[-300:]).strip()[:200]}
    ranks = [json.load(open(f"{out}.{r}")) for r in range(WORLD)]
    return {"samples_per_s": ranks[0]["samples_per_s"], "first_step_s": max(r["first_step_s"] for r in ranks),
            "peak_rss_bytes": max(r["peak_rss_bytes"] for r in ranks), "version": ranks[0]["version"],
            "loss0": statistics.mean(r["losses"][0] for r in ranks)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="10m,124m")
    ap.add_argument("--stages", default="0,1,2,3")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--peer", choices=["deepspeed", "fsdp2"], default="deepspeed")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    peer_python = ensure_ds_venv() if args.peer == "deepspeed" else PINNED
    peer_name = {"deepspeed": "DeepSpeed", "fsdp2": "FSDP2"}[args.peer]
    setups = [(m, int(s), d) for m in args.models.split(",") for d in args.dtypes.split(",")
              for s in args.stages.split(",")]
    pythons = {"zerotrain": PINNED, args.peer: peer_python}
    with tempfile.TemporaryDirectory() as tmp:
        def run_pair(setup, rnd):   # (zerotrain, peer), back to back
            got = {impl: run(impl, pythons[impl], *setup, args.steps, tmp, args.micro, args.warmup)
                   for impl in rotated(pythons, rnd)}
            print(f"round {rnd + 1} {setup}: zerotrain {got['zerotrain']}\n    {args.peer} {got[args.peer]}",
                  file=sys.stderr, flush=True)
            return got["zerotrain"], got[args.peer]
        rows = run_rounds(args.rounds, setups, run_pair)
    lines = [f"CPU: {cpu_line()}. World size {WORLD} (`zerotrain launch`), 1 intra-op thread per rank, "
             f"{args.steps} timed steps after {args.warmup} warm-up steps, micro-batch {args.micro} × 128 tokens, AdamW; "
             f"{args.rounds} rounds, interleaved. Ratios are zerotrain / {peer_name}, the median over rounds.", "",
             "| model | dtype | stage | samples/s ratio | peak RSS ratio | first step ratio | zerotrain samples/s | "
             f"{peer_name} samples/s | zerotrain first step | {peer_name} first step |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (model, stage, dtype), pairs in rows.items():
        ok = [(z, d) for z, d in pairs if "error" not in z and "error" not in d]
        if not ok:
            err = next((p.get("error") for pair in pairs for p in pair if "error" in p), "?")
            lines.append(f"| {model} | {dtype} | {stage} | n/a ({err}) | | | | | | |")
            continue
        zts, peers = [z for z, _ in ok], [d for _, d in ok]
        lines.append(
            f"| {model} | {dtype} | {stage} | {median_ratio(zts, peers, 'samples_per_s'):.2f} | "
            f"{median_ratio(zts, peers, 'peak_rss_bytes'):.2f} | "
            f"{median_ratio(zts, peers, 'first_step_s'):.2f} | "
            f"{median(z['samples_per_s'] for z, _ in ok):.3g} | "
            f"{median(d['samples_per_s'] for _, d in ok):.3g} | "
            f"{median(z['first_step_s'] for z, _ in ok):.1f} s | "
            f"{median(d['first_step_s'] for _, d in ok):.1f} s |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_block(f"python_vs_{args.peer}:{args.models}" + ("" if args.dtypes == "fp32" else f":{args.dtypes}"), text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checkpoint save and load throughput against the disk's raw sequential bandwidth, measured
side by side in one run by bench/checkpoint_io (see its header), and consolidation against
DeepSpeed's zero_to_fp32.py (peak RSS and time), interleaved over rounds (the order rotated
by the round). Prints markdown tables; a ratio is the median over rounds of that round's ratio.

    python3 bench/checkpoint_bench.py [--build build] [--rounds 3] [--layers 8] [--width 4096] [--skip io,...] [--write]

--write replaces the tables in docs/benchmarks.md (between the checkpoint_io and
checkpoint_consolidate markers, and checkpoint_import's: `zerotrain checkpoint import-deepspeed`
against zero_to_fp32.py on DeepSpeed's checkpoint). The consolidation and import parts need DeepSpeed: it uses
$ZEROTRAIN_HOME/bench-venv (created on first use: bench/lib/peer_envs.py).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.peer_envs import DEEPSPEED_VERSION, ensure_zero_to_fp32_deps
from lib.rounds import run_rounds
from lib.stats import median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def io_rounds(args, work, world, stage):
    exe = os.path.join(args.build, "bench", "checkpoint_io")
    out = subprocess.run([exe, "--dir", os.path.join(work, "io"), "--layers", str(args.layers), "--width",
                          str(args.width), "--world", str(world), "--stage", str(stage), "--rounds",
                          str(args.rounds + 1)], check=True, capture_output=True, text=True,
                         env=dict(os.environ, ZEROTRAIN_LOG_LEVEL="warning", OMP_NUM_THREADS="1")).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return rows[1:]   # round 0 is a warm-up: first-touch page faults on both sides


def io_table(args, results):
    gb = 1e9
    med = median
    params = args.layers * (args.width * args.width + args.width)
    size = results[0][2][0]["bytes"]
    lines = [f"MLP of {args.layers} x Linear({args.width}, {args.width}) ({params / 1e6:.0f}M parameters), AdamW, "
             f"fp32, checkpoint {size / gb:.2f} GB (fp32 master + 2 moments), ranks as threads of one process; "
             f"{args.rounds} interleaved rounds after a warm-up round; page cache evicted before every read; "
             f"{cpu_line()}", "",
             "| ranks, stage | | zerotrain (median) | raw disk, same bytes (median) | zerotrain / raw (median of rounds) | per round |",
             "|---|---|---:|---:|---:|---|"]
    for world, stage, rows in results:
        for what, ours, raw in (("save (write + fsync)", "save_s", "raw_write_s"),
                                ("load (read + checksums" + (" + re-gather" if stage > 0 else "") + ")", "load_s",
                                 "raw_read_s")):
            ratios = [r[raw] / r[ours] for r in rows]
            lines.append(f"| {world}, {stage} | {what} | {size / gb / med([r[ours] for r in rows]):.2f} GB/s | "
                         f"{size / gb / med([r[raw] for r in rows]):.2f} GB/s | {med(ratios):.2f} | "
                         f"{', '.join(f'{x:.2f}' for x in ratios)} |")
    return "\n".join(lines)


# Runs a command in a fresh child and returns (seconds, peak RSS bytes of that command).
MEASURE = """import resource, subprocess, sys, time
t = time.monotonic(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)"""


def measured(cmd, env=None):
    out = subprocess.run([sys.executable, "-c", MEASURE] + cmd, check=True, capture_output=True, text=True, env=env)
    seconds, rss = out.stdout.split()
    return float(seconds), int(rss)


def ds_checkpoint(args, work, ds_python, ds_env):
    """DeepSpeed's checkpoint of the MLP (bench/ds_checkpoint.py), made once per run."""
    ds_ckpt = os.path.join(work, "ds_ckpt")
    if not os.path.isdir(ds_ckpt):
        subprocess.run([ds_python, os.path.join(ROOT, "bench", "ds_checkpoint.py"), "--save_to", ds_ckpt, "--stage",
                        str(args.consolidate_stage), "--layers", str(args.layers), "--width", str(args.width)],
                       check=True, capture_output=True, env=ds_env)
    return ds_ckpt


def import_rounds(args, work):
    """zerotrain checkpoint import-deepspeed (weights and Adam's states, into zerotrain's format)
    against DeepSpeed's zero_to_fp32.py (weights only) on the same DeepSpeed checkpoint."""
    ds_python = ensure_zero_to_fp32_deps()
    ds_env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    ds_ckpt = ds_checkpoint(args, work, ds_python, ds_env)
    zt = os.path.join(args.build, "tools", "zerotrain")
    return interleaved(args, work, "import_", lambda outs: [
        ("zt", [zt, "checkpoint", "import-deepspeed", ds_ckpt, outs["zt"]], None),
        ("ds", [ds_python, os.path.join(ds_ckpt, "zero_to_fp32.py"), ds_ckpt, outs["ds"], "--safe_serialization"],
         ds_env)], with_bytes=True)


def interleaved(args, work, prefix, make_runs, with_bytes=False):
    """args.rounds rounds of make_runs(outs) (name, command, env), the order rotated by the
    round; each row maps a name to (seconds, peak RSS[, bytes written to its out dir])."""
    def outs_of(r):
        return {name: os.path.join(work, f"{prefix}{name}{r}") for name in ("zt", "light", "ds")}

    def run_one(name, r):
        outs = outs_of(r)
        cmd, env = next((c, e) for n, c, e in make_runs(outs) if n == name)
        return measured(cmd, env) + ((du_bytes(outs[name]),) if with_bytes else ())

    def clean(r, _):
        for d in outs_of(r).values():
            subprocess.run(["rm", "-rf", d], check=True)
    names = [name for name, _, _ in make_runs(outs_of(0))]
    results = run_rounds(args.rounds, names, run_one, end_round=clean)
    return [{name: results[name][r] for name in names} for r in range(args.rounds)]


def du_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def import_table(args, rows, ds_version):
    med = median
    mib, gb = 1 << 20, 1e9
    params = args.layers * (args.width * args.width + args.width)
    ratio = lambda i: [r["zt"][i] / r["ds"][i] for r in rows]
    return "\n".join([
        f"DeepSpeed {ds_version}'s checkpoint of an MLP of {args.layers} x Linear({args.width}, {args.width}) "
        f"({params / 1e6:.0f}M parameters), torch.optim.AdamW given to deepspeed.initialize, ZeRO stage "
        f"{args.consolidate_stage}, 1 rank, one step; {args.rounds} interleaved rounds; {cpu_line()}", "",
        "| | writes | peak RSS (median) | time (median) | RSS / DeepSpeed's (median; per round) | time / DeepSpeed's |",
        "|---|---|---:|---:|---:|---:|",
        f"| `zerotrain checkpoint import-deepspeed` | zerotrain's checkpoint: fp32 masters and Adam's states, "
        f"{med([r['zt'][2] for r in rows]) / gb:.2f} GB | {med([r['zt'][1] for r in rows]) / mib:.0f} MiB | "
        f"{med([r['zt'][0] for r in rows]):.1f} s | {med(ratio(1)):.3f} ({', '.join(f'{x:.3f}' for x in ratio(1))}) | "
        f"{med(ratio(0)):.2f} ({', '.join(f'{x:.2f}' for x in ratio(0))}) |",
        f"| DeepSpeed `zero_to_fp32.py --safe_serialization` | the fp32 weights, {med([r['ds'][2] for r in rows]) / gb:.2f} GB | "
        f"{med([r['ds'][1] for r in rows]) / mib:.0f} MiB | {med([r['ds'][0] for r in rows]):.1f} s | 1 | 1 |"])


def consolidate_rounds(args, work):
    """zerotrain zero-to-fp32 and DeepSpeed's zero_to_fp32.py on checkpoints of the same model."""
    ds_python = ensure_zero_to_fp32_deps()
    ds_env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    zt_ckpt = os.path.join(work, "zt_ckpt")
    model = ["--layers", str(args.layers), "--width", str(args.width)]
    subprocess.run([os.path.join(args.build, "bench", "checkpoint_io"), "--save_to", zt_ckpt, "--world", "1",
                    "--stage", str(args.consolidate_stage)] + model, check=True, capture_output=True,
                   env=dict(os.environ, ZEROTRAIN_LOG_LEVEL="warning"))
    ds_ckpt = ds_checkpoint(args, work, ds_python, ds_env)
    zt = os.path.join(args.build, "tools", "zerotrain")
    light = os.path.join(args.build, "tools", "zerotrain-checkpoint")
    return interleaved(args, work, "consolidated_", lambda outs: [
        ("zt", [zt, "zero-to-fp32", zt_ckpt, outs["zt"]], None),
        ("light", [light, "zero-to-fp32", zt_ckpt, outs["light"]], None),
        ("ds", [ds_python, os.path.join(ds_ckpt, "zero_to_fp32.py"), ds_ckpt, outs["ds"], "--safe_serialization"],
         ds_env)])


def consolidate_table(args, rows, ds_version):
    med = median
    mib = 1 << 20
    params = args.layers * (args.width * args.width + args.width)
    ratio = lambda who, i: [r[who][i] / r["ds"][i] for r in rows]
    largest = args.width * args.width * 4
    return "\n".join([
        f"MLP of {args.layers} x Linear({args.width}, {args.width}) ({params / 1e6:.0f}M parameters, fp32 weights "
        f"{params * 4 / 1e9:.2f} GB, largest tensor {largest / mib:.0f} MiB), AdamW, ZeRO stage "
        f"{args.consolidate_stage}, 1 rank, one step, then consolidated to one fp32 safetensors file; "
        f"deepspeed {ds_version}; {args.rounds} interleaved rounds; {cpu_line()}", "",
        "| | peak RSS (median) | time (median) | RSS / DeepSpeed's (median of rounds; per round) | time / DeepSpeed's |",
        "|---|---:|---:|---:|---:|"] + [
        f"| {label} | {med([r[who][1] for r in rows]) / mib:.0f} MiB | {med([r[who][0] for r in rows]):.1f} s | "
        + (f"{med(ratio(who, 1)):.3f} ({', '.join(f'{x:.3f}' for x in ratio(who, 1))}) | "
           f"{med(ratio(who, 0)):.2f} ({', '.join(f'{x:.2f}' for x in ratio(who, 0))}) |" if who != "ds" else "1 | 1 |")
        for who, label in (("zt", "`zerotrain zero-to-fp32`"),
                           ("light", "`zerotrain-checkpoint zero-to-fp32` (no LibTorch)"),
                           ("ds", "DeepSpeed `zero_to_fp32.py --safe_serialization`"))])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--setups", default="1:0,2:1", help="ranks:stage pairs, comma-separated")
    ap.add_argument("--consolidate_stage", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma-separated parts to leave out: io, consolidate, import")
    ap.add_argument("--write", action="store_true", help="replace the tables in docs/benchmarks.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as work:
        tables = {}
        skip = set(args.skip.split(","))
        if "io" not in skip:
            results = []
            for setup in args.setups.split(","):
                world, stage = (int(x) for x in setup.split(":"))
                results.append((world, stage, io_rounds(args, work, world, stage)))
            tables["checkpoint_io"] = io_table(args, results)
            print(tables["checkpoint_io"] + "\n")
        if "consolidate" not in skip:
            tables["checkpoint_consolidate"] = consolidate_table(args, consolidate_rounds(args, work), DEEPSPEED_VERSION)
            print(tables["checkpoint_consolidate"])
        if "import" not in skip:
            tables["checkpoint_import"] = import_table(args, import_rounds(args, work), DEEPSPEED_VERSION)
            print(tables["checkpoint_import"])
    if args.write:
        for name, table in tables.items():
            replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), name, table)


if __name__ == "__main__":
    sys.exit(main())

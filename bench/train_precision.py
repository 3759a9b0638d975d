#!/usr/bin/env python3
"""`zerotrain train` in fp32, bf16 and fp16 side by side: the built-in GPT at ZeRO stage 2 on
2 ranks, the three precisions interleaved over several rounds in one invocation (the order
rotated by the round). Prints a markdown table of samples/s and model_state_bytes per rank
with their ratios to fp32 (the median over rounds of each round's ratio), and the final loss.

    python3 bench/train_precision.py [--build build] [--preset small] [--steps 30] [--rounds 3] [--write]

--write also replaces the table in docs/benchmarks.md (between the train_precision markers).
"""
import argparse
import json
import os
import subprocess
import tempfile

from lib.docs_tables import replace_between_markers
from lib.rounds import run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRECISIONS = ("fp32", "bf16", "fp16")


def run(args, precision, out_dir, round_index):
    zt = os.path.join(args.build, "tools", "zerotrain")
    config = json.load(open(os.path.join(ROOT, "examples", "ds_config_train_zero2.json")))
    del config["scheduler"]
    config_path = os.path.join(out_dir, "zero2.json")
    json.dump(config, open(config_path, "w"))
    metrics = os.path.join(out_dir, f"{precision}-{round_index}.jsonl")
    flags = [] if precision == "fp32" else [f"--{precision}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([zt, "launch", "--nproc_per_node", "2", "--backend", args.backend, "--", zt, "train",
                    "--model", "gpt", "--model_config", f"preset={args.preset}", "--deepspeed", config_path,
                    "--per_device_train_batch_size", str(args.micro), "--learning_rate", "3e-3",
                    "--max_grad_norm", "0", "--max_steps", str(args.steps), "--logging_steps", str(args.steps),
                    "--seed", "3", "--metrics_file", metrics, "--overwrite_output_dir"] + flags, check=True, capture_output=True, env=env)
    rows = [json.loads(line) for line in open(metrics)]
    step = [r for r in rows if "loss" in r][-1]
    return dict(samples_per_s=rows[-1]["samples_per_s"], state=max(step["model_state_bytes"]),
                rss=max(step["peak_rss_bytes"]), loss=step["loss"], skipped=step["skipped"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--preset", default="small")
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--write", action="store_true", help="replace the table in docs/benchmarks.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        results = run_rounds(args.rounds, PRECISIONS, lambda p, r: run(args, p, out_dir, r))
    mib = 1 << 20
    lines = [f"gpt preset {args.preset}, ZeRO stage 2, 2 ranks x micro-batch {args.micro}, {args.steps} steps, AdamW, "
             f"{args.backend}, 1 thread per rank, {args.rounds} interleaved rounds", "",
             "| precision | samples/s (median) | × fp32 | model state / rank | × fp32 | peak RSS / rank | "
             "final loss | skipped |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p in PRECISIONS:
        rs = results[p]
        speed = median(r["samples_per_s"] for r in rs)
        speed_ratio = median_ratio(rs, results["fp32"], "samples_per_s")
        state = rs[0]["state"]
        lines.append(f"| {p} | {speed:.1f} | {speed_ratio:.2f} | {state / mib:.1f} MiB | "
                     f"{state / results['fp32'][0]['state']:.2f} | {max(r['rss'] for r in rs) / mib:.0f} MiB | "
                     f"{rs[-1]['loss']:.4f} | {rs[-1]['skipped']} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "train_precision", table)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The Python front end against the C++ command on one model: `zerotrain train --model gpt`
and bench/py_train.py's `import zerotrain as deepspeed` script on the same GPT in Python
(bench/lib/gpt_py.py: the same layers, the same synthetic sequences), with one ds_config file,
2 ranks under `zerotrain launch` on gloo, one intra-op thread per rank. Both time the same
steps: the second half of the run (`zerotrain train` logs every `--steps` steps, and its
second log's samples/s covers exactly those). Each round runs every stage once, the two
back to back (the stages' order and which of the two goes first rotated by the round); the
table gives the median over rounds of each round's ratio Python / C++.

    ~/.cache/zerotrain/venv/bin/python bench/python_vs_cli.py [--preset small] [--stages 0,3]
        [--rounds 3] [--steps 10] [--micro 8] [--write]

--write puts the table into docs/benchmarks.md between the python_vs_cli markers.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from lib.cpu import cpu_line
from lib.docs_tables import write_block
from lib.peer_envs import PINNED_PYTHON as PINNED
from lib.rounds import rotated, run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORLD = 2
LR = 3e-3


def config(stage, micro):
    return {"train_batch_size": micro * WORLD, "train_micro_batch_size_per_gpu": micro,
            "gradient_accumulation_steps": 1, "gradient_clipping": 0.0,
            "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": 0.0}},
            "zero_optimization": {"stage": stage}}


def env():
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.join(ROOT, "build", "python"))


def run_cli(zt, cfg_path, args, tmp, stage):
    metrics = os.path.join(tmp, f"cli{stage}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([zt, "launch", "--nproc_per_node", str(WORLD), "--backend", "gloo", "--", zt, "train",
                    "--model", "gpt", "--model_config", f"preset={args.preset}", "--deepspeed", cfg_path,
                    "--per_device_train_batch_size", str(args.micro), "--learning_rate", str(LR),
                    "--weight_decay", "0", "--max_grad_norm", "0", "--max_steps", str(2 * args.steps),
                    "--logging_steps", str(args.steps), "--seed", "3", "--metrics_file", metrics, "--overwrite_output_dir"],
                   check=True, capture_output=True, env=env(), timeout=1800)
    rows = [json.loads(line) for line in open(metrics)]
    second = [r for r in rows if r.get("step") == 2 * args.steps and "loss" in r][-1]
    return {"samples_per_s": second["samples_per_s"], "peak_rss_bytes": max(second["peak_rss_bytes"])}


def run_python(cfg_path, args, tmp, stage):
    out = os.path.join(tmp, f"py{stage}")
    subprocess.run([PINNED, "-m", "zerotrain.launcher", "--nproc_per_node", str(WORLD), "--", PINNED,
                    os.path.join(ROOT, "bench", "py_train.py"), "--impl", "zerotrain", "--model", f"gpt-{args.preset}",
                    "--config", cfg_path, "--micro", str(args.micro), "--warmup", str(args.steps),
                    "--steps", str(args.steps), "--out", out], check=True, capture_output=True, env=env(),
                   timeout=1800)
    ranks = [json.load(open(f"{out}.{r}")) for r in range(WORLD)]
    return {"samples_per_s": ranks[0]["samples_per_s"], "peak_rss_bytes": max(r["peak_rss_bytes"] for r in ranks)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--preset", default="small")
    ap.add_argument("--stages", default="0,3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    zt = os.path.join(args.build, "tools", "zerotrain")
    stages = [int(s) for s in args.stages.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        def run_pair(stage, rnd):   # (python, cli), back to back
            path = os.path.join(tmp, f"zero{stage}.json")
            json.dump(config(stage, args.micro), open(path, "w"))
            runs = {"cli": lambda: run_cli(zt, path, args, tmp, stage),
                    "python": lambda: run_python(path, args, tmp, stage)}
            got = {side: runs[side]() for side in rotated(runs, rnd)}
            print(f"round {rnd + 1} stage {stage}: python {got['python']} cli {got['cli']}", file=sys.stderr,
                  flush=True)
            return got["python"], got["cli"]
        ratios = run_rounds(args.rounds, stages, run_pair)
    lines = [f"CPU: {cpu_line()}. The built-in GPT, preset {args.preset}, world size {WORLD} on gloo, 1 intra-op "
             f"thread per rank, micro-batch {args.micro}, AdamW; {args.steps} timed steps after {args.steps}; "
             f"{args.rounds} rounds, interleaved. Ratios are Python / C++ (`zerotrain train`), the median over "
             "rounds.", "",
             "| stage | samples/s ratio | peak RSS ratio | Python samples/s | C++ samples/s | Python peak RSS | "
             "C++ peak RSS |", "|---|---|---|---|---|---|---|"]
    mib = 1 << 20
    for stage, pairs in ratios.items():
        pys, clis = [p for p, _ in pairs], [c for _, c in pairs]
        lines.append(f"| {stage} | {median_ratio(pys, clis, 'samples_per_s'):.3f} | "
                     f"{median_ratio(pys, clis, 'peak_rss_bytes'):.2f} | "
                     f"{median(p['samples_per_s'] for p, _ in pairs):.3g} | "
                     f"{median(c['samples_per_s'] for _, c in pairs):.3g} | "
                     f"{median(p['peak_rss_bytes'] for p, _ in pairs) / mib:.0f} MiB | "
                     f"{median(c['peak_rss_bytes'] for _, c in pairs) / mib:.0f} MiB |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_block("python_vs_cli", text)


if __name__ == "__main__":
    main()

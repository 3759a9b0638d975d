#!/usr/bin/env python3
"""`zerotrain train` (ZeRO stages 0, 1, 2) against PyTorch DDP training the same GPT on the
same synthetic data with the same optimizer, 2 ranks on this machine, side by side in one
run, both over Gloo. Prints a markdown table: samples/s and per-rank memory, and the ratios.

    python3 bench/train_vs_ddp.py [--build build] [--preset small] [--steps 40]

The Python side needs the pinned torch wheel: run it with $ZEROTRAIN_HOME/venv/bin/python
(scripts/setup.sh creates it), e.g. ~/.cache/zerotrain/venv/bin/python bench/train_vs_ddp.py.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from lib.gpt_py import PRESETS, make_gpt, synthetic_batch
from lib.ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ddp_worker(rank, world, port, preset, micro, steps, lr, seed, out_path):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    cfg = PRESETS[preset]

    torch.manual_seed(seed)
    model = nn.parallel.DistributedDataParallel(make_gpt(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    vocab = cfg["vocab_size"]

    start = time.perf_counter()
    for step in range(steps):
        x, y = synthetic_batch(cfg, seed, step * micro * world + rank * micro, micro)
        loss = F.cross_entropy(model(x).view(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    state = sum(p.numel() * 4 * 4 for p in model.parameters())  # each parameter once (the tied head)  # params, grads, exp_avg, exp_avg_sq
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(dict(samples_per_s=steps * micro * world / elapsed, state=state, rss=rss, loss=loss.item()), f)
    dist.destroy_process_group()


def run_ddp(args, out_dir):
    import torch.multiprocessing as mp
    out = os.path.join(out_dir, "ddp.json")
    mp.spawn(ddp_worker, args=(2, free_port(), args.preset, args.micro, args.steps, 3e-3, 3, out), nprocs=2)
    return json.load(open(out))


def run_zerotrain(args, stage, out_dir):
    zt = os.path.join(args.build, "tools", "zerotrain")
    config = json.load(open(os.path.join(ROOT, "examples", "ds_config_train_zero2.json")))
    config["zero_optimization"]["stage"] = stage
    config["scheduler"] = None
    del config["scheduler"]
    path = os.path.join(out_dir, f"zero{stage}.json")
    json.dump(config, open(path, "w"))
    metrics = os.path.join(out_dir, f"zero{stage}.jsonl")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([zt, "launch", "--nproc_per_node", "2", "--backend", "gloo", "--", zt, "train", "--model", "gpt",
                    "--model_config", f"preset={args.preset}", "--deepspeed", path,
                    "--per_device_train_batch_size", str(args.micro), "--learning_rate", "3e-3",
                    "--max_grad_norm", "0", "--max_steps", str(args.steps), "--logging_steps", str(args.steps),
                    "--seed", "3", "--metrics_file", metrics, "--overwrite_output_dir"], check=True, capture_output=True, env=env)
    rows = [json.loads(l) for l in open(metrics)]
    step = [r for r in rows if "loss" in r][-1]
    return dict(samples_per_s=rows[-1]["samples_per_s"], state=max(step["model_state_bytes"]),
                rss=max(step["peak_rss_bytes"]), loss=step["loss"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--preset", default="small")
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        results = {"PyTorch DDP (Python)": run_ddp(args, out_dir)}
        for stage in (0, 1, 2):
            results[f"zerotrain ZeRO-{stage}"] = run_zerotrain(args, stage, out_dir)
    ddp = results["PyTorch DDP (Python)"]
    mib = 1 << 20
    print(f"gpt preset {args.preset}, 2 ranks x micro-batch {args.micro}, {args.steps} steps, AdamW, gloo, "
          f"1 thread per rank\n")
    print("| run | samples/s | × DDP | model state / rank | × DDP | peak RSS / rank | final loss |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['samples_per_s']:.1f} | {r['samples_per_s'] / ddp['samples_per_s']:.2f} | "
              f"{r['state'] / mib:.1f} MiB | {r['state'] / ddp['state']:.2f} | {r['rss'] / mib:.0f} MiB | "
              f"{r['loss']:.3f} |")


if __name__ == "__main__":
    main()

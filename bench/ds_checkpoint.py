#!/usr/bin/env python3
"""Saves a DeepSpeed checkpoint of bench/checkpoint_io's MLP (layers x Linear(width, width),
AdamW, fp32, one optimizer step) for bench/checkpoint_bench.py to consolidate with
DeepSpeed's zero_to_fp32.py. Runs in the DeepSpeed venv with DS_ACCELERATOR=cpu, as one rank.

    python ds_checkpoint.py --save_to DIR [--layers 8] [--width 4096] [--stage 2]
"""
import argparse
import os

import deepspeed
import torch

from lib.ports import free_port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--save_to", required=True)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--stage", type=int, default=2)
    args = ap.parse_args()
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", str(free_port()))):
        os.environ.setdefault(key, value)
    torch.manual_seed(1)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width) for _ in range(args.layers)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    config = {"train_batch_size": 2, "zero_optimization": {"stage": args.stage}}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    loss = engine(torch.randn(2, args.width)).square().mean()
    engine.backward(loss)
    engine.step()
    engine.save_checkpoint(args.save_to)


if __name__ == "__main__":
    main()

"""One rank of the zero.Init test: a stack of Linear layers built inside zero.Init (or not,
with --whole), the peak memory that building it took, then training at ZeRO stage 3."""

import argparse
import json
import os
import resource
import sys

import torch
import torch.nn.functional as F

import zerotrain as deepspeed


class Stack(torch.nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.frozen = torch.nn.Linear(width, width)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.frozen(x)


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--whole", action="store_true", help="build without zero.Init")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 2 * world,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
           "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
    torch.manual_seed(0)
    # Everything torch and the engine need before building, so that the peak below is the model's.
    torch.nn.Linear(8, 8)(torch.zeros(1, 8))
    if args.whole:
        deepspeed.init_distributed()
        before = peak_rss_bytes()
        model = Stack(args.width, args.depth)
    else:
        with deepspeed.zero.Init(config_dict_or_path=cfg):   # joins the job first
            before = peak_rss_bytes()
            model = Stack(args.width, args.depth)
        model.frozen.requires_grad_(False)
        # A change after the build, written by rank 0 and taken by every rank.
        with deepspeed.zero.GatheredParameters([model.layers[0].bias], modifier_rank=0), torch.no_grad():
            if rank == 0:
                model.layers[0].bias.fill_(0.01)
    build_peak = peak_rss_bytes() - before   # what building took, on top of what the process held
    freed = all(p.untyped_storage().nbytes() == 0 for p in model.parameters())
    if args.whole:
        model.frozen.requires_grad_(False)
        with torch.no_grad():
            model.layers[0].bias.fill_(0.01)
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    engine, *_ = deepspeed.initialize(model=model, config=cfg)
    with deepspeed.zero.GatheredParameters([model.layers[0].bias]):
        bias0 = model.layers[0].bias[:4].tolist()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.steps * 2 * world, args.width, generator=g)
    losses = []
    for s in range(args.steps):
        start = (s * world + rank) * 2
        out = engine(x[start:start + 2])
        loss = F.mse_loss(out, torch.zeros_like(out))
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump({"rank": rank, "build_peak": build_peak, "model_bytes": model_bytes, "freed": freed,
                   "losses": losses, "bias0": bias0, "frozen_whole": model.frozen.weight.untyped_storage().nbytes()},
                  f)


if __name__ == "__main__":
    main()

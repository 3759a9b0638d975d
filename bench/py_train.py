"""One rank of the Python front-end benchmark: the same DeepSpeed training script, run with
`import deepspeed` (--impl deepspeed) or `import zerotrain as deepspeed` (--impl zerotrain),
on a transformers GPT-2 built from a config (nothing downloaded) and synthetic tokens; or
the same model and data under PyTorch FSDP2 (--impl fsdp2: fully_shard on every block, then
the root, plain AdamW). --model gpt-<preset> trains the `zerotrain train --model gpt` model
instead (bench/lib/gpt_py.py: the same layers, the same synthetic sequences), so that the Python
front end can be compared with the C++ command on one model; --config then gives the
ds_config both read.
Writes this rank's figures as JSON to --out.<rank>: the time from process start to the end
of the first step, samples/s over the timed steps, the peak RSS, the losses."""

import argparse
import json
import os
import resource
import sys
import time

from lib import gpt_py   # (no torch at import)
from lib.proc_stats import process_start_s

MODELS = {   # GPT-2's layout at two sizes
    "10m": dict(n_layer=4, n_head=6, n_embd=384, vocab_size=8192, n_positions=128),   # 10.3M parameters
    "124m": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=128),   # 124M (GPT-2 small, 128 positions)
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["deepspeed", "zerotrain", "fsdp2"], required=True)
    ap.add_argument("--model", choices=sorted(MODELS) + [f"gpt-{p}" for p in gpt_py.PRESETS], default="10m")
    ap.add_argument("--config", help="a ds_config file to train with (default: the one built below)")
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", required=True)
    ap.add_argument("--local_rank", type=int, default=-1, help="given by the launcher, as DeepSpeed's does")
    args = ap.parse_args()
    started = process_start_s()

    if args.impl == "deepspeed":
        import deepspeed
    elif args.impl == "zerotrain":
        import zerotrain as deepspeed
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if args.impl == "fsdp2":
        dist.init_process_group("gloo")
    else:
        deepspeed.init_distributed(dist_backend="gloo")
    if args.config:
        config = json.load(open(args.config))
    else:
        config = {
            "train_micro_batch_size_per_gpu": args.micro, "gradient_accumulation_steps": 1,
            "train_batch_size": args.micro * world, "gradient_clipping": 1.0,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
            "zero_optimization": {"stage": args.stage},
            "bf16": {"enabled": args.dtype == "bf16"},
        }
    torch.manual_seed(0)
    builtin = args.model.startswith("gpt-")
    if builtin:   # the built-in GPT and its synthetic sequences, as `zerotrain train --model gpt` has them
        gcfg = gpt_py.PRESETS[args.model[len("gpt-"):]]
        model = gpt_py.make_gpt(gcfg)
        batches = [gpt_py.synthetic_batch(gcfg, 3, (step * world + rank) * args.micro, args.micro)
                   for step in range(args.warmup + args.steps)]

        def forward(x, y):
            return gpt_py.gpt_loss(run_model(x), y)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(**MODELS[args.model], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                         bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(cfg)
        g = torch.Generator().manual_seed(100 + rank)
        batches = []
        for _ in range(args.warmup + args.steps):
            tokens = torch.randint(0, cfg.vocab_size, (args.micro, args.seq), generator=g)
            batches.append((tokens, tokens))

        def forward(x, y):
            return run_model(input_ids=x, labels=y).loss
    if args.impl == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        shard = {"mesh": mesh}
        if config.get("bf16", {}).get("enabled"):   # as the engines: bf16 compute, fp32 master weights
            from torch.distributed.fsdp import MixedPrecisionPolicy
            shard["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in (model.blocks if builtin else model.transformer.h):
            fully_shard(block, **shard)
        fully_shard(model, **shard)
        params = config["optimizer"]["params"]
        opt = torch.optim.AdamW(model.parameters(), lr=params["lr"], weight_decay=params.get("weight_decay", 0.01))
        clip = config.get("gradient_clipping", 0.0)
        run_model = model

        def train_step(x, y):
            loss = forward(x, y)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            opt.zero_grad()
            return loss
    else:
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        run_model = engine

        def train_step(x, y):
            loss = forward(x, y)
            engine.backward(loss)
            engine.step()
            return loss
    losses, first_step_s, timed_from = [], None, None
    for step, (x, y) in enumerate(batches):
        if step == args.warmup:
            timed_from = time.perf_counter()
        losses.append(train_step(x, y).item())
        if first_step_s is None:
            first_step_s = time.time() - started
    elapsed = time.perf_counter() - timed_from
    result = {"impl": args.impl, "rank": rank, "first_step_s": first_step_s,
              "samples_per_s": args.steps * args.micro * world / elapsed,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "losses": losses, "torch": torch.__version__,
              "version": torch.__version__ if args.impl == "fsdp2" else getattr(deepspeed, "__version__", "?")}
    with open(f"{args.out}.{rank}", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

"""One rank of the Python front-end benchmark: the same DeepSpeed training script, run with
`import deepspeed` (--impl deepspeed) or `import zerotrain as deepspeed` (--impl zerotrain),
on a transformers GPT-2 built from a config (nothing downloaded) and synthetic tokens.
Writes this rank's figures as JSON to --out.<rank>: the time from process start to the end
of the first step, samples/s over the timed steps, the peak RSS, the losses."""

import argparse
import json
import os
import resource
import time


def process_start_s():
    """When this process started, on time.time()'s clock (from /proc: the launcher's fork)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime_s = float(f.read().split()[0])
    return time.time() - uptime_s + start_ticks / os.sysconf("SC_CLK_TCK")


MODELS = {   # GPT-2's layout at two sizes
    "10m": dict(n_layer=4, n_head=6, n_embd=384, vocab_size=8192, n_positions=128),   # 10.3M parameters
    "124m": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=128),   # 124M (GPT-2 small, 128 positions)
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["deepspeed", "zerotrain"], required=True)
    ap.add_argument("--model", choices=sorted(MODELS), default="10m")
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    started = process_start_s()

    if args.impl == "deepspeed":
        import deepspeed
    else:
        import zerotrain as deepspeed
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    config = {
        "train_micro_batch_size_per_gpu": args.micro, "gradient_accumulation_steps": 1,
        "train_batch_size": args.micro * world, "gradient_clipping": 1.0,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
        "zero_optimization": {"stage": args.stage},
        "bf16": {"enabled": args.dtype == "bf16"},
    }
    torch.manual_seed(0)
    cfg = GPT2Config(**MODELS[args.model], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    g = torch.Generator().manual_seed(100 + rank)
    losses, first_step_s, timed_from = [], None, None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            timed_from = time.perf_counter()
        tokens = torch.randint(0, cfg.vocab_size, (args.micro, args.seq), generator=g)
        loss = engine(input_ids=tokens, labels=tokens).loss
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
        if first_step_s is None:
            first_step_s = time.time() - started
    elapsed = time.perf_counter() - timed_from
    result = {"impl": args.impl, "rank": rank, "first_step_s": first_step_s,
              "samples_per_s": args.steps * args.micro * world / elapsed,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "losses": losses, "torch": torch.__version__,
              "version": getattr(deepspeed, "__version__", "?")}
    with open(f"{args.out}.{rank}", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

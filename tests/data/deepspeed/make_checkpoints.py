"""Writes the small DeepSpeed checkpoints that tests/data/deepspeed holds, and what each must
import as (expected.json beside it). Run once with DeepSpeed 0.19 installed (the bench venv,
scripts/bench_venv.sh); CI only reads what it wrote.

    DS_ACCELERATOR=cpu python tests/data/deepspeed/make_checkpoints.py OUT_DIR [--only s2_bf16_w2,...]

Each checkpoint: a tiny MLP with odd sizes (so that partitions split parameters) and a
buffer (one more case freezes a parameter), AdamW (torch's), WarmupLR, 3 steps, at ZeRO stage 0-3, world size 1 or 2,
fp32, bf16 or fp16, saved under OUT_DIR/<name>/ with `latest`. expected.json holds the fp32
master weights and Adam's states of every parameter as DeepSpeed's engine had them when it
saved (gathered with deepspeed.utils.safe_get_full_*), the step counters, the schedule's
iteration, the loss scaler, and the loss of one more step after DeepSpeed resumes from the
checkpoint itself.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from held_port import held_port  # noqa: E402


STEPS, MICRO, SEED = 3, 4, 0


class TinyMlp(torch.nn.Module):
    """Parameters of 35, 7, 21 and 3 elements, and a buffer."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(5, 7)
        self.fc2 = torch.nn.Linear(7, 3)
        self.register_buffer("out_scale", torch.tensor([1.0, 0.5, 2.0]))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x))) * self.out_scale.to(x.dtype)


def make_model(frozen=()):
    torch.manual_seed(SEED)
    model = TinyMlp()
    for name, p in model.named_parameters():
        p.requires_grad_(name not in frozen)
    return model


def config(stage, dtype):
    cfg = {"train_micro_batch_size_per_gpu": MICRO, "gradient_accumulation_steps": 1, "steps_per_print": 1 << 30,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1, "torch_adam": True}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5, "warmup_max_lr": 0.01}},
           "zero_optimization": {"stage": stage}}
    if stage == 3:
        cfg["zero_optimization"].update(sub_group_size=20, stage3_param_persistence_threshold=0)
    if dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    if dtype == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 2}
    return cfg


def batch(step, rank, world, dtype):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(MICRO, 5, generator=g)
    return x.to({"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype])


def loss_of(engine, x):
    return engine(x).float().pow(2).mean()


def full_states(engine, deepspeed):
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state
    opt = engine.optimizer
    if hasattr(opt, "fp16_groups") and hasattr(opt, "fp32_groups") and not engine.zero_optimization():
        # No ZeRO in fp16 or bf16: FP16_UnfusedOptimizer keeps an fp32 master per parameter,
        # and torch's optimizer steps the masters.
        masters = {id(p): m for g16, g32 in zip(opt.fp16_groups, opt.fp32_groups) for p, m in zip(g16, g32)}
        return {name: {"shape": list(p.shape), "fp32": masters[id(p)].float().flatten().tolist(),
                       **{key: opt.optimizer.state[masters[id(p)]][key].float().flatten().tolist()
                          for key in ("exp_avg", "exp_avg_sq")}}
                for name, p in engine.module.named_parameters()}
    out = {}
    for name, p in engine.module.named_parameters():
        if not p.requires_grad:
            continue
        fp32 = safe_get_full_fp32_param(p)
        if fp32 is None:   # no ZeRO and no bf16/fp16 wrapper: the parameter is the master
            fp32 = p.detach()
        states = {}
        for key in ("exp_avg", "exp_avg_sq"):
            s = safe_get_full_optimizer_state(p, key)
            if s is None:
                s = engine.optimizer.state[p][key] if hasattr(engine.optimizer, "state") and p in engine.optimizer.state else None
            states[key] = None if s is None else s.float().flatten().tolist()
        out[name] = {"shape": list(getattr(p, "ds_shape", p.shape)), "fp32": fp32.float().flatten().tolist(), **states}
    return out


def loss_scale_of(engine):
    state = engine.optimizer.state_dict()
    return float(state["cur_scale"] if "cur_scale" in state else state["loss_scaler"].cur_scale)


def worker(rank, world, port, name, stage, dtype, frozen, out_dir, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), DS_ACCELERATOR="cpu")
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    # DeepSpeed's CPU accelerator refuses fp16, though PyTorch computes it on a CPU (slowly,
    # which a 66-parameter model does not feel): its checkpoints are the same as on a GPU.
    get_accelerator().is_fp16_supported = lambda: True
    deepspeed.init_distributed(dist_backend="gloo")
    model = make_model(frozen)
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config(stage, dtype))
    losses = []
    for step in range(STEPS):
        loss = loss_of(engine, batch(step, rank, world, dtype))
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    ckpt = os.path.join(out_dir, name)
    engine.save_checkpoint(ckpt, tag=f"global_step{STEPS}")
    expected = {"params": full_states(engine, deepspeed)}
    # Adam's step as torch's optimizer counts it (FP16_UnfusedOptimizer takes one step with zero
    # gradients when it starts, so without ZeRO in fp16 and bf16 it is one ahead of the engine's).
    inner = engine.optimizer.optimizer if hasattr(engine.optimizer, "optimizer") else engine.optimizer
    expected["adam_steps"] = sorted({int(float(st["step"])) for st in inner.state.values() if "step" in st})
    buffers = {n: b.float().flatten().tolist() for n, b in engine.module.named_buffers()}
    expected["frozen"] = {n: p.float().flatten().tolist() for n, p in engine.module.named_parameters() if n in frozen}
    expected.update(
        config=config(stage, dtype), frozen_names=list(frozen), world_size=world, zero_stage=stage, dtype=dtype,
        losses=losses,
        buffers=buffers, global_steps=engine.global_steps, global_samples=engine.global_samples,
        skipped_steps=engine.skipped_steps, lr=engine.get_lr()[0],
        last_batch_iteration=engine.lr_scheduler.last_batch_iteration,
        loss_scale=None if dtype != "fp16" else loss_scale_of(engine))
    # DeepSpeed resumes from its own checkpoint and takes one more step: the loss of that
    # step, and of the step after, are what an importer's resumed run must give.
    model2 = make_model(frozen)
    engine2, *_ = deepspeed.initialize(model=model2, model_parameters=model2.parameters(), config=config(stage, dtype))
    engine2.load_checkpoint(ckpt)
    next_losses = []
    for step in range(STEPS, STEPS + 2):
        loss = loss_of(engine2, batch(step, rank, world, dtype))
        engine2.backward(loss)
        engine2.step()
        next_losses.append(loss.item())
    expected["resumed_losses"] = next_losses
    if rank == 0:
        queue.put(expected)
    torch.distributed.barrier()
    for junk in ("zero_to_fp32.py", "zero_to_torch.py"):
        if rank == 0 and os.path.exists(os.path.join(ckpt, junk)):
            os.remove(os.path.join(ckpt, junk))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = []
    for stage in (0, 1, 2, 3):
        for world in (1, 2):
            for dtype in ("fp32", "bf16", "fp16"):
                names.append((f"s{stage}_{dtype}_w{world}", stage, dtype, world, ()))
    # A frozen parameter (not trained, saved whole beside the trained ones).
    names.append(("s2_fp32_w2_frozen", 2, "fp32", 2, ("fc1.bias",)))
    only = set(filter(None, args.only.split(",")))
    ctx = torch.multiprocessing.get_context("spawn")
    for name, stage, dtype, world, frozen in names:
        if only and name not in only:
            continue
        queue = ctx.Queue()
        port = held_port()
        procs = [ctx.Process(target=worker, args=(r, world, port, name, stage, dtype, frozen, args.out_dir, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            print(f"{name}: FAILED (exit codes {[p.exitcode for p in procs]})", flush=True)
            continue
        expected = queue.get()
        with open(os.path.join(args.out_dir, name, "expected.json"), "w") as f:
            json.dump(expected, f, indent=0)
        print(f"{name}: ok, losses {expected['losses']} then {expected['resumed_losses']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

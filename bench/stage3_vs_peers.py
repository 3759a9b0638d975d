#!/usr/bin/env python3
"""`zerotrain train` at ZeRO stages 0, 2 and 3 against DeepSpeed ZeRO-2/ZeRO-3 (CPU
accelerator) and PyTorch FSDP2 (fully_shard), all training the built-in GPT (head tied to
the token embedding) on the same synthetic data with AdamW, fp32, 2 ranks on this machine
(--world N for another count),
one intra-op thread per rank. zerotrain runs on its default backend under `zerotrain launch`
(shared memory between its ranks: docs/benchmarks.md); the Python peers on gloo, the CPU
backend the torch wheel has. The setups run interleaved in each round, the order rotated by
the round; the tables give medians over rounds, and the median over rounds of each round's
ratio of zerotrain ZeRO-3 to the setup. A setup that fails (e.g. a stage this build does not
support) shows as "n/a (error: ...)" and the others go on.

    python3 bench/stage3_vs_peers.py [--build build] [--models small,124m] [--rounds 3]
        [--steps N] [--warmup N] [--micro N] [--only zt0,zt2,zt3,ds2,ds3,fsdp2] [--write]
        [--world N] [--zero JSON] [--zt_env VAR=VALUE,...]

--zero adds keys to every setup's zero_optimization block (bucket sizes, say); --zt_env sets
variables for zerotrain's ranks (ZEROTRAIN_SHM=0 measures it without shared memory).

The Python peers run with $ZEROTRAIN_HOME/venv/bin/python (scripts/setup.sh makes it) for
FSDP2, and with $ZEROTRAIN_HOME/bench-venv/bin/python for DeepSpeed: that venv is created
on first use (deepspeed==0.19.8 from PyPI over the pinned venv's torch, which is left alone:
bench/lib/peer_envs.py). --write puts the tables into docs/benchmarks.md between the
stage3_vs_peers markers.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from lib import gpt_py
from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.ds_config import gpt_ds_config
from lib.formatting import fmt, versions_text
from lib.peer_envs import DS_PYTHON, PINNED_PYTHON, ensure_ds_venv
from lib.ports import free_port
from lib.procs import first_error_line, run_group
from lib.rounds import run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORLD, SEED, LR = 2, 3, 1e-3

MODELS = {  # name: (--model_config, default micro-batch, warmup steps, measured steps)
    "small": ("preset=small", 8, 3, 20),
    "124m": ("preset=small,n_layer=12,n_embd=768,n_head=12,vocab_size=50304,block_size=128", 2, 2, 5),
}
SETUPS = {  # key: table name
    "zt0": "zerotrain ZeRO-0",
    "zt1": "zerotrain ZeRO-1",
    "zt2": "zerotrain ZeRO-2",
    "zt3": "zerotrain ZeRO-3",
    "ds0": "DeepSpeed ZeRO-0",
    "ds1": "DeepSpeed ZeRO-1",
    "ds2": "DeepSpeed ZeRO-2",
    "ds3": "DeepSpeed ZeRO-3",
    "fsdp2": "PyTorch FSDP2",
}
REFERENCE = "zt3"


ZERO_EXTRA = {}  # --zero: keys added to every setup's zero_optimization block


def ds_config(stage, micro=None, concrete=False, gas=1, bf16=False, overlap_comm=True):
    """One DeepSpeed config for zerotrain ("auto" filled from the flags) and DeepSpeed (filled here)."""
    return gpt_ds_config(stage, LR, micro, concrete=concrete, world=WORLD, gas=gas, bf16=bf16,
                         overlap_comm=overlap_comm, zero_extra=ZERO_EXTRA)


# --- the Python peers' ranks (run as `stage3_vs_peers.py --worker SETUP ...`) ---------------
def worker(args):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cfg = gpt_py.parse_model_config(args.model_config)
    versions = {"torch": torch.__version__.split("+")[0]}
    if args.worker == "fsdp2" and args.gas != 1:
        raise SystemExit("fsdp2 here runs gas 1 only")
    if args.worker.startswith("ds"):
        import deepspeed
        versions["deepspeed"] = deepspeed.__version__
        deepspeed.init_distributed(dist_backend="gloo")
    else:
        dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    model = gpt_py.make_gpt(cfg)
    if args.worker.startswith("ds"):
        config = ds_config(int(args.worker[2:]), args.micro, concrete=True, gas=args.gas, bf16=args.bf16,
                           overlap_comm=not args.no_overlap)
        config.update(steps_per_print=1 << 30, wall_clock_breakdown=False)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        versions["optimizer"] = type(engine.optimizer.optimizer if hasattr(engine.optimizer, "optimizer")
                                     else engine.optimizer).__name__

        def train_step(x, y):  # one micro-step; DeepSpeed steps the optimizer at the boundary
            loss = gpt_py.gpt_loss(engine(x), y)
            engine.backward(loss)
            engine.step()
            return loss
    elif args.worker == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

        def train_step(x, y):
            loss = gpt_py.gpt_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
    else:
        raise SystemExit(f"unknown worker {args.worker}")

    losses = []
    total = args.warmup + args.steps
    for step in range(total):
        if step == args.warmup:
            dist.barrier()
            start = time.perf_counter()
        for micro_step in range(args.gas):
            # DistributedSampler order over one global batch, as `zerotrain train`
            first = ((step * args.gas + micro_step) * world + rank) * args.micro
            x, y = gpt_py.synthetic_batch(cfg, SEED, first, args.micro)
            loss = train_step(x, y)
        losses.append(loss.item())
    dist.barrier()
    elapsed = time.perf_counter() - start
    # first_loss: at the end of the warm-up, the first step `zerotrain train` logs here
    result = dict(samples_per_s=args.steps * args.micro * args.gas * world / elapsed, first_loss=losses[args.warmup - 1],
                  loss=losses[-1], rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, **versions)
    with open(f"{args.out}.{rank}", "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


# --- the launcher ------------------------------------------------------------------------------
def run_zerotrain(args, model, stage, micro, warmup, steps, out_dir, tag):
    zt = args.zerotrain
    config = os.path.join(out_dir, f"zt{stage}.json")
    json.dump(ds_config(stage, bf16=args.bf16, overlap_comm=not args.no_overlap), open(config, "w"))
    metrics, logfile = os.path.join(out_dir, f"{tag}.jsonl"), os.path.join(out_dir, f"{tag}.log")
    cmd = [zt, "launch", "--nproc_per_node", str(WORLD), "--", zt, "train", "--model", "gpt",
           "--model_config", MODELS[model][0], "--dataset", "synthetic", "--deepspeed", config,
           "--per_device_train_batch_size", str(micro), "--gradient_accumulation_steps", str(args.gas),
           "--learning_rate", str(LR), "--lr_scheduler_type", "constant", "--weight_decay", "0",
           "--max_grad_norm", "0", "--max_steps", str(warmup + steps), "--logging_steps", str(warmup),
           "--seed", str(SEED), "--metrics_file", metrics, "--overwrite_output_dir"] + (["--bf16"] if args.bf16 else [])
    with open(logfile, "w") as log:
        extra = dict(kv.split("=", 1) for kv in args.zt_env.split(",") if kv)
        code = run_group([cmd], [dict(os.environ, OMP_NUM_THREADS="1", **extra)], log, args.timeout)
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(open(logfile).read())}")
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    logged = [r for r in rows if "loss" in r]
    first = next(r for r in logged if r["step"] == warmup)
    last = logged[-1]
    return dict(samples_per_s=(last["step"] - first["step"]) * micro * args.gas * WORLD
                / (last["elapsed_s"] - first["elapsed_s"]),
                rss=max(last["peak_rss_bytes"]), state=max(last["model_state_bytes"]), loss=last["loss"],
                first_loss=logged[0]["loss"])


def run_python(args, setup, model, micro, warmup, steps, out_dir, tag):
    python = DS_PYTHON if setup.startswith("ds") else PINNED_PYTHON
    out, logfile = os.path.join(out_dir, f"{tag}.json"), os.path.join(out_dir, f"{tag}.log")
    port = free_port()
    cmd = [python, os.path.abspath(__file__), "--worker", setup, "--model_config", MODELS[model][0],
           "--micro", str(micro), "--warmup", str(warmup), "--steps", str(steps), "--out", out,
           "--gas", str(args.gas), "--zero", args.zero, "--world", str(WORLD)] + (["--bf16"] if args.bf16 else []) + \
        (["--no_overlap"] if args.no_overlap else [])
    envs = [dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), LOCAL_RANK=str(r),
                 WORLD_SIZE=str(WORLD), LOCAL_WORLD_SIZE=str(WORLD), OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu",
                 PYTHONUNBUFFERED="1") for r in range(WORLD)]
    with open(logfile, "w") as log:
        code = run_group([cmd] * WORLD, envs, log, args.timeout)
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(open(logfile).read())}")
    ranks = [json.load(open(f"{out}.{r}")) for r in range(WORLD)]
    result = dict(ranks[0], rss=max(r["rss"] for r in ranks), loss=statistics.mean(r["loss"] for r in ranks),
                  first_loss=statistics.mean(r["first_loss"] for r in ranks))
    return result


def table(model, setups, results, micro, warmup, steps, rounds, versions, gas=1, bf16=False):
    mib = 1 << 20
    cfg = gpt_py.parse_model_config(MODELS[model][0])
    ref = results.get(REFERENCE)
    lines = [f"**gpt {model}** ({gpt_py.param_count(cfg) / 1e6:.1f}M parameters, head tied; n_layer {cfg['n_layer']}, "
             f"n_embd {cfg['n_embd']}, vocab {cfg['vocab_size']}, {cfg['block_size']} tokens): "
             f"{WORLD} ranks x micro-batch {micro}" + (f" x {gas} accumulation steps" if gas > 1 else "") +
             f", {warmup} warm-up + {steps} timed steps, {'bf16' if bf16 else 'fp32'}, AdamW lr {LR:g}, "
             f"zerotrain on its default backend (shared memory), the Python peers on gloo (the CPU backend the torch wheel "
             f"has), 1 thread per rank, {rounds} interleaved rounds; {cpu_line()}; {versions}", "",
             "| setup | samples/s (median) | peak RSS / rank, MiB (median) | zerotrain ZeRO-3 speed ÷ it | "
             "zerotrain ZeRO-3 RSS ÷ it | loss after warm-up → last |",
             "|---|---:|---:|---:|---:|---|"]
    for key in setups:
        rs = results[key]
        ok = [r for r in rs if "error" not in r]
        if not ok:
            lines.append(f"| {SETUPS[key]} | n/a (error: {rs[0]['error'][:160].replace('|', '/')}) | | | | |")
            continue
        speed = median(r["samples_per_s"] for r in ok)
        rss = median(r["rss"] for r in ok)
        speed_ratio = median_ratio(ref or [], rs, "samples_per_s")
        rss_ratio = median_ratio(ref or [], rs, "rss")
        failed = f" ({len(rs) - len(ok)} of {len(rs)} rounds failed)" if len(ok) < len(rs) else ""
        lines.append(f"| {SETUPS[key]}{failed} | {speed:.2f} | {rss / mib:.0f} | {fmt(speed_ratio, '.2f')} | "
                     f"{fmt(rss_ratio, '.2f')} | {ok[-1]['first_loss']:.3f} → {ok[-1]['loss']:.3f} |")
    zt0 = [r for r in results.get("zt0", []) if "error" not in r]
    zt_params = zt0[0]["state"] // 16 if zt0 else None  # fp32 stage 0 holds 16 bytes per parameter
    if zt_params is not None and zt_params != gpt_py.param_count(cfg):
        why = ("its head is not tied to wte" if zt_params == gpt_py.param_count(cfg, tied=False)
               else "the models differ")
        lines += ["", f"**Not like for like:** zerotrain's gpt has {zt_params} parameters, the Python replica "
                      f"{gpt_py.param_count(cfg)} (head tied to wte): {why}."]
    if "zt2" in results and ref:
        speed, rss = median_ratio(ref, results["zt2"], "samples_per_s"), median_ratio(ref, results["zt2"], "rss")
        if speed is not None:
            lines += ["", f"zerotrain ZeRO-3 vs ZeRO-2 (median of per-round ratios): speed "
                          f"{speed:.2f}x, peak RSS {rss:.2f}x"]

    def ratio(a_key, b_key):
        return median_ratio(results.get(a_key, []), results.get(b_key, []), "samples_per_s")
    extra = [f"{a}/{b} {ratio(a, b):.3f}" for a, b in
             [(f"zt{k}", f"ds{k}") for k in range(4)] + [("zt1", "zt0"), ("zt1", "zt2"), ("zt2", "zt0"),
                                                         ("ds1", "ds0"), ("ds1", "ds2")]
             if a in results and b in results and ratio(a, b) is not None]
    if extra:
        lines += ["", "speed, median of per-round ratios: " + ", ".join(extra)]
    return "\n".join(lines)


def main():
    global WORLD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zerotrain", help="the zerotrain binary (default: BUILD/tools/zerotrain)")
    ap.add_argument("--gas", type=int, default=1, help="gradient accumulation steps (a timed step is one optimizer step)")
    ap.add_argument("--bf16", action="store_true", help="bf16 instead of fp32 (zerotrain --bf16, DeepSpeed bf16.enabled)")
    ap.add_argument("--no_overlap", action="store_true", help="zero_optimization.overlap_comm false (default true)")
    ap.add_argument("--world", type=int, default=WORLD, help="ranks per setup (all on this host)")
    ap.add_argument("--zero", default="{}", help="JSON object of keys added to every zero_optimization block, "
                    "e.g. '{\"reduce_bucket_size\": 5e7}'")
    ap.add_argument("--zt_env", default="", help="VAR=VALUE,... set for zerotrain's ranks, e.g. ZEROTRAIN_SHM=0")
    ap.add_argument("--models", default="small,124m", help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--only", default=",".join(SETUPS), help=f"comma-separated, of {', '.join(SETUPS)}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, help="timed steps (default: per model)")
    ap.add_argument("--warmup", type=int, help="untimed steps first, at least 1 (default: per model)")
    ap.add_argument("--micro", type=int, help="micro-batch per rank (default: per model)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before a run is killed")
    ap.add_argument("--keep", help="keep the runs' logs and metrics in this directory")
    ap.add_argument("--write", action="store_true", help="replace the tables in docs/benchmarks.md")
    # worker mode (internal)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--model_config", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    WORLD = args.world   # a worker's too: its DeepSpeed config's train_batch_size counts the ranks
    if args.worker:
        ZERO_EXTRA.update(json.loads(args.zero))
        return worker(args)
    args.zerotrain = args.zerotrain or os.path.join(args.build, "tools", "zerotrain")
    ZERO_EXTRA.update(json.loads(args.zero))

    models = [m for m in args.models.split(",") if m]
    setups = [s for s in args.only.split(",") if s]
    for name, known in ((models, MODELS), (setups, SETUPS)):
        bad = [x for x in name if x not in known]
        if bad:
            sys.exit(f"unknown {bad}; choose from {', '.join(known)}")
    if any(s.startswith("zt") for s in setups) and not os.access(args.zerotrain, os.X_OK):
        sys.exit(f"no {args.zerotrain}: run scripts/setup.sh first")
    if any(not s.startswith("zt") for s in setups) and not os.path.exists(PINNED_PYTHON):
        sys.exit(f"no {PINNED_PYTHON}: run scripts/setup.sh first")
    if any(s.startswith("ds") for s in setups):
        ensure_ds_venv()

    out_dir = args.keep or tempfile.mkdtemp(prefix="stage3_vs_peers.")
    os.makedirs(out_dir, exist_ok=True)
    tables = []
    for model in models:
        _, micro, warmup, steps = MODELS[model]
        micro, warmup, steps = args.micro or micro, args.warmup or warmup, args.steps or steps

        def run_one(s, r):
            tag = f"{model}-{s}-{r}"
            t0 = time.monotonic()
            if s.startswith("zt"):
                res = run_zerotrain(args, model, int(s[2:]), micro, warmup, steps, out_dir, tag)
            else:
                res = run_python(args, s, model, micro, warmup, steps, out_dir, tag)
            shown = res.get("error") or (f"{res['samples_per_s']:.2f} samples/s, {res['rss'] / (1 << 20):.0f} MiB, "
                                         f"loss {res['first_loss']:.3f} -> {res['loss']:.3f}")
            print(f"[{model} round {r + 1}/{args.rounds}] {SETUPS[s]}: {shown} ({time.monotonic() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
            return res

        results = run_rounds(args.rounds, setups, run_one)
        tables.append(table(model, setups, results, micro, warmup, steps, args.rounds, versions_text(results),
                            args.gas, args.bf16))
        print(tables[-1] + "\n", flush=True)
    if not args.keep:
        subprocess.run(["rm", "-rf", out_dir])
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "stage3_vs_peers", "\n\n".join(tables))


if __name__ == "__main__":
    main()

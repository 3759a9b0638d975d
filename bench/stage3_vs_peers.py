#!/usr/bin/env python3
"""`zerotrain train` at ZeRO stages 0, 2 and 3 against DeepSpeed ZeRO-2/ZeRO-3 (CPU
accelerator) and PyTorch FSDP2 (fully_shard), all training the built-in GPT (head tied to
the token embedding) on the same synthetic data with AdamW, fp32, 2 ranks on this machine
(--world N for another count),
one intra-op thread per rank. zerotrain runs on its default backend under `zerotrain launch`
(shared memory between its ranks: docs/benchmarks.md); the Python peers on gloo, the CPU
backend the torch wheel has. The setups run interleaved in each round; the
tables give medians over rounds, and the median over rounds of each round's ratio of
zerotrain ZeRO-3 to the setup. A setup that fails (e.g. a stage this build does not
support) shows as "n/a (error: ...)" and the others go on.

    python3 bench/stage3_vs_peers.py [--build build] [--models small,124m] [--rounds 3]
        [--steps N] [--warmup N] [--micro N] [--only zt0,zt2,zt3,ds2,ds3,fsdp2] [--write]
        [--world N] [--zero JSON] [--zt_env VAR=VALUE,...]

--zero adds keys to every setup's zero_optimization block (bucket sizes, say); --zt_env sets
variables for zerotrain's ranks (ZEROTRAIN_SHM=0 measures it without shared memory).

The Python peers run with $ZEROTRAIN_HOME/venv/bin/python (scripts/setup.sh makes it) for
FSDP2, and with $ZEROTRAIN_HOME/bench-venv/bin/python for DeepSpeed: that venv is created
on first use (torch==2.15.0 and deepspeed==0.19.8 from PyPI; the pinned venv is left
alone). --write puts the tables into docs/benchmarks.md between the stage3_vs_peers markers.
"""
import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_py  # noqa: E402
from local_ports import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZEROTRAIN_HOME = os.environ.get("ZEROTRAIN_HOME", os.path.expanduser("~/.cache/zerotrain"))
PINNED_PYTHON = os.path.join(ZEROTRAIN_HOME, "venv", "bin", "python")
BENCH_VENV = os.path.join(ZEROTRAIN_HOME, "bench-venv")
TORCH_VERSION, NUMPY_VERSION, DEEPSPEED_VERSION = "2.15.0", "2.4.6", "0.19.8"
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
    zero = {"stage": stage, "overlap_comm": overlap_comm, **ZERO_EXTRA}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    auto = lambda v: v if concrete else "auto"  # noqa: E731
    return {
        "train_batch_size": auto(None if micro is None else micro * WORLD * gas),
        "train_micro_batch_size_per_gpu": auto(micro),
        "gradient_accumulation_steps": auto(gas),
        "gradient_clipping": auto(0.0),
        "optimizer": {"type": "AdamW", "params": {"lr": auto(LR), "betas": auto([0.9, 0.999]), "eps": auto(1e-8),
                                                  "weight_decay": auto(0.0)}},
        "zero_optimization": zero,
        **({"bf16": {"enabled": auto(True)}} if bf16 else {}),
    }


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
def first_error_line(text):
    """The line that says what went wrong: a Python exception's, zerotrain's typed error, else the first
    that names an error."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    exceptions = [l for l in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", l)]
    if exceptions:
        return exceptions[0]
    # zerotrain's own failures: "zerotrain: [kind] what went wrong" (tools/typed_errors.cpp)
    typed = [l for l in lines if re.match(r"^(\[rank \d+\] )?zerotrain: \[", l)]
    errors = typed or [l for l in lines if re.search(r"error|not supported|terminate", l, re.I)]
    return re.sub(r"^\[rank \d+\] ", "", (errors or lines or ["no output"])[0])


def run_group(cmds, envs, log, timeout):
    """Starts the processes, waits for all; on a failure or the timeout kills the rest."""
    procs = [subprocess.Popen(c, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
             for c, e in zip(cmds, envs)]
    deadline, codes = time.monotonic() + timeout, [None] * len(procs)
    while None in codes:
        for i, p in enumerate(procs):
            codes[i] = p.poll()
        if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
            time.sleep(2)  # let the failing rank's message reach the log
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            bad = [c for c in codes if c not in (None, 0)]
            return bad[0] if bad else "timeout"
        time.sleep(0.2)
    return 0


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
    python = os.path.join(BENCH_VENV, "bin", "python") if setup.startswith("ds") else PINNED_PYTHON
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


def ensure_bench_venv():
    """$ZEROTRAIN_HOME/bench-venv: DeepSpeed for the benchmark, apart from the pinned venv CI uses."""
    python = os.path.join(BENCH_VENV, "bin", "python")
    stamp = os.path.join(BENCH_VENV, f".zerotrain-deepspeed-{DEEPSPEED_VERSION}-torch-{TORCH_VERSION}")
    if os.path.exists(stamp):
        return
    print(f"creating {BENCH_VENV} with deepspeed=={DEEPSPEED_VERSION} (once per machine)", file=sys.stderr)
    if not os.path.exists(python):
        subprocess.run([PINNED_PYTHON, "-m", "venv", "--system-site-packages", BENCH_VENV], check=True)
    # --system-site-packages sees the base interpreter's packages, not the pinned venv's: torch
    # usually has to come from PyPI again (the same version as the pinned venv).
    has_torch = subprocess.run([python, "-c", f"import torch; assert torch.__version__.startswith('{TORCH_VERSION}')"],
                               capture_output=True).returncode == 0
    pkgs = [f"deepspeed=={DEEPSPEED_VERSION}"] + ([] if has_torch else [f"torch=={TORCH_VERSION}",
                                                                       f"numpy=={NUMPY_VERSION}"])
    subprocess.run([python, "-m", "pip", "install", "-q"] + pkgs, check=True)
    subprocess.run([python, "-c", "import torch, deepspeed"], check=True, env=dict(os.environ, DS_ACCELERATOR="cpu"))
    open(stamp, "w").close()


def cpu_line():
    info = open("/proc/cpuinfo").read()
    name = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
    flags = set(re.search(r"^flags\s*:\s*(.*)$", info, re.M).group(1).split())
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
    return (f"{name.group(1).strip() if name else 'unknown CPU'}, {os.cpu_count()} cores "
            f"({', '.join(f + ('' if f in flags else ' no') for f in wanted)})")


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


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
        speed = statistics.median(r["samples_per_s"] for r in ok)
        rss = statistics.median(r["rss"] for r in ok)
        pairs = [(a, b) for a, b in zip(ref or [], rs) if "error" not in a and "error" not in b]
        speed_ratio = statistics.median(a["samples_per_s"] / b["samples_per_s"] for a, b in pairs) if pairs else None
        rss_ratio = statistics.median(a["rss"] / b["rss"] for a, b in pairs) if pairs else None
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
        pairs = [(a, b) for a, b in zip(ref, results["zt2"]) if "error" not in a and "error" not in b]
        if pairs:
            lines += ["", f"zerotrain ZeRO-3 vs ZeRO-2 (median of per-round ratios): speed "
                          f"{statistics.median(a['samples_per_s'] / b['samples_per_s'] for a, b in pairs):.2f}x, "
                          f"peak RSS {statistics.median(a['rss'] / b['rss'] for a, b in pairs):.2f}x"]
    def ratio(a_key, b_key):
        pairs = [(a, b) for a, b in zip(results.get(a_key, []), results.get(b_key, []))
                 if "error" not in a and "error" not in b]
        return statistics.median(a["samples_per_s"] / b["samples_per_s"] for a, b in pairs) if pairs else None
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
        ensure_bench_venv()

    out_dir = args.keep or tempfile.mkdtemp(prefix="stage3_vs_peers.")
    os.makedirs(out_dir, exist_ok=True)
    tables = []
    for model in models:
        _, micro, warmup, steps = MODELS[model]
        micro, warmup, steps = args.micro or micro, args.warmup or warmup, args.steps or steps
        results = {s: [] for s in setups}
        for r in range(args.rounds):
            for s in setups:
                tag = f"{model}-{s}-{r}"
                t0 = time.monotonic()
                if s.startswith("zt"):
                    res = run_zerotrain(args, model, int(s[2:]), micro, warmup, steps, out_dir, tag)
                else:
                    res = run_python(args, s, model, micro, warmup, steps, out_dir, tag)
                results[s].append(res)
                shown = res.get("error") or (f"{res['samples_per_s']:.2f} samples/s, {res['rss'] / (1 << 20):.0f} MiB, "
                                             f"loss {res['first_loss']:.3f} -> {res['loss']:.3f}")
                print(f"[{model} round {r + 1}/{args.rounds}] {SETUPS[s]}: {shown} ({time.monotonic() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
        versions = {}
        for rs in results.values():
            for r in rs:
                versions.update({k: r[k] for k in ("torch", "deepspeed") if k in r})
                if "optimizer" in r:
                    versions["DeepSpeed's optimizer"] = r["optimizer"]
        vtext = ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "versions n/a"
        tables.append(table(model, setups, results, micro, warmup, steps, args.rounds, vtext, args.gas, args.bf16))
        print(tables[-1] + "\n", flush=True)
    if not args.keep:
        subprocess.run(["rm", "-rf", out_dir])
    if args.write:
        from docs_tables import replace_between_markers
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "stage3_vs_peers", "\n\n".join(tables))


if __name__ == "__main__":
    main()

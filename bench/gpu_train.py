#!/usr/bin/env python3
"""`zerotrain train` on one GPU (world size 1, bf16) at ZeRO stages 0-3 and stage 2 with the
optimizer offloaded to the CPU, against PyTorch eager with fused AdamW and DeepSpeed 0.19
(stages 0-3 and stage 2 + CPU offload), all training the built-in GPT (head tied to the token
embedding) on the same synthetic data with AdamW at a constant learning rate, in one session.
The setups run interleaved in each round, the order rotated by the round; the table gives
medians over rounds and the median of each round's ratios: samples/s, the CUDA caching
allocator's peak allocated bytes, and the time from starting the process to the end of its
first optimizer step (library loading, CUDA start-up, the model, the engine, DeepSpeed's JIT
op builds). The targets: zerotrain ZeRO-0 >= 0.95x PyTorch eager's samples/s; zerotrain >=
1.1x DeepSpeed's samples/s at every stage at no more GPU memory; a first step far sooner than
DeepSpeed's.

    python3 bench/gpu_train.py [--build build] [--models small,124m] [--rounds 3] [--write]
    python3 bench/gpu_train.py --device cpu --smoke      # checks the script on a CPU machine

Models (zerotrain train --model gpt --model_config ...): `small` is preset=small (4 layers,
n_embd 256, vocab 1024, 128 tokens); `124m` is preset=gpt2, GPT-2 small's shape (12 layers,
12 heads, n_embd 768, vocab 50257, 1024 tokens: 124.4M parameters with the tied head).
Precision: zerotrain --bf16 and DeepSpeed's bf16.enabled keep bf16 weights with fp32 master
weights; PyTorch eager keeps fp32 weights and runs the forward under
torch.autocast(bfloat16), its usual mixed precision, with torch.optim.AdamW(fused=True).

Pythons: the PyTorch peer runs with --python (default: $ZEROTRAIN_HOME/venv/bin/python, else
this interpreter); DeepSpeed with --ds_python (default: $ZEROTRAIN_HOME/bench-venv, which
bench/lib/peer_envs.py creates from PyPI where it is missing; a machine without PyPI needs a
Python that has deepspeed). A setup that fails shows as "n/a (error: ...)" and the others go
on. --write puts the tables into docs/benchmarks.md between the gpu_train markers.
"""
import argparse
import json
import os
import queue
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time

from lib import gpt_py
from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.ds_config import gpt_ds_config
from lib.formatting import fmt, versions_text
from lib.peer_envs import DS_PYTHON, DS_VENV, PINNED_PYTHON, ensure_ds_venv
from lib.ports import free_port
from lib.procs import first_error_line
from lib.rounds import run_rounds
from lib.stats import median_of, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED, LR = 3, 1e-3
FIRST_STEP_MARK = "gpu_train: first step done"   # what a Python peer prints after its first step
ZEROTRAIN_FIRST_STEP = re.compile(r"^step 1/")    # zerotrain train's line for step 1 (--disable_tqdm)

MODELS = {  # name: (--model_config, micro-batch, warm-up steps, timed steps)
    "small": ("preset=small", 32, 10, 50),
    "124m": ("preset=gpt2", 8, 5, 20),
    "tiny": ("preset=tiny", 2, 1, 1),   # --smoke: 2 steps of a tiny model
}
SETUPS = {  # key: table name
    "torch": "PyTorch eager, fused AdamW",
    "zt0": "zerotrain ZeRO-0",
    "zt1": "zerotrain ZeRO-1",
    "zt2": "zerotrain ZeRO-2",
    "zt3": "zerotrain ZeRO-3",
    "zt2off": "zerotrain ZeRO-2 + CPU offload",
    "ds0": "DeepSpeed ZeRO-0",
    "ds1": "DeepSpeed ZeRO-1",
    "ds2": "DeepSpeed ZeRO-2",
    "ds3": "DeepSpeed ZeRO-3",
    "ds2off": "DeepSpeed ZeRO-2 + CPU offload",
}


def stage_of(setup):
    return int(setup[2])


def offloaded(setup):
    return setup.endswith("off")


def ds_config(setup, micro=None):
    """One DeepSpeed config: "auto" values for zerotrain (filled from its flags), concrete ones
    for DeepSpeed (micro given), at world size 1, bf16, with the optimizer offloaded for *off."""
    config = gpt_ds_config(stage_of(setup), LR, micro, concrete=micro is not None, world=1, bf16=True)
    if offloaded(setup):
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return config


# --- the Python peers (run as `gpu_train.py --worker SETUP ...`) ------------------------------
def worker(args):
    import torch

    device = torch.device(args.device)
    cfg = gpt_py.parse_model_config(args.model_config)
    versions = {"torch": torch.__version__.split("+")[0]}
    total = args.warmup + args.steps
    torch.manual_seed(SEED)
    model = gpt_py.make_gpt(cfg)
    # The batches are made before the clock starts and wait on the device, so that the peers'
    # Python data code is not what is measured (zerotrain's loader prefetches in C++).
    batches = [tuple(t.to(device) for t in batch) for batch in gpt_py.trainer_batches(cfg, SEED, args.micro, total)]
    if args.worker == "torch":
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=True)

        def train_step(x, y):
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = gpt_py.gpt_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
    elif args.worker.startswith("ds"):
        import deepspeed
        versions["deepspeed"] = deepspeed.__version__
        deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo")
        config = ds_config(args.worker, args.micro)
        config.update(steps_per_print=1 << 30, wall_clock_breakdown=False)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        inner = engine.optimizer.optimizer if hasattr(engine.optimizer, "optimizer") else engine.optimizer
        versions["optimizer"] = type(inner).__name__

        def train_step(x, y):
            loss = gpt_py.gpt_loss(engine(x), y)
            engine.backward(loss)
            engine.step()
            return loss
    else:
        raise SystemExit(f"unknown worker {args.worker}")

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    losses = []
    for step in range(total):
        if step == args.warmup:
            sync()
            start = time.perf_counter()
        x, y = batches[step]
        losses.append(train_step(x, y).detach())   # read back at the end: no sync per step
        if step == 0:
            losses[0].item()
            print(FIRST_STEP_MARK, flush=True)
    sync()
    elapsed = time.perf_counter() - start
    if device.type == "cuda":
        memory = torch.cuda.max_memory_allocated(device)
    else:
        memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = dict(samples_per_s=args.steps * args.micro / elapsed, memory=memory,
                  first_loss=losses[args.warmup - 1].item(), loss=losses[-1].item(), **versions)
    with open(args.out, "w") as f:
        json.dump(result, f)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


# --- the launcher ------------------------------------------------------------------------------
def run_timed(cmd, env, logfile, timeout, first_step):
    """Runs one process, its output into `logfile`; returns (exit code or "timeout", seconds
    from the start to the first output line that matches `first_step`, or None)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    seen = queue.Queue()

    def read():
        with open(logfile, "w") as log:
            for line in proc.stdout:
                if seen.empty() and first_step.search(line):
                    seen.put(time.monotonic() - start)
                log.write(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = "timeout"
    reader.join()
    return code, (None if seen.empty() else seen.get())


def failure(code, logfile):
    return dict(error=f"exit {code}: {first_error_line(open(logfile).read())}")


def run_zerotrain(args, setup, model, micro, warmup, steps, out_dir, tag):
    config = os.path.join(out_dir, f"{setup}.json")
    json.dump(ds_config(setup), open(config, "w"))
    metrics, logfile = os.path.join(out_dir, f"{tag}.jsonl"), os.path.join(out_dir, f"{tag}.log")
    cmd = [args.zerotrain, "train", "--device", args.device, "--model", "gpt", "--model_config", MODELS[model][0],
           "--dataset", "synthetic", "--deepspeed", config, "--bf16", "--per_device_train_batch_size", str(micro),
           "--learning_rate", str(LR), "--lr_scheduler_type", "constant", "--weight_decay", "0",
           "--max_grad_norm", "0", "--max_steps", str(warmup + steps), "--logging_steps", str(warmup),
           "--logging_first_step", "--disable_tqdm", "--save_strategy", "no", "--seed", str(SEED),
           "--output_dir", os.path.join(out_dir, f"{tag}.out"), "--metrics_file", metrics, "--overwrite_output_dir"]
    code, first_step_s = run_timed(cmd, dict(os.environ), logfile, args.timeout, ZEROTRAIN_FIRST_STEP)
    if code != 0:
        return failure(code, logfile)
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    logged = [r for r in rows if "loss" in r]
    first = next(r for r in logged if r["step"] == warmup)
    last = logged[-1]
    memory_key = "gpu_peak_allocated_bytes" if args.device.startswith("cuda") else "peak_rss_bytes"
    memory = max(last[memory_key]) if memory_key in last else None
    return dict(samples_per_s=(last["step"] - first["step"]) * micro / (last["elapsed_s"] - first["elapsed_s"]),
                memory=memory, first_step_s=first_step_s, first_loss=first["loss"], loss=last["loss"])


def run_python(args, setup, model, micro, warmup, steps, out_dir, tag):
    python = args.ds_python if setup.startswith("ds") else args.python
    out, logfile = os.path.join(out_dir, f"{tag}.json"), os.path.join(out_dir, f"{tag}.log")
    cmd = [python, os.path.abspath(__file__), "--worker", setup, "--device", args.device,
           "--model_config", MODELS[model][0], "--micro", str(micro), "--warmup", str(warmup),
           "--steps", str(steps), "--out", out]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", LOCAL_RANK="0",
               WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", PYTHONUNBUFFERED="1",
               DS_ACCELERATOR="cuda" if args.device.startswith("cuda") else "cpu")
    code, first_step_s = run_timed(cmd, env, logfile, args.timeout, re.compile(re.escape(FIRST_STEP_MARK)))
    if code != 0:
        return failure(code, logfile)
    return dict(json.load(open(out)), first_step_s=first_step_s)


def query(cmd):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def gpu_line(python):
    """The GPU this runs on, named as the table shows it; "" when none is visible."""
    smi = query(["nvidia-smi", "-i", "0", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    if smi:
        name, memory, driver = (s.strip() for s in smi.splitlines()[0].split(","))
        return f"{name} ({memory}, driver {driver})"
    return query([python, "-c", "import torch; torch.cuda.is_available() and print(torch.cuda.get_device_name(0))"])


def ds_python_for(args):
    """A Python that imports deepspeed: --ds_python, the bench venv, or the peer's Python;
    the bench venv is made from PyPI when none has it (lib.peer_envs.ensure_ds_venv)."""
    if args.ds_python:
        return args.ds_python
    env = dict(os.environ, DS_ACCELERATOR="cuda" if args.device.startswith("cuda") else "cpu")
    for python in (DS_PYTHON, args.python):
        if os.path.exists(python) and subprocess.run([python, "-c", "import deepspeed"], env=env,
                                                     capture_output=True).returncode == 0:
            return python
    try:
        ensure_ds_venv()
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"no Python with deepspeed, and making {DS_VENV} failed ({e}): the DeepSpeed rows will say so",
              file=sys.stderr)
    return DS_PYTHON


def ds_twin(setup):
    return "ds" + setup[2:] if setup.startswith("zt") else None


def table(args, model, setups, results, micro, warmup, steps, where, versions):
    mib = 1 << 20
    on_gpu = args.device.startswith("cuda")
    memory_name = "peak GPU memory (allocated), MiB" if on_gpu else "peak RSS, MiB"
    cfg = gpt_py.parse_model_config(MODELS[model][0])
    lines = [f"**gpt {model}** (`--model_config {MODELS[model][0]}`: {gpt_py.param_count(cfg) / 1e6:.1f}M parameters, "
             f"head tied; n_layer {cfg['n_layer']}, n_embd {cfg['n_embd']}, vocab {cfg['vocab_size']}, "
             f"{cfg['block_size']} tokens): world size 1, micro-batch {micro}, {warmup} warm-up + {steps} timed steps, "
             f"bf16 (PyTorch eager: fp32 weights under autocast), AdamW lr {LR:g}, {args.rounds} interleaved rounds; "
             f"{where}; {versions}", "",
             f"| setup | samples/s | {memory_name} | first step, s (round 1 / median) | × PyTorch eager, speed | "
             "zerotrain ÷ DeepSpeed, speed | zerotrain ÷ DeepSpeed, memory | logged loss after warm-up → last |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for key in setups:
        runs = results[key]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            lines.append(f"| {SETUPS[key]} | n/a (error: {runs[0]['error'][:160].replace('|', '/')}) "
                         "| | | | | | |")
            continue
        memory = median_of(runs, "memory")
        vs_torch = median_ratio(runs, results["torch"], "samples_per_s") if "torch" in results else None
        twin = ds_twin(key)
        speed_vs_ds = median_ratio(runs, results[twin], "samples_per_s") if twin in results else None
        memory_vs_ds = median_ratio(runs, results[twin], "memory") if twin in results else None
        failed = f" ({len(runs) - len(ok)} of {len(runs)} rounds failed)" if len(ok) < len(runs) else ""
        lines.append(f"| {SETUPS[key]}{failed} | {median_of(runs, 'samples_per_s'):.1f} | "
                     f"{fmt(None if memory is None else memory / mib, '.0f')} | "
                     f"{fmt(runs[0].get('first_step_s'), '.1f')} / {fmt(median_of(runs, 'first_step_s'), '.1f')} | "
                     f"{fmt(vs_torch, '.2f')} | {fmt(speed_vs_ds, '.2f')} | {fmt(memory_vs_ds, '.2f')} | "
                     f"{ok[-1]['first_loss']:.3f} → {ok[-1]['loss']:.3f} |")
    targets = []
    if "zt0" in results and "torch" in results:
        r = median_ratio(results["zt0"], results["torch"], "samples_per_s")
        targets.append(f"ZeRO-0 ÷ PyTorch eager {fmt(r, '.2f')}x (≥ 0.95: {'met' if r and r >= 0.95 else 'not met'})")
    for key in setups:
        twin = ds_twin(key)
        if twin in results:
            speed = median_ratio(results[key], results[twin], "samples_per_s")
            memory = median_ratio(results[key], results[twin], "memory")
            met = speed is not None and speed >= 1.1 and memory is not None and memory <= 1.0
            targets.append(f"{SETUPS[key][len('zerotrain '):]} ÷ DeepSpeed {fmt(speed, '.2f')}x speed, "
                           f"{fmt(memory, '.2f')}x memory (≥ 1.1 at ≤ 1.0: {'met' if met else 'not met'})")
    if targets:
        lines += ["", "Targets (median of per-round ratios): " + "; ".join(targets) + "."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zerotrain", help="the zerotrain binary (default: BUILD/tools/zerotrain)")
    ap.add_argument("--device", default="cuda", help="cuda (default; GPU 0) or cpu (with --smoke: checks the script)")
    ap.add_argument("--smoke", action="store_true", help="the tiny gpt, 1 warm-up + 1 timed step, 2 rounds")
    ap.add_argument("--python", help="the PyTorch peer's Python (default: the pinned venv's, else this one)")
    ap.add_argument("--ds_python", help="DeepSpeed's Python (default: the bench venv, made if missing)")
    ap.add_argument("--models", help=f"comma-separated, of {', '.join(MODELS)} (default: small,124m)")
    ap.add_argument("--only", default=",".join(SETUPS), help=f"comma-separated, of {', '.join(SETUPS)}")
    ap.add_argument("--rounds", type=int, help="interleaved rounds, at least 3 (default 3; --smoke: 2)")
    ap.add_argument("--steps", type=int, help="timed steps (default: per model)")
    ap.add_argument("--warmup", type=int, help="untimed steps first, at least 1 (default: per model)")
    ap.add_argument("--micro", type=int, help="micro-batch (default: per model)")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds before a run is killed (DeepSpeed's "
                    "first run builds its ops)")
    ap.add_argument("--keep", help="keep the runs' logs and metrics in this directory")
    ap.add_argument("--write", action="store_true", help="replace the tables in docs/benchmarks.md")
    # worker mode (internal)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--model_config", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    if args.device not in ("cuda", "cpu"):
        sys.exit(f"--device {args.device}: give cuda or cpu")
    if args.device == "cpu" and not args.smoke:
        sys.exit("--device cpu only checks the script: give --smoke too (the CPU benchmarks are "
                 "bench/stage3_vs_peers.py and bench/train_vs_ddp.py)")
    if args.smoke and args.write:
        sys.exit("--smoke measures nothing worth keeping: leave out --write")
    args.rounds = args.rounds or (2 if args.smoke else 3)
    if args.rounds < 3 and not args.smoke:
        sys.exit(f"--rounds {args.rounds}: give at least 3, so that the medians mean something")
    args.models = args.models or ("tiny" if args.smoke else "small,124m")
    args.zerotrain = args.zerotrain or os.path.join(args.build, "tools", "zerotrain")
    args.python = args.python or (PINNED_PYTHON if os.path.exists(PINNED_PYTHON) else sys.executable)

    models = [m for m in args.models.split(",") if m]
    setups = [s for s in args.only.split(",") if s]
    for names, known in ((models, MODELS), (setups, SETUPS)):
        bad = [x for x in names if x not in known]
        if bad:
            sys.exit(f"unknown {bad}; choose from {', '.join(known)}")
    if any(s.startswith("zt") for s in setups) and not os.access(args.zerotrain, os.X_OK):
        sys.exit(f"no {args.zerotrain}: build zerotrain first (scripts/setup.sh), or give --zerotrain")
    if args.device == "cuda":
        gpu = gpu_line(args.python)
        if not gpu:
            sys.exit("gpu_train.py: no GPU visible (nvidia-smi lists none and torch.cuda.is_available() is False): "
                     "this benchmark measures GPUs; run it on a GPU machine, or check the script here with "
                     "--device cpu --smoke")
        where = f"GPU: {gpu}; host CPU: {cpu_line()}"
    else:
        where = f"CPU only (smoke run, not a GPU measurement): {cpu_line()}"
    if any(s.startswith("ds") for s in setups):
        args.ds_python = ds_python_for(args)
    print(f"{where}\nPyTorch peer: {args.python}; DeepSpeed: {args.ds_python or 'not run'}", file=sys.stderr)

    out_dir = args.keep or tempfile.mkdtemp(prefix="gpu_train.")
    os.makedirs(out_dir, exist_ok=True)
    tables = []
    for model in models:
        _, micro, warmup, steps = MODELS[model]
        micro, warmup, steps = args.micro or micro, args.warmup or warmup, args.steps or steps

        def run_one(s, r):
            tag = f"{model}-{s}-{r}"
            t0 = time.monotonic()
            run = run_zerotrain if s.startswith("zt") else run_python
            res = run(args, s, model, micro, warmup, steps, out_dir, tag)
            shown = res.get("error") or (f"{res['samples_per_s']:.1f} samples/s, "
                                         f"{fmt(res['memory'] and res['memory'] / (1 << 20), '.0f')} MiB, first "
                                         f"step {fmt(res['first_step_s'], '.1f')} s, loss {res['first_loss']:.3f} "
                                         f"-> {res['loss']:.3f}")
            print(f"[{model} round {r + 1}/{args.rounds}] {SETUPS[s]}: {shown} ({time.monotonic() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
            return res

        results = run_rounds(args.rounds, setups, run_one)
        tables.append(table(args, model, setups, results, micro, warmup, steps, where, versions_text(results)))
        print(tables[-1] + "\n", flush=True)
    if not args.keep:
        subprocess.run(["rm", "-rf", out_dir])
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "gpu_train", "\n\n".join(tables))


if __name__ == "__main__":
    main()

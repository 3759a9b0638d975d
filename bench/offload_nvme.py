#!/usr/bin/env python3
"""NVMe optimizer offload: the optimizer step against the disk's bound, and against
DeepSpeed's NVMe offload on the same model and config.

The model is the built-in GPT made wide and shallow, with few tokens per step (by
default 4 layers, 3072 wide, vocabulary 1024, 32 tokens: 456M parameters), so that a step's
forward and backward are smaller than the optimizer step's IO. It trains in bf16 at ZeRO
stage 3 on one rank (DeepSpeed swaps optimizer states to NVMe at stage 3 only), batch 1, AdamW,
with `offload_optimizer: {"device": "nvme", "pipeline_read": true, "pipeline_write": true,
"buffer_count": 12}`, the same `sub_group_size` and the same `aio` block for both. DeepSpeed
0.19.8's pipelined swapper needs 12 buffers here (4 per sub-group: master, moments and an fp32
gradient, for the sub-group stepped, the one read ahead and the one written behind); with its
default 4 it stops in step 1 (`assert new_alloc_buffers is not None`), with 9 in step 2 ("ran
out of swap buffers"). zerotrain keeps 12 / 3 = 4 sets of 3 buffers: the same memory.
Each round, interleaved (the order of the training setups rotated by the round):

- `zerotrain io-bench` on the swap folder at the `aio` block's settings (every engine that
  runs here, and its raw O_DIRECT baseline): the disk's read and write bandwidth in this run;
- `zerotrain train` with `"wall_clock_breakdown": true, "steps_per_print": 1`: its per-step
  forward, backward and step times (the Trainer's timers; "step" is engine.step(), the
  optimizer step with its swap-in and swap-out);
- DeepSpeed 0.19.8 (`DS_ACCELERATOR=cpu`, its `async_io` op on libaio, DeepSpeedCPUAdam),
  training gpt_py.py's replica of the model on the same synthetic sequences, the same three
  times taken around engine(x), engine.backward(loss) and engine.step();
- with `--only ...,ztcpu`, `zerotrain train` with `offload_optimizer.device: "cpu"`: the
  optimizer step without the disk (needs 12 bytes per parameter of memory more).

Bytes moved per optimizer step: master, exp_avg and exp_avg_sq are read and written, 2 x 12
bytes per parameter. The IO bound of a step is 12 B x parameters / read bandwidth + 12 B x
parameters / write bandwidth, with the bandwidths of the engine zerotrain uses (`auto`) at the
same settings, measured in the same round. Step 1 reads no moments (they start at zero) and
is a warm-up: the times are the median over the timed steps after it. A ratio is the median
over rounds of that round's ratio. The load average at the start of each round is shown.

    python3 bench/offload_nvme.py [--build build] [--nvme_dir DIR] [--rounds 3] [--steps 3]
        [--model_config preset=...,key=value] [--sub_group_size 5e7] [--only io,zt,ds,ztcpu]
        [--keep DIR] [--write]

The swap folder (default: a new folder under BUILD, which must be on a disk, not tmpfs) holds
12 bytes per parameter while a setup runs (5.5 GB for the default model) and is emptied after
each. DeepSpeed runs with the bench venv ($ZEROTRAIN_HOME/bench-venv, made on first use:
bench/lib/peer_envs.py); its first run JIT-builds the async_io, pin_memory and
cpu_adam ops (minutes). --write puts the table into docs/benchmarks.md between the
offload_nvme markers.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from lib import gpt_py
from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.formatting import fmt, versions_text
from lib.peer_envs import DS_PYTHON, ensure_ds_venv
from lib.ports import free_port
from lib.procs import first_error_line, run_group
from lib.rounds import run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SEED, LR = 3, 1e-5
MODEL_CONFIG = "preset=small,n_layer=4,n_embd=3072,n_head=24,vocab_size=1024,block_size=32"
AIO = {"block_size": 1048576, "queue_depth": 16, "intra_op_parallelism": 1, "single_submit": False,
       "overlap_events": True}
SETUPS = {  # key: table name
    "zt": "zerotrain, optimizer on NVMe",
    "ds": "DeepSpeed, optimizer on NVMe",
    "ztcpu": "zerotrain, optimizer in host memory (cpu)",
}
STATE_BYTES_PER_PARAM = 12  # fp32 master, exp_avg, exp_avg_sq


def ds_config(args, device, nvme_path, concrete):
    """One DeepSpeed config for both ("auto" filled from zerotrain's flags, concrete for DeepSpeed)."""
    auto = lambda v: v if concrete else "auto"  # noqa: E731
    offload = {"device": device, "pipeline_read": True, "pipeline_write": True, "buffer_count": args.buffer_count}
    if device == "nvme":
        offload["nvme_path"] = nvme_path
    return {
        "train_batch_size": auto(args.micro),
        "train_micro_batch_size_per_gpu": auto(args.micro),
        "gradient_accumulation_steps": auto(1),
        "gradient_clipping": auto(0.0),
        "optimizer": {"type": "AdamW", "params": {"lr": auto(LR), "betas": auto([0.9, 0.999]), "eps": auto(1e-8),
                                                  "weight_decay": auto(0.0)}},
        "bf16": {"enabled": auto(True)},
        "zero_optimization": {"stage": 3, "sub_group_size": int(args.sub_group_size),
                              "stage3_param_persistence_threshold": 0, "offload_optimizer": offload},
        "aio": AIO,
    }


# --- DeepSpeed's rank (run as `offload_nvme.py --worker ds ...`) --------------------------------
def worker(args):
    import torch
    import deepspeed

    deepspeed.init_distributed(dist_backend="gloo")
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    cfg = gpt_py.parse_model_config(args.model_config)
    model = gpt_py.make_gpt(cfg)
    config = ds_config(args, "nvme", args.nvme_path, concrete=True)
    config.update(steps_per_print=1 << 30, wall_clock_breakdown=False)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    inner = engine.optimizer.optimizer if hasattr(engine.optimizer, "optimizer") else engine.optimizer
    steps, losses = [], []
    for step in range(1 + args.steps):
        x, y = gpt_py.synthetic_batch(cfg, SEED, step * args.micro, args.micro)
        t0 = time.perf_counter()
        loss = gpt_py.gpt_loss(engine(x), y)
        t1 = time.perf_counter()
        engine.backward(loss)
        t2 = time.perf_counter()
        engine.step()
        t3 = time.perf_counter()
        steps.append(dict(forward_ms=(t1 - t0) * 1e3, backward_ms=(t2 - t1) * 1e3, step_ms=(t3 - t2) * 1e3))
        losses.append(loss.item())
    result = dict(steps=steps, first_loss=losses[0], loss=losses[-1], torch=torch.__version__.split("+")[0],
                  deepspeed=deepspeed.__version__, optimizer=type(inner).__name__,
                  rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    with open(args.out, "w") as f:
        json.dump(result, f)


# --- the launcher ------------------------------------------------------------------------------
TIMER_LINE = re.compile(r"time \(ms\) \| forward: ([\d.]+) \| backward: ([\d.]+) \| step: ([\d.]+)")


def timed(res, warmup=1):
    """The medians over the steps after the warm-up: optimizer step, forward + backward, whole step (s)."""
    rows = res["steps"][warmup:]
    return dict(opt_s=median(r["step_ms"] for r in rows) / 1e3,
                fwd_bwd_s=median(r["forward_ms"] + r["backward_ms"] for r in rows) / 1e3,
                total_s=median(r["forward_ms"] + r["backward_ms"] + r["step_ms"] for r in rows) / 1e3)


def swap_dir(args, tag):
    path = os.path.join(args.nvme_dir, tag)
    os.makedirs(path, exist_ok=True)
    return path


def run_zerotrain(args, device, out_dir, tag):
    nvme = swap_dir(args, tag)
    config = os.path.join(out_dir, f"{tag}.json")
    cfg = ds_config(args, device, nvme, concrete=False)
    cfg.update(steps_per_print=1, wall_clock_breakdown=True)
    json.dump(cfg, open(config, "w"))
    metrics, logfile = os.path.join(out_dir, f"{tag}.jsonl"), os.path.join(out_dir, f"{tag}.log")
    zt = args.zerotrain
    cmd = [zt, "train", "--model", "gpt", "--model_config", args.model_config, "--dataset", "synthetic",
           "--deepspeed", config, "--per_device_train_batch_size", str(args.micro), "--bf16",
           "--learning_rate", str(LR), "--lr_scheduler_type", "constant", "--weight_decay", "0",
           "--max_grad_norm", "0", "--max_steps", str(1 + args.steps), "--logging_steps", "1",
           "--seed", str(SEED), "--disable_tqdm", "--metrics_file", metrics, "--overwrite_output_dir"]
    try:
        with open(logfile, "w") as log:
            code = run_group([cmd], [dict(os.environ, OMP_NUM_THREADS=str(args.threads))], log, args.timeout)
    finally:
        shutil.rmtree(nvme, ignore_errors=True)
    text = open(logfile).read()
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(text)}")
    steps = [dict(forward_ms=float(f), backward_ms=float(b), step_ms=float(s)) for f, b, s in TIMER_LINE.findall(text)]
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    logged = [r for r in rows if "loss" in r]
    if len(steps) != 1 + args.steps:
        return dict(error=f"expected {1 + args.steps} timer lines in {logfile}, found {len(steps)}")
    return dict(steps=steps, first_loss=logged[0]["loss"], loss=logged[-1]["loss"],
                rss=max(logged[-1]["peak_rss_bytes"]))


def run_deepspeed(args, out_dir, tag):
    nvme = swap_dir(args, tag)
    out, logfile = os.path.join(out_dir, f"{tag}.json"), os.path.join(out_dir, f"{tag}.log")
    cmd = [DS_PYTHON, os.path.abspath(__file__), "--worker", "ds",
           "--model_config", args.model_config, "--micro", str(args.micro), "--steps", str(args.steps),
           "--sub_group_size", str(args.sub_group_size), "--buffer_count", str(args.buffer_count),
           "--threads", str(args.threads), "--nvme_path", nvme, "--out", out]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", LOCAL_RANK="0",
               WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", OMP_NUM_THREADS=str(args.threads), DS_ACCELERATOR="cpu",
               PYTHONUNBUFFERED="1")
    try:
        with open(logfile, "w") as log:
            code = run_group([cmd], [env], log, args.timeout)
    finally:
        shutil.rmtree(nvme, ignore_errors=True)
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(open(logfile).read())}")
    return json.load(open(out))


IO_ROW = re.compile(r"^(io_uring|libaio|threads)\s+(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", re.M)
RAW_ROW = re.compile(r"^raw O_DIRECT.*?\s([\d.]+)\s+([\d.]+)\s*$", re.M)
AUTO_PICK = re.compile(r"auto picks (\w+)")


def run_io_bench(args, out_dir, tag):
    """Read and write GB/s of each engine at the aio block's settings, and of the raw O_DIRECT loop."""
    path = swap_dir(args, tag)
    cmd = [args.zerotrain, "io-bench", "--path", path, "--size_mib", str(args.io_size_mib), "--engine", "all",
           "--block_sizes", f"{AIO['block_size'] >> 10}K", "--queue_depths", str(AIO["queue_depth"]),
           "--threads", str(AIO["intra_op_parallelism"]), "--rounds", "3"]
    logfile = os.path.join(out_dir, f"{tag}.log")
    try:
        with open(logfile, "w") as log:
            code = run_group([cmd], [dict(os.environ)], log, args.timeout)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    text = open(logfile).read()
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(text)}")
    engines = {m[0]: dict(write=float(m[4]), read=float(m[5])) for m in IO_ROW.findall(text)}
    raw = RAW_ROW.search(text)
    return dict(engines=engines, raw=dict(write=float(raw.group(1)), read=float(raw.group(2))) if raw else None)


def auto_engine(zerotrain):
    """The engine `auto` takes here: the first of io_uring, libaio, threads that runs (docs/io.md)."""
    text = subprocess.run([zerotrain, "report"], capture_output=True, text=True).stdout
    for name in ("io_uring", "libaio", "threads"):
        if re.search(rf"^\s*{name}\s*\.+\s*yes", text, re.M):
            return name
    return "threads"


def io_bound_s(params, bw):
    """Seconds to read and then write 12 bytes per parameter at these GB/s (1 GB = 1e9 bytes)."""
    nbytes = STATE_BYTES_PER_PARAM * params
    return nbytes / (bw["read"] * 1e9) + nbytes / (bw["write"] * 1e9)


def table(args, setups, results, ios, loads, engine, versions):
    cfg = gpt_py.parse_model_config(args.model_config)
    params = gpt_py.param_count(cfg)
    gb = STATE_BYTES_PER_PARAM * params / 1e9
    bws = [io["engines"].get(engine) if "error" not in io else None for io in ios]
    raws = [io.get("raw") if "error" not in io else None for io in ios]
    bounds = [io_bound_s(params, bw) if bw else None for bw in bws]

    def bw_text(values):
        ok = [v for v in values if v]
        if not ok:
            return "n/a"
        return (f"read {median(v['read'] for v in ok):.2f} GB/s, "
                f"write {median(v['write'] for v in ok):.2f} GB/s")

    lines = [f"**gpt** ({params / 1e6:.0f}M parameters, head tied; n_layer {cfg['n_layer']}, n_embd {cfg['n_embd']}, "
             f"vocab {cfg['vocab_size']}, {cfg['block_size']} tokens), bf16, ZeRO-3, 1 rank x micro-batch {args.micro}, "
             f"AdamW lr {LR:g}, `sub_group_size` {int(args.sub_group_size):.0e}, pipeline_read and pipeline_write on, "
             f"aio block {AIO['block_size'] >> 10} KiB, queue depth {AIO['queue_depth']}, "
             f"{AIO['intra_op_parallelism']} thread; {args.threads} intra-op threads; 1 warm-up + {args.steps} timed "
             f"steps, {args.rounds} interleaved rounds, load average at the start of each round "
             f"{', '.join(f'{l:.2f}' for l in loads)}; {cpu_line()}; {versions}", "",
             f"Disk (`zerotrain io-bench` on the swap folder, median of the rounds): zerotrain's engine ({engine}) "
             f"{bw_text(bws)}; raw O_DIRECT {bw_text(raws)}. Bytes moved per optimizer step: {gb:.2f} GB read + "
             f"{gb:.2f} GB written; IO bound {fmt(median(bounds), '.2f')} s.", "",
             "| setup | optimizer step, s | ÷ IO bound | forward + backward, s | whole step, s | "
             "zerotrain ÷ it, optimizer step | zerotrain ÷ it, whole step | peak RSS, MiB | loss, step 1 → last |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    ref = results.get("zt", [])
    for key in sorted(setups, key=list(SETUPS).index):
        rs = results[key]
        ok = [r for r in rs if "error" not in r]
        if not ok:
            lines.append(f"| {SETUPS[key]} | n/a (error: {rs[0]['error'][:200].replace('|', '/')}) | | | | | | | |")
            continue
        t = [timed(r) if "error" not in r else None for r in rs]
        med = {k: median(x[k] for x in t if x) for k in ("opt_s", "fwd_bwd_s", "total_s")}
        over_bound = median(x["opt_s"] / b if x and b else None for x, b in zip(t, bounds))
        ref_t = [timed(a) if "error" not in a else None for a in ref]
        opt_ratio = median_ratio(ref_t, t, "opt_s")
        total_ratio = median_ratio(ref_t, t, "total_s")
        failed = f" ({len(rs) - len(ok)} of {len(rs)} rounds failed)" if len(ok) < len(rs) else ""
        bound_text = fmt(over_bound, ".2f") if key != "ztcpu" else "(no IO)"
        lines.append(f"| {SETUPS[key]}{failed} | {med['opt_s']:.2f} | {bound_text} | {med['fwd_bwd_s']:.2f} | "
                     f"{med['total_s']:.2f} | {fmt(opt_ratio, '.2f')} | {fmt(total_ratio, '.2f')} | "
                     f"{median(r['rss'] for r in ok) / (1 << 20):.0f} | "
                     f"{ok[-1]['first_loss']:.3f} → {ok[-1]['loss']:.3f} |")
    per_round = []
    for r, (io, b) in enumerate(zip(ios, bounds)):
        cells = [f"round {r + 1}: bound {fmt(b, '.2f')} s"]
        for key in setups:
            res = results[key][r]
            if "error" not in res:
                cells.append(f"{key} {timed(res)['opt_s']:.2f} s")
        per_round.append(", ".join(cells))
    lines += ["", "Optimizer step per round: " + "; ".join(per_round) + "."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zerotrain", help="the zerotrain binary (default: BUILD/tools/zerotrain)")
    ap.add_argument("--nvme_dir", help="a folder on a disk for the swap files (default: a new one under BUILD)")
    ap.add_argument("--model_config", default=MODEL_CONFIG, help="the gpt (zerotrain train --model_config)")
    ap.add_argument("--micro", type=int, default=1, help="micro-batch")
    ap.add_argument("--sub_group_size", type=float, default=5e7)
    ap.add_argument("--buffer_count", type=int, default=12,
                    help="offload_optimizer.buffer_count, for both (DeepSpeed with both pipelines needs 12 here; "
                         "zerotrain keeps buffer_count / 3 sets of 3 buffers, at least 3)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads (OMP_NUM_THREADS)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3, help="timed steps after the 1 warm-up step")
    ap.add_argument("--io_size_mib", type=int, default=1024, help="io-bench's test file")
    ap.add_argument("--only", default="zt,ds", help=f"comma-separated, of {', '.join(SETUPS)}")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a run is killed")
    ap.add_argument("--keep", help="keep the runs' logs and metrics in this directory")
    ap.add_argument("--write", action="store_true", help="replace the table in docs/benchmarks.md")
    # worker mode (internal)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--nvme_path", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    args.zerotrain = args.zerotrain or os.path.join(args.build, "tools", "zerotrain")
    setups = [s for s in args.only.split(",") if s]
    bad = [s for s in setups if s not in SETUPS]
    if bad:
        sys.exit(f"unknown {bad}; choose from {', '.join(SETUPS)}")
    if not os.access(args.zerotrain, os.X_OK):
        sys.exit(f"no {args.zerotrain}: run scripts/setup.sh first")
    if "ds" in setups:
        ensure_ds_venv()
    # a kill still removes the swap files (several GB) in the finally below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("offload_nvme.py: terminated"))
    made_nvme_dir = args.nvme_dir is None
    args.nvme_dir = args.nvme_dir or tempfile.mkdtemp(prefix="offload_nvme.", dir=args.build)
    out_dir = args.keep or tempfile.mkdtemp(prefix="offload_nvme.")
    os.makedirs(out_dir, exist_ok=True)
    engine = auto_engine(args.zerotrain)

    ios, loads = [], []

    def start_round(r, order):   # the disk's bandwidth in this round, before its setups
        loads.append(os.getloadavg()[0])
        print(f"[round {r + 1}/{args.rounds}] load average {loads[-1]:.2f}; order io-bench, {', '.join(order)}",
              file=sys.stderr, flush=True)
        ios.append(run_io_bench(args, out_dir, f"io-{r}"))
        io = ios[-1]
        print(f"[round {r + 1}/{args.rounds}] io-bench: " + (io.get("error") or json.dumps(io)), file=sys.stderr,
              flush=True)

    def run_one(s, r):
        t0 = time.monotonic()
        tag = f"{s}-{r}"
        if s == "ds":
            res = run_deepspeed(args, out_dir, tag)
        else:
            res = run_zerotrain(args, "nvme" if s == "zt" else "cpu", out_dir, tag)
        shown = res.get("error") or ", ".join(f"{k} {v:.2f} s" for k, v in timed(res).items())
        print(f"[round {r + 1}/{args.rounds}] {SETUPS[s]}: {shown} ({time.monotonic() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        return res

    try:
        results = run_rounds(args.rounds, setups, run_one, start_round)
    finally:
        if made_nvme_dir:
            shutil.rmtree(args.nvme_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    text = table(args, setups, results, ios, loads, engine, versions_text(results))
    print(text + "\n", flush=True)
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "offload_nvme", text)


if __name__ == "__main__":
    main()

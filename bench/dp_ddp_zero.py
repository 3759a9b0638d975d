#!/usr/bin/env python3
"""The DataParallel / DDP / DeepSpeed ZeRO comparison, redone on this machine: the same small
ConvNet trained on Fashion-MNIST for 2 epochs (global batch 256, Adam lr 1e-3, fp32) by

- one process (the single-host DataParallel setup; on a CPU nn.DataParallel runs the module
  as it is), 2 intra-op threads;
- PyTorch DDP, 2 ranks over gloo, 1 thread per rank;
- DeepSpeed ZeRO-2 (DS_ACCELERATOR=cpu), 2 ranks over gloo, 1 thread per rank;
- `zerotrain train` at ZeRO stages 0 and 2 under `zerotrain launch --backend gloo`, 2 ranks,
  1 thread per rank (OMP_NUM_THREADS=1, which the launcher passes on to its ranks).

Each setup is its own process group. They run interleaved: round r runs every setup once, in
an order rotated by r. The table gives, per setup, the median over rounds of the seconds per
epoch (the wall time of an epoch's training loop, evaluation excluded), of the peak RSS of
the rank that used the most, and of each round's ratio to DDP, and the test accuracy on the
10,000 test images after the last epoch. The load average at the start of each round is
printed with the table, as a gauge of the noise on a shared machine.

Then, unless --no_fp16_log, the same training runs in fp16 for its first --fp16_steps steps
(default 30: the overflows come first) once with DeepSpeed ZeRO-2 and once with zerotrain
ZeRO-2, and the "[deepspeed] OVERFLOW! ..." lines of both are printed side by side. DeepSpeed 0.19 refuses fp16 on a CPU whose oneDNN has no fp16 support ("Type
fp16 is not supported on your device."): the DeepSpeed fp16 worker overrides that one check
(see ds_allow_fp16_on_cpu) and runs DeepSpeed's own ZeRO-2 fp16 optimizer and loss scaler
on PyTorch's CPU half kernels.

    python3 bench/dp_ddp_zero.py [--build build] [--rounds 3] [--epochs 2] [--limit N]
        [--only single,ddp,ds2,zt0,zt2] [--no_fp16_log] [--background_load N] [--contention N]
        [--keep DIR] [--write]

--background_load N runs N busy processes (a spinning Python loop each, in its own session)
beside every setup, for the rows under contention; with --write those go between the
dp_ddp_zero_loaded markers.

--contention N runs every setup twice in each round, quiet and beside N busy processes, back
to back, and prints per setup the median over rounds of busy ÷ quiet (how much a setup slows
when another job takes cores) and its busy time against DDP's; with --write between the
dp_ddp_zero_contention markers.

--only also offers single1: the one process with 1 thread, which tells the cost of the second
intra-op thread from that of running one process.

Data: the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist). The
Python setups run with $ZEROTRAIN_HOME/venv/bin/python, DeepSpeed with the bench venv
($ZEROTRAIN_HOME/bench-venv, made on first use: bench/lib/peer_envs.py). --write
puts the tables into docs/benchmarks.md between the dp_ddp_zero markers.
"""
import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from lib.cpu import cpu_line
from lib.docs_tables import replace_between_markers
from lib.formatting import versions_text
from lib.peer_envs import DS_PYTHON, PINNED_PYTHON, ensure_ds_venv
from lib.ports import free_port
from lib.procs import first_error_line, run_group
from lib.rounds import rotated, run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
WORLD, SEED, LR, GLOBAL_BATCH = 2, 42, 1e-3, 256
BETAS, EPS = (0.9, 0.999), 1e-8
SETUPS = {  # key: (table name, processes, intra-op threads per process)
    "single": ("one process (DataParallel on one host)", 1, 2),
    "single1": ("one process, 1 thread", 1, 1),
    "ddp": ("PyTorch DDP (gloo)", WORLD, 1),
    "ds2": ("DeepSpeed ZeRO-2 (gloo)", WORLD, 1),
    "zt0": ("zerotrain ZeRO-0", WORLD, 1),
    "zt2": ("zerotrain ZeRO-2", WORLD, 1),
}
DEFAULT_SETUPS = "single,ddp,ds2,zt0,zt2"
REFERENCE = "ddp"


# --- data and model (the Python workers) ------------------------------------------------------
def load_idx(name, header_bytes):
    import numpy as np
    with gzip.open(os.path.join(DATA_DIR, name)) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header_bytes)


def load_split(split, limit=None):
    """uint8 images [N, 1, 28, 28] and int64 labels; normalised per batch, so that a rank
    holds 47 MB of training images rather than 188 MB of floats."""
    import torch
    images = load_idx(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    labels = load_idx(f"{split}-labels-idx1-ubyte.gz", 8)
    if limit:
        images, labels = images[:limit], labels[:limit]
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype("int64"))


def normalise(images_u8, dtype):
    return ((images_u8.float() / 255 - 0.5) / 0.5).to(dtype)


def make_convnet():
    import torch.nn as nn

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3)
            self.conv2 = nn.Conv2d(32, 64, 3)
            self.pool = nn.MaxPool2d(2, 2)
            self.fc1 = nn.Linear(64 * 5 * 5, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = self.pool(self.conv1(x).relu())
            x = self.pool(self.conv2(x).relu())
            return self.fc2(self.fc1(x.flatten(1)).relu())

    return ConvNet()


def epoch_order(n, epoch, rank, world):
    """DistributedSampler(shuffle=True, seed=SEED, drop_last=False) after set_epoch(epoch).
    With world 1 it is randperm seeded SEED + epoch: the one process sees the same global
    batches as the 2 ranks together."""
    import torch
    from torch.utils.data import DistributedSampler
    if world == 1:
        g = torch.Generator()
        g.manual_seed(SEED + epoch)
        return torch.randperm(n, generator=g)
    sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=SEED)
    sampler.set_epoch(epoch)
    return torch.tensor(list(sampler))


def ds_allow_fp16_on_cpu():
    """DeepSpeed's CPU accelerator reports fp16 support only where oneDNN has fp16 kernels
    (AVX512-FP16 or AMX-FP16); otherwise deepspeed.initialize raises "Type fp16 is not
    supported on your device.". PyTorch still runs half on any CPU (converting around the
    math), so the fp16 log run lifts that one check and keeps the rest of DeepSpeed as is."""
    from deepspeed.accelerator import get_accelerator
    accelerator = get_accelerator()
    native = bool(accelerator.is_fp16_supported())
    if not native:
        accelerator.is_fp16_supported = lambda: True
    return native


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    kind = args.worker
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    info = {"torch": torch.__version__.split("+")[0]}
    if kind == "ds2":
        import deepspeed
        info["deepspeed"] = deepspeed.__version__
        if args.fp16:
            info["ds_fp16_native"] = ds_allow_fp16_on_cpu()
        deepspeed.init_distributed(dist_backend="gloo")
    elif world > 1:
        dist.init_process_group("gloo")
    torch.set_num_threads(SETUPS[kind][2])
    train_x, train_y = load_split("train", args.limit)
    test_x, test_y = load_split("t10k")
    micro = GLOBAL_BATCH // world
    dtype = torch.float16 if args.fp16 else torch.float32

    torch.manual_seed(SEED)
    model = make_convnet()
    info["parameters"] = sum(p.numel() for p in model.parameters())
    if kind.startswith("single") or kind == "ddp":
        # One process: DataParallel, which on a host without CUDA calls the module directly.
        net = nn.DataParallel(model) if kind.startswith("single") else nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)

        def train_step(x, y):
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
    elif kind == "ds2":
        config = {
            "train_batch_size": GLOBAL_BATCH, "train_micro_batch_size_per_gpu": micro,
            "gradient_accumulation_steps": 1, "steps_per_print": 1 << 30, "wall_clock_breakdown": False,
            # DeepSpeed's "Adam" is AdamW unless adam_w_mode is false; with weight decay 0 the two agree,
            # and false says plain Adam as the other setups run it.
            "optimizer": {"type": "Adam", "params": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": 0.0,
                                                     "adam_w_mode": False}},
            "zero_optimization": {"stage": 2},
        }
        if args.fp16:
            # DeepSpeed's default fp16 block; its loss scaler logs at INFO, below 0.19's default level
            config.update(fp16={"enabled": True}, log_level="info")
        net, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        inner = net.optimizer.optimizer if hasattr(net.optimizer, "optimizer") else net.optimizer
        info["optimizer"] = type(inner).__name__

        def train_step(x, y):
            loss = F.cross_entropy(net(x), y)
            net.backward(loss)
            net.step()
            return loss
    else:
        raise SystemExit(f"unknown worker {kind}")

    def evaluate():
        model.eval()
        correct, loss_sum = 0, 0.0
        with torch.no_grad():
            for i in range(0, len(test_y), 1000):
                logits = model(normalise(test_x[i:i + 1000], dtype)).float()
                loss_sum += F.cross_entropy(logits, test_y[i:i + 1000], reduction="sum").item()
                correct += (logits.argmax(1) == test_y[i:i + 1000]).sum().item()
        model.train()
        return correct / len(test_y), loss_sum / len(test_y)

    epochs, steps_done = [], 0
    for epoch in range(args.epochs):
        order = epoch_order(len(train_y), epoch, rank, world)
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        losses = []
        for i in range(0, len(order), micro):
            if args.max_steps and steps_done == args.max_steps:
                break
            steps_done += 1
            idx = order[i:i + micro]
            losses.append(train_step(normalise(train_x[idx], dtype), train_y[idx]).item())
        if world > 1:
            dist.barrier()  # the epoch ends when the slower rank's does
        epoch_s = time.perf_counter() - start
        accuracy, eval_loss = evaluate() if rank == 0 else (None, None)
        epochs.append(dict(epoch_s=epoch_s, train_loss=statistics.mean(losses[-20:]), eval_accuracy=accuracy,
                           eval_loss=eval_loss))
        if args.max_steps and steps_done == args.max_steps:
            break
    result = dict(info, epochs=epochs, rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    with open(f"{args.out}.{rank}", "w") as f:
        json.dump(result, f)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


# --- the launcher ------------------------------------------------------------------------------
def run_python(args, setup, out_dir, tag, fp16_steps=None):
    """One setup's process group; with fp16_steps, an fp16 run of that many steps for its log."""
    python = DS_PYTHON if setup.startswith("ds") else PINNED_PYTHON
    _, procs, threads = SETUPS[setup]
    out, logfile = os.path.join(out_dir, f"{tag}.json"), os.path.join(out_dir, f"{tag}.log")
    cmd = [python, os.path.abspath(__file__), "--worker", setup, "--epochs", str(args.epochs), "--out", out] + \
          (["--limit", str(args.limit)] if args.limit else []) + \
          (["--fp16", "--max_steps", str(fp16_steps)] if fp16_steps else [])
    port = free_port()
    envs = [dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), LOCAL_RANK=str(r),
                 WORLD_SIZE=str(procs), LOCAL_WORLD_SIZE=str(procs), OMP_NUM_THREADS=str(threads),
                 DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1") for r in range(procs)]
    with open(logfile, "w") as log:
        code = run_group([cmd] * procs, envs, log, args.timeout)
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(open(logfile).read())}", log=logfile)
    ranks = [json.load(open(f"{out}.{r}")) for r in range(procs)]
    epochs = ranks[0]["epochs"]
    return dict(ranks[0], epoch_s=[e["epoch_s"] for e in epochs], rss=max(r["rss"] for r in ranks),
                accuracy=epochs[-1]["eval_accuracy"], log=logfile)


def zerotrain_config(stage, fp16, fp16_keys=None):
    """The DeepSpeed config `zerotrain train` reads; "auto" takes the command line's values."""
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
              "train_batch_size": "auto",
              "optimizer": {"type": "Adam", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                       "weight_decay": "auto"}},
              "zero_optimization": {"stage": stage}}
    if fp16:
        config["fp16"] = {"enabled": "auto", **(fp16_keys or {})}
    return config


def run_zerotrain(args, stage, out_dir, tag, fp16_steps=None, fp16_keys=None):
    """`zerotrain train` under `zerotrain launch`; with fp16_steps, an fp16 run of that many
    steps for its log (no evaluation), its fp16 block {"enabled": "auto"} plus fp16_keys."""
    zt = args.zerotrain
    config = os.path.join(out_dir, f"{tag}.config.json")
    json.dump(zerotrain_config(stage, bool(fp16_steps), fp16_keys), open(config, "w"))
    metrics, logfile = os.path.join(out_dir, f"{tag}.jsonl"), os.path.join(out_dir, f"{tag}.log")
    cmd = [zt, "launch", "--nproc_per_node", str(WORLD), "--backend", args.zt_backend, "--",
           zt, "train", "--model", "convnet", "--dataset", "fashion-mnist", "--deepspeed", config,
           "--per_device_train_batch_size", str(GLOBAL_BATCH // WORLD), "--num_train_epochs", str(args.epochs),
           "--learning_rate", str(LR), "--seed", str(SEED), "--logging_steps", "50", "--metrics_file", metrics, "--overwrite_output_dir",
           # the Trainer's defaults are HF's (linear decay, clipping at 1.0): the article's run has neither
           "--lr_scheduler_type", "constant", "--max_grad_norm", "0"]
    cmd += ["--fp16", "--max_steps", str(fp16_steps)] if fp16_steps else ["--eval_strategy", "epoch"]
    if args.limit:
        cmd += ["--max_train_samples", str(args.limit)]
    try:
        with open(logfile, "w") as log:
            code = run_group([cmd], [dict(os.environ, OMP_NUM_THREADS="1")], log, args.timeout)
    except OSError as e:  # e.g. the binary is being relinked
        return dict(error=f"cannot start {zt}: {e}")
    if code != 0:
        return dict(error=f"exit {code}: {first_error_line(open(logfile).read())}", log=logfile)
    if fp16_steps:
        return dict(log=logfile)
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    epoch_ends = sorted((r for r in rows if r.get("event") == "epoch_end"), key=lambda r: r["epoch"])
    evals = [r for r in rows if "eval_accuracy" in r]
    end = [r for r in rows if r.get("event") == "end"]
    if not epoch_ends or not evals or not end:
        return dict(error=f"{metrics} lacks the epoch_end, eval or end lines", log=logfile)
    return dict(epoch_s=[r["epoch_train_s"] for r in epoch_ends], rss=max(end[-1]["peak_rss_bytes"]),
                accuracy=evals[-1]["eval_accuracy"], log=logfile)


def run_setup(args, setup, out_dir, tag):
    if setup.startswith("zt"):
        return run_zerotrain(args, int(setup[2:]), out_dir, tag)
    return run_python(args, setup, out_dir, tag)


def overflow_lines(logfile):
    """The loss scaler's lines, from "[deepspeed] OVERFLOW!" on (DeepSpeed's logger and the ranks'
    prefixes cut off)."""
    lines = []
    for line in open(logfile, errors="replace"):
        at = line.find("[deepspeed] OVERFLOW!")
        if at >= 0:
            lines.append(line[at:].rstrip())
    return lines


# --- the tables --------------------------------------------------------------------------------
def per_epoch(r):
    return statistics.mean(r["epoch_s"])


def table(args, setups, results, loads, versions):
    mib = 1 << 20
    n_train = args.limit or 60000
    lines = [f"ConvNet (225,034 parameters) on Fashion-MNIST ({n_train} training images, 10,000 test), "
             f"{args.epochs} epochs, global batch {GLOBAL_BATCH} (2 ranks: {GLOBAL_BATCH // WORLD} each), Adam lr {LR:g}, "
             f"fp32, seed {SEED}; {args.rounds} interleaved rounds (order rotated each round), load average at the "
             f"start of each round {', '.join(f'{l:.2f}' for l in loads)}"
             + (f", with {args.background_load} busy process(es) beside every setup" if args.background_load else "")
             + f"; zerotrain under `zerotrain launch --backend "
             f"{args.zt_backend}`"
             + (" with ZEROTRAIN_SHM=0" if os.environ.get("ZEROTRAIN_SHM") == "0" else " (shared memory between its ranks)")
             + f", the Python setups on gloo; {cpu_line()}; {versions}", "",
             f"| setup | processes × threads | s / epoch (median) | "
             f"epoch {', '.join(str(e + 1) for e in range(args.epochs))} (median) | × DDP time | "
             "peak RSS / rank (median) | × DDP RSS | test accuracy |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for key in setups:
        name, procs, threads = SETUPS[key]
        rs = results[key]
        ok = [r for r in rs if "error" not in r]
        if not ok:
            err = rs[0]["error"][:160].replace("|", "/")
            lines.append(f"| {name} | {procs} × {threads} | n/a (error: {err}) | | | | | |")
            continue
        failed = f" ({len(rs) - len(ok)} of {len(rs)} rounds failed)" if len(ok) < len(rs) else ""
        epoch_medians = [median(r["epoch_s"][e] for r in ok) for e in range(len(ok[0]["epoch_s"]))]
        time_ratio = median_ratio(results[key], results.get(REFERENCE, []), per_epoch)
        rss_ratio = median_ratio(results[key], results.get(REFERENCE, []), "rss")
        accs = sorted({f"{r['accuracy']:.4f}" for r in ok})
        lines.append(f"| {name}{failed} | {procs} × {threads} | {median(per_epoch(r) for r in ok):.1f} | "
                     f"{', '.join(f'{s:.1f}' for s in epoch_medians)} | "
                     f"{'n/a' if time_ratio is None else f'{time_ratio:.2f}'} | "
                     f"{median(r['rss'] for r in ok) / mib:.0f} MiB | "
                     f"{'n/a' if rss_ratio is None else f'{rss_ratio:.2f}'} | {' / '.join(accs)} |")
    return "\n".join(lines)


def fp16_block(columns, notes):
    """columns: (heading, lines) pairs, shown side by side, one log line per row."""
    out = ["| line | " + " | ".join(h for h, _ in columns) + " |", "|---:|" + "---|" * len(columns)]
    for i in range(max(len(lines) for _, lines in columns)):
        cells = [f"`{lines[i]}`" if i < len(lines) else "" for _, lines in columns]
        out.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    return "\n".join(notes + [""] + out)


def round_start(args, loads):
    """For run_rounds: notes the load average at the start of each round and prints its order."""
    def start(r, order):
        loads.append(os.getloadavg()[0])
        print(f"[round {r + 1}/{args.rounds}] load average {loads[-1]:.2f}; order {', '.join(order)}",
              file=sys.stderr, flush=True)
    return start


def run_quiet(args, setups, out_dir, loads):
    """Every setup once per round, in an order rotated by the round."""
    def run_one(s, r):
        t0 = time.monotonic()
        res = run_setup(args, s, out_dir, f"{s}-{r}")
        shown = res.get("error") or (f"{', '.join(f'{x:.1f}' for x in res['epoch_s'])} s/epoch, "
                                     f"{res['rss'] / (1 << 20):.0f} MiB, accuracy {res['accuracy']:.4f}")
        print(f"[round {r + 1}/{args.rounds}] {SETUPS[s][0]}: {shown} ({time.monotonic() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        return res
    return run_rounds(args.rounds, setups, run_one, round_start(args, loads))


def start_spinners(n):
    """n busy processes, each in its own session: to the scheduler, another user's job."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(n)]


def stop_spinners(spinners):
    for p in spinners:
        p.kill()
        p.wait()


def run_contention(args, setups, out_dir):
    """Every setup twice per round, quiet and beside --contention busy processes, back to back
    (which comes first alternates with the round), so that each round gives one loaded ÷ quiet
    ratio per setup measured minutes apart at most."""
    loads = []

    def run_one(s, r):   # {busy: result} for 0 and args.contention busy processes
        both = {}
        for busy in rotated((0, args.contention), r):
            spinners = start_spinners(busy)
            try:
                res = run_setup(args, s, out_dir, f"{s}-{r}-{'busy' if busy else 'quiet'}")
            finally:
                stop_spinners(spinners)
            both[bool(busy)] = res
            shown = res.get("error") or f"{per_epoch(res):.1f} s/epoch"
            print(f"[round {r + 1}/{args.rounds}] {SETUPS[s][0]}, {busy} busy: {shown}", file=sys.stderr, flush=True)
        return both
    results = run_rounds(args.rounds, setups, run_one, round_start(args, loads))
    quiet = {s: [both[False] for both in rs] for s, rs in results.items()}
    loaded = {s: [both[True] for both in rs] for s, rs in results.items()}
    return quiet, loaded, loads


def contention_table(args, setups, quiet, loaded, loads, versions):
    n_train = args.limit or 60000
    lines = [f"ConvNet on Fashion-MNIST ({n_train} training images), {args.epochs} epoch(s), global batch "
             f"{GLOBAL_BATCH} (2 ranks × {GLOBAL_BATCH // WORLD}), fp32; {args.rounds} rounds, each running every setup "
             f"quiet and beside {args.contention} busy process(es) (a spinning Python loop in its own session), back "
             f"to back; load average at the start of each round {', '.join(f'{l:.2f}' for l in loads)}; zerotrain "
             f"under `zerotrain launch --backend {args.zt_backend}`, the Python setups on gloo, every rank in its own "
             f"session; {cpu_line()}; {versions}", "",
             "| setup | quiet: s/epoch | busy: s/epoch | busy ÷ quiet (median of rounds) | busy: × DDP time |",
             "|---|---:|---:|---:|---:|"]
    for key in setups:
        pairs = [(b, q) for b, q in zip(loaded[key], quiet[key]) if "error" not in b and "error" not in q]
        if not pairs:
            err = next(r["error"] for r in loaded[key] + quiet[key] if "error" in r)[:160].replace("|", "/")
            lines.append(f"| {SETUPS[key][0]} | n/a (error: {err}) | | | |")
            continue
        vs_ddp = median_ratio(loaded[key], loaded.get(REFERENCE, []), per_epoch)
        lines.append(f"| {SETUPS[key][0]} | {median(per_epoch(q) for _, q in pairs):.1f} | "
                     f"{median(per_epoch(b) for b, _ in pairs):.1f} | "
                     f"{median_ratio(loaded[key], quiet[key], per_epoch):.2f} | "
                     f"{'n/a' if vs_ddp is None else f'{vs_ddp:.2f}'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zerotrain", help="the zerotrain binary (default: BUILD/tools/zerotrain)")
    ap.add_argument("--zt_backend", default="gloo",
                    help="zerotrain launch --backend: gloo (default, as the Python setups), mpi, or auto")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--background_load", type=int, default=0,
                    help="busy processes (one spinning thread each) running beside every setup, for the contention rows")
    ap.add_argument("--contention", type=int, default=0,
                    help="run every setup quiet and beside N busy processes in each round: the busy ÷ quiet table")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--limit", type=int, help="train on the first N training images only (for a quick try)")
    ap.add_argument("--only", default=DEFAULT_SETUPS, help=f"comma-separated, of {', '.join(SETUPS)}")
    ap.add_argument("--no_fp16_log", action="store_true", help="skip the fp16 OVERFLOW comparison")
    ap.add_argument("--fp16_steps", type=int, default=30, help="steps of the fp16 runs (the overflows come first)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before a run is killed")
    ap.add_argument("--keep", help="keep the runs' logs and metrics in this directory")
    ap.add_argument("--write", action="store_true", help="replace the tables in docs/benchmarks.md")
    # worker mode (internal)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--fp16", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--max_steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    args.zerotrain = args.zerotrain or os.path.join(args.build, "tools", "zerotrain")

    setups = [s for s in args.only.split(",") if s]
    bad = [s for s in setups if s not in SETUPS]
    if bad:
        sys.exit(f"unknown {bad}; choose from {', '.join(SETUPS)}")
    if not os.path.exists(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz")):
        sys.exit(f"no Fashion-MNIST in {DATA_DIR}: apt-get install dataset-fashion-mnist (or set FASHION_MNIST_DIR)")
    if any(s.startswith("zt") for s in setups) and not os.access(args.zerotrain, os.X_OK):
        sys.exit(f"no {args.zerotrain}: run scripts/setup.sh first")
    if not os.path.exists(PINNED_PYTHON):
        sys.exit(f"no {PINNED_PYTHON}: run scripts/setup.sh first")
    if "ds2" in setups or not args.no_fp16_log:
        ensure_ds_venv()

    out_dir = args.keep or tempfile.mkdtemp(prefix="dp_ddp_zero.")
    os.makedirs(out_dir, exist_ok=True)
    if args.contention:
        quiet, loaded, loads = run_contention(args, setups, out_dir)
        text = contention_table(args, setups, quiet, loaded, loads, versions_text(quiet, loaded))
        print(text + "\n", flush=True)
        if not args.keep:
            subprocess.run(["rm", "-rf", out_dir])
        if args.write:
            replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), "dp_ddp_zero_contention", text)
        return
    loads = []
    # A busy core per --background_load: the same for every setup, started before the rounds.
    spinners = start_spinners(args.background_load)
    try:
        results = run_quiet(args, setups, out_dir, loads)
    finally:
        stop_spinners(spinners)
    tables = [table(args, setups, results, loads, versions_text(results))]
    print(tables[0] + "\n", flush=True)

    if not args.no_fp16_log:
        steps = args.fp16_steps
        ds = run_python(args, "ds2", out_dir, "fp16-ds2", fp16_steps=steps)
        zt = run_zerotrain(args, 2, out_dir, "fp16-zt2", fp16_steps=steps)
        zt16 = run_zerotrain(args, 2, out_dir, "fp16-zt2-power16", fp16_steps=steps,
                             fp16_keys={"initial_scale_power": 16})
        notes = [f"fp16, ZeRO-2, 2 ranks x {GLOBAL_BATCH // WORLD}, the first {steps} steps of the same training (same "
                 f"ConvNet, data order and Adam). DeepSpeed's config has `\"fp16\": {{\"enabled\": true}}`; "
                 f"zerotrain's `\"fp16\": {{\"enabled\": \"auto\"}}` with `--fp16`, and in the last column "
                 f"`\"initial_scale_power\": 16` (the documented default) written out as well."]
        if ds.get("ds_fp16_native") is False:
            notes.append("DeepSpeed's CPU accelerator reports no fp16 support on this CPU (oneDNN has no fp16 "
                         "kernels here), so `deepspeed.initialize` would stop with \"Type fp16 is not supported on "
                         "your device.\"; the DeepSpeed run lifts that one check (`ds_allow_fp16_on_cpu` in the "
                         "script) and is otherwise DeepSpeed's own ZeRO-2 fp16 optimizer and loss scaler, on "
                         "PyTorch's CPU half kernels, with `\"log_level\": \"info\"` so that the scaler's INFO "
                         "lines print.")
        columns = []
        for heading, res in ((f"DeepSpeed {ds.get('deepspeed', '')} ZeRO-2 fp16", ds),
                             ("zerotrain ZeRO-2 `--fp16`", zt),
                             ("zerotrain, `initial_scale_power` 16 written", zt16)):
            lines = overflow_lines(res["log"]) if "log" in res else []
            if "error" in res:
                notes.append(f"{heading}: the run failed: {res['error']}")
            elif not lines:
                notes.append(f"{heading}: no overflow in the {steps} steps.")
            columns.append((heading, lines))
        tables.append(fp16_block(columns, notes))
        print(tables[-1] + "\n", flush=True)
    if not args.keep:
        subprocess.run(["rm", "-rf", out_dir])
    if args.write:
        # Rounds under a background load have their own table: the quiet one stays.
        marker = "dp_ddp_zero_loaded" if args.background_load else "dp_ddp_zero"
        replace_between_markers(os.path.join(ROOT, "docs", "benchmarks.md"), marker, "\n\n".join(tables))


if __name__ == "__main__":
    main()

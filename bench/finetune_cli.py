#!/usr/bin/env python3
"""Fine-tuning a Hugging Face model folder: `zerotrain train --model hf:DIR` (the C++ model,
tokenizer and data pipeline, no Python at run time) against the same job in Python: HF's
Trainer with transformers' GPT-2 on zerotrain's engine (`zerotrain.hf`), and with DeepSpeed
0.19.8 (CPU accelerator). The model is GPT-2 small's layout (12 layers, 768 wide; "small":
2 x 128 for a check of the harness) over the KJV tokenizer's vocabulary, random init saved as
an HF folder; the data the tokenised King James Bible in blocks of --seq tokens; world size 2,
one intra-op thread per rank; fp32, or bf16 with --bf16 (where the CPU has AVX512-BF16 or AMX).

Per stage and side: samples/s over the steps after the warm-up, peak RSS per rank, and the
time from the rank process's start to the end of its first optimizer step. Rounds interleave
the sides: each round runs every stage, the three sides back to back (the stages' order and
the sides' rotated by the round); the table gives the median over rounds of each round's ratio.

    python3 bench/finetune_cli.py [--stages 2,3] [--rounds 3] [--steps 10] [--warmup 2]
        [--micro 2] [--seq 128] [--model-size 124m|small] [--bf16] [--dry-run]

The Python sides are bench/hf_trainer_worker.py (its --final step, not timed here, is each
framework's cheapest: save_model for zerotrain, the ZeRO checkpoint for DeepSpeed). The
C++ side reads the text from a file the driver writes, tokenised with the same tokenizer.json;
its cache (docs/finetune.md) is made by an untimed run first, as the Python side's token ids
are cached by kjv_data. The table goes into docs/benchmarks.md between the
<!-- finetune_cli:<model-size>[-bf16] --> markers unless --dry-run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from lib.cpu import cpu_line
from lib.docs_tables import write_block
from lib.formatting import fmt
from lib.hf_trainer_runs import GPT2_SIZES as MODELS, WORLD, run_worker
from lib.peer_envs import PINNED_PYTHON as PINNED, ensure_ds_venv
from lib.procs import error_of
from lib.rounds import rotated, run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZEROTRAIN = os.environ.get("ZEROTRAIN_BIN", os.path.join(ROOT, "build", "tools", "zerotrain"))
SIDES = ["deepspeed", "python", "cli"]
NAMES = {"deepspeed": "DeepSpeed + transformers", "python": "zerotrain.hf + transformers",
         "cli": "zerotrain train --model hf:"}
GIB = float(1 << 30)


def prepare(tmp, args):
    """The tokenizer, the text file, the model folder (random init), and the C++ side's cache."""
    code = f"""
import json, sys, torch, transformers
sys.path.insert(0, {os.path.join(ROOT, 'examples', 'hf')!r})
import kjv_data
tok = kjv_data.train_kjv_tokenizer({os.path.join(tmp, 'tokenizer')!r})
kjv_data.kjv_blocks({os.path.join(tmp, 'tokenizer')!r})
open({os.path.join(tmp, 'kjv.txt')!r}, 'w').write(kjv_data.kjv_text())
torch.manual_seed(0)
config = transformers.GPT2Config(**{MODELS[args.model_size]!r}, vocab_size=len(tok), n_positions={args.seq},
                                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
transformers.GPT2LMHeadModel(config).save_pretrained({os.path.join(tmp, 'model')!r})
tok.save_pretrained({os.path.join(tmp, 'model')!r})
"""
    subprocess.run([PINNED, "-c", code], check=True, capture_output=True)
    run_cli(0, args, tmp, "cache", steps=1, warmup=0)   # builds the tokenised text's cache


def run_cli(stage, args, tmp, label, steps=None, warmup=None):
    steps = args.steps if steps is None else steps
    warmup = args.warmup if warmup is None else warmup
    base = os.path.join(tmp, label)
    os.makedirs(base)
    metrics = os.path.join(base, "metrics.jsonl")
    cmd = [ZEROTRAIN, "launch", "--nproc_per_node", str(WORLD), ZEROTRAIN, "train",
           "--model", "hf:" + os.path.join(tmp, "model"), "--model_config", f"block_size={args.seq}",
           "--dataset", "text:" + os.path.join(tmp, "kjv.txt"), "--zero_stage", str(stage),
           "--max_steps", str(warmup + steps), "--per_device_train_batch_size", str(args.micro),
           "--learning_rate", "3e-4", "--weight_decay", "0.01", "--warmup_steps", "2", "--seed", "0",
           "--logging_steps", "1", "--save_strategy", "no", "--disable_tqdm", "--metrics_file", metrics]
    if args.bf16:
        cmd.append("--bf16")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    with open(os.path.join(base, "log.txt"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return {"error": error_of(proc)}
    lines = [json.loads(l) for l in open(metrics)]
    logs = [l for l in lines if "loss" in l and "event" not in l]
    end = next(l for l in lines if l.get("event") == "end")
    timed_s = logs[-1]["elapsed_s"] - logs[warmup - 1]["elapsed_s"] if warmup else None
    return {"samples_per_s": steps * args.micro * WORLD / timed_s if timed_s else None,
            "peak_rss_bytes": max(end["peak_rss_bytes"]), "first_step_s": logs[0]["process_s"],
            "train_loss": end["train_loss"]}


def run_python(impl, stage, args, tmp, label):
    base = os.path.join(tmp, label)
    os.makedirs(base)
    ranks = run_worker(impl, stage, args, base, os.path.join(tmp, "tokenizer"), os.path.join(base, "final"),
                       extra=["--bf16"] if args.bf16 else [])
    if isinstance(ranks, dict):
        return ranks
    return {"samples_per_s": statistics.mean(r["samples_per_s"] for r in ranks),
            "first_step_s": max(r["first_step_s"] for r in ranks),
            "peak_rss_bytes": max(r["peak_rss_bytes"] for r in ranks), "train_loss": ranks[0]["train_loss"],
            "parameters": ranks[0]["parameters"]}


def run(side, stage, args, tmp, label):
    if side == "cli":
        return run_cli(stage, args, tmp, label)
    return run_python("deepspeed" if side == "deepspeed" else "zerotrain", stage, args, tmp, label)


def tables(args, rows, command):
    params = next((r["parameters"] for pairs in rows.values() for p in pairs for r in p.values()
                   if "parameters" in r), None)
    lines = [f"CPU: {cpu_line()}. GPT-2 ({args.model_size}: {fmt(params and params / 1e6, '.1f', 'M')} parameters, "
             f"the KJV tokenizer's vocabulary), {'bf16' if args.bf16 else 'fp32'}, world size 2, 1 intra-op thread "
             f"per rank, per-device batch {args.micro} × {args.seq} tokens, AdamW; {args.steps} timed steps after "
             f"{args.warmup}; {args.rounds} round{'s' if args.rounds > 1 else ''}, interleaved. DeepSpeed 0.19.8. "
             f"Reproduce: `{command}`", "",
             "Ratios, the median of each round's (targets: the CLI ≥ 1.2× DeepSpeed's samples/s, and at least "
             "the Python package's):", "",
             "| stage | samples/s: CLI / DeepSpeed | samples/s: CLI / zerotrain.hf | peak RSS: CLI / DeepSpeed | "
             "first step: CLI / DeepSpeed |", "|---|---|---|---|---|"]
    for stage, pairs in rows.items():
        def ratio(key, other):
            return median_ratio([p["cli"] for p in pairs], [p[other] for p in pairs], key)
        lines.append(f"| {stage} | {fmt(ratio('samples_per_s', 'deepspeed'), '.2f')} | "
                     f"{fmt(ratio('samples_per_s', 'python'), '.2f')} | {fmt(ratio('peak_rss_bytes', 'deepspeed'), '.2f')} | "
                     f"{fmt(ratio('first_step_s', 'deepspeed'), '.2f')} |")
    lines += ["", "| stage | side | samples/s | peak RSS per rank | first step | train loss |", "|---|---|---|---|---|---|"]
    for stage, pairs in rows.items():
        for side in SIDES:
            ok = [p[side] for p in pairs if "error" not in p[side]]
            if not ok:
                lines.append(f"| {stage} | {NAMES[side]} | n/a ({pairs[0][side]['error']}) | | | |")
                continue
            med = lambda key: median(r.get(key) for r in ok)  # noqa: E731
            lines.append(f"| {stage} | {NAMES[side]} | {fmt(med('samples_per_s'), '.3g')} | "
                         f"{fmt(med('peak_rss_bytes') and med('peak_rss_bytes') / GIB, '.2f', ' GiB')} | "
                         f"{fmt(med('first_step_s'), '.1f', ' s')} | {fmt(med('train_loss'), '.4f')} |")
    lines += ["", "First step: from the rank process's start to the end of its first optimizer step. The CLI "
              "tokenises the text in C++ (cached after the first run, as the Python side caches its ids); its "
              "blocks are the same length but cut from the whole text rather than from each split, so the "
              "losses differ slightly."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", default="2,3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--micro", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--model-size", choices=sorted(MODELS), default="124m")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.warmup < 1 or args.steps < 1:
        ap.error("--warmup and --steps must be at least 1")
    stages = [int(s) for s in args.stages.split(",")]
    kept = [a for a in sys.argv[1:] if a != "--dry-run"]
    command = "python3 bench/finetune_cli.py " + " ".join(kept)
    ensure_ds_venv()
    with tempfile.TemporaryDirectory(prefix="finetune-cli-bench-") as tmp:
        prepare(tmp, args)

        def run_sides(stage, rnd):   # {side: figures}, the sides back to back
            got = {}
            for side in rotated(SIDES, rnd):
                got[side] = run(side, stage, args, tmp, f"r{rnd}-s{stage}-{side}")
                print(f"round {rnd + 1} stage {stage} {side}: {got[side]}", file=sys.stderr, flush=True)
            return {side: got[side] for side in SIDES}
        rows = run_rounds(args.rounds, stages, run_sides)
    text = tables(args, rows, command)
    print(text)
    if not args.dry_run:
        write_block(f"finetune_cli:{args.model_size}{'-bf16' if args.bf16 else ''}", text)


if __name__ == "__main__":
    main()

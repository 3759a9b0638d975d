#!/usr/bin/env python3
"""The Hugging Face Trainer on zerotrain against DeepSpeed: the same Trainer script
(bench/hf_trainer_worker.py) with `from transformers import Trainer, TrainingArguments` and
DeepSpeed 0.19.8 (CPU accelerator), and with `from zerotrain.hf import Trainer,
TrainingArguments`; transformers' GPT-2 (GPT2Config's 12 layers × 768, the KJV tokenizer's
vocabulary) built from a config, trained on the tokenised King James Bible
(examples/hf/kjv_data.py), fp32, world size 2, one intra-op thread per rank.

Per stage and side: samples/s over the steps after the warm-up, peak RSS per rank while
training, time from the rank's process start to the end of its first optimizer step, and the
time and memory to produce the final Hugging Face folder:
  DeepSpeed  the ZeRO checkpoint the Trainer writes (model_wrapped.save_checkpoint), then
             zero_to_fp32 + save_pretrained in a process of its own
             (bench/hf_trainer_consolidate.py): its time is the two together, its memory the
             peak RSS of that process.
  zerotrain  trainer.save_model(dir) in the training processes
             (stage3_gather_16bit_weights_on_model_save): its memory is what the save adds to
             a rank's RSS (the peak during the save less the RSS before it).
Rounds interleave the two: each round runs every stage, the two sides back to back (the
stages' order and which side goes first rotated by the round); the table gives the median
over rounds of each round's ratio.

    python3 bench/hf_trainer.py [--stages 2,3] [--rounds 3] [--steps 20] [--warmup 2]
        [--micro 2] [--seq 128] [--model-size 124m|small] [--impls deepspeed,zerotrain]
        [--dry-run] [--json FILE]

DeepSpeed runs from $ZEROTRAIN_HOME/bench-venv (made on first use, see
bench/lib/peer_envs.py) under its own launcher (`deepspeed --num_gpus 2`,
DS_ACCELERATOR=cpu); zerotrain from the pinned venv with the build tree's package
(build/python) under `python -m zerotrain.launcher --nproc_per_node 2`. The table goes into
docs/benchmarks.md between the <!-- hf_trainer:<model-size> --> markers unless --dry-run,
and only when both sides ran.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from lib.cpu import cpu_line
from lib.docs_tables import write_block
from lib.formatting import fmt
from lib.hf_trainer_runs import run_worker
from lib.peer_envs import DS_PYTHON, PINNED_PYTHON, ensure_ds_venv
from lib.procs import error_of
from lib.rounds import rotated, run_rounds
from lib.stats import median, median_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSOLIDATE = os.path.join(ROOT, "bench", "hf_trainer_consolidate.py")
NAMES = {"deepspeed": "DeepSpeed", "zerotrain": "zerotrain"}
GIB, MIB = float(1 << 30), float(1 << 20)


def prepare_tokenizer(directory):
    """Trains the KJV tokenizer and encodes the text once, so that the ranks only load them."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import kjv_data; "
            "kjv_data.train_kjv_tokenizer(sys.argv[2]); kjv_data.kjv_blocks(sys.argv[2])")
    subprocess.run([PINNED_PYTHON, "-c", code, os.path.join(ROOT, "examples", "hf"), directory], check=True)


def run(impl, stage, args, tmp, tokenizer_dir, label):
    """One training run of `impl` (and DeepSpeed's consolidation); its figures, or {"error"}."""
    base = os.path.join(tmp, label)
    os.makedirs(base)
    final_dir = os.path.join(base, "final")
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    ranks = run_worker(impl, stage, args, base, tokenizer_dir, final_dir)
    if isinstance(ranks, dict):
        return ranks
    result = {
        "samples_per_s": statistics.mean(r["samples_per_s"] for r in ranks),
        "first_step_s": max(r["first_step_s"] for r in ranks),
        "peak_rss_bytes": max(r["peak_rss_bytes"] for r in ranks),
        "final_s": max(r["final_s"] for r in ranks),
        # What the last step in the training processes adds to a rank's RSS (None: VmHWM not resettable).
        "final_rss_in_ranks_bytes": max((r["final_peak_rss_bytes"] or float("nan")) - r["final_rss_before_bytes"]
                                        for r in ranks),
        "train_loss": ranks[0]["train_loss"], "parameters": ranks[0]["parameters"], "version": ranks[0]["version"],
    }
    if result["final_rss_in_ranks_bytes"] != result["final_rss_in_ranks_bytes"]:   # NaN
        result["final_rss_in_ranks_bytes"] = None
    if impl == "zerotrain":
        result["final_rss_bytes"] = result["final_rss_in_ranks_bytes"]
        return result
    # DeepSpeed: zero_to_fp32 + save_pretrained, a process of its own.
    out = os.path.join(base, "consolidate.json")
    t0 = time.perf_counter()
    cons = subprocess.run([DS_PYTHON, CONSOLIDATE, final_dir,
                           os.path.join(base, "hf"), "--out", out], capture_output=True, text=True, env=env,
                          timeout=3600)
    if cons.returncode != 0:
        return {"error": "zero_to_fp32 + save_pretrained: " + error_of(cons)}
    result["final_s"] += time.perf_counter() - t0
    result["final_rss_bytes"] = json.load(open(out))["peak_rss_bytes"]
    return result


def tables(args, rows, command):
    """The text for docs/benchmarks.md: ratios (zerotrain / DeepSpeed, the median of each
    round's ratio) and the medians of each side's figures."""
    some = next((r for pairs in rows.values() for pair in pairs for r in pair.values() if "error" not in r), {})
    params = some.get("parameters")
    versions = {impl: next((p[impl]["version"] for pairs in rows.values() for p in pairs
                            if impl in p and "error" not in p[impl]), "?") for impl in args.impls}
    lines = [
        f"CPU: {cpu_line()}. GPT-2 ({args.model_size}: {fmt(params and params / 1e6, '.1f', 'M')} parameters, "
        f"vocabulary of the KJV tokenizer), fp32, world size 2, 1 intra-op thread per rank, per-device batch "
        f"{args.micro} × {args.seq} tokens, AdamW with WarmupDecayLR (all \"auto\"); {args.steps} timed steps after "
        f"{args.warmup}; {args.rounds} round{'s' if args.rounds > 1 else ''}, interleaved. "
        + ", ".join(f"{NAMES[i]} {versions[i]}" for i in args.impls) + ". Reproduce: `" + command + "`", ""]
    both = set(args.impls) == {"deepspeed", "zerotrain"}
    if both:
        lines += ["Ratios zerotrain / DeepSpeed (targets: samples/s ≥ 1.2, peak RSS ≤ 0.6, final-folder RSS ≤ 0.2):",
                  "",
                  "| stage | samples/s | peak RSS per rank | first step | final folder time | final folder RSS |",
                  "|---|---|---|---|---|---|"]
        for stage, pairs in rows.items():
            def ratio(key):
                return median_ratio([p["zerotrain"] for p in pairs], [p["deepspeed"] for p in pairs], key)
            lines.append(f"| {stage} | {fmt(ratio('samples_per_s'), '.2f')} | {fmt(ratio('peak_rss_bytes'), '.2f')} | "
                         f"{fmt(ratio('first_step_s'), '.2f')} | {fmt(ratio('final_s'), '.2f')} | "
                         f"{fmt(ratio('final_rss_bytes'), '.2f')} |")
        lines.append("")
    lines += ["| stage | side | samples/s | peak RSS per rank | first step | final folder time | final folder RSS | "
              "train loss |", "|---|---|---|---|---|---|---|---|"]
    for stage, pairs in rows.items():
        for impl in args.impls:
            ok = [p[impl] for p in pairs if "error" not in p[impl]]
            if not ok:
                lines.append(f"| {stage} | {NAMES[impl]} | n/a ({pairs[0][impl]['error']}) | | | | | |")
                continue

            def med(key):
                return median(r.get(key) for r in ok)
            lines.append(f"| {stage} | {NAMES[impl]} | {fmt(med('samples_per_s'), '.3g')} | "
                         f"{fmt(med('peak_rss_bytes') and med('peak_rss_bytes') / GIB, '.2f', ' GiB')} | "
                         f"{fmt(med('first_step_s'), '.1f', ' s')} | {fmt(med('final_s'), '.1f', ' s')} | "
                         f"{fmt(med('final_rss_bytes') and med('final_rss_bytes') / MIB, '.0f', ' MiB')} | "
                         f"{fmt(med('train_loss'), '.4f')} |")
    lines += ["", "First step: from the rank process's start to the end of its first optimizer step (the later "
              "rank). Final folder: DeepSpeed writes its ZeRO checkpoint, then zero_to_fp32 + save_pretrained run "
              "in a process of their own (time: both; RSS: that process's peak); zerotrain's "
              "`trainer.save_model(dir)` runs in the training processes (RSS: what the save adds to a rank's)."]
    return "\n".join(lines)


def reproducing_args(argv):
    """The command line as given, less the options that do not change the figures."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--json":
            skip = True
        elif a != "--dry-run" and not a.startswith("--json="):
            kept.append(a)
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", default="2,3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20, help="timed optimizer steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="optimizer steps before the timed ones")
    ap.add_argument("--micro", type=int, default=2, help="per-device batch")
    ap.add_argument("--seq", type=int, default=128, help="tokens per sample")
    ap.add_argument("--model-size", choices=["124m", "small"], default="124m",
                    help="small: 2 layers × 128, for a quick check of the harness")
    ap.add_argument("--impls", default="deepspeed,zerotrain", help="the sides to run (both to write the table)")
    ap.add_argument("--dry-run", action="store_true", help="print the table, leave docs/benchmarks.md alone")
    ap.add_argument("--json", help="also write every run's figures to this file")
    args = ap.parse_args()
    args.impls = [i for i in ("deepspeed", "zerotrain") if i in args.impls.split(",")]
    if not args.impls or args.warmup < 1 or args.steps < 1:
        ap.error("--impls needs deepspeed and/or zerotrain; --warmup and --steps at least 1")
    stages = [int(s) for s in args.stages.split(",")]
    command = "python3 bench/hf_trainer.py " + " ".join(reproducing_args(sys.argv[1:]))
    if "deepspeed" in args.impls:
        ensure_ds_venv()
    with tempfile.TemporaryDirectory(prefix="hf-trainer-bench-") as tmp:
        tokenizer_dir = os.path.join(tmp, "tokenizer")
        prepare_tokenizer(tokenizer_dir)

        def run_pair(stage, rnd):   # {impl: figures}, the sides back to back
            pair = {}
            for impl in rotated(args.impls, rnd):
                pair[impl] = run(impl, stage, args, tmp, tokenizer_dir, f"r{rnd}-s{stage}-{impl}")
                print(f"round {rnd + 1} stage {stage} {impl}: {pair[impl]}", file=sys.stderr, flush=True)
            return {impl: pair[impl] for impl in args.impls}
        rows = run_rounds(args.rounds, stages, run_pair)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(s): pairs for s, pairs in rows.items()}, f, indent=1)
    text = tables(args, rows, command)
    print(text)
    if args.dry_run:
        return
    if set(args.impls) != {"deepspeed", "zerotrain"}:
        print("not written to docs/benchmarks.md: one side only (run both, or --dry-run)", file=sys.stderr)
        return
    write_block(f"hf_trainer:{args.model_size}", text)


if __name__ == "__main__":
    main()

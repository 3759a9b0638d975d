#!/usr/bin/env python3
"""`zerotrain estimate --detailed` against what `zerotrain train` measures: the built-in GPT at
ZeRO stages 0, 1, 2 and 3 on 2 ranks, in fp32, bf16 and fp16. Predicted model-state bytes are compared
with the engine's model_state_bytes() and predicted peak RSS with getrusage's, on the rank
holding the most. Prints a markdown table.

    python3 bench/estimate_vs_measured.py [--build build] [--cases ci|docs] [--check] [--write]

--check exits 1 unless every model-state prediction is within 5% and every peak within 10%
(ctest runs this with --cases ci), and, for the ci cases, unless the model states are at least
40% of every predicted peak: at the tiny and small sizes the peak is mostly the runtime's
constant, so a bound on it says little about the estimate of the states.

The runs fix glibc's mmap threshold (MALLOC_MMAP_THRESHOLD_): left dynamic, glibc raises it
after the first large free, and the buffers that stage 3 frees and allocates again every step
then come from a heap that keeps its freed pages (docs/estimator.md). --write puts
the table into docs/estimator.md between the estimate_vs_measured markers.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from lib.docs_tables import replace_between_markers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = 200000   # reduce_bucket_size of examples/ds_config_train_zero2.json
# ci: a GPT of 29.4M parameters on short sequences, so that its model states outweigh the
# runtime and the activations at every stage and precision, yet a step costs little compute
# (bf16 is slow on CPUs without AVX512-BF16).
STATES_DOMINATE = "n_layer=8,n_head=8,n_embd=512,vocab_size=8192,block_size=32"
CASES = {
    "ci": [(STATES_DOMINATE, 2)],
    "docs": [("preset=tiny", 8), ("preset=small", 8), ("preset=small,n_layer=8,n_embd=512,vocab_size=8192", 4)],
    "big": [("preset=small,n_layer=8,n_embd=512,vocab_size=8192", 4)],
}
STATE_TOLERANCE, PEAK_TOLERANCE = 0.05, 0.10
MIN_STATE_SHARE = 0.4   # ci cases: the model states' share of the predicted peak


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def measure(zt, out, model_config, micro, stage, precision, steps):
    config = json.load(open(os.path.join(ROOT, "examples", "ds_config_train_zero2.json")))
    config["zero_optimization"]["stage"] = stage
    path = os.path.join(out, f"zero{stage}.json")
    json.dump(config, open(path, "w"))
    metrics = os.path.join(out, "metrics.jsonl")
    flags = [] if precision == "fp32" else [f"--{precision}"]
    run([zt, "launch", "--nproc_per_node", "2", "--", zt, "train", "--model", "gpt", "--model_config", model_config,
         "--deepspeed", path, "--per_device_train_batch_size", str(micro), "--max_steps", str(steps),
         "--logging_steps", str(steps), "--metrics_file", metrics, "--overwrite_output_dir"] + flags, env=dict(os.environ, OMP_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_=str(1 << 20)))
    rows = [json.loads(line) for line in open(metrics)]
    last = [r for r in rows if "loss" in r][-1]
    return max(last["model_state_bytes"]), max(last["peak_rss_bytes"]), max(last["baseline_rss_bytes"])


def predict(zt, model_config, micro):
    text = run([zt, "estimate", "--detailed", "--json", "--model", "gpt", "--model_config", model_config,
                "--world_size", "2", "--micro_batch", str(micro), "--reduce_bucket_size", str(BUCKET),
                "--overlap_comm"]).stdout
    return json.loads(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cases", choices=sorted(CASES), default="docs")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    zt = os.path.join(args.build, "tools", "zerotrain")
    mib = 1 << 20
    lines = ["| model | precision | stage | model states: predicted | measured | error | peak RSS: predicted | "
             "measured | error | runtime measured |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    failures = []
    with tempfile.TemporaryDirectory() as out:
        for model_config, micro in CASES[args.cases]:
            prediction = predict(zt, model_config, micro)
            for precision in ("fp32", "bf16", "fp16"):
                for stage in (0, 1, 2, 3):
                    row = next(r for r in prediction["rows"] if r["precision"] == precision and r["stage"] == stage
                               and not r["offload_optimizer"])
                    state, peak, baseline = measure(zt, out, model_config, micro, stage, precision, args.steps)
                    state_err = row["model_states"] / state - 1
                    peak_err = row["peak"] / peak - 1
                    lines.append(f"| {model_config} ({prediction['params'] / 1e6:.1f}M), micro-batch {micro} | "
                                 f"{precision} | {stage} | {row['model_states'] / mib:.1f} MiB | {state / mib:.1f} MiB | "
                                 f"{state_err:+.1%} | {row['peak'] / mib:.0f} MiB | {peak / mib:.0f} MiB | "
                                 f"{peak_err:+.1%} | {baseline / mib:.0f} MiB |")
                    print(lines[-1], flush=True)
                    if abs(state_err) > STATE_TOLERANCE:
                        failures.append(f"{model_config} {precision} stage {stage}: model states off by {state_err:+.1%}")
                    if abs(peak_err) > PEAK_TOLERANCE:
                        failures.append(f"{model_config} {precision} stage {stage}: peak RSS off by {peak_err:+.1%}")
                    if args.cases == "ci" and row["model_states"] < MIN_STATE_SHARE * row["peak"]:
                        failures.append(f"{model_config} {precision} stage {stage}: the model states are "
                                        f"{row['model_states'] / row['peak']:.0%} of the predicted peak; the check "
                                        f"needs a model whose states are at least {MIN_STATE_SHARE:.0%}")
    table = "\n".join(lines)
    print(table)
    if args.write:
        replace_between_markers(os.path.join(ROOT, "docs", "estimator.md"), "estimate_vs_measured", table)
    if args.check and failures:
        print("\n".join(["FAIL"] + failures))
        sys.exit(1)


if __name__ == "__main__":
    main()

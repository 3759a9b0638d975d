"""One rank of bench/hf_trainer.py: the same Hugging Face Trainer script run with DeepSpeed
(--impl deepspeed: `from transformers import Trainer, TrainingArguments`, the ds_config in
TrainingArguments(deepspeed=...)) or with zerotrain (--impl zerotrain: `from zerotrain.hf
import ...`). Only the import line differs, and the last step (--final), which follows each
framework's route to a Hugging Face folder:

  save_model       trainer.save_model(dir): the gathered 16-bit weights written by the
                   training processes (zerotrain; stage3_gather_16bit_weights_on_model_save).
  zero_checkpoint  the ZeRO checkpoint the Trainer writes with DeepSpeed
                   (model_wrapped.save_checkpoint), for zero_to_fp32 + save_pretrained in a
                   separate process (bench/hf_trainer_consolidate.py).

A GPT-2 built from a config (nothing downloaded) trains on the tokenised King James Bible
(examples/hf/kjv_data.py), fp32, 1 intra-op thread. Writes this rank's figures as JSON to
--out.rank<R>.json: time from process start to the end of the first optimizer step,
samples/s over the steps after the warm-up, peak RSS while training, and the time and RSS of
the last step."""

import argparse
import json
import os
import resource
import sys
import time

from lib.hf_trainer_runs import GPT2_SIZES as MODELS
from lib.proc_stats import process_start_s, reset_peak_rss, status_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "hf"))   # kjv_data


def main():
    started = process_start_s()
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["deepspeed", "zerotrain"], required=True)
    ap.add_argument("--ds-config", required=True, help="a ds_config file with Hugging Face 'auto' values")
    ap.add_argument("--tokenizer-dir", required=True, help="where kjv_data.train_kjv_tokenizer saved the tokenizer")
    ap.add_argument("--model-size", choices=sorted(MODELS), default="124m")
    ap.add_argument("--steps", type=int, default=20, help="timed optimizer steps, after the warm-up")
    ap.add_argument("--warmup", type=int, default=2, help="optimizer steps left out of samples/s")
    ap.add_argument("--micro", type=int, default=2, help="per-device batch")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--bf16", action="store_true", help="TrainingArguments(bf16=True)")
    ap.add_argument("--final", choices=["save_model", "zero_checkpoint"], required=True)
    ap.add_argument("--final-dir", required=True)
    ap.add_argument("--work-dir", required=True, help="the Trainer's output_dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--local_rank", type=int, default=-1, help="given by the deepspeed launcher (LOCAL_RANK too)")
    args = ap.parse_args()
    if args.warmup < 1 or args.steps < 1:
        ap.error("--warmup and --steps must be at least 1 (samples/s is timed from the end of the warm-up)")

    if args.impl == "deepspeed":
        from transformers import Trainer, TrainingArguments
    else:
        from zerotrain.hf import Trainer, TrainingArguments
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback
    import kjv_data

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    tokenizer = kjv_data.train_kjv_tokenizer(args.tokenizer_dir)   # saved by the driver: loaded, not trained
    total_steps = args.warmup + args.steps
    train = kjv_data.kjv_hf_dataset(args.tokenizer_dir, "train", block_size=args.seq,
                                    limit=total_steps * args.micro * world)

    class StepTimes(TrainerCallback):
        """The wall clock at the end of each optimizer step."""

        def __init__(self):
            self.ends = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.time())

    training_args = TrainingArguments(
        output_dir=args.work_dir, deepspeed=args.ds_config, max_steps=total_steps,
        per_device_train_batch_size=args.micro, gradient_accumulation_steps=1,
        learning_rate=3e-4, weight_decay=0.01, warmup_steps=2, max_grad_norm=1.0,
        ddp_backend="gloo", use_cpu=True, dataloader_num_workers=0, seed=0,
        save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True, bf16=args.bf16)
    torch.manual_seed(0)
    config = GPT2Config(**MODELS[args.model_size], vocab_size=len(tokenizer), n_positions=args.seq,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config)
    parameters = sum(p.numel() for p in model.parameters())   # before ZeRO-3 partitions them
    steps = StepTimes()
    trainer = Trainer(model=model, args=training_args, train_dataset=train, processing_class=tokenizer,
                      callbacks=[steps])
    train_output = trainer.train()
    train_peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    # The final folder: time and peak RSS of this step alone.
    peak_resettable = reset_peak_rss()
    rss_before = status_bytes("VmRSS")
    t0 = time.time()
    if args.final == "save_model":
        trainer.save_model(args.final_dir)
    else:
        trainer.model_wrapped.save_checkpoint(args.final_dir)
        if trainer.args.should_save:   # as the Trainer's save_model does before a ZeRO checkpoint
            model.config.save_pretrained(args.final_dir)
            tokenizer.save_pretrained(args.final_dir)
    final_s = time.time() - t0
    final_peak = status_bytes("VmHWM") if peak_resettable else None

    if len(steps.ends) != total_steps:
        raise RuntimeError(f"the Trainer made {len(steps.ends)} optimizer steps, not {total_steps}")
    timed_s = steps.ends[-1] - steps.ends[args.warmup - 1]
    result = {
        "impl": args.impl, "rank": rank, "world": world, "steps": len(steps.ends),
        "parameters": parameters,
        "first_step_s": steps.ends[0] - started,
        "samples_per_s": args.steps * args.micro * world / timed_s,
        "peak_rss_bytes": train_peak_rss, "train_loss": train_output.training_loss,
        "final_s": final_s, "final_rss_before_bytes": rss_before, "final_peak_rss_bytes": final_peak,
        "version": sys.modules[args.impl].__version__,   # imported by the Trainer
        "torch": torch.__version__,
    }
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

"""One rank of a Hugging Face Trainer run on the tokenised King James Bible: the guide's
script, with `--impl zerotrain` importing Trainer and TrainingArguments from zerotrain.hf
(ds_config given as deepspeed=) and `--impl plain` from transformers (no DeepSpeed, one
process). Writes this rank's logged per-step losses, eval losses and engine facts to --out."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "hf"))
import kjv_data  # noqa: E402


def ds_config(stage, offload, gather):
    cfg = {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "zero_optimization": {"stage": stage, "reduce_bucket_size": "auto"},
    }
    if stage == 3:
        cfg["zero_optimization"].update({"stage3_prefetch_bucket_size": "auto",
                                         "stage3_param_persistence_threshold": "auto",
                                         "stage3_gather_16bit_weights_on_model_save": gather})
    if offload:
        cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    return cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["zerotrain", "plain"], required=True)
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--tokenizer_dir", required=True)
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--offload", action="store_true")
    ap.add_argument("--no_gather", action="store_true")
    ap.add_argument("--global_batch", type=int, default=4)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--blocks", type=int, default=64, help="training blocks of the KJV")
    ap.add_argument("--block_size", type=int, default=32)
    ap.add_argument("--save_steps", type=int, default=0)
    ap.add_argument("--save_total_limit", type=int, default=None)
    ap.add_argument("--eval_steps", type=int, default=0)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--save_model", default=None)
    ap.add_argument("--hf_dataset", action="store_true", help="the training data as a datasets.Dataset")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    if a.impl == "zerotrain":
        # The whole import change of the guide's script: with the arguments built first, a
        # stage-3 config loads the model under zero.Init (each rank reads its share).
        from zerotrain.hf import AutoModelForCausalLM, Trainer, TrainingArguments
    else:
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    import torch

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    tokenizer = kjv_data.train_kjv_tokenizer(a.tokenizer_dir)
    make = kjv_data.kjv_hf_dataset if a.hf_dataset else kjv_data.KjvBlocks
    train = make(tokenizer, "train", block_size=a.block_size, limit=a.blocks)
    evald = kjv_data.KjvBlocks(tokenizer, "eval", block_size=a.block_size, limit=8)

    extra = {}
    if a.impl == "zerotrain":
        extra["deepspeed"] = ds_config(a.stage, a.offload, not a.no_gather)
    if a.save_steps:
        extra.update(save_strategy="steps", save_steps=a.save_steps, save_total_limit=a.save_total_limit)
    else:
        extra["save_strategy"] = "no"
    if a.eval_steps:
        extra.update(eval_strategy="steps", eval_steps=a.eval_steps, per_device_eval_batch_size=2)
    args = TrainingArguments(
        output_dir=a.output_dir, per_device_train_batch_size=a.global_batch // (world * a.accum),
        gradient_accumulation_steps=a.accum, max_steps=a.steps, learning_rate=3e-3, weight_decay=0.01,
        warmup_steps=3, lr_scheduler_type="linear", logging_steps=1, report_to="none", seed=0, data_seed=0,
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, **extra)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir)
    result_model = {"zero_init": any(getattr(p, "_zt_cutter", None) is not None for p in model.parameters())}
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=evald if a.eval_steps else None,
                      processing_class=tokenizer)
    trainer.train(resume_from_checkpoint=a.resume)
    history = trainer.state.log_history
    result = {
        "rank": rank, "world": world,
        "losses": {int(h["step"]): h["loss"] for h in history if "loss" in h},
        "eval_losses": [h["eval_loss"] for h in history if "eval_loss" in h],
        "grad_norms": [h.get("grad_norm") for h in history if "loss" in h],
        "deepspeed_enabled": bool(trainer.is_deepspeed_enabled),
        "deepspeed_imported": "deepspeed" in sys.modules,
        "global_step": trainer.state.global_step,
        **result_model,
    }
    if a.impl == "zerotrain":
        result["stage"] = trainer.deepspeed.zero_optimization_stage()
        result["world_size"] = trainer.deepspeed.world_size
    if a.save_model:
        trainer.save_model(a.save_model)
        # The logits the saved folder must reproduce, from the trained model (gathered at stage 3).
        ids = torch.arange(a.block_size).remainder(len(tokenizer)).unsqueeze(0)
        engine = trainer.model_wrapped
        engine.eval()
        with torch.no_grad():
            result["logits"] = engine(input_ids=ids).logits.flatten().tolist()
    with open(f"{a.out}.rank{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

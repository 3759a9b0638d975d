"""Fine-tune a causal language model on the King James Bible with Hugging Face's Trainer,
the flow of HF's DeepSpeed guide, on zerotrain's engine (docs/hf.md):

    python -m zerotrain.launcher --nproc_per_node 2 -- python examples/hf/finetune_kjv.py \
        --deepspeed examples/hf/ds_config_zero3.json --output_dir out_hf --max_steps 50

The one line that differs from the DeepSpeed version of this script is the import of
AutoModelForCausalLM, Trainer and TrainingArguments. --model_dir names a pretrained model
folder (config.json and model.safetensors); without it a small GPT-2 is made from a config
and saved first, standing in for a downloaded one (nothing is downloaded). At the end the trained model is
saved as an HF model folder and loaded back with from_pretrained."""

import dataclasses
import os
import sys

import transformers
from transformers import HfArgumentParser

# DeepSpeed's version: from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
from zerotrain.hf import AutoModelForCausalLM, Trainer, TrainingArguments

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kjv_data  # noqa: E402


@dataclasses.dataclass
class ScriptArguments:
    model_dir: str = dataclasses.field(default=None, metadata={"help": "a pretrained model folder"})
    block_size: int = dataclasses.field(default=128, metadata={"help": "tokens per training example"})
    train_blocks: int = dataclasses.field(default=None, metadata={"help": "use only this many training blocks"})
    eval_blocks: int = dataclasses.field(default=64, metadata={"help": "evaluation blocks"})


def stand_in_model(path, tokenizer):
    """A GPT-2 of 4 layers, 256 wide, saved as a pretrained folder (once)."""
    if not os.path.exists(os.path.join(path, "config.json")):
        config = transformers.GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=256, n_layer=4,
                                         n_head=4, bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id,
                                         eos_token_id=tokenizer.eos_token_id)
        transformers.set_seed(0)
        transformers.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return path


def main():
    script, args = HfArgumentParser((ScriptArguments, TrainingArguments)).parse_args_into_dataclasses()
    with args.main_process_first(desc="the tokenizer and the stand-in model"):   # made once, then read
        tokenizer = kjv_data.train_kjv_tokenizer(os.path.join(args.output_dir, "tokenizer"))
        model_dir = script.model_dir or stand_in_model(os.path.join(args.output_dir, "pretrained"), tokenizer)
    # Built after the arguments: at ZeRO stage 3 under zero.Init, each rank reading its share.
    model = AutoModelForCausalLM.from_pretrained(model_dir)

    train = kjv_data.KjvBlocks(tokenizer, "train", block_size=script.block_size, limit=script.train_blocks)
    evald = kjv_data.KjvBlocks(tokenizer, "eval", block_size=script.block_size, limit=script.eval_blocks)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=evald, processing_class=tokenizer)
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    metrics = trainer.evaluate()
    final = os.path.join(args.output_dir, "final")
    trainer.save_model(final)
    if args.process_index == 0:
        reloaded = transformers.AutoModelForCausalLM.from_pretrained(final)   # one process: a plain load
        print(f"eval loss {metrics['eval_loss']:.4f}; saved {final} "
              f"({sorted(os.listdir(final))}); from_pretrained loads it: "
              f"{sum(p.numel() for p in reloaded.parameters())} parameters")


if __name__ == "__main__":
    main()

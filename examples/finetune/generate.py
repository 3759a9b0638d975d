#!/usr/bin/env python3
"""Loads a model folder that `zerotrain train --model hf:DIR` wrote back into transformers,
strictly (no missing or unexpected weights), and generates a line from a prompt.

    python examples/finetune/generate.py OUT_DIR ["In the beginning"]
"""
import sys

import torch
import transformers


def main():
    folder = sys.argv[1]
    prompt = sys.argv[2] if len(sys.argv) > 2 else "In the beginning"
    model, info = transformers.AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"{folder}: transformers did not load every weight exactly: {problems}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    torch.manual_seed(0)
    out = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    print(f"{model.config.model_type} from {folder}: {tokenizer.decode(out[0])!r}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Stand-ins for downloaded models, made offline: a tokenizer trained on the King James Bible
with `tokenizers`, a tiny GPT-2 and a tiny Llama created by transformers from configs (random
init, fixed seed) and saved as Hugging Face model folders, and the KJV as JSONL for
`zerotrain train --dataset jsonl:PATH` (docs/finetune.md). Nothing is downloaded.

    python examples/finetune/make_models.py OUT_DIR [--vocab_size 4096]

writes OUT_DIR/gpt2/, OUT_DIR/llama/ (config.json, model.safetensors, tokenizer files),
OUT_DIR/kjv.jsonl (one {"text": ...} per chapter) and OUT_DIR/kjv_qa.jsonl (prompt/completion
pairs: a verse reference as the prompt, the verse as the completion).
"""
import argparse
import json
import os
import re
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf"))
import kjv_data  # noqa: E402


def tiny_configs(vocab_size, eos_id):
    common = dict(vocab_size=vocab_size, bos_token_id=eos_id, eos_token_id=eos_id)
    return {
        "gpt2": transformers.GPT2Config(n_layer=2, n_head=4, n_embd=128, n_positions=256, **common),
        # Grouped-query attention (4 heads share 2 key/value heads), an untied head, rotary
        # positions with Llama 3's scaling: the Llama family's parts that GPT-2 lacks.
        "llama": transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          hidden_size=128, intermediate_size=344, max_position_embeddings=256,
                                          tie_word_embeddings=False, **common),
    }


def chapters_and_verses(text):
    """The KJV as `bible` prints it: a "Genesis 1" line opens each chapter, "  N " each verse,
    and a verse runs on over the following lines."""
    chapters = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" ") and re.search(r" \d+$", line):
            chapters.append((line.strip(), []))
        elif re.match(r"^  \d+ ", line) and chapters:
            chapters[-1][1].append(line.strip())
        elif chapters and chapters[-1][1]:
            chapters[-1][1][-1] += " " + line.strip()
    return chapters


def write_jsonl(text, out_dir, max_pairs=5000):
    """The KJV's chapters as documents, and (reference, verse) pairs for prompt/completion."""
    chapters = chapters_and_verses(text)
    with open(os.path.join(out_dir, "kjv.jsonl"), "w") as f:
        for title, verses in chapters:
            f.write(json.dumps({"text": title + "\n" + "\n".join(verses)}) + "\n")
    pairs = 0
    with open(os.path.join(out_dir, "kjv_qa.jsonl"), "w") as f:
        for title, verses in chapters:
            for verse in verses:
                number, _, words = verse.partition(" ")
                if pairs < max_pairs:
                    f.write(json.dumps({"prompt": f"{title}:{number} ", "completion": words}) + "\n")
                    pairs += 1
    return len(chapters), pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--vocab_size", type=int, default=4096)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    text = kjv_data.kjv_text()
    tokenizer = kjv_data.train_kjv_tokenizer(os.path.join(args.out_dir, "tokenizer"), args.vocab_size, text)
    for name, config in tiny_configs(len(tokenizer), tokenizer.eos_token_id).items():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config)
        folder = os.path.join(args.out_dir, name)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        params = sum(p.numel() for p in model.parameters())
        print(f"{folder}: {config.model_type}, {params / 1e6:.2f}M parameters")
    chapters, pairs = write_jsonl(text, args.out_dir)
    print(f"{args.out_dir}/kjv.jsonl: {chapters} chapters; {args.out_dir}/kjv_qa.jsonl: {pairs} prompt/completion pairs")


if __name__ == "__main__":
    main()

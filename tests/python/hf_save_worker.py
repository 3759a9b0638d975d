"""One rank of a Hugging Face model trained by zerotrain's engine and saved as a model
folder (engine.save_16bit_model, and zerotrain.hf.save_hf_folder for the shards): a tiny
GPT-2 (tied embeddings) or Llama built from a random config, trained a few steps, saved
whole and in small shards, and as an engine checkpoint. Rank 0 writes the logits of the trained engine on a fixed batch (`<out>.pt`),
and every rank what save_hf_folder returned (`<out>.rank<r>.json`).

--memory instead saves a ~100 MB plain model at stage 3 (untrained: only the save matters)
and reports rank 0's peak resident memory during the save against the model's size."""

import argparse
import ctypes
import json
import os

import torch

import zerotrain
from zerotrain.hf import save_hf_folder

VOCAB = 96


def tiny_model(kind, dtype):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    if kind == "gpt2":
        # Token ids inside the vocabulary, so the config is valid and loads without a warning.
        cfg = GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=32, bos_token_id=1,
                         eos_token_id=2)
        model = GPT2LMHeadModel(cfg)
    else:
        cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=32, bos_token_id=1,
                          eos_token_id=2)
        model = LlamaForCausalLM(cfg)
    return model.to(dtype)


def ds_config(stage, dtype, gather):
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}},
           "zero_optimization": {"stage": stage, "stage3_gather_16bit_weights_on_model_save": gather}}
    if dtype == torch.bfloat16:
        cfg["bf16"] = {"enabled": True}
    return cfg


def train_and_save(args, rank):
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = tiny_model(args.model, dtype)
    if args.hf_dir and rank == 0:
        model.save_pretrained(args.hf_dir)   # the folder a user trained from: its config for --hf_config
    engine, *_ = zerotrain.initialize(model=model, config=ds_config(args.stage, dtype, not args.no_gather))
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        x = torch.randint(0, VOCAB, (2, 12), generator=g)
        loss = engine(input_ids=x, labels=x).loss
        engine.backward(loss)
        engine.step()
    # DeepSpeed's name writes the whole folder too; save_hf_folder is the same function.
    result = {"saved": engine.save_16bit_model(args.save)}
    if args.shards:
        result["saved_shards"] = save_hf_folder(engine, args.shards, max_shard_size=args.max_shard_size)
    if args.checkpoint:
        engine.save_checkpoint(args.checkpoint)
    # The trained model's logits on a fixed batch, through the engine (gathered per unit at
    # stage 3, so every rank runs it); without dropout, as from_pretrained's model runs.
    engine.eval()
    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        logits = engine(input_ids=ids).logits
    if rank == 0:
        reference = {"ids": ids, "logits": logits.float()}
        if args.stage < 3:   # whole on every rank: the trained weights themselves
            reference["state_dict"] = {k: v.clone() for k, v in engine.module.state_dict().items()}
        torch.save(reference, f"{args.out}.pt")
    return result


def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(fn):
    """Bytes the process's peak resident memory rose above its resident memory while fn ran
    (the peak is reset first through /proc/self/clear_refs), less what file-backed and shared
    pages added: library pages the kernel dropped under other processes' load and faulted back
    in, and the shared-memory transport's segment, are not the save's memory (counted, they
    made this measure swing from -0.2 to 32 MiB between runs on a busy machine). The heap's
    free pages go back to the kernel first (malloc_trim): the engine's malloc policy keeps
    freed memory mapped for the next step, and an allocation served from it raises no peak, so
    without the trim the measure missed as much as the heap held free (a whole state dict
    read as 62% of the model)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before, shared = status("VmRSS"), status("RssFile") + status("RssShmem")
    fn()
    return status("VmHWM") - before - max(0, status("RssFile") + status("RssShmem") - shared)


def memory(args, rank):
    """A plain ~100 MB fp32 model of equal layers at stage 3: the save's peak on rank 0.
    Many small layers (1 MiB each) rather than a few large ones: a gathered layer's buffer is
    also held by the Gloo worker thread that ran its all_gather until that thread moves on,
    and under load the workers lag the saving thread by a few layers (seen: 7 layers of 4 MiB,
    28 MiB on a busy machine), which is transport memory the save does not hold."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(96)])
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    engine, *_ = zerotrain.initialize(model=model, config=ds_config(3, torch.float32, True))
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    # A first save warms the allocator and the communicator up (their first blocks stay with
    # the process); the second is measured.
    engine.save_16bit_model(args.save)
    saved = {}
    streamed = measure(lambda: saved.setdefault("ok", engine.save_16bit_model(args.save)))
    gathered_peak = engine.model_state_bytes()["gathered_peak"]
    # The same measure on the engine's in-memory state dict, which keeps every gathered
    # parameter on rank 0: the measure sees a whole model.
    kept = []
    whole = measure(lambda: kept.append(engine._engine.consolidated_16bit_state_dict()))
    return {"saved": saved["ok"], "model_bytes": model_bytes, "largest_param_bytes": largest,
            "save_peak_bytes": streamed, "gathered_peak_bytes": gathered_peak, "state_dict_peak_bytes": whole}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--save", required=True, help="save_hf_folder's directory")
    ap.add_argument("--shards", default=None, help="save again here in shards of --max_shard_size")
    ap.add_argument("--max_shard_size", default="20KB")
    ap.add_argument("--checkpoint", default=None, help="engine.save_checkpoint here too")
    ap.add_argument("--hf_dir", default=None, help="rank 0 saves the untrained model here (save_pretrained)")
    ap.add_argument("--no_gather", action="store_true", help="stage3_gather_16bit_weights_on_model_save false")
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    result = memory(args, rank) if args.memory else train_and_save(args, rank)
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

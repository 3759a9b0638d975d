"""One rank of test_hf_zero_config.py.

--mode load: a model directory (save_pretrained's) loaded with zerotrain.hf's
AutoModelForCausalLM while a stage-3 HfZeroConfig is alive: the memory and the bytes read
that loading took on this rank, then the engine's logits on a fixed input.

--mode cases: small checkpoints that rank 0 writes (a base model's weights in a model with a
head and the reverse, a head the checkpoint lacks, tied weights stored twice, a persistent
buffer, bf16), each loaded at stage 3 and compared, parameter by parameter, with what plain
transformers loads on one process."""

import argparse
import io
import json
import logging
import os
import sys

import torch

import zerotrain
import zerotrain.hf as zhf

FIXED_INPUT = [[3, 14, 15, 92, 65, 35, 89, 79], [32, 38, 46, 26, 43, 38, 32, 79]]


def _status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _bytes_read():
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def _reset_peak():
    """Starts the peak resident size (VmHWM) from the current size, where the kernel allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _config(stage=3, extra=None):
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
           "zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 0}}
    cfg.update(extra or {})
    return cfg


def mode_load(args, rank):
    import transformers
    # Everything loading needs besides the weights, before the baseline: torch.distributed,
    # the model's module, a first use of the kernels.
    zerotrain.init_distributed()
    config = transformers.AutoConfig.from_pretrained(args.dir)
    transformers.AutoModelForCausalLM._model_mapping[type(config)]   # imports the model's module
    torch.nn.Linear(8, 8)(torch.zeros(1, 8))
    from zerotrain.hf import loading  # noqa: F401

    cfg = _config()
    zero_config = zhf.HfZeroConfig(cfg)
    base = _status_bytes("VmRSS")
    reset = _reset_peak()
    read_before = _bytes_read()
    model = zhf.AutoModelForCausalLM.from_pretrained(args.dir)
    read = _bytes_read() - read_before
    peak = _status_bytes("VmHWM") if reset else max(_status_bytes("VmHWM"), base)
    fp32_bytes = sum(p.numel() * 4 for p in model.parameters())
    whole = [n for n, p in model.named_parameters() if p.untyped_storage().nbytes() > 0]
    tied = (model.get_output_embeddings().weight is model.get_input_embeddings().weight)

    engine, *_ = zerotrain.initialize(model=model, config=cfg)
    with torch.no_grad():
        logits = engine(input_ids=torch.tensor(FIXED_INPUT)).logits
    ref = torch.load(args.ref)
    result = {"rank": rank, "peak_over_base": peak - base, "peak_reset": reset, "bytes_read": read,
              "fp32_bytes": fp32_bytes, "whole_after_load": whole, "tied": tied,
              "max_logit_diff": (logits.float() - ref).abs().max().item(),
              "class": type(model).__name__, "deepspeed_imported": "deepspeed" in sys.modules}
    del zero_config
    return result


# --- cases ------------------------------------------------------------------------------------

def _gathered_state(model):
    """Every parameter and buffer, whole (gathered one at a time), by name."""
    out = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        with zerotrain.zero.GatheredParameters([p]):
            out[name] = p.detach().clone().float()
    for name, b in model.named_buffers():
        out[name] = b.detach().clone().float()
    return out


def _diff(zero_model, plain_model, skip=()):
    """Names that differ (or that one model lacks) between the stage-3 load and the plain one."""
    got, want = _gathered_state(zero_model), {k: v.detach().float() for k, v in
                                              list(plain_model.named_parameters(remove_duplicate=False)) +
                                              list(plain_model.named_buffers())}
    bad = sorted(set(got) ^ set(want))
    for name in set(got) & set(want):
        if name in skip:
            continue
        if got[name].shape != want[name].shape or not torch.equal(got[name], want[name]):
            bad.append(name)
    return sorted(bad)


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.text = io.StringIO()

    def emit(self, record):
        self.text.write(record.getMessage() + "\n")


def _write_checkpoints(root):
    import transformers
    from transformers import GPT2Config, LlamaConfig
    torch.manual_seed(0)
    gpt2 = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=100, n_positions=16, bos_token_id=0,
                      eos_token_id=0)
    llama = LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=48, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=100, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    transformers.GPT2Model(gpt2).save_pretrained(os.path.join(root, "gpt2_base"))
    transformers.LlamaForCausalLM(llama).save_pretrained(os.path.join(root, "llama_lm"), max_shard_size="20KB")
    # Tied in the config, but stored twice with different values: transformers leaves them untied.
    untied = GPT2Config(**{**gpt2.to_dict(), "tie_word_embeddings": False})
    model = transformers.GPT2LMHeadModel(untied)
    model.save_pretrained(os.path.join(root, "gpt2_twice"))
    with open(os.path.join(root, "gpt2_twice", "config.json")) as f:
        cfg = json.load(f)
    cfg["tie_word_embeddings"] = True
    with open(os.path.join(root, "gpt2_twice", "config.json"), "w") as f:
        json.dump(cfg, f)
    # A persistent buffer: a BatchNorm's running statistics.
    from transformers import ResNetConfig, ResNetModel
    resnet = ResNetModel(ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_channels=3))
    with torch.no_grad():
        for m in resnet.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    resnet.save_pretrained(os.path.join(root, "resnet"))


def mode_cases(args, rank):
    import transformers
    zerotrain.init_distributed()
    root = args.dir
    if rank == 0:
        _write_checkpoints(root)
    torch.distributed.barrier()
    capture = _Capture()
    logging.getLogger("zerotrain.hf.loading").addHandler(capture)
    result = {"rank": rank}
    cfg = _config()
    keep = zhf.HfZeroConfig(cfg)

    # A base model's checkpoint in a model with a head: the prefix is added, lm_head is tied to wte.
    d = os.path.join(root, "gpt2_base")
    model = zhf.AutoModelForCausalLM.from_pretrained(d)
    plain = transformers.AutoModelForCausalLM.from_pretrained(d)
    result["base_into_head"] = _diff(model, plain)
    result["base_into_head_tied"] = model.lm_head.weight is model.transformer.wte.weight

    # A model with a head's checkpoint in the base model: the prefix is dropped, lm_head is unexpected.
    d = os.path.join(root, "llama_lm")
    model = zhf.AutoModel.from_pretrained(d)
    plain = transformers.AutoModel.from_pretrained(d)
    result["head_into_base"] = _diff(model, plain)
    result["head_into_base_class"] = type(model).__name__

    # A head the checkpoint lacks: initialised by the model's _init_weights, rank 0's values.
    model, info = zhf.AutoModelForSequenceClassification.from_pretrained(d, num_labels=3, output_loading_info=True)
    plain = transformers.AutoModelForSequenceClassification.from_pretrained(d, num_labels=3)
    result["missing_head_diff"] = _diff(model, plain, skip={"score.weight"})
    result["missing_keys"] = sorted(info["missing_keys"])
    with zerotrain.zero.GatheredParameters([model.score.weight]):
        score = model.score.weight.detach().clone()
    result["score_std"] = score.std().item()
    result["score_sum"] = score.double().sum().item()

    # Tied in the config but stored twice, different: left untied, as transformers does.
    d = os.path.join(root, "gpt2_twice")
    model = zhf.AutoModelForCausalLM.from_pretrained(d)
    plain = transformers.AutoModelForCausalLM.from_pretrained(d)
    result["twice_diff"] = _diff(model, plain)
    result["twice_tied"] = model.lm_head.weight is model.transformer.wte.weight

    # A persistent buffer from the file, through the top-level from_pretrained and a concrete class.
    d = os.path.join(root, "resnet")
    model = zhf.from_pretrained(transformers.ResNetModel, d)
    plain = transformers.ResNetModel.from_pretrained(d)
    result["buffers_diff"] = _diff(model, plain)
    result["buffers_nonzero"] = any(b.abs().sum().item() > 0 for n, b in model.named_buffers()
                                    if n.endswith("running_mean"))

    # bf16 training: the chunks are bf16 and hold the checkpoint's values rounded.
    del keep
    keep = zhf.HfZeroConfig(_config(extra={"bf16": {"enabled": True}}))
    d = os.path.join(root, "llama_lm")
    model = zhf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
    plain = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
    result["bf16_dtypes"] = sorted({str(p.dtype) for p in model.parameters()})
    result["bf16_diff"] = _diff(model, plain)
    try:
        zhf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float16)
        result["fp16_refused"] = None
    except zerotrain.UsageError as e:
        result["fp16_refused"] = str(e)
    # A bf16 model is what initialize takes at this config.
    zerotrain.initialize(model=model, config=keep.config)
    result["bf16_initialized"] = True

    result["warnings"] = capture.text.getvalue()
    result["deepspeed_imported"] = "deepspeed" in sys.modules
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["load", "cases"], required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ref")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    result = mode_load(args, rank) if args.mode == "load" else mode_cases(args, rank)
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

"""HF's "auto" values in a ds_config, filled from TrainingArguments and the model.

The filling and its checks are the C++ Trainer's (`_C.resolve_auto`), which does what
transformers' HfTrainerDeepSpeedConfig does: an "auto" key takes the argument's value, a key
the config sets must equal it, and every mismatch is reported in one ConfigError. This file
only gathers the arguments and writes the filled values back into the user's dict, under the
key names the user wrote."""

import copy
import json

from .._ext import _C
from ..errors import ConfigError

# The C++ reader's names for keys that ds_configs usually spell with DeepSpeed's stage3_ prefix.
_ALIASES = {
    "prefetch_bucket_size": "stage3_prefetch_bucket_size",
    "param_persistence_threshold": "stage3_param_persistence_threshold",
}
_BUCKET_KEYS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                "prefetch_bucket_size", "param_persistence_threshold")


def hidden_size(model):
    """HF's rule for the bucket sizes: config.hidden_size, else the largest of hidden_sizes,
    else the same from text_config; None when the model says none of them."""
    config = getattr(model, "config", None)
    for c in (config, getattr(config, "text_config", None)):
        if c is None:
            continue
        if getattr(c, "hidden_size", None) is not None:
            return int(c.hidden_size)
        if getattr(c, "hidden_sizes", None):
            return int(max(c.hidden_sizes))
    return None


def needs_hidden_size(cfg):
    zero = cfg.get("zero_optimization") or {}
    return any(zero.get(k) == "auto" for k in _BUCKET_KEYS)


def trainer_arguments(args, num_training_steps=None, hidden=None):
    """The TrainingArguments that fill "auto" keys, as the C++ resolution takes them."""
    d = {
        "world_size": args.world_size,
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "max_grad_norm": float(args.max_grad_norm),
        "learning_rate": float(args.learning_rate),
        "adam_beta1": float(args.adam_beta1),
        "adam_beta2": float(args.adam_beta2),
        "adam_epsilon": float(args.adam_epsilon),
        "weight_decay": float(args.weight_decay),
        "fp16": bool(args.fp16 or args.fp16_full_eval),
        "bf16": bool(args.bf16 or args.bf16_full_eval),
        "seed": int(args.seed),
        "hidden_size": hidden,
    }
    warmup = float(args.warmup_steps or 0)
    if num_training_steps is not None:
        # HF: warmup_num_steps = max(1, get_warmup_steps(n)); a warmup_steps below 1 is a ratio.
        d["num_training_steps"] = int(num_training_steps)
        d["warmup_steps"] = max(1, int(args.get_warmup_steps(int(num_training_steps))))
    elif warmup >= 1:
        d["warmup_steps"] = int(warmup)
    else:
        d["warmup_ratio"] = warmup
    return d


def _set_filled(cfg, path, value):
    node = cfg
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    last = parts[-1]
    if last not in node and _ALIASES.get(last) in node:
        last = _ALIASES[last]
    node[last] = value


def resolve(cfg, origin, args, num_training_steps=None, model=None):
    """A copy of `cfg` with every "auto" the arguments (and, given them, the step count and
    the model's hidden size) fill. ConfigError for mismatches and bad arguments."""
    hidden = hidden_size(model) if model is not None else None
    if model is not None and hidden is None and needs_hidden_size(cfg):
        raise ConfigError("[config] the zero_optimization bucket sizes are \"auto\", but the model's config has no "
                          "hidden_size (nor hidden_sizes, nor a text_config with one) to fill them from; give them "
                          "values in the ds_config")
    filled = _C.resolve_auto(json.dumps(cfg), origin, trainer_arguments(args, num_training_steps, hidden))
    out = copy.deepcopy(cfg)
    for path, value in filled.items():
        _set_filled(out, path, value)
    return out

"""HF's "auto" values in a ds_config, filled from TrainingArguments and the model.

The filling and its checks are the C++ Trainer's (Config.resolve_auto), which does what
transformers' HfTrainerDeepSpeedConfig does: an "auto" key takes the argument's value, a key
the config sets must equal it, and every mismatch is reported in one ConfigError. This file
only gathers the arguments."""


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


def resolve(config, args, num_training_steps=None, model=None):
    """A new zerotrain._C.Config: `config` with every "auto" the arguments (and, given them,
    the step count and the model's hidden size) fill. ConfigError for mismatches and bad
    arguments."""
    hidden = hidden_size(model) if model is not None else None
    return config.resolve_auto(trainer_arguments(args, num_training_steps, hidden), model_known=model is not None)

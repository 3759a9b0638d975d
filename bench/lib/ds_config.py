"""The DeepSpeed config the GPT benchmarks (stage3_vs_peers.py, gpu_train.py) give both
sides: zerotrain reads it with "auto" values, filled from its command line, and DeepSpeed
with the same values written out, so that the two train with one optimizer and ZeRO setup."""


def gpt_ds_config(stage, lr, micro=None, concrete=False, world=2, gas=1, bf16=False, overlap_comm=True,
                  zero_extra=None):
    """AdamW at `lr`, no clipping, ZeRO `stage` (stage 3 keeps no parameter persistent), the
    keys of zero_extra added to zero_optimization. concrete: the values written out, for
    DeepSpeed (train_batch_size = micro x world x gas); else "auto", for zerotrain."""
    zero = {"stage": stage, "overlap_comm": overlap_comm, **(zero_extra or {})}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    auto = lambda v: v if concrete else "auto"  # noqa: E731
    return {
        "train_batch_size": auto(None if micro is None else micro * world * gas),
        "train_micro_batch_size_per_gpu": auto(micro),
        "gradient_accumulation_steps": auto(gas),
        "gradient_clipping": auto(0.0),
        "optimizer": {"type": "AdamW", "params": {"lr": auto(lr), "betas": auto([0.9, 0.999]), "eps": auto(1e-8),
                                                  "weight_decay": auto(0.0)}},
        "zero_optimization": zero,
        **({"bf16": {"enabled": auto(True)}} if bf16 else {}),
    }

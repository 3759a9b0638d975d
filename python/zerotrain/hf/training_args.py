"""transformers.TrainingArguments with `deepspeed=` served by zerotrain's engine.

transformers' own class builds HF's DeepSpeed integration in __post_init__ (which imports
the deepspeed package and registers a global config that makes from_pretrained import it
too). This subclass takes the same fields, hides `deepspeed` from that code, and keeps the
config for zerotrain.hf.Trainer instead: read and checked by zerotrain's config reader, its
"auto" values checked against the arguments now (HF checks them here too) and filled when
training starts, once the number of steps and the model are known."""

import dataclasses
import os

import transformers

from .. import config as _config
from ..errors import UsageError
from . import auto_values


@dataclasses.dataclass
class TrainingArguments(transformers.TrainingArguments):
    """transformers.TrainingArguments; `deepspeed` (a path, a dict or a JSON string) is the
    ds_config that zerotrain.hf.Trainer trains with."""

    def __post_init__(self):
        if str(os.environ.get("ACCELERATE_USE_DEEPSPEED", "false")).lower() in ("1", "true", "yes", "on"):
            raise UsageError("ACCELERATE_USE_DEEPSPEED is set: it makes accelerate run DeepSpeed's engine "
                             "under zerotrain.hf; unset it (zerotrain's engine serves the `deepspeed=` config)")
        if self.auto_find_batch_size:
            raise UsageError("auto_find_batch_size: a ZeRO engine is built for one batch size (HF refuses "
                             "it with DeepSpeed's ZeRO-3 too); give per_device_train_batch_size")
        ds, self.deepspeed = self.deepspeed, None
        try:
            # Without `deepspeed`, HF's __post_init__ sets up devices and torch.distributed as
            # for a plain run: no DeepSpeed plugin, no global HfDeepSpeedConfig.
            super().__post_init__()
        finally:
            self.deepspeed = ds
        self.zerotrain_config = None
        self.hf_zero_config = None
        if ds is None or ds is False or ds == "":
            return
        # Read and checked once (a zerotrain._C.Config): the Trainer resolves this same object.
        self.zerotrain_config = _config.load(ds)
        # HF's trainer_config_process: the values known now are checked now, so a mismatch
        # stops the script before the model is loaded.
        known = auto_values.resolve(self.zerotrain_config, self)
        # As HF's arguments keep an HfDeepSpeedConfig alive: at stage 3, zerotrain.hf's
        # AutoModel*.from_pretrained then builds the model under zero.Init, in the dtype
        # these arguments train in, each rank reading only its share of the weights.
        from .zero_config import HfZeroConfig
        self.hf_zero_config = HfZeroConfig(known)
        # The engine owns precision and gradient accumulation: accelerate must add no
        # autocast or GradScaler, and must not wrap micro-steps in the model's no_sync()
        # (ZeRO-2/3 reduce during every backward).
        self.mixed_precision = "no"
        kwargs = dict(self.accelerator_config.gradient_accumulation_kwargs or {})
        kwargs["sync_each_batch"] = True
        self.accelerator_config.gradient_accumulation_kwargs = kwargs

    @property
    def place_model_on_device(self):
        # The engine places the model (and zero.Init's parameters have no memory to move).
        if self.zerotrain_config is not None:
            return False
        return super().place_model_on_device

    @property
    def n_gpu(self):
        # One process per device under zerotrain's launcher: never torch's DataParallel.
        if getattr(self, "zerotrain_config", None) is not None:
            return min(super().n_gpu, 1)
        return super().n_gpu

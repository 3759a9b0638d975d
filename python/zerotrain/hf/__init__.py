"""Hugging Face transformers on zerotrain's engine (docs/hf.md). A Trainer script changes one
import line:

    from zerotrain.hf import Trainer, TrainingArguments

and `TrainingArguments(deepspeed="ds_config.json")` is served by zerotrain's engine: no
deepspeed package, no HF DeepSpeed integration. HfZeroConfig is HF's HfDeepSpeedConfig: while
it is alive at ZeRO stage 3, this package's AutoModel* classes build the model under
zero.Init and each rank reads only its share of the weights."""

import importlib

_EXPORTS = {
    "Trainer": ".trainer",
    "TrainingArguments": ".training_args",
    "HfZeroConfig": ".zero_config",
    "is_zero3_enabled": ".zero_config",
    "from_pretrained": ".loading",
    "AutoModel": ".loading",
    "AutoModelForCausalLM": ".loading",
    "AutoModelForSequenceClassification": ".loading",
    "save_hf_folder": ".save",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    # Imported on first use: transformers is imported only by a script that uses this package.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zerotrain.hf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

"""A model trained by zerotrain's engine as the folder Hugging Face's save_pretrained writes,
which `AutoModelForCausalLM.from_pretrained(dir)` loads: the weights in the training dtype
(model.safetensors, or shards and model.safetensors.index.json past max_shard_size), a tied
parameter once under its first name, persistent buffers only; and for a transformers model
config.json and generation_config.json. The engine streams the weights (save_16bit_model):
at ZeRO stage 3 one module's parameters are gathered at a time, never the whole model."""

import os
import tempfile


def _is_transformers_model(module):
    config = getattr(module, "config", None)
    return config is not None and callable(getattr(config, "save_pretrained", None))


def _config_files(module, dtype):
    """What save_pretrained writes besides the weights, as [(name, bytes)]: made by the
    config's own save_pretrained (and the generation config's, for a model that generates)
    into a temporary directory, so the files are transformers' to the byte."""
    # save_pretrained records the dtype and the class in the config before writing it.
    module.config.dtype = str(dtype).removeprefix("torch.")   # torch.bfloat16 -> "bfloat16", as HF writes it
    module.config.architectures = [type(module).__name__]
    with tempfile.TemporaryDirectory(prefix="zerotrain-hf-config-") as tmp:
        module.config.save_pretrained(tmp)
        can_generate = getattr(module, "can_generate", None)
        if callable(can_generate) and can_generate() and getattr(module, "generation_config", None) is not None:
            module.generation_config.save_pretrained(tmp)
        files = []
        for name in sorted(os.listdir(tmp)):
            path = os.path.join(tmp, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    files.append((name, f.read()))
        return files


def save_hf_folder(engine, save_dir, max_shard_size="5GB", save_filename="model.safetensors",
                   exclude_frozen_parameters=False):
    """Writes `engine.module` into `save_dir` as a Hugging Face model folder. Every rank must
    call it; rank 0 writes. Returns whether the weights were written: False (and nothing is
    written) at stage 3 without stage3_gather_16bit_weights_on_model_save. A failure on rank
    0, config.json's included, raises on every rank and leaves no weights behind.
    engine.save_16bit_model is this function."""
    module = engine.module
    files, error = [], ""
    if engine.global_rank == 0 and _is_transformers_model(module):
        try:
            files = _config_files(module, engine._engine.model_dtype())
        except Exception as e:   # reported by the save, on every rank
            error = f"writing the model's config: {type(e).__name__}: {e}"
    return engine._save_model_files(save_dir, save_filename, exclude_frozen_parameters, max_shard_size, files, error)

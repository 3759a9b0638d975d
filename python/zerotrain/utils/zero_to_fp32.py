"""DeepSpeed's deepspeed.utils.zero_to_fp32 on zerotrain checkpoints, read by the C++
streaming reader (every fragment's checksum checked; one tensor in memory at a time while
reading). A checkpoint of any world size and ZeRO stage gives the whole model."""

from .._ext import _C
from ..errors import UsageError


def _tag(tag):
    return "" if tag is None else str(tag)


def get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag=None, exclude_frozen_parameters=False,
                                             lazy_mode=False):
    """{name: tensor} in fp32 on the CPU: every trained parameter whole, frozen parameters
    (unless excluded), buffers, and the other names of tied parameters (the same tensor), so
    that model.load_state_dict(..., strict=True) takes it."""
    manifest = _C.read_manifest(str(checkpoint_dir), _tag(tag))
    frozen = set(manifest["frozen"]) if exclude_frozen_parameters else set()
    state = {name: t for name, t in _C.read_state_dict(str(checkpoint_dir), _tag(tag), "fp32")
             if name not in frozen}
    for first, others in (manifest.get("client_state") or {}).get(_C.CLIENT_STATE_SHARED_PARAMS_KEY, {}).items():
        if first in state:
            for other in others:
                state[other] = state[first]
    return state


def load_state_dict_from_zero_checkpoint(model, checkpoint_dir, tag=None):
    """Loads the checkpoint's fp32 weights into `model` (moved to the CPU) and returns it, as
    DeepSpeed's does (strict=False: a key the model lacks is ignored)."""
    state = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag)
    model = model.cpu()
    model.load_state_dict(state, strict=False)
    return model


def convert_zero_checkpoint_to_fp32_state_dict(checkpoint_dir, output_dir, max_shard_size="5GB",
                                               safe_serialization=True, tag=None, exclude_frozen_parameters=False):
    """Writes the consolidated fp32 model into `output_dir` as safetensors (model.safetensors,
    or shards and model.safetensors.index.json past max_shard_size), streaming: memory is
    about the largest tensor. A tied parameter is written once, under its first name (as
    Hugging Face saves tied weights). Returns the files written."""
    if exclude_frozen_parameters:
        raise UsageError("exclude_frozen_parameters=True: the consolidated file holds the frozen parameters; "
                         "drop them after loading, or use get_fp32_state_dict_from_zero_checkpoint")
    return _C.consolidate(str(checkpoint_dir), str(output_dir), _tag(tag), "fp32", _C.parse_bytes(max_shard_size, "max_shard_size"))

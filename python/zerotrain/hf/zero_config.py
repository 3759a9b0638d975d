"""HfZeroConfig: transformers' HfDeepSpeedConfig for zerotrain. The same constructor and
queries (config, is_zero3(), get_value(), ...), but the config is read and checked by
zerotrain's own reader, and the object registers itself with zerotrain.hf only: never with
transformers' set_hf_deepspeed_config, which would make transformers import deepspeed.

While one is alive at ZeRO stage 3, zerotrain.hf's AutoModel* classes build models under
zero.Init and each rank reads only its share of the weights (loading.py). As with
HfDeepSpeedConfig, keep a reference to it for as long as models are loaded: only a weak
reference is kept here."""

import base64
import binascii
import os
import weakref

from .. import config as _config
from ..errors import ConfigError

# The live HfZeroConfig (the latest one made), as transformers keeps its HfDeepSpeedConfig.
_live_ref = None


def is_zero3_enabled():
    """True while an HfZeroConfig whose config asks for ZeRO stage 3 is alive."""
    live = get_hf_zero_config()
    return live is not None and live.is_zero3()


def get_hf_zero_config():
    """The live HfZeroConfig, or None."""
    return _live_ref() if _live_ref is not None else None


def _load(config_file_or_dict):
    """The zerotrain._C.Config of what HfDeepSpeedConfig accepts: a dict, a path, a JSON
    string or a base64-encoded JSON string (and a Config, as TrainingArguments hold one)."""
    source = config_file_or_dict
    if isinstance(source, (_config.Config, dict, os.PathLike)) or (isinstance(source, str) and os.path.exists(source)):
        return _config.load(source)
    if isinstance(source, str):
        text = source.strip()
        if text.startswith("{"):
            return _config.load(text)
        try:
            decoded = base64.urlsafe_b64decode(text).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            decoded = None
        if decoded is not None and decoded.lstrip().startswith("{"):
            return _config.load(decoded, origin="<config base64 string>")
        if text.endswith(".json") or os.sep in text:
            raise ConfigError(f"HfZeroConfig: {text}: no such file; check the path of the ds_config")
        raise ConfigError(f"HfZeroConfig({source!r}): not an existing file, a JSON object or a base64-encoded JSON "
                          "object; give the path of the ds_config, or the config as a dict")
    raise ConfigError(f"HfZeroConfig takes a path or a dict, not {type(source).__name__}")


class HfZeroConfig:
    """A ds_config (path, dict, JSON or base64 string) that can be queried for its ZeRO stage
    and other values; "auto" values are allowed (the Trainer fills them). Bad values raise
    zerotrain.ConfigError. `config` is a new dict: the caller's is never changed. The stage,
    offload and precision answers are the engine's reader's (`zerotrain_config`), not the
    dict's."""

    def __init__(self, config_file_or_dict):
        self.zerotrain_config = _load(config_file_or_dict)   # the engine's own checks: ConfigError
        self.config = self.zerotrain_config.raw()
        self.set_stage_and_offload()
        global _live_ref
        _live_ref = weakref.ref(self)

    def set_stage_and_offload(self):
        self._stage = self.zerotrain_config.stage
        self._offload = self._stage in (2, 3) and self.zerotrain_config.offload

    @property
    def zero_optimization_stage(self):
        """The ZeRO stage the engine runs (0 when the config names none), as DeepSpeed's
        DeepSpeedConfig.zero_optimization_stage."""
        return self._stage

    def find_config_node(self, ds_key_long):
        """(the dict holding the last part of the dotted key, that last part); (None, last part)
        when a parent is absent."""
        config = self.config
        nodes = ds_key_long.split(".")
        ds_key = nodes.pop()
        for node in nodes:
            config = config.get(node) if isinstance(config, dict) else None
            if config is None:
                return None, ds_key
        return config, ds_key

    def get_value(self, ds_key_long, default=None):
        """The value at a dotted key ("zero_optimization.stage"), or `default` when not set."""
        config, ds_key = self.find_config_node(ds_key_long)
        if config is None:
            return default
        return config.get(ds_key, default)

    def del_config_sub_tree(self, ds_key_long, must_exist=False):
        """Removes the sub-tree at a dotted key; with must_exist, a missing one is an error."""
        config = self.config
        parent = None
        nodes = ds_key_long.split(".")
        for node in nodes:
            parent = config
            config = config.get(node) if isinstance(config, dict) else None
            if config is None:
                if must_exist:
                    raise ConfigError(f"del_config_sub_tree: no {ds_key_long} entry in the config")
                return
        if parent is not None:
            parent.pop(nodes[-1])

    def is_true(self, ds_key_long):
        """True only when the value is set and true."""
        value = self.get_value(ds_key_long)
        return False if value is None else bool(value)

    def is_false(self, ds_key_long):
        """True only when the value is set and false."""
        value = self.get_value(ds_key_long)
        return False if value is None else not bool(value)

    def is_zero2(self):
        return self._stage == 2

    def is_zero3(self):
        return self._stage == 3

    def is_offload(self):
        return self._offload

    def _precision(self):
        """The training dtype's name the config asks for ("fp32", "fp16", "bf16"), or None
        when fp16/bf16 "enabled" is "auto" and none is explicitly on (the Trainer decides)."""
        return self.zerotrain_config.precision

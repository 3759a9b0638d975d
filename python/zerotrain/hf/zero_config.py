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
import copy
import json
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


def _json_text_of(config_file_or_dict):
    """(json_text, origin) for a dict, a path, a JSON string or a base64-encoded JSON string:
    what HfDeepSpeedConfig accepts."""
    if isinstance(config_file_or_dict, dict):
        return _config.config_source(config=config_file_or_dict)
    if isinstance(config_file_or_dict, os.PathLike) or (
            isinstance(config_file_or_dict, str) and os.path.exists(config_file_or_dict)):
        return _config.config_source(config=config_file_or_dict)
    if isinstance(config_file_or_dict, str):
        text = config_file_or_dict.strip()
        if text.startswith("{"):
            return text, "<config JSON string>"
        try:
            decoded = base64.urlsafe_b64decode(text).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            decoded = None
        if decoded is not None and decoded.lstrip().startswith("{"):
            return decoded, "<config base64 string>"
        if text.endswith(".json") or os.sep in text:
            raise ConfigError(f"[config] HfZeroConfig: {text}: no such file; check the path of the ds_config")
        raise ConfigError(f"[config] HfZeroConfig({config_file_or_dict!r}): not an existing file, a JSON object or a "
                          "base64-encoded JSON object; give the path of the ds_config, or the config as a dict")
    raise ConfigError(f"[config] HfZeroConfig takes a path or a dict, not {type(config_file_or_dict).__name__}")


class HfZeroConfig:
    """A ds_config (path, dict, JSON or base64 string) that can be queried for its ZeRO stage
    and other values; "auto" values are allowed (the Trainer fills them). Bad values raise
    zerotrain.ConfigError. A dict is copied: the caller's is never changed."""

    def __init__(self, config_file_or_dict):
        text, origin = _json_text_of(config_file_or_dict)
        self._resolved = _config.load(text, origin)   # the engine's own checks: ConfigError
        if isinstance(config_file_or_dict, dict):
            self.config = copy.deepcopy(config_file_or_dict)
        else:
            self.config = json.loads(text)
        self.set_stage_and_offload()
        global _live_ref
        _live_ref = weakref.ref(self)

    def set_stage_and_offload(self):
        # accelerate's convention: -1 when the config names no stage.
        self._stage = self.get_value("zero_optimization.stage", -1)
        self._offload = False
        if self.is_zero2() or self.is_zero3():
            devices = {self.get_value("zero_optimization.offload_optimizer.device"),
                       self.get_value("zero_optimization.offload_param.device")}
            self._offload = bool(devices & {"cpu", "nvme"})

    @property
    def zero_optimization_stage(self):
        """The ZeRO stage the engine runs (0 when the config names none), as DeepSpeed's
        DeepSpeedConfig.zero_optimization_stage."""
        return int(self._resolved["zero_stage"])

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
                    raise ConfigError(f"[config] del_config_sub_tree: no {ds_key_long} entry in the config")
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
        if self._resolved["bf16"]:
            return "bf16"
        if self._resolved["fp16"]:
            return "fp16"
        keys = ("bf16.enabled", "bfloat16.enabled", "fp16.enabled")
        if any(self.get_value(k) == "auto" for k in keys):
            return None
        return "fp32"

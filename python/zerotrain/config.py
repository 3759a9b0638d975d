"""The ds_config a script gives (a path, a dict, or args.deepspeed_config), as DeepSpeed's
initialize accepts it, loaded and checked by the C++ config reader: a bad value raises
zerotrain.ConfigError with the message `zerotrain config check` prints."""

import json
import os

from ._ext import _C
from .errors import ConfigError


def config_source(args=None, config=None, config_params=None):
    """The one config given, as (json_text, origin). DeepSpeed's rules: `config_params` is the
    old name of `config`; a config both in args and in the call is an error."""
    if config is None and config_params is not None:
        config = config_params
    from_args = getattr(args, "deepspeed_config", None) if args is not None else None
    if from_args is not None and config is not None:
        raise ConfigError("[config] a ds_config was given both as args.deepspeed_config (" + str(from_args) +
                          ") and as initialize(config=...); give one of them (DeepSpeed refuses both too)")
    if config is None:
        config = from_args
    if config is None:
        raise ConfigError("[config] no ds_config: pass initialize(config=<path or dict>), or args with "
                          "--deepspeed_config <path> (deepspeed.add_config_arguments adds the flag)")
    if isinstance(config, dict):
        try:
            return json.dumps(config), "<config dict>"
        except (TypeError, ValueError) as e:
            raise ConfigError(f"[config] the config dict cannot be written as JSON ({e}); give plain numbers, "
                              "strings, lists and dicts") from None
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), path
        except OSError as e:
            raise ConfigError(f"[config] {path}: cannot read the ds_config ({e.strerror}); check the path") from None
    raise ConfigError(f"[config] config must be a path or a dict, not {type(config).__name__}")


def load(json_text, origin):
    """The resolved values the Python engine needs (batch sizes, stage, precision), after the
    same checks the engine makes."""
    return _C.load_config(json_text, origin)

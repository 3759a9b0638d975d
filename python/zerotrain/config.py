"""The ds_config a script gives (a path, a dict, a JSON string, or args.deepspeed_config), as
DeepSpeed's initialize accepts it, read and checked once by the C++ config reader into a
zerotrain._C.Config: a bad value raises zerotrain.ConfigError with the message `zerotrain
config check` prints. Everything the package asks of a config (stage, precision, offload,
batch sizes) is that object's; nothing here parses or interprets one."""

import os

from ._ext import _C
from .errors import ConfigError

Config = _C.Config


def pick_source(args=None, config=None, config_params=None):
    """The one config given. DeepSpeed's rules: `config_params` is the old name of `config`;
    a config both in args and in the call is an error."""
    if config is None and config_params is not None:
        config = config_params
    from_args = getattr(args, "deepspeed_config", None) if args is not None else None
    if from_args is not None and config is not None:
        raise ConfigError("a ds_config was given both as args.deepspeed_config (" + str(from_args) +
                          ") and as initialize(config=...); give one of them (DeepSpeed refuses both too)")
    if config is None:
        config = from_args
    if config is None:
        raise ConfigError("no ds_config: pass initialize(config=<path or dict>), or args with "
                          "--deepspeed_config <path> (deepspeed.add_config_arguments adds the flag)")
    return config


def load(source, client_optimizer=None, client_scheduler=False, origin=None):
    """A Config from a path, a dict, a JSON object's text, or a Config (returned as it is
    when nothing is added to it). `client_optimizer`: the "optimizer" block a client
    optimizer stands for; `client_scheduler`: whether a client schedule was given (either
    beside the config's own block is a ConfigError)."""
    extra = {"client_optimizer": client_optimizer, "client_scheduler": bool(client_scheduler)}
    if isinstance(source, Config):
        if client_optimizer is None and not client_scheduler:
            return source
        return Config.from_dict(source.raw(), source.origin, **extra)
    if isinstance(source, dict):
        return Config.from_dict(source, origin or "<config dict>", **extra)
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return Config.from_text(source, origin or "<config JSON string>", **extra)
    if isinstance(source, (str, os.PathLike)):
        return Config.from_file(os.fspath(source), **extra)
    raise ConfigError(f"config must be a path or a dict, not {type(source).__name__}")

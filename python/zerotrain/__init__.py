"""zerotrain: DeepSpeed's training API over a C++ engine (ZeRO stages 0-3, offload, fp16/bf16,
resharding checkpoints). A DeepSpeed script needs one change:

    import zerotrain as deepspeed

docs/python.md shows the API. The engine, its config reader, collectives, optimizers and
checkpoints are C++ (zerotrain._C); this package holds only what must be Python: the module
hooks of ZeRO-3, argument conversion and the exceptions."""

import argparse

from ._ext import _C
from .errors import (CheckpointError, CommError, CommTimeoutError, ConfigError, Error, InternalError, IoError,  # noqa: F401
                     NotSupportedError, NumericsError, ResourceError, UsageError)
from . import comm, zero, utils  # noqa: F401
from .comm import init_distributed  # noqa: F401
from .runtime.engine import DeepSpeedEngine

__version__ = _C.__version__
__all__ = ["initialize", "add_config_arguments", "init_distributed", "DeepSpeedEngine", "zero", "comm", "utils",
           "Error", "ConfigError", "UsageError", "NotSupportedError", "CommError", "CommTimeoutError", "IoError",
           "CheckpointError", "NumericsError", "ResourceError", "InternalError"]


def initialize(args=None, model=None, optimizer=None, model_parameters=None, training_data=None, lr_scheduler=None,
               distributed_port=29500, mpu=None, dist_init_required=None, collate_fn=None, config=None,
               mesh_param=None, config_params=None):
    """deepspeed.initialize: returns (engine, optimizer, training_dataloader, lr_scheduler).

    `config` is a path or a dict (or args.deepspeed_config). `optimizer` a torch optimizer
    (Adam, AdamW, SGD, Adagrad: the engine runs it fused over its own shards) or none when
    the config has an "optimizer" block. `lr_scheduler` a torch schedule (or a callable that
    builds one from the optimizer) when the config has no "scheduler" block."""
    if mpu is not None:
        raise NotSupportedError("initialize(mpu=...): model parallelism is not implemented; "
                                "zerotrain trains data-parallel with ZeRO")
    engine = DeepSpeedEngine(args=args, model=model, optimizer=optimizer, model_parameters=model_parameters,
                             training_data=training_data, lr_scheduler=lr_scheduler, config=config,
                             config_params=config_params, collate_fn=collate_fn,
                             dist_init_required=dist_init_required)
    return engine, engine.optimizer, engine.training_dataloader, engine.lr_scheduler


def add_config_arguments(parser):
    """DeepSpeed's flags on an argparse parser: --deepspeed, --deepspeed_config, and the
    deprecated --deepscale/--deepscale_config."""
    group = parser.add_argument_group("DeepSpeed", "DeepSpeed configurations")
    group.add_argument("--deepspeed", default=False, action="store_true",
                       help="Enable DeepSpeed (helper flag for user code, no impact on DeepSpeed backend)")
    group.add_argument("--deepspeed_config", default=None, type=str, help="DeepSpeed json configuration file.")
    group.add_argument("--deepscale", default=False, action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--deepscale_config", default=None, type=str, help=argparse.SUPPRESS)
    return parser

"""deepspeed.zero: GatheredParameters, register_external_parameter, Init."""

from .partition_parameters import GatheredParameters, Init, register_external_parameter

__all__ = ["GatheredParameters", "Init", "register_external_parameter"]

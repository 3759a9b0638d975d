"""`deepspeed.zero`, as `zerotrain.zero`."""

from ..runtime.zero import GatheredParameters, Init, register_external_parameter  # noqa: F401
from ..runtime.zero.partition_parameters import unregister_external_parameter  # noqa: F401

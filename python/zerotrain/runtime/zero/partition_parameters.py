"""DeepSpeed's zero.GatheredParameters, zero.register_external_parameter and zero.Init."""

import torch

from ...errors import NotSupportedError, UsageError


def _engine_of(params):
    engines = {id(e): e for e in (getattr(p, "_zt_engine", lambda: None)() for p in params) if e is not None}
    if len(engines) > 1:
        raise UsageError("[usage] GatheredParameters: the parameters belong to two engines; gather each engine's "
                         "parameters in a scope of its own")
    return next(iter(engines.values()), None)


class GatheredParameters:
    """While the scope is open, `params` hold their full values on every rank, also at ZeRO
    stage 3 outside a forward. With `modifier_rank`, what that rank writes into them becomes
    every rank's (master weights included) when the scope closes. Every rank must open the
    same scope. Parameters of no engine (the model not yet given to initialize): nothing to
    gather, the scope does nothing, as DeepSpeed's does for parameters that are not ZeRO-3's."""

    def __init__(self, params, modifier_rank=None, fwd_module=None, enabled=True):
        if isinstance(params, torch.Tensor):
            params = [params]
        self._params = [p for p in (params or []) if p is not None]
        self._modifier_rank = modifier_rank
        self._enabled = enabled
        self._scope = None

    def __enter__(self):
        if not self._enabled or not self._params:
            return self
        engine = _engine_of(self._params)
        if engine is None:
            return self
        self._scope = engine._engine.gathered_parameters(self._params, self._modifier_rank)
        return self

    def __exit__(self, exc_type, exc, tb):
        scope, self._scope = self._scope, None
        if scope is not None and exc_type is None:
            scope.close()
        return False


def register_external_parameter(module, parameter):
    """Declares that `module`'s forward uses `parameter`, which another module owns, so that
    ZeRO-3 gathers it with `module`. Call it before initialize."""
    if not isinstance(module, torch.nn.Module) or not isinstance(parameter, torch.nn.Parameter):
        raise UsageError("[usage] register_external_parameter(module, parameter): give an nn.Module and an "
                         "nn.Parameter")
    if getattr(parameter, "_zt_engine", None) is not None:
        raise UsageError("[usage] register_external_parameter after deepspeed.initialize: the units are fixed then; "
                         "call it before initialize (in the module's __init__, as DeepSpeed's examples do)")
    registered = module.__dict__.setdefault("_zt_external_parameters", [])
    if not any(p is parameter for p in registered):
        registered.append(parameter)


def unregister_external_parameter(module, parameter):
    registered = module.__dict__.get("_zt_external_parameters", [])
    module.__dict__["_zt_external_parameters"] = [p for p in registered if p is not parameter]


class Init:
    """DeepSpeed's zero.Init: a model built inside it is never whole on any rank.

    Not yet available from Python: with enabled=True it raises NotSupportedError rather than
    build the model whole while claiming not to. Build the model normally (initialize shards
    it at once), or use the C++ zerotrain::ZeroInit."""

    def __init__(self, module=None, data_parallel_group=None, mem_efficient_linear=True, remote_device=None,
                 pin_memory=False, config_dict_or_path=None, config=None, enabled=True, dtype=None, mpu=None,
                 **kwargs):
        self._enabled = enabled

    def __enter__(self):
        if self._enabled:
            raise NotSupportedError(
                "[not supported] zerotrain.zero.Init is not implemented for Python models yet: build the model "
                "without it (deepspeed.initialize then keeps only this rank's shard at stage 3), or pass "
                "enabled=False")
        return self

    def __exit__(self, *exc):
        return False

"""DeepSpeed's zero.GatheredParameters, zero.register_external_parameter and zero.Init."""

import functools

import torch

from ... import config as _config
from ..._ext import _C
from ...errors import UsageError


def _engine_of(params):
    engines = {id(e): e for e in (getattr(p, "_zt_engine", lambda: None)() for p in params) if e is not None}
    if len(engines) > 1:
        raise UsageError("GatheredParameters: the parameters belong to two engines; gather each engine's "
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
        if engine is not None:
            self._scope = engine._engine.gathered_parameters(self._params, self._modifier_rank)
            return self
        # Cut by zero.Init and not yet given to an engine: whole again until the scope ends.
        cutter = _cutter_of(self._params)
        if cutter is not None:
            cutter.gather(self._params)
            self._scope = _CutScope(cutter, self._params, self._modifier_rank)
        return self

    def __exit__(self, exc_type, exc, tb):
        scope, self._scope = self._scope, None
        if scope is not None and exc_type is None:
            scope.close()
        return False


class _CutScope:
    def __init__(self, cutter, params, modifier_rank):
        self._cutter, self._params, self._modifier_rank = cutter, params, modifier_rank

    def close(self):
        self._cutter.release(self._params, self._modifier_rank)


def _cutter_of(params):
    cutters = {id(c): c for c in (getattr(p, "_zt_cutter", None) for p in params) if c is not None}
    if len(cutters) > 1:
        raise UsageError("GatheredParameters: the parameters were cut by two zero.Init scopes; gather each "
                         "scope's parameters on their own")
    return next(iter(cutters.values()), None)


def register_external_parameter(module, parameter):
    """Declares that `module`'s forward uses `parameter`, which another module owns, so that
    ZeRO-3 gathers it with `module`. Call it before initialize."""
    if not isinstance(module, torch.nn.Module) or not isinstance(parameter, torch.nn.Parameter):
        raise UsageError("register_external_parameter(module, parameter): give an nn.Module and an "
                         "nn.Parameter")
    if getattr(parameter, "_zt_engine", None) is not None:
        raise UsageError("register_external_parameter after deepspeed.initialize: the units are fixed then; "
                         "call it before initialize (in the module's __init__, as DeepSpeed's examples do)")
    registered = module.__dict__.setdefault("_zt_external_parameters", [])
    if not any(p is parameter for p in registered):
        registered.append(parameter)


def unregister_external_parameter(module, parameter):
    registered = module.__dict__.get("_zt_external_parameters", [])
    module.__dict__["_zt_external_parameters"] = [p for p in registered if p is not parameter]




# --- zero.Init -------------------------------------------------------------------------------
# While a scope is open, every nn.Module subclass's __init__ is wrapped: when the outermost
# __init__ of a module object returns (its subclasses' included), that module's own
# parameters are cut by the C++ cutter (python/src/zero_init.cpp). A child is cut as soon as
# it is built, before its parent goes on, so at most one module's parameters are whole.

_active = []        # the open Init scopes, innermost last
_originals = {}     # class -> its own __init__, while wrapped


def _wrap_class(cls):
    orig = cls.__dict__.get("__init__")
    if orig is None or getattr(orig, "_zt_wrapped", False) or cls is torch.nn.Module:
        return

    @functools.wraps(orig)
    def init(module, *args, **kwargs):
        depth = module.__dict__.get("_zt_init_depth", 0)
        module.__dict__["_zt_init_depth"] = depth + 1
        try:
            orig(module, *args, **kwargs)
        finally:
            module.__dict__["_zt_init_depth"] = depth
        if depth == 0 and _active:
            _active[-1]._cut_own(module)

    init._zt_wrapped = True
    _originals[cls] = orig
    cls.__init__ = init


def _all_module_classes():
    seen, stack = set(), [torch.nn.Module]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    return seen


def _init_subclass(cls, **kwargs):
    # Classes defined inside the scope are wrapped too.
    _wrap_class(cls)


_had_init_subclass = "__init_subclass__" in torch.nn.Module.__dict__
_module_init_subclass = torch.nn.Module.__dict__.get("__init_subclass__")


def _patch():
    for cls in _all_module_classes():
        _wrap_class(cls)
    torch.nn.Module.__init_subclass__ = classmethod(_init_subclass)


def _unpatch():
    for cls, orig in _originals.items():
        cls.__init__ = orig
    _originals.clear()
    if _had_init_subclass:
        torch.nn.Module.__init_subclass__ = _module_init_subclass
    else:
        del torch.nn.Module.__init_subclass__


def _zero_init_device():
    """Where the parameters built under zero.Init are made, and so cut: torch's default device."""
    return str(torch.get_default_device()) if hasattr(torch, "get_default_device") else "cpu"


class Init:
    """DeepSpeed's zero.Init: a model built inside the scope is never whole on any rank. As
    each module finishes its __init__, its own parameters keep their shape and dtype (the
    config's training dtype) but no memory, and this rank keeps its 1/N of them (rank 0's
    values). deepspeed.initialize then places them at ZeRO stage 3 without gathering the
    model. Every rank must build the same model. To change weights after their module was
    built (tying aside), open zero.GatheredParameters(params, modifier_rank=0) around the
    change. `module=`: cut an already built model now."""

    # Each parameter's values come from rank 0 (broadcast when cut). zerotrain.hf's loader
    # turns it off: it writes every chunk from the checkpoint next.
    _from_rank0 = True

    def __init__(self, module=None, data_parallel_group=None, mem_efficient_linear=True, remote_device=None,
                 pin_memory=False, config_dict_or_path=None, config=None, enabled=True, dtype=None, mpu=None,
                 **kwargs):
        self._enabled = enabled
        self._config = config_dict_or_path if config_dict_or_path is not None else config
        self._cutter = None
        if module is not None and enabled:
            self._start()
            for m in module.modules():
                self._cut_own(m)

    def _start(self):
        if self._cutter is not None:
            return
        from ... import comm as _comm
        _comm.init_distributed()   # torch.distributed first: the cutter then cuts over its group
        if self._config is None:
            config = _config.load({"zero_optimization": {"stage": 3}}, origin="<zero.Init default config>")
        else:
            config = _config.load(self._config)
        device = _zero_init_device()
        group, store = _comm._adoptable_group(config, device)   # the script's torch.distributed group, if usable
        # Joins the job (ConfigError unless stage 3).
        self._cutter = _C.ParamCutter(config, group, store, device, from_rank0=self._from_rank0)

    def _cut_own(self, module):
        params = [p for p in module._parameters.values() if p is not None and getattr(p, "_zt_cutter", None) is None]
        if not params:
            return
        self._cutter.cut(params)
        for p in params:
            p._zt_cutter = self._cutter

    def __enter__(self):
        if not self._enabled:
            return self
        self._start()
        if not _active:
            _patch()
        _active.append(self)
        return self

    def __exit__(self, *exc):
        if not self._enabled:
            return False
        _active.remove(self)
        if not _active:
            _unpatch()
        return False

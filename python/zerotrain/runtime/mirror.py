"""The C++ mirror of a Python model (python/src/mirror.h): a tree of C++ modules that
registers the model's own parameter and persistent buffer tensors under the same names, so
that the engine trains the Python tensors themselves and its checkpoints use the names of
the model's state_dict().

At ZeRO stage 3 some modules are units, whose parameters are gathered around their forward
(zerotrain.runtime.zero.hooks). DeepSpeed's choice: every module with parameters of its own.
A module of a class given to zerotrain.utils.set_z3_leaf_modules (DeepSpeed's API) is one
unit with all the parameters below it, and nothing below it is a unit."""

from .._ext import _C


def _is_leaf(module):
    return getattr(module, "_z3_leaf", False)


def _has_own_parameters(module):
    return any(p is not None for p in module._parameters.values())


class MirroredModel:
    """The mirror of `model`, and its units as (module, mirror node)."""

    def __init__(self, model, stage3):
        self.units = []
        self._seen = set()
        self.root = self._build(model, stage3, inside_leaf=False)

    def _build(self, module, stage3, inside_leaf):
        leaf = stage3 and not inside_leaf and _is_leaf(module)
        external = getattr(module, "_zt_external_parameters", [])
        unit = stage3 and not inside_leaf and (
            (leaf and any(True for _ in module.parameters())) or _has_own_parameters(module) or bool(external))
        node = _C.ModuleMirror(unit)
        for name, p in module._parameters.items():
            if p is not None:
                node.add_parameter(name, p)
        non_persistent = getattr(module, "_non_persistent_buffers_set", set())
        for name, b in module._buffers.items():
            if b is not None and name not in non_persistent:
                node.add_buffer(name, b)
        for name, child in module._modules.items():
            # A module registered twice (shared) is mirrored once, where PyTorch names it first.
            if child is None or id(child) in self._seen:
                continue
            self._seen.add(id(child))
            node.add_child(name, self._build(child, stage3, inside_leaf or leaf))
        if unit:
            for p in external:
                node.add_external_parameter(p)
            self.units.append((module, node))
        return node

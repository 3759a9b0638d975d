"""deepspeed.utils: zero_to_fp32, and the ZeRO-3 leaf modules."""

from . import zero_to_fp32  # noqa: F401


def set_z3_leaf_modules(model, leaf_module_classes):
    """DeepSpeed's set_z3_leaf_modules: every module of `model` whose class is one of
    `leaf_module_classes` (classes or class names) becomes one ZeRO-3 unit with all the
    parameters below it, gathered once around its forward instead of module by module (fewer,
    larger collectives: a transformer block, an MoE layer). Call it before initialize.
    Returns the modules marked."""
    names = {c if isinstance(c, str) else c.__name__ for c in leaf_module_classes}
    marked = []
    for m in model.modules():
        if type(m).__name__ in names:
            m._z3_leaf = True
            marked.append(m)
    return marked


def unset_z3_leaf_modules(model, leaf_module_classes):
    names = {c if isinstance(c, str) else c.__name__ for c in leaf_module_classes}
    for m in model.modules():
        if type(m).__name__ in names:
            m._z3_leaf = False


def z3_leaf_module(model):
    return getattr(model, "_z3_leaf", False)

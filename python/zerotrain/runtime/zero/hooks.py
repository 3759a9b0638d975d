"""ZeRO-3 from Python: each unit module's forward hooks drive the C++ stage-3 schedule
(gathers, prefetch along the recorded trace, release, persistence), and its outputs are
passed through a C++ autograd node that gathers the unit again before its backward. The
gradients themselves are hooked in C++ (as at stages 0-2), so no Python runs per gradient."""

import collections.abc

import torch


def _arm(node, out):
    """`out` with every tensor that needs a gradient passed through the unit's pre-backward
    node; tuples, lists, dicts (HF's ModelOutput included) are walked."""
    if isinstance(out, torch.Tensor):
        return node.arm(out) if out.requires_grad else out
    if isinstance(out, tuple):
        items = [_arm(node, o) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    if isinstance(out, list):
        return [_arm(node, o) for o in out]
    if isinstance(out, collections.abc.MutableMapping):
        for key in list(out.keys()):
            value = out[key]
            armed = _arm(node, value)
            if armed is not value:
                out[key] = armed
        return out
    return out


def install(units):
    """Forward hooks on every (module, mirror node) unit; returns their handles."""
    handles = []
    for module, node in units:
        def pre_hook(_module, _args, node=node):
            node.enter_forward()

        def post_hook(_module, _args, output, node=node):
            node.leave_forward()
            if output is None or not torch.is_grad_enabled():
                return None
            armed = _arm(node, output)
            return armed if armed is not output else None

        # Gathered before any other pre-hook reads the parameters; released even when the
        # forward raises (always_call), so a failed forward leaves nothing gathered.
        handles.append(module.register_forward_pre_hook(pre_hook, prepend=True))
        handles.append(module.register_forward_hook(post_hook, always_call=True))
    return handles

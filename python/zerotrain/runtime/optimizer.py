"""What initialize returns as the optimizer and the schedule: views of the C++ engine's.

A client torch optimizer is not run: the engine steps its own fused optimizer over the flat
fp32 shard, with the same hyper-parameters and parameter groups (DeepSpeed also swaps in
its own fused optimizers under ZeRO). A torch LR schedule, the user's or one built over the
returned optimizer, keeps working: it sets the view's param_groups' "lr", and the engine
takes those at every step."""

import torch

from ..errors import NotSupportedError, UsageError


def _adam_params(group, w_mode):
    return {"lr": group["lr"], "betas": list(group["betas"]), "eps": group["eps"],
            "weight_decay": group["weight_decay"], "adam_w_mode": w_mode}


def optimizer_block(optimizer):
    """The ds_config "optimizer" block that runs what `optimizer` (a torch.optim instance)
    would run, from its first group's hyper-parameters."""
    g = optimizer.param_groups[0]
    if isinstance(optimizer, torch.optim.AdamW):
        if g.get("amsgrad"):
            raise NotSupportedError("torch.optim.AdamW(amsgrad=True): AMSGrad is not implemented")
        return {"type": "AdamW", "params": _adam_params(g, True)}
    if isinstance(optimizer, torch.optim.Adam):
        if g.get("amsgrad"):
            raise NotSupportedError("torch.optim.Adam(amsgrad=True): AMSGrad is not implemented")
        # torch's Adam adds weight decay to the gradient (L2), DeepSpeed's "Adam" decouples it
        # unless adam_w_mode is false.
        return {"type": "Adam", "params": _adam_params(g, bool(g.get("decoupled_weight_decay", False)))}
    if isinstance(optimizer, torch.optim.SGD):
        return {"type": "SGD", "params": {"lr": g["lr"], "momentum": g["momentum"], "dampening": g["dampening"],
                                          "weight_decay": g["weight_decay"], "nesterov": g["nesterov"]}}
    if isinstance(optimizer, torch.optim.Adagrad):
        return {"type": "Adagrad", "params": {"lr": g["lr"], "eps": g["eps"], "weight_decay": g["weight_decay"]}}
    raise NotSupportedError(
        f"client optimizer {type(optimizer).__module__}.{type(optimizer).__name__}: the engine runs "
        "torch.optim.Adam, AdamW, SGD and Adagrad as its own fused optimizers; pass one of them, or name the "
        "optimizer in the config's \"optimizer\" block (Adam, AdamW, Lamb, SGD, Adagrad, Lion)")


class EngineOptimizer(torch.optim.Optimizer):
    """The optimizer initialize returns: its param_groups are the engine's groups (each with
    "params" and "lr", which an LR schedule may set); engine.step() steps it."""

    def __init__(self, engine, groups, defaults):
        # torch.optim.Optimizer.__init__ would build state for a torch step; this view only
        # carries the groups, so set what LR schedules read.
        self._engine = engine
        self.defaults = dict(defaults)
        self.param_groups = groups
        self.state = {}
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._optimizer_state_dict_pre_hooks = {}
        self._optimizer_state_dict_post_hooks = {}
        self._optimizer_load_state_dict_pre_hooks = {}
        self._optimizer_load_state_dict_post_hooks = {}

    def step(self, closure=None):
        raise UsageError("call engine.step(), not optimizer.step(): the engine steps the optimizer at the "
                         "gradient accumulation boundary (as DeepSpeed's does)")

    def zero_grad(self, set_to_none=True):
        self._engine.zero_grad()

    @property
    def cur_scale(self):
        """DeepSpeed's name of the fp16 loss scale."""
        return self._engine.loss_scale

    @property
    def loss_scale(self):
        return self._engine.loss_scale

    def __repr__(self):
        return f"EngineOptimizer({len(self.param_groups)} groups, lr {[g['lr'] for g in self.param_groups]})"


class EngineLRScheduler:
    """The schedule of the config's "scheduler" block, which the engine steps itself after
    every optimizer step (DeepSpeed's engine does too): this view only reads it."""

    def __init__(self, engine):
        self._engine = engine

    def get_lr(self):
        return self._engine.get_lr()

    def get_last_lr(self):
        return self._engine.get_lr()

    def step(self, *args, **kwargs):
        """A no-op: the engine steps the schedule at every optimizer step."""

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass

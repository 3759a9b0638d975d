"""DeepSpeed's engine over the C++ one (python/src/engine.cpp): the same names, arguments and
return values as deepspeed.runtime.engine.DeepSpeedEngine for what a training script calls.
The engine is an nn.Module whose child `module` is the user's model; the model's own
parameters become views of the C++ engine's flat buffers (no copies)."""

import atexit
import json
import weakref

import torch

from .. import comm as _comm
from .. import config as _config
from .._ext import _C
from ..errors import ConfigError, UsageError
from . import mirror as _mirror
from .optimizer import EngineLRScheduler, EngineOptimizer, optimizer_block
from .zero import hooks as _hooks

# Reserved client_state keys (zerotrain/checkpoint/names.h defines them): the names under
# which a tied parameter also appears in the model's state_dict (zero_to_fp32 adds them back,
# as DeepSpeed's "shared_params"), and the state of a client torch LR schedule (DeepSpeed saves
# it in its checkpoint too), so that a resumed run continues the schedule.
SHARED_PARAMS_KEY = _C.CLIENT_STATE_SHARED_PARAMS_KEY
LR_SCHEDULER_KEY = _C.CLIENT_STATE_LR_SCHEDULER_KEY


def _param_groups(model, optimizer, model_parameters):
    """The engine's groups as (name, params, lr or None, weight_decay or None)."""
    if optimizer is not None:
        source = optimizer.param_groups
    elif model_parameters is not None:
        source = list(model_parameters)
        if source and isinstance(source[0], dict):
            pass
        else:
            source = [{"params": source}]
    else:
        source = [{"params": list(model.parameters())}]
    groups = []
    for i, g in enumerate(source):
        if not isinstance(g, dict) or "params" not in g:
            raise UsageError("model_parameters: give a list of tensors or a list of dicts with \"params\" "
                             "(torch.optim's parameter groups)")
        params = g["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        lr = g.get("lr")
        wd = g.get("weight_decay")
        groups.append((f"group {i}", params, None if lr is None else float(lr), None if wd is None else float(wd)))
    return groups


def _shared_names(model):
    """{first name: [other names]} of parameters registered under more than one name."""
    first = {}
    shared = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            shared.setdefault(first[id(p)], []).append(name)
        else:
            first[id(p)] = name
    return shared


def _engine_device(model):
    """Where the engine trains: the device of the (placed) parameters."""
    for p in model.parameters():
        return str(p.device)
    return "cpu"


def _zero_init_cutter(model, stage):
    """The zero.Init cutter the model's parameters were cut by, if any."""
    cutters = {id(c): c for c in (getattr(p, "_zt_cutter", None) for p in model.parameters()) if c is not None}
    if not cutters:
        return None
    if len(cutters) > 1:
        raise UsageError("the model was built in two zero.Init scopes; build it in one")
    if stage != 3:
        raise ConfigError(f"the model was built under zero.Init, so every rank holds 1/N of its parameters, "
                          f"but the config asks for ZeRO stage {stage}, which needs them whole; train it at stage 3, "
                          "or build it without zero.Init")
    return next(iter(cutters.values()))


def _place_and_cast(model, config):
    """As DeepSpeed's engine moves the module to its device and calls .half()/.bfloat16():
    floating parameters and buffers (persistent or not) in the training dtype, on the device
    the engine chooses (_C.training_device: LOCAL_RANK's GPU, ZEROTRAIN_DEVICE). Parameters
    cut by zero.Init are already in it, and have no memory to convert."""
    device = torch.device(_C.training_device(_engine_device(model), config))
    dtype = config.dtype
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if getattr(t, "_zt_cutter", None) is not None:
                continue
            new = t.data
            if device is not None and new.device != device:
                new = new.to(device)
            if new.is_floating_point() and new.dtype != dtype:
                new = new.to(dtype)
            if new is not t.data:
                t.data = new


class DeepSpeedEngine(torch.nn.Module):
    """What deepspeed.initialize returns first. Call it as the model, then backward(loss)
    and step() for every micro-batch."""

    def __init__(self, args=None, model=None, optimizer=None, model_parameters=None, training_data=None,
                 lr_scheduler=None, config=None, config_params=None, collate_fn=None, dist_init_required=None):
        super().__init__()
        if model is None:
            raise UsageError("deepspeed.initialize: model is required (an nn.Module)")
        if not isinstance(model, torch.nn.Module):
            raise UsageError(f"deepspeed.initialize: model must be a torch.nn.Module, not "
                             f"{type(model).__name__}")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer) and callable(optimizer):
            # DeepSpeed accepts a callable that builds the optimizer from the parameters.
            optimizer = optimizer(model_parameters if model_parameters is not None else model.parameters())
        # As DeepSpeed's initialize: torch.distributed usable too (and one rendezvous store).
        _comm.init_distributed(dist_init_required=dist_init_required)
        # Read and checked once, here (ConfigError before the model is touched); everything
        # below asks this object.
        cfg = _config.load(_config.pick_source(args, config, config_params),
                           client_optimizer=optimizer_block(optimizer) if optimizer is not None else None,
                           client_scheduler=lr_scheduler is not None)

        self.module = model
        stage3 = cfg.stage == 3
        cutter = _zero_init_cutter(model, cfg.stage)
        _place_and_cast(model, cfg)
        self._mirror = _mirror.MirroredModel(model, stage3)
        if cutter is not None:
            # The chunks zero.Init kept go to the engine, which places them (and uses the
            # communicator they were cut with: one rendezvous).
            cutter.give_to(self._mirror.units[0][1])
        groups = _param_groups(model, optimizer, model_parameters)
        self._shared = _shared_names(model)
        # The script's torch.distributed group carries the engine's collectives too; a model
        # cut by zero.Init brings the communicator it was cut with instead.
        device = _engine_device(model)
        group, store = _comm._adoptable_group(cfg, device) if cutter is None else (None, None)
        self._engine = _C.initialize(self._mirror.root, cfg, groups, group, store, device)
        if cutter is not None:
            cutter.restore_unplaced(list(model.parameters()))   # frozen ones: whole again
        self._config = self._engine.config()   # the batch triangle at the job's world size
        self._hook_handles = _hooks.install(self._mirror.units) if stage3 else []
        self._zt_destroyed = False
        for p in model.parameters():
            p._zt_engine = weakref.ref(self)

        # What initialize returns besides the engine.
        self._client_optimizer = optimizer
        opt_groups = optimizer.param_groups if optimizer is not None else [
            {"params": g[1], "lr": lr} for g, lr in zip(groups, self._engine.get_lr())]
        defaults = dict(optimizer.defaults) if optimizer is not None else {"lr": self._engine.get_lr()[0]}
        self.optimizer = EngineOptimizer(self, opt_groups, defaults)
        if lr_scheduler is not None and not hasattr(lr_scheduler, "step") and callable(lr_scheduler):
            lr_scheduler = lr_scheduler(self.optimizer)   # DeepSpeed: a callable of the optimizer
        self._client_scheduler = lr_scheduler
        if lr_scheduler is not None:
            self.lr_scheduler = lr_scheduler
        elif self._config.has_scheduler:
            self.lr_scheduler = EngineLRScheduler(self)
        else:
            self.lr_scheduler = None
        self.training_dataloader = self.deepspeed_io(training_data, collate_fn=collate_fn) \
            if training_data is not None else None

    # --- running the model ----------------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self._config.fp16_auto_cast:
            args = tuple(a.half() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
            kwargs = {k: v.half() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in kwargs.items()}
        return self.module(*args, **kwargs)

    def backward(self, loss, retain_graph=False, scale_wrt_gas=True):
        """Backward of loss / gradient_accumulation_steps (times the loss scale in fp16);
        gradient buckets are reduced while it runs. Returns the loss, as DeepSpeed's does.
        scale_wrt_gas=False: the loss is already divided (HF's Trainer divides it itself)."""
        if retain_graph:
            raise UsageError("engine.backward(retain_graph=True) is not supported: the engine frees each "
                             "gradient as soon as it is reduced")
        self._engine.backward(loss, bool(scale_wrt_gas))
        return loss

    def step(self, lr_kwargs=None):
        """Counts the micro-step; at the accumulation boundary clips, steps the optimizer and
        the schedule (a skipped fp16 step steps neither)."""
        boundary = self._engine.is_gradient_accumulation_boundary()
        if boundary and not self._config.has_scheduler:
            # A torch schedule sets the groups' "lr"; the engine takes them now.
            self._engine.set_lr([float(g["lr"]) for g in self.optimizer.param_groups])
        skipped_before = self._engine.skipped_steps()
        self._engine.step()
        if not boundary:
            return
        if _IN_FLIGHT and id(self._engine) in _IN_FLIGHT and self._engine.checkpoint_in_flight() is None:
            del _IN_FLIGHT[id(self._engine)]   # the step published it
        stepped = self._engine.skipped_steps() == skipped_before
        self._last_step_applied = stepped
        if self._client_scheduler is not None and stepped:
            # The engine stepped in the optimizer's place: tell torch's schedule so (it warns
            # about a schedule stepped before its optimizer otherwise).
            sched_opt = getattr(self._client_scheduler, "optimizer", None)
            if sched_opt is not None:
                sched_opt._opt_called = True
            self._client_scheduler.step(**(lr_kwargs or {}))
            self._engine.set_lr([float(g["lr"]) for g in self.optimizer.param_groups])
        if self._config.has_scheduler:
            for g, lr in zip(self.optimizer.param_groups, self._engine.get_lr()):
                g["lr"] = lr

    def zero_grad(self, set_to_none=True):
        self._engine.zero_grad()

    def no_sync(self):
        """DDP's no_sync: backward accumulates locally and reduces nothing (stages 0-1)."""
        return _NoSync(self._engine)

    # --- state ----------------------------------------------------------------------------
    @property
    def global_steps(self):
        return self._engine.global_steps()

    @property
    def global_samples(self):
        return self._engine.global_samples()

    @property
    def micro_steps(self):
        return self._engine.micro_steps()

    @property
    def skipped_steps(self):
        return self._engine.skipped_steps()

    @property
    def loss_scale(self):
        return self._engine.loss_scale()

    @property
    def global_rank(self):
        return self._engine.rank()

    @property
    def world_size(self):
        return self._engine.world_size()

    @property
    def dp_world_size(self):
        return self._engine.world_size()

    @property
    def local_rank(self):
        return _C.rendezvous_from_env()["local_rank"]

    @property
    def device(self):
        return torch.device(self._engine.device())

    def get_lr(self):
        return self._engine.get_lr()

    def get_global_grad_norm(self):
        return self._engine.get_global_grad_norm()

    def gradient_accumulation_steps(self):
        return self._config.gradient_accumulation_steps

    def train_batch_size(self):
        return self._config.train_batch_size

    def train_micro_batch_size_per_gpu(self):
        return self._config.train_micro_batch_size_per_gpu

    def is_gradient_accumulation_boundary(self):
        return self._engine.is_gradient_accumulation_boundary()

    def set_gradient_accumulation_boundary(self, is_boundary):
        """DeepSpeed's: whether the next micro-step ends the accumulation, whatever the count
        (None: count again). HF's Trainer ends a short last window of an epoch this way."""
        self._engine.set_gradient_accumulation_boundary(None if is_boundary is None else bool(is_boundary))

    def zero_optimization_stage(self):
        return self._config.stage

    def zero_optimization(self):
        return self._config.stage > 0

    def fp16_enabled(self):
        return self._config.fp16_enabled

    def bfloat16_enabled(self):
        return self._config.bf16_enabled

    def gradient_clipping(self):
        return self._config.gradient_clipping

    def was_step_applied(self):
        """False when the last optimizer step was skipped (fp16 overflow)."""
        return getattr(self, "_last_step_applied", True)

    def model_state_bytes(self):
        """The bytes this rank holds for parameters, gradients, optimizer states, master
        weights and buffers (zerotrain's; docs/python.md)."""
        return self._engine.model_state_bytes()

    # --- data -----------------------------------------------------------------------------
    def deepspeed_io(self, dataset, batch_size=None, route=None, pin_memory=True, data_sampler=None,
                     collate_fn=None, num_local_io_workers=None):
        """A DataLoader of micro-batches over this rank's share of `dataset`
        (DistributedSampler), as DeepSpeed's."""
        from torch.utils.data import DataLoader, DistributedSampler
        if data_sampler is None:
            data_sampler = DistributedSampler(dataset, num_replicas=self.dp_world_size, rank=self.global_rank)
        return DataLoader(dataset, batch_size=batch_size or self.train_micro_batch_size_per_gpu(),
                          sampler=data_sampler, collate_fn=collate_fn, num_workers=num_local_io_workers or 0,
                          drop_last=False)

    # --- checkpoints ----------------------------------------------------------------------
    def save_checkpoint(self, save_dir, tag=None, client_state={}, save_latest=True, exclude_frozen_parameters=False):
        """Every rank must call it. `<save_dir>/<tag>` appears whole or not at all; `latest`
        moves only when every rank has written. client_state must be JSON (nothing is
        pickled). Returns True, as DeepSpeed's."""
        state = dict(client_state or {})
        if self._shared:
            state[SHARED_PARAMS_KEY] = self._shared
        schedule_state = self._client_schedule_state()
        if schedule_state is not None:
            state[LR_SCHEDULER_KEY] = schedule_state
        try:
            text = json.dumps(state)
        except (TypeError, ValueError) as e:
            raise UsageError(f"save_checkpoint: client_state must be JSON-serialisable (zerotrain never "
                             f"pickles: a checkpoint cannot run code when loaded): {e}") from None
        self._engine.save_checkpoint(str(save_dir), "" if tag is None else str(tag), text, bool(save_latest))
        if self._engine.checkpoint_in_flight() is not None:
            _IN_FLIGHT[id(self._engine)] = self._engine
        return True

    def wait_for_checkpoint(self):
        """With checkpoint.async_save: waits for the checkpoint being written in the background
        and publishes it (moves `latest`); every rank must call it. Returns its path, or None
        when none was in flight. The next step, save or load does it too, and so does the end
        of the program."""
        path = self._engine.wait_for_checkpoint()
        _IN_FLIGHT.pop(id(self._engine), None)
        return path

    def _client_schedule_state(self):
        """The client torch schedule's state_dict as JSON (checkpoints never pickle), or None
        when there is no client schedule or its state is not plain data."""
        sched = self._client_scheduler
        if sched is None or not hasattr(sched, "state_dict"):
            return None
        state = sched.state_dict()
        try:
            return json.loads(json.dumps(state))
        except (TypeError, ValueError):
            import warnings
            warnings.warn(f"{type(sched).__name__}'s state is not plain data (JSON), so the checkpoint does not "
                          "hold it: a resumed run restarts that schedule; save and restore it yourself through "
                          "client_state", stacklevel=3)
            return None

    def load_checkpoint(self, load_dir, tag=None, load_module_strict=True, load_optimizer_states=True,
                        load_lr_scheduler_states=True, load_module_only=False, custom_load_fn=None):
        """Loads `<load_dir>/<tag>` (tag None: the one `latest` names) at any world size and
        stage. Returns (path, client_state), or (None, None) when there is no `latest`."""
        loaded = self._engine.load_checkpoint(str(load_dir), "" if tag is None else str(tag), load_module_strict,
                                              load_optimizer_states, load_lr_scheduler_states, load_module_only)
        if loaded is None:
            return None, None
        path, client_state = loaded
        client_state.pop(SHARED_PARAMS_KEY, None)
        schedule_state = client_state.pop(LR_SCHEDULER_KEY, None)
        if schedule_state is not None and load_lr_scheduler_states and not load_module_only \
                and self._client_scheduler is not None:
            self._client_scheduler.load_state_dict(schedule_state)
            self._engine.set_lr([float(lr) for lr in self._client_scheduler.get_last_lr()])
            for g, lr in zip(self.optimizer.param_groups, self._client_scheduler.get_last_lr()):
                g["lr"] = lr
        if self._config.has_scheduler:
            for g, lr in zip(self.optimizer.param_groups, self._engine.get_lr()):
                g["lr"] = lr
        return path, client_state

    def save_16bit_model(self, save_dir, save_filename="model.safetensors", exclude_frozen_parameters=False,
                         max_shard_size="5GB"):
        """Every rank must call it. Rank 0 writes the model's parameters (a tied one once,
        under its first name) and persistent buffers, in the training dtype, as safetensors:
        `save_filename`, or past `max_shard_size` Hugging Face's shards and index. Streamed:
        at stage 3 the parameters of one module at a time are gathered. At stage 3 only with
        stage3_gather_16bit_weights_on_model_save (returns False, writing nothing, otherwise).
        For a transformers model the folder also gets its config.json (and
        generation_config.json), so that from_pretrained loads it (zerotrain.hf.save_hf_folder)."""
        from ..hf.save import save_hf_folder
        return save_hf_folder(self, save_dir, max_shard_size, save_filename, exclude_frozen_parameters)

    def _save_model_files(self, save_dir, filename, exclude_frozen_parameters, max_shard_size, extra_files=(),
                          caller_error=""):
        """save_16bit_model, with rank 0's other files of the folder as (name, bytes), or the
        error making them (the save then fails on every rank)."""
        return self._engine.save_16bit_model(str(save_dir), str(filename), bool(exclude_frozen_parameters),
                                             _C.parse_bytes(max_shard_size, "max_shard_size"), list(extra_files),
                                             str(caller_error))

    def destroy(self):
        """Publishes a checkpoint still being written (a collective), then detaches the
        engine from the model and frees its buffers."""
        if not self._zt_destroyed:
            self.wait_for_checkpoint()
        self._zt_destroyed = True
        for h in self._hook_handles:
            h.remove()
        self._hook_handles = []
        self._engine.destroy()


# The C++ engines with a save written in the background (checkpoint.async_save): a script
# ends right after its last save_checkpoint, as DeepSpeed's examples do, so what is still in
# flight is published at exit (every rank exits alike) rather than left as a staging
# directory. The C++ engine is held here, not the Python one: a Python engine freed first (at
# different times on different ranks) must not publish on some ranks and not on others. A
# script that destroys its torch.distributed group before it exits must call
# wait_for_checkpoint() first; the package's own exit handler, which releases the group
# (zerotrain.comm), calls this first.
_IN_FLIGHT = {}


def _publish_in_flight():
    for cpp in list(_IN_FLIGHT.values()):
        if cpp.checkpoint_in_flight() is not None:
            cpp.wait_for_checkpoint()
    _IN_FLIGHT.clear()


atexit.register(_publish_in_flight)
_comm._before_release.append(_publish_in_flight)


class _NoSync:
    def __init__(self, engine):
        self._engine = engine
        self._scope = None

    def __enter__(self):
        self._scope = self._engine.no_sync()
        return self

    def __exit__(self, *exc):
        self._scope = None
        return False

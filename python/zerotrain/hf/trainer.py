"""transformers.Trainer whose `deepspeed=` config is served by zerotrain's engine.

HF's loop runs unchanged (data, accumulation windows, logging, evaluation, checkpoint folders
and their rotation, resume); the overrides below are the Trainer's documented hooks and the
methods HF's own DeepSpeed branch replaces, each handing its work to the engine:

  create_optimizer / create_scheduler   build the engine (once the step count is known)
  _wrap_model                           the engine is the model HF calls
  training_step                         engine.backward, and engine.step at HF's boundaries
  _clip_grad_norm / _get_grad_norm      the engine clips; its norm is what HF logs
  save_model                            an HF model folder, streamed by the engine
  _save_optimizer_and_scheduler         engine.save_checkpoint inside checkpoint-N
  _load_optimizer_and_scheduler         engine.load_checkpoint (any world size and stage)

What HF would otherwise call on the optimizer and the schedule (optimizer.step(),
lr_scheduler.step(), model.zero_grad()) lands on views whose step is a no-op: the engine
already stepped inside training_step."""

import os

import torch
import transformers

from .. import initialize as _initialize
from .._ext import _C
from ..errors import NotSupportedError, UsageError
from . import auto_values
from .training_args import TrainingArguments

# The Trainer methods this class relies on HF calling; checked at start-up, so a transformers
# release that renames one fails here and not in the middle of a run.
_REQUIRED_HOOKS = ("create_optimizer", "create_scheduler", "_wrap_model", "training_step", "_clip_grad_norm",
                   "_get_grad_norm", "save_model", "_save_optimizer_and_scheduler",
                   "_load_optimizer_and_scheduler", "_load_from_checkpoint", "_load_best_model")

_CHECKPOINT_TAG_PREFIX = _C.CHECKPOINT_DEFAULT_TAG_PREFIX


class _OptimizerView:
    """What HF holds as the optimizer: the engine's groups (lr, weight_decay) for reading;
    step() and zero_grad() do nothing because the engine stepped already. Not a
    torch.optim.Optimizer, so accelerate passes it through untouched."""

    def __init__(self, engine):
        self._engine = engine

    @property
    def param_groups(self):
        return self._engine.optimizer.param_groups

    @property
    def defaults(self):
        return self._engine.optimizer.defaults

    def step(self, closure=None):
        pass

    def zero_grad(self, set_to_none=True):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class _SchedulerView:
    """What HF holds as the schedule: get_last_lr() is the rate the last step used (HF reads
    it after the step, before stepping its own schedule); step() does nothing."""

    def __init__(self, trainer):
        self._trainer = trainer

    def get_last_lr(self):
        used = self._trainer._zt_lr_used
        return list(used) if used is not None else self._trainer._zt_engine.get_lr()

    def step(self, *args, **kwargs):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class Trainer(transformers.Trainer):
    """transformers.Trainer; with zerotrain.hf.TrainingArguments(deepspeed=...) the model
    trains on zerotrain's engine (ZeRO stages 0-3, offload, fp16/bf16)."""

    def __init__(self, model=None, args=None, *pargs, **kwargs):
        if args is not None and not isinstance(args, TrainingArguments) and getattr(args, "deepspeed", None):
            raise UsageError("zerotrain.hf.Trainer got transformers.TrainingArguments(deepspeed=...), which "
                             "sets up HF's DeepSpeed integration; build the arguments with "
                             "`from zerotrain.hf import TrainingArguments`")
        missing = [name for name in _REQUIRED_HOOKS if not hasattr(transformers.Trainer, name)]
        if missing:
            raise NotSupportedError(f"transformers {transformers.__version__} has no Trainer."
                                    f"{', '.join(missing)}: zerotrain.hf overrides these; use a tested transformers "
                                    "version (docs/hf.md)")
        self._zt_engine = None
        self._zt_lr_used = None
        super().__init__(model, args, *pargs, **kwargs)

    # --- the engine -----------------------------------------------------------------------
    @property
    def _zt_enabled(self):
        return getattr(self.args, "zerotrain_config", None) is not None

    def _zt_build_engine(self, num_training_steps):
        args = self.args
        cfg = auto_values.resolve(args.zerotrain_config, args, num_training_steps=num_training_steps, model=self.model)
        client_optimizer = None
        if not cfg.has_optimizer:
            # As HF's DeepSpeed integration: no optimizer block -> the Trainer's own optimizer
            # (AdamW with HF's decay / no-decay groups), which the engine runs over its shards.
            client_optimizer = super().create_optimizer()
            self.optimizer = None
        schedule = None
        if not cfg.has_scheduler:
            # No scheduler block -> HF's schedule (lr_scheduler_type, warmup), stepped by the engine.
            def schedule(optimizer):
                self.lr_scheduler = None
                sched = transformers.Trainer.create_scheduler(self, num_training_steps, optimizer=optimizer)
                self.lr_scheduler = None
                self._created_lr_scheduler = False
                return sched
        engine, _, _, _ = _initialize(model=self.model, optimizer=client_optimizer, lr_scheduler=schedule,
                                      config=cfg)
        self._zt_engine = engine
        self._zt_resolved_config = cfg
        self.deepspeed = engine   # HF's name for the engine, for user code
        self.optimizer = _OptimizerView(engine)
        self.lr_scheduler = _SchedulerView(self)
        return engine

    def create_optimizer(self, model=None):
        if not self._zt_enabled:
            return super().create_optimizer(model)
        if self._zt_engine is None:
            if self.state.max_steps is None or self.state.max_steps <= 0:
                raise UsageError("create_optimizer before train(): the engine is built when training starts, "
                                 "once the number of steps is known (HF's DeepSpeed integration does the same)")
            self._zt_build_engine(self.state.max_steps)
        return self.optimizer

    def create_scheduler(self, num_training_steps, optimizer=None):
        if not self._zt_enabled:
            return super().create_scheduler(num_training_steps, optimizer)
        if self._zt_engine is None:
            self._zt_build_engine(num_training_steps)
        return self.lr_scheduler

    def _wrap_model(self, model, training=True, dataloader=None):
        if not self._zt_enabled:
            return super()._wrap_model(model, training, dataloader)
        if self._zt_engine is not None:
            return self._zt_engine
        if any(getattr(p, "_zt_cutter", None) is not None for p in self.model.parameters()):
            raise NotSupportedError("evaluate/predict before train() on a model built under "
                                    "zero.Init: its weights exist only as shards, which the engine gathers; train "
                                    "first, or load the model without HfZeroConfig for evaluation")
        return model

    # --- one micro-step -------------------------------------------------------------------
    def training_step(self, model, inputs, num_items_in_batch=None):
        if not self._zt_enabled:
            return super().training_step(model, inputs, num_items_in_batch)
        engine = self._zt_engine
        model.train()
        inputs = self._prepare_inputs(inputs)
        with self.compute_loss_context_manager():
            loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
        del inputs
        # HF's normalisation (Trainer.training_step): the loss is divided by the micro-batches
        # of this window unless the model or compute_loss_func already normalised it by the
        # window's token count.
        if self.loss_is_scaled_for_ga is not None:
            scaled = self.loss_is_scaled_for_ga
        else:
            scaled = (self.model_accepts_loss_kwargs and num_items_in_batch is not None) \
                or self.compute_loss_func is not None
        if not scaled:
            loss = loss / self.current_gradient_accumulation_steps
        boundary = bool(self.accelerator.sync_gradients)
        engine.set_gradient_accumulation_boundary(boundary)
        engine.backward(loss, scale_wrt_gas=False)
        if boundary:
            self._zt_lr_used = engine.get_lr()
        engine.step()
        return loss.detach()

    def _clip_grad_norm(self, model):
        if not self._zt_enabled:
            return super()._clip_grad_norm(model)
        return self._zt_grad_norm()

    def _get_grad_norm(self, model, grad_norm=None):
        if not self._zt_enabled:
            return super()._get_grad_norm(model, grad_norm)
        return self._zt_grad_norm()

    def _zt_grad_norm(self):
        norm = self._zt_engine.get_global_grad_norm()
        return None if norm is None else float(norm)

    # --- saving and loading ---------------------------------------------------------------
    def save_model(self, output_dir=None, _internal_call=False):
        if not self._zt_enabled or self._zt_engine is None:
            return super().save_model(output_dir, _internal_call)
        from .save import save_hf_folder
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        written = save_hf_folder(self._zt_engine, output_dir)
        if not written:
            # HF's DeepSpeed path: at stage 3 without stage3_gather_16bit_weights_on_model_save
            # the model folder gets the engine's checkpoint instead.
            transformers.trainer.logger.warning(
                "stage3_gather_16bit_weights_on_model_save is false: saved the engine's checkpoint into %s instead "
                "of model weights; `zerotrain zero-to-fp32 %s OUT --hf_config %s` writes the model folder",
                output_dir, output_dir, output_dir)
            self._zt_engine.save_checkpoint(output_dir)
        if self.args.should_save:
            if self.processing_class is not None:
                self.processing_class.save_pretrained(output_dir)
            torch.save(self.args, os.path.join(output_dir, transformers.trainer.TRAINING_ARGS_NAME))
        if self.args.push_to_hub and not _internal_call:
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)

    def _save_optimizer_and_scheduler(self, output_dir):
        if not self._zt_enabled:
            return super()._save_optimizer_and_scheduler(output_dir)
        # Every rank writes its share: checkpoint-N/global_stepN/ and checkpoint-N/latest.
        self._zt_engine.save_checkpoint(output_dir)
        # HF writes trainer_state.json next, rotates, and resumes from the newest checkpoint-N
        # whether or not its save finished: with checkpoint.async_save the engine's files are
        # published here, before HF counts the folder as saved.
        self._zt_engine.wait_for_checkpoint()

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        if not self._zt_enabled:
            return super()._load_from_checkpoint(resume_from_checkpoint, model)
        # The engine loads the weights with the optimizer (_load_optimizer_and_scheduler), at
        # whatever world size and stage the checkpoint was saved.

    def _load_optimizer_and_scheduler(self, checkpoint):
        if not self._zt_enabled:
            return super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        self._zt_load(checkpoint)

    def _load_best_model(self):
        if not self._zt_enabled:
            return super()._load_best_model()
        self._zt_load(self.state.best_model_checkpoint)

    def _zt_load(self, checkpoint):
        """The engine's checkpoint in HF's checkpoint-N folder, optimizer and schedule included
        (HF's DeepSpeed path loads them for the best model too)."""
        tags = [d for d in os.listdir(checkpoint) if d.startswith(_CHECKPOINT_TAG_PREFIX)] \
            if os.path.isdir(checkpoint) else []
        if not tags:
            raise UsageError(f"{checkpoint} holds no engine checkpoint ({_CHECKPOINT_TAG_PREFIX}*/): it was "
                             "not saved by zerotrain.hf.Trainer; resume from a checkpoint-N folder it wrote")
        path, _ = self._zt_engine.load_checkpoint(checkpoint)
        if path is None:
            raise UsageError(f"{checkpoint}: no `latest` file names the tag to load; give the checkpoint "
                             "folder the Trainer wrote")

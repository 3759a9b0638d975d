"""Loading a pretrained Hugging Face model at ZeRO stage 3 without making it whole on any rank.

While an HfZeroConfig at stage 3 is alive, `AutoModelForCausalLM.from_pretrained(dir)` (this
module's routers, or `from_pretrained(cls, dir)`) builds the model under
`transformers.initialization.no_init_weights()` and `zerotrain.zero.Init(<that config>)`, so
that each module keeps only this rank's chunk of its parameters, and then each rank reads
from the safetensors files only the elements of its own chunks, straight into them. Keys are
matched as transformers matches them (its legacy renames, the base model's prefix added or
dropped); tied weights are tied again, missing weights initialised by the model's own
`_init_weights` under GatheredParameters(modifier_rank=0), unexpected ones reported. The
model is then ready for `zerotrain.initialize(model=..., config=<same config>)`.

Without a live stage-3 HfZeroConfig, the routers are transformers' Auto classes, unchanged:
each rank builds the whole model and the engine cuts it at initialize, as DeepSpeed does
without HfDeepSpeedConfig.

This mirrors transformers 5.24's ZeRO-3 branch of from_pretrained (modeling_utils
`_load_pretrained_model`, `_finalize_model_loading`) without its `import deepspeed`, and
reads per rank instead of merging every shard on rank 0. Weight conversions other than
renames (merged or split tensors) are not followed: such a checkpoint is refused."""

import contextlib
import copy
import inspect
import logging
import os

import torch

from .. import comm as _comm
from .. import config as _config
from .._ext import _C
from ..errors import IoError, NotSupportedError, UsageError
from ..runtime.zero.partition_parameters import GatheredParameters, Init
from . import zero_config as _zero_config

logger = logging.getLogger(__name__)

# What the engine trains in (a config's precision names them: Config.dtype).
_TRAINING_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Hub arguments: a local directory needs none of them, and transformers ignores them there too.
_HUB_ONLY = ("cache_dir", "force_download", "local_files_only", "proxies", "token", "tqdm_class", "_commit_hash",
             "code_revision", "_from_pipeline")
# Arguments transformers itself no longer reads, or that only matter for pickled checkpoints.
_NO_EFFECT = ("mirror", "_fast_init", "low_cpu_mem_usage", "from_tf", "from_flax", "offload_state_dict",
              "weights_only", "disable_mmap")
# Placement, quantisation, parallelism and adapters: a model cut by zero.Init is placed by the
# engine, so these have no meaning here. Refused when set, rather than ignored.
_REFUSED = ("device_map", "max_memory", "offload_folder", "offload_buffers", "quantization_config", "load_in_8bit",
            "load_in_4bit", "gguf_file", "tp_plan", "tp_size", "distributed_config", "device_mesh", "state_dict",
            "use_kernels", "kernel_config", "allow_all_kernels", "adapter_kwargs", "adapter_name", "fusion_config")


class _InitForLoading(Init):
    """zero.Init without the broadcast of rank 0's values as each parameter is cut: every
    chunk is written next (from the checkpoint, or by the model's own initialisation), and
    each element lives in one rank's chunk only, so nothing needs to agree before. It saves
    sending the whole model once, and the memory a receiving rank's heap would keep."""

    _from_rank0 = False


def _is_unset(value):
    return value is None or value is False or (isinstance(value, (dict, list, tuple)) and not value)


# --- the routers --------------------------------------------------------------------------------

class _ZeroAutoClass:
    """transformers' Auto class of the same name, which builds the model under zero.Init and
    reads each rank's share of the weights while a stage-3 HfZeroConfig is alive."""

    _transformers_name = None

    def __init__(self, *args, **kwargs):
        raise UsageError(f"{type(self).__name__} is not instantiated: call "
                         f"{type(self).__name__}.from_pretrained(dir) or .from_config(config)")

    @classmethod
    def _transformers_class(cls):
        import transformers
        return getattr(transformers, cls._transformers_name)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        return from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs)

    @classmethod
    def from_config(cls, config, **kwargs):
        return _from_config(cls, config, **kwargs)


class AutoModel(_ZeroAutoClass):
    _transformers_name = "AutoModel"


class AutoModelForCausalLM(_ZeroAutoClass):
    _transformers_name = "AutoModelForCausalLM"


class AutoModelForSequenceClassification(_ZeroAutoClass):
    _transformers_name = "AutoModelForSequenceClassification"


def _transformers_class(model_cls):
    if isinstance(model_cls, type) and issubclass(model_cls, _ZeroAutoClass):
        return model_cls._transformers_class()
    return model_cls


def _zero3_config():
    live = _zero_config.get_hf_zero_config()
    return live if live is not None and live.is_zero3() else None


def from_pretrained(model_cls, pretrained_model_name_or_path, *model_args, **kwargs):
    """`model_cls.from_pretrained(dir, ...)` (a transformers model class or Auto class, or one
    of this module's routers); at ZeRO stage 3 (a live HfZeroConfig), built under zero.Init
    with each rank reading only its share of the weights from dir's safetensors files."""
    hf_cls = _transformers_class(model_cls)
    live = _zero3_config()
    if live is None:
        return hf_cls.from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
    return _Zero3Loader(live, hf_cls, kwargs).load(pretrained_model_name_or_path, model_args)


def _from_config(model_cls, config, **kwargs):
    hf_cls = _transformers_class(model_cls)
    live = _zero3_config()
    if live is None:
        return hf_cls.from_config(config, **kwargs)
    return _Zero3Loader(live, hf_cls, kwargs).build_from_config(config)


# --- the stage-3 path ---------------------------------------------------------------------------

class _Zero3Loader:
    def __init__(self, live, hf_cls, kwargs):
        self.live = live
        self.hf_cls = hf_cls
        self.kwargs = dict(kwargs)
        self.rank = _comm.get_rank()

    # Arguments -----------------------------------------------------------------------------------
    def _pop_common(self):
        kw = self.kwargs
        for name in _REFUSED:
            if name in kw and not _is_unset(kw[name]):
                raise UsageError(f"from_pretrained({name}=...) under ZeRO stage 3: the model is cut by "
                                 "zero.Init and the engine places it, so placement, quantisation, tensor parallelism "
                                 f"and adapters do not apply; drop {name}=")
            kw.pop(name, None)
        if kw.get("trust_remote_code"):
            raise NotSupportedError("trust_remote_code=True under ZeRO stage 3: a model's own code may "
                                    "load its weights its own way; load it without HfZeroConfig (the engine then "
                                    "cuts the whole model at initialize)")
        kw.pop("trust_remote_code", None)
        dtype = kw.pop("dtype", None)
        torch_dtype = kw.pop("torch_dtype", None)
        self.dtype, self.init_config = self._training_dtype(dtype if dtype is not None else torch_dtype)
        self.attn_implementation = kw.pop("attn_implementation", None)
        self.experts_implementation = kw.pop("experts_implementation", None)
        self.from_auto = bool(kw.pop("_from_auto", False)) or hasattr(self.hf_cls, "_model_mapping")

    def _training_dtype(self, requested):
        """The dtype zero.Init cuts the parameters in (the config's training dtype, which the
        engine checks at initialize), and the config zero.Init gets."""
        if isinstance(requested, str) and requested != "auto":
            named = getattr(torch, requested, None)
            if not isinstance(named, torch.dtype):
                raise UsageError(f"dtype={requested!r} is not a torch dtype; give torch.float32, "
                                 "torch.bfloat16 or torch.float16")
            requested = named
        if requested == "auto":
            requested = None
        if requested is not None and requested not in _TRAINING_DTYPES:
            raise UsageError(f"dtype={requested}: the engine trains in float32, bfloat16 or float16")
        config = self.live.zerotrain_config
        if config.precision is not None:
            if requested is not None and requested != config.dtype:
                raise UsageError(f"dtype={requested}, but the ds_config trains in {config.precision}: under ZeRO "
                                 "stage 3 the parameters are kept in the training dtype from the start; drop dtype=, "
                                 "or change the config's fp16/bf16 blocks")
            return config.dtype, config
        # fp16/bf16 "enabled" is "auto": the Trainer fills it later. zero.Init must know it now:
        # a dtype given here fills it (for zero.Init only); otherwise float32.
        if requested is None:
            return torch.float32, config
        raw = config.raw()
        for block, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("bfloat16", torch.bfloat16)):
            if isinstance(raw.get(block), dict) and raw[block].get("enabled") == "auto":
                raw[block]["enabled"] = requested == dtype
        filled = _config.load(raw, origin=config.origin)
        if filled.dtype != requested:
            raise UsageError(f"dtype={requested}, but the ds_config enables neither fp16 nor bf16; set the "
                             "matching block's \"enabled\" to true or \"auto\"")
        return requested, filled

    def _resolve_config(self, directory, config):
        """(the model's config, the keyword arguments left for the model's __init__), as
        transformers' from_pretrained resolves them."""
        from transformers import AutoConfig, PreTrainedConfig
        kw = self.kwargs
        if isinstance(config, PreTrainedConfig):
            return copy.deepcopy(config), kw
        source = os.fspath(config) if config is not None else directory
        config_cls = AutoConfig if self.from_auto else getattr(self.hf_cls, "config_class", None)
        if config_cls is None:
            raise UsageError(f"{self.hf_cls.__name__} has no config_class; pass config=")
        try:
            return config_cls.from_pretrained(source, return_unused_kwargs=True, local_files_only=True, **kw)
        except OSError as e:
            raise IoError(f"{source}: cannot read the model's config.json ({e})") from None

    def _model_class(self, config):
        """The concrete class: an Auto class picks it from the config, as transformers does."""
        from transformers import PreTrainedModel
        hf_cls = self.hf_cls
        if hasattr(hf_cls, "_model_mapping"):
            if _in_auto_map(config, hf_cls.__name__):
                raise NotSupportedError(f"the config maps {hf_cls.__name__} to the model's own code "
                                        "(auto_map); ZeRO-3 loading builds only transformers' classes")
            from transformers.models.auto.auto_factory import _get_model_class
            if type(config) not in hf_cls._model_mapping:
                raise UsageError(f"{hf_cls.__name__} has no model for a {type(config).__name__}; use the "
                                 "Auto class that matches the checkpoint")
            model_class = _get_model_class(config, hf_cls._model_mapping)
            text_config_class = config.sub_configs.get("text_config", None)
            if text_config_class is not None and getattr(model_class, "config_class", None) == text_config_class:
                config = config.get_text_config()
            return model_class, config
        if isinstance(hf_cls, type) and issubclass(hf_cls, PreTrainedModel):
            return hf_cls, config
        raise UsageError(f"from_pretrained: {hf_cls!r} is not a transformers model class or Auto class")

    # Building -----------------------------------------------------------------------------------
    def _build(self, model_class, config, model_args, model_kwargs):
        """The model, built so that every parameter is cut as soon as its module exists."""
        from transformers import initialization as hf_init
        try:
            from transformers.monkey_patching import apply_patches, patch_output_recorders
        except ImportError:   # not in every transformers release
            apply_patches, patch_output_recorders = contextlib.nullcontext, lambda model: None
        from transformers.modeling_utils import local_torch_dtype

        _check_model_kwargs(model_class, model_kwargs)
        if self.attn_implementation is not None:
            config._attn_implementation = self.attn_implementation
        if self.experts_implementation is not None:
            config._experts_implementation = self.experts_implementation
        config.dtype = self.dtype
        for sub in getattr(config, "sub_configs", {}):
            if getattr(config, sub, None) is not None:
                getattr(config, sub).dtype = self.dtype
        with contextlib.ExitStack() as scope:
            scope.enter_context(local_torch_dtype(self.dtype, model_class.__name__))
            # Tying is done after loading (as transformers does), and initialisation only for
            # the weights the checkpoint lacks: neither may run on parameters already cut.
            scope.enter_context(hf_init.no_tie_weights())
            scope.enter_context(apply_patches())
            scope.enter_context(hf_init.no_init_weights())
            scope.enter_context(_InitForLoading(config_dict_or_path=self.init_config))
            model = model_class(config, *model_args, **model_kwargs)
            patch_output_recorders(model)
        return model

    def build_from_config(self, config):
        self._pop_common()
        model_class, config = self._model_class(config)   # as transformers: the model keeps this config
        model = self._build(model_class, config, (), self.kwargs)
        _tie_weights(model, missing=None)
        _initialize_missing(model)
        return model

    def load(self, pretrained_model_name_or_path, model_args):
        self._pop_common()
        kw = self.kwargs
        for name in _HUB_ONLY + _NO_EFFECT:
            kw.pop(name, None)
        revision = kw.pop("revision", None)
        if revision not in (None, "main"):
            raise UsageError(f"revision={revision!r}: zerotrain loads a local directory, which has no "
                             "revisions; check the revision out into a directory and load that")
        if kw.pop("use_safetensors", None) is False:
            raise NotSupportedError("use_safetensors=False under ZeRO stage 3: each rank reads its "
                                    "share of the weights from safetensors files only")
        ignore_mismatched_sizes = bool(kw.pop("ignore_mismatched_sizes", False))
        output_loading_info = bool(kw.pop("output_loading_info", False))
        key_mapping = kw.pop("key_mapping", None)
        generation_config = kw.pop("generation_config", None)
        variant = kw.pop("variant", None)
        subfolder = kw.pop("subfolder", "") or ""
        config = kw.pop("config", None)

        if pretrained_model_name_or_path is None:
            raise UsageError("from_pretrained(None, ...): give the model's directory")
        given = os.fspath(pretrained_model_name_or_path)
        directory = os.path.join(given, subfolder) if subfolder else given
        if not os.path.isdir(directory):
            raise IoError(f"{directory}: no such local directory. Under ZeRO stage 3 zerotrain loads only a "
                          "local directory and downloads nothing: fetch the model first (save_pretrained, or "
                          "huggingface_hub's snapshot_download) and give its directory")

        files = _C.HfWeights(directory, variant or "")   # before building: a missing file fails fast
        try:
            config, model_kwargs = self._resolve_config(directory, config)
            model_class, config = self._model_class(config)
            config.name_or_path = given
            model = self._build(model_class, config, model_args, model_kwargs)
            info = _load_weights(model, files, given, ignore_mismatched_sizes, key_mapping, self.rank)
        finally:
            files.close()
        model.eval()   # as transformers returns it
        if model.can_generate() and hasattr(model, "adjust_generation_fn"):
            model.adjust_generation_fn(generation_config, self.from_auto, None, directory, None, False, None, True,
                                       None, "main", "", False)
        if output_loading_info:
            return model, info.to_dict()
        return model


def _check_model_kwargs(model_class, model_kwargs):
    """What is left of from_pretrained's keywords goes to the model's __init__, as in
    transformers; one it does not take is refused here, before anything is built."""
    if not model_kwargs:
        return
    params = inspect.signature(model_class.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(model_kwargs) - set(params))
    if unknown:
        raise UsageError(f"from_pretrained({', '.join(k + '=' for k in unknown)}...): neither an attribute of "
                         f"{model_class.config_class.__name__} nor an argument of {model_class.__name__}; check the "
                         "spelling, or drop it (zerotrain's loader takes transformers' loading arguments except "
                         "placement, quantisation, parallelism and adapters)")


def _in_auto_map(config, class_name):
    auto_map = getattr(config, "auto_map", None)
    return isinstance(auto_map, dict) and class_name in auto_map


# --- weights ------------------------------------------------------------------------------------

def _cutter_of(model):
    cutters = {id(c): c for c in (getattr(p, "_zt_cutter", None) for p in model.parameters()) if c is not None}
    if len(cutters) > 1:
        raise UsageError("the model's parameters were cut by two zero.Init scopes; build it in one")
    return next(iter(cutters.values()), None)


def _checkpoint_to_model_keys(model, checkpoint_keys, model_keys, key_mapping):
    """{checkpoint key: model key}, renamed as transformers renames them: its legacy renames
    (LayerNorm.gamma -> .weight, ...), the user's key_mapping, and the base model's prefix
    added or dropped (a base model's checkpoint in a model with a head, and the reverse)."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightRenaming, rename_source_key
    transforms = get_model_conversion_mapping(model, key_mapping)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if not isinstance(t, WeightRenaming)]
    present = dict.fromkeys(model_keys, True)
    prefix = getattr(model, "base_model_prefix", None) or None
    mapping = {}
    for key in checkpoint_keys:
        renamed, converted_by = rename_source_key(key, renamings, converters, prefix, present)
        if converted_by is not None:
            raise NotSupportedError(f"the checkpoint's {key} must be converted ({converted_by}) to "
                                    f"fit {type(model).__name__}, which needs whole tensors; ZeRO-3 loading reads "
                                    "each rank's share as it is stored: load and save it once without HfZeroConfig")
        mapping[key] = renamed
    return mapping


def _load_weights(model, files, name_or_path, ignore_mismatched_sizes, key_mapping, rank):
    """Reads this rank's share of every parameter (and every persistent buffer, whole) from
    `files`, ties, initialises what the checkpoint lacks; returns transformers'
    LoadStateDictInfo."""
    from transformers.utils.loading_report import LoadStateDictInfo, log_state_dict_report

    cutter = _cutter_of(model)
    state = model.state_dict(keep_vars=True)   # parameters and persistent buffers, by name
    to_model = _checkpoint_to_model_keys(model, files.keys(), state.keys(), key_mapping)
    source_of, unexpected = {}, set()
    for ckpt_key, model_key in to_model.items():
        if model_key in state and model_key not in source_of:
            source_of[model_key] = ckpt_key
        else:
            unexpected.add(ckpt_key)

    # Every shape before anything is read: the same answer on every rank.
    mismatched, errors = set(), []
    for model_key, ckpt_key in list(source_of.items()):
        want, have = tuple(state[model_key].shape), files.shape(ckpt_key)
        if want != have:
            mismatched.add((model_key, have, want))
            errors.append(f"size mismatch for {model_key}: the checkpoint's {ckpt_key} is {list(have)}, the model's "
                          f"is {list(want)}")
            del source_of[model_key]
    if errors and not ignore_mismatched_sizes:
        raise UsageError(f"{name_or_path} does not fit {type(model).__name__}: " + "; ".join(errors[:5]) +
                         ("; ..." if len(errors) > 5 else "") + ". Pass ignore_mismatched_sizes=True to initialise "
                         "those weights instead")

    # Each tensor once, whatever number of names it has (modules shared in __init__).
    loaded = set()
    names_of = {}
    for name, tensor in state.items():
        names_of.setdefault(id(tensor), []).append(name)
    with torch.no_grad():
        for names in names_of.values():
            ckpt_key = next((source_of[n] for n in names if n in source_of), None)
            if ckpt_key is None:
                continue
            tensor = state[names[0]]
            piece = cutter.chunk_of(tensor) if cutter is not None and getattr(tensor, "_zt_cutter", None) else None
            if piece is not None:
                chunk, offset = piece
                files.read_range(ckpt_key, offset, offset + chunk.numel(), chunk)
            else:   # a buffer, or a parameter zero.Init did not cut: small, read whole
                tensor.copy_(files.read(ckpt_key))
            loaded.update(names)
    # As transformers reports them: a mismatched key is not also missing (both are initialised).
    missing = set(state) - loaded - {name for name, _, _ in mismatched}

    params_before = {id(p): p for p in model.parameters()}
    _tie_weights(model, missing)
    if cutter is not None:
        after = {id(p) for p in model.parameters()}
        cutter.drop([p for i, p in params_before.items() if i not in after])
    for name in loaded:   # the tensors as loaded: after a swapped tie, the one kept is among them
        state[name]._is_hf_initialized = True
    _initialize_missing(model)

    info = LoadStateDictInfo(missing_keys=missing, unexpected_keys=unexpected, mismatched_keys=mismatched,
                             error_msgs=[], conversion_errors={}, skipped_pp_keys=set())
    model._adjust_missing_and_unexpected_keys(info)
    if rank == 0:
        log_state_dict_report(model, name_or_path, True, info, logger=logger)
    return info


def _same_values(a, b):
    """Whether two cut parameters hold the same values: gathered whole for the comparison,
    on every rank (a collective), so that every rank decides the same."""
    with GatheredParameters([a, b]):
        return a.shape == b.shape and torch.equal(a.detach(), b.detach())


def _tie_weights(model, missing):
    """transformers' tie_weights for a model cut by zero.Init: the same pairs
    (model.all_tied_weights_keys) and, when loading (`missing` given), the same symmetric
    rule: a pair whose source the checkpoint lacks is tied to the target it has; a pair that
    the checkpoint holds twice with different values is left untied, with a warning."""
    tied = list(getattr(model, "all_tied_weights_keys", {}).items())
    for i, (target, source) in enumerate(tied):
        if missing is not None:
            source_there, target_there = source not in missing, target not in missing
            if source_there and target_there:
                if not _same_values(model.get_parameter(source), model.get_parameter(target)):
                    logger.warning(f"{source} and {target} should be tied, but the checkpoint holds both, with "
                                   "different values: they are not tied (set tie_word_embeddings=False in the "
                                   "config to silence this)")
                    model.all_tied_weights_keys.pop(target, None)
                    continue
            elif target_there:
                target, source = source, target
            elif not source_there:
                backup = next((t for t, s in tied[i + 1:] if s == source and t not in missing), None)
                if backup is not None:
                    source = backup
        parent_name, _, leaf = target.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        source_param = model.get_parameter_or_buffer(source)
        setattr(parent, leaf, source_param)
        if missing is not None and source not in missing:
            missing.discard(target)


def _initialize_missing(model):
    """The model's own initialisation (transformers' smart_apply walk of `_initialize_weights`)
    for the parameters not loaded (no `_is_hf_initialized` flag): before each module's
    `_init_weights`, its own and its direct children's unloaded parameters are gathered, and
    rank 0's values become every rank's. Every rank runs the initialisation, so buffers it
    computes (rotary frequencies) agree too. Loaded parameters have the flag, so
    transformers' init functions leave them alone."""
    from transformers import PreTrainedModel
    from transformers.initialization import guard_torch_init_functions

    is_custom_code = model.is_remote_code() if hasattr(model, "is_remote_code") else False

    def visit(module, init_fn):
        for child in module.children():
            visit(child, child._initialize_weights if isinstance(child, PreTrainedModel) else init_fn)
        params = list(module.parameters(recurse=False))
        for child in module.children():
            if not isinstance(child, PreTrainedModel):
                params.extend(child.parameters(recurse=False))
        unloaded = list({id(p): p for p in params if not getattr(p, "_is_hf_initialized", False)}.values())
        with GatheredParameters(unloaded, modifier_rank=0):
            init_fn(module, is_custom_code)

    with torch.no_grad(), guard_torch_init_functions():
        visit(model, model._initialize_weights)


__all__ = ["from_pretrained", "AutoModel", "AutoModelForCausalLM", "AutoModelForSequenceClassification"]

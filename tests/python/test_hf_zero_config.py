"""zerotrain.hf.HfZeroConfig and pretrained Hugging Face models loaded at ZeRO stage 3: while a
stage-3 HfZeroConfig is alive, zerotrain.hf.AutoModel*.from_pretrained builds the model under
zero.Init and each rank reads only its share of the weights (a GPT-2 with tied embeddings and
a Llama, from one model.safetensors and from sharded files), then trains on the engine with
the logits of the model loaded whole by plain transformers. At world 1: the config's queries,
its weak reference, the fall-through to transformers below stage 3, the refusals; and no
`import deepspeed` anywhere."""

import base64
import gc
import json
import shutil
import sys

import pytest
import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import zerotrain
import zerotrain.hf as zhf
from hf_zero_config_worker import FIXED_INPUT

# ~150 MB in fp32 each, so that half of it stands well above what a process allocates anyway;
# no layer above 3% of the model, the most zero.Init holds whole while building.
BIG = {
    "gpt2": lambda: GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=512, n_head=8, vocab_size=1024, n_positions=64,
                                               bos_token_id=0, eos_token_id=0)),
    "llama": lambda: LlamaForCausalLM(LlamaConfig(num_hidden_layers=10, hidden_size=512, intermediate_size=1536,
                                                  num_attention_heads=8, num_key_value_heads=8, vocab_size=1024,
                                                  bos_token_id=0, eos_token_id=0, pad_token_id=0)),
}
STAGE3 = {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
          "zero_optimization": {"stage": 3}}


@pytest.fixture(scope="module")
def big_models(tmp_path_factory):
    """Each BIG model saved as one model.safetensors and as sharded files, and the logits of
    the single file loaded by plain transformers on this one process."""
    root = tmp_path_factory.mktemp("hf_big")
    for name, build in BIG.items():
        torch.manual_seed(0)
        model = build()
        model.save_pretrained(root / f"{name}_single")
        model.save_pretrained(root / f"{name}_sharded", max_shard_size="40MB")
        del model
        plain = transformers.AutoModelForCausalLM.from_pretrained(root / f"{name}_single")
        with torch.no_grad():
            torch.save(plain(input_ids=torch.tensor(FIXED_INPUT)).logits, root / f"{name}_ref.pt")
        del plain
    yield root
    shutil.rmtree(root, ignore_errors=True)   # 600 MB


@pytest.mark.parametrize("layout", ["single", "sharded"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_each_rank_reads_only_its_share(ranks, big_models, name, layout):
    directory = big_models / f"{name}_{layout}"
    files = sorted(directory.glob("*.safetensors"))
    if layout == "sharded":
        assert len(files) > 1 and (directory / "model.safetensors.index.json").is_file()
    else:
        assert [f.name for f in files] == ["model.safetensors"]
    file_bytes = sum(f.stat().st_size for f in files)
    results = ranks("hf_zero_config_worker.py", ["--mode", "load", "--dir", directory,
                                                 "--ref", big_models / f"{name}_ref.pt"], 2)
    for r in results:
        fp32 = r["fp32_bytes"]
        assert fp32 >= 100 * 2**20, "the model is too small for the memory figure to mean anything"
        # Half the model is this rank's chunks; a whole copy, or a whole file mapped, would be 1.
        assert r["peak_over_base"] <= 0.6 * fp32, (r["rank"], r["peak_over_base"] / fp32)
        assert r["bytes_read"] <= 0.6 * file_bytes, (r["rank"], r["bytes_read"] / file_bytes)
        assert r["whole_after_load"] == [], "parameters left whole after loading"
        assert r["tied"] == (name == "gpt2")
        assert r["max_logit_diff"] <= 1e-6, r["max_logit_diff"]
        assert not r["deepspeed_imported"]


def test_prefixes_ties_missing_keys_buffers_and_bf16(ranks, tmp_path):
    results = ranks("hf_zero_config_worker.py", ["--mode", "cases", "--dir", tmp_path / "ckpts"], 2)
    for r in results:
        rank = r["rank"]
        assert r["base_into_head"] == [] and r["base_into_head_tied"], rank
        assert r["head_into_base"] == [] and r["head_into_base_class"] == "LlamaModel", rank
        assert r["missing_head_diff"] == [] and r["missing_keys"] == ["score.weight"], rank
        assert 0.01 < r["score_std"] < 0.04, "score.weight not initialised as the model's _init_weights does"
        assert r["twice_diff"] == [] and not r["twice_tied"], rank
        assert r["buffers_diff"] == [] and r["buffers_nonzero"], rank
        assert r["bf16_dtypes"] == ["torch.bfloat16"] and r["bf16_diff"] == [], rank
        assert r["fp16_refused"] and "bf16" in r["fp16_refused"], rank
        assert r["bf16_initialized"]
        assert not r["deepspeed_imported"]
    # The initialised head is one tensor, rank 0's values, whichever rank gathers it.
    assert results[0]["score_sum"] == results[1]["score_sum"]
    assert "lm_head.weight" in results[0]["warnings"] and "UNEXPECTED" in results[0]["warnings"]
    assert "not tied" in results[1]["warnings"]


# --- world 1, in this process ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_gpt2")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16, bos_token_id=0,
                               eos_token_id=0)).save_pretrained(directory)
    return directory


def test_config_queries():
    user = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
            "bf16": {"enabled": "auto"},
            "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
            "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "overlap_comm": True,
                                  "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}}
    before = json.dumps(user, sort_keys=True)
    cfg = zhf.HfZeroConfig(user)
    assert cfg.is_zero3() and not cfg.is_zero2() and cfg.is_offload()
    assert cfg.zero_optimization_stage == 3
    assert cfg.get_value("zero_optimization.stage") == 3
    assert cfg.get_value("optimizer.params.lr") == "auto"
    assert cfg.get_value("zero_optimization.nope", 7) == 7 and cfg.get_value("nope.deeper") is None
    assert cfg.is_true("zero_optimization.overlap_comm") and not cfg.is_false("zero_optimization.overlap_comm")
    assert not cfg.is_true("fp16.enabled") and not cfg.is_false("fp16.enabled")   # not set: neither
    node, key = cfg.find_config_node("optimizer.params.lr")
    assert key == "lr" and node is cfg.config["optimizer"]["params"]
    cfg.del_config_sub_tree("optimizer.params")
    assert cfg.get_value("optimizer.params") is None and cfg.get_value("optimizer.type") == "AdamW"
    cfg.del_config_sub_tree("not.there")
    with pytest.raises(zerotrain.ConfigError):
        cfg.del_config_sub_tree("not.there", must_exist=True)
    assert json.dumps(user, sort_keys=True) == before, "the caller's dict was changed"


def test_config_sources_and_errors(tmp_path):
    plain = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(plain))
    as_b64 = base64.urlsafe_b64encode(json.dumps(plain).encode()).decode()
    for source in (str(path), path, json.dumps(plain), as_b64):
        cfg = zhf.HfZeroConfig(source)
        assert cfg.config == plain and cfg.is_zero2() and cfg.is_offload() and not cfg.is_zero3()
    assert zhf.HfZeroConfig({}).zero_optimization_stage == 0 and not zhf.HfZeroConfig({}).is_zero3()
    for bad in ({"zero_optimization": {"stage": 7}}, {"zero_optimization": {"stage": 3, "no_such_key": 1}},
                str(tmp_path / "missing.json"), "not json", 42):
        with pytest.raises(zerotrain.ConfigError):
            zhf.HfZeroConfig(bad)


def test_weak_reference_and_transformers_untouched():
    from transformers.integrations import is_deepspeed_zero3_enabled
    cfg = zhf.HfZeroConfig({"zero_optimization": {"stage": 3}})
    assert zhf.is_zero3_enabled()
    assert not is_deepspeed_zero3_enabled(), "HfZeroConfig must not register with transformers"
    del cfg
    gc.collect()
    assert not zhf.is_zero3_enabled(), "the weak reference outlived its HfZeroConfig"
    stage2 = zhf.HfZeroConfig({"zero_optimization": {"stage": 2}})
    assert not zhf.is_zero3_enabled()
    del stage2


@pytest.mark.parametrize("stage", [None, 2])
def test_below_stage3_is_plain_transformers(tiny_gpt2, stage):
    keep = zhf.HfZeroConfig({"zero_optimization": {"stage": stage}}) if stage is not None else None
    model = zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2)
    plain = transformers.AutoModelForCausalLM.from_pretrained(tiny_gpt2)
    assert type(model) is type(plain)
    assert all(getattr(p, "_zt_cutter", None) is None for p in model.parameters())
    for (n, a), (_, b) in zip(model.state_dict().items(), plain.state_dict().items()):
        assert torch.equal(a, b), n
    fresh = zhf.AutoModelForCausalLM.from_config(plain.config)
    assert all(p.untyped_storage().nbytes() > 0 for p in fresh.parameters())
    via_function = zhf.from_pretrained(transformers.GPT2LMHeadModel, tiny_gpt2)
    assert type(via_function) is transformers.GPT2LMHeadModel
    del keep


def test_stage3_at_world1_trains_with_the_same_logits(tiny_gpt2):
    keep = zhf.HfZeroConfig(STAGE3)
    config = transformers.AutoConfig.from_pretrained(tiny_gpt2)
    model, info = zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, config=config, output_loading_info=True,
                                                           attn_implementation="eager")
    assert info == {"missing_keys": set(), "unexpected_keys": set(), "mismatched_keys": set(), "error_msgs": []}
    assert model.config._attn_implementation == "eager" and config._attn_implementation != "eager"
    assert all(p.untyped_storage().nbytes() == 0 for p in model.parameters())
    assert model.lm_head.weight is model.transformer.wte.weight
    model.tie_weights()   # as a Trainer may call it: the tie holds, nothing is touched
    assert model.lm_head.weight is model.transformer.wte.weight
    engine, *_ = zerotrain.initialize(model=model, config=keep.config)
    plain = transformers.AutoModelForCausalLM.from_pretrained(tiny_gpt2)
    x = torch.tensor(FIXED_INPUT) % 100
    with torch.no_grad():
        assert (engine(input_ids=x).logits - plain(input_ids=x).logits).abs().max().item() <= 1e-6


def test_from_config_at_stage3_is_cut_and_initialised():
    keep = zhf.HfZeroConfig(STAGE3)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = zhf.AutoModelForCausalLM.from_config(config)
    assert all(p.untyped_storage().nbytes() == 0 for p in model.parameters())
    assert model.lm_head.weight is model.transformer.wte.weight
    with zerotrain.zero.GatheredParameters(list(model.parameters())):
        assert torch.equal(model.transformer.ln_f.weight, torch.ones(32))
        assert 0.01 < model.transformer.wte.weight.std().item() < 0.03   # initializer_range 0.02
    del keep


def test_refused_at_stage3(tiny_gpt2, tmp_path):
    keep = zhf.HfZeroConfig(STAGE3)
    with pytest.raises(zerotrain.IoError, match="no such local directory"):
        zhf.AutoModelForCausalLM.from_pretrained(tmp_path / "nope")
    with pytest.raises(zerotrain.IoError, match="no such local directory"):
        zhf.AutoModelForCausalLM.from_pretrained("openai-community/gpt2")
    with pytest.raises(zerotrain.UsageError, match="device_map"):
        zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, device_map="auto")
    with pytest.raises(zerotrain.UsageError, match="fp32"):
        zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, dtype=torch.bfloat16)
    with pytest.raises(zerotrain.UsageError, match="revision"):
        zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, revision="v2")
    with pytest.raises(zerotrain.NotSupportedError, match="safetensors"):
        zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, use_safetensors=False)
    with pytest.raises(zerotrain.UsageError, match="bogus_arg="):
        zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, bogus_arg=3)
    with pytest.raises(zerotrain.UsageError, match="ignore_mismatched_sizes"):
        zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, n_positions=8)
    model, info = zhf.AutoModelForCausalLM.from_pretrained(tiny_gpt2, n_positions=8, ignore_mismatched_sizes=True,
                                                           output_loading_info=True)
    assert info["mismatched_keys"] == {("transformer.wpe.weight", (16, 32), (8, 32))}
    assert info["missing_keys"] == set()
    with zerotrain.zero.GatheredParameters([model.transformer.wpe.weight]):
        assert 0.01 < model.transformer.wpe.weight.std().item() < 0.03   # initialised, not left empty
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(tiny_gpt2 / "config.json", pickled / "config.json")
    torch.save({}, pickled / "pytorch_model.bin")
    with pytest.raises(zerotrain.NotSupportedError, match="pytorch_model.bin"):
        zhf.AutoModelForCausalLM.from_pretrained(pickled)
    with pytest.raises(zerotrain.IoError, match="model.safetensors"):
        zhf.AutoModelForCausalLM.from_pretrained(tmp_path)   # a directory without weights
    del keep


def test_deepspeed_never_imported():
    # Run last in this file: everything above went through zerotrain.hf and transformers.
    assert "deepspeed" not in sys.modules

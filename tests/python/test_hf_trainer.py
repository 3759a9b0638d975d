"""zerotrain.hf.Trainer against transformers' own Trainer without DeepSpeed: a tiny GPT-2 and
a tiny Llama (random configs, saved with save_pretrained; nothing downloaded) fine-tuned on
the tokenised King James Bible, as real processes (world 2 under zerotrain's launcher). Same
data order and schedule, fp32: the logged per-step losses must agree to 1e-5 relative."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "hf"))

STEPS = 10
RTOL = 1e-5


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """The KJV tokenizer and the two tiny models, built once for the file."""
    import torch
    import transformers
    import kjv_data
    root = tmp_path_factory.mktemp("hf_assets")
    tokenizer = kjv_data.train_kjv_tokenizer(str(root / "tokenizer"))
    vocab = len(tokenizer)
    torch.manual_seed(0)
    configs = {
        "gpt2": transformers.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id),
        "llama": transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                          max_position_embeddings=64,
                                          bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id),
    }
    dirs = {}
    for name, cfg in configs.items():
        model = transformers.AutoModelForCausalLM.from_config(cfg)
        dirs[name] = str(root / name)
        model.save_pretrained(dirs[name])
    return {"tokenizer": str(root / "tokenizer"), "models": dirs}


def run(ranks, tmp_path, assets, model, impl, world, name, **kw):
    args = ["--impl", impl, "--model_dir", assets["models"][model], "--tokenizer_dir", assets["tokenizer"],
            "--output_dir", str(tmp_path / f"out_{name}"), "--steps", kw.pop("steps", STEPS)]
    for k, v in kw.items():
        if v is True:
            args.append(f"--{k}")
        elif v is not None and v is not False:
            args += [f"--{k}", v]
    return ranks("hf_trainer_worker.py", args, world, timeout=600)


_plain_runs = {}


def plain_run(ranks, tmp_path_factory, assets, model, **kw):
    """transformers' Trainer on one process: the reference, run once per model and arguments."""
    key = (model, tuple(sorted(kw.items())))
    if key not in _plain_runs:
        tmp = tmp_path_factory.mktemp("plain")
        from conftest import run_ranks
        args = ["--impl", "plain", "--model_dir", assets["models"][model], "--tokenizer_dir", assets["tokenizer"],
                "--output_dir", str(tmp / "out"), "--steps", kw.pop("steps", STEPS)]
        for k, v in kw.items():
            args += [f"--{k}", v]
        _plain_runs[key] = run_ranks("hf_trainer_worker.py", args, 1, tmp, timeout=600)[0]
    return _plain_runs[key]


def close(a, b, rtol=RTOL):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def assert_losses_equal(got, want, steps):
    for s in steps:
        assert close(got[str(s)], want[str(s)]), f"step {s}: {got[str(s)]} vs {want[str(s)]}\n{got}\n{want}"


@pytest.mark.parametrize("model,stage,world", [("gpt2", 2, 1), ("gpt2", 3, 2), ("llama", 2, 2), ("llama", 3, 2)])
def test_losses_equal_plain_trainer(ranks, tmp_path, tmp_path_factory, assets, model, stage, world):
    plain = plain_run(ranks, tmp_path_factory, assets, model, accum=2, eval_steps=5)
    zt = run(ranks, tmp_path, assets, model, "zerotrain", world, "zt", stage=stage, accum=2, eval_steps=5)
    for r in zt:
        assert not r["deepspeed_enabled"] and not r["deepspeed_imported"]
        assert r["stage"] == stage and r["world_size"] == world
        assert r["zero_init"] == (stage == 3)   # built under zero.Init through the arguments' HfZeroConfig
        assert r["global_step"] == STEPS
        assert_losses_equal(r["losses"], plain["losses"], range(1, STEPS + 1))
        assert len(r["eval_losses"]) == 2 and r["eval_losses"][1] < r["eval_losses"][0]
        for got, want in zip(r["eval_losses"], plain["eval_losses"]):
            assert close(got, want), (r["eval_losses"], plain["eval_losses"])


def test_offload_and_hf_dataset(ranks, tmp_path, tmp_path_factory, assets):
    """Optimizer offload, and training data given as a datasets.Dataset."""
    pytest.importorskip("datasets")
    plain = plain_run(ranks, tmp_path_factory, assets, "gpt2", steps=6)
    zt = run(ranks, tmp_path, assets, "gpt2", "zerotrain", 2, "zt", stage=2, offload=True, hf_dataset=True, steps=6)
    for r in zt:
        assert_losses_equal(r["losses"], plain["losses"], range(1, 7))


def test_resume_at_another_world_size_and_stage(ranks, tmp_path, assets):
    """checkpoint-6, written at world 2 and stage 3, resumes at world 1 and stage 2: the next
    losses equal the uninterrupted run's. save_total_limit=3 keeps the three newest folders."""
    full = run(ranks, tmp_path, assets, "llama", "zerotrain", 2, "full", stage=3, accum=2, save_steps=3,
               save_total_limit=3)[0]
    out = tmp_path / "out_full"
    # Saved at steps 3, 6, 9 and the last; rotation removed the oldest.
    assert sorted(os.listdir(out)) == ["checkpoint-10", "checkpoint-6", "checkpoint-9"], os.listdir(out)
    ckpt = out / "checkpoint-6"
    assert (ckpt / "latest").read_text().strip() == "global_step6"
    assert (ckpt / "trainer_state.json").exists() and (ckpt / "config.json").exists()
    resumed = run(ranks, tmp_path, assets, "llama", "zerotrain", 1, "resumed", stage=2, accum=2, resume=str(ckpt))[0]
    assert resumed["global_step"] == STEPS
    assert_losses_equal(resumed["losses"], full["losses"], range(7, STEPS + 1))


def test_saved_folder_loads_back(ranks, tmp_path, assets):
    """trainer.save_model at stage 3, world 2: a folder from_pretrained loads strictly, with the
    trained engine's logits."""
    import torch
    import transformers
    folder = tmp_path / "final"
    r = run(ranks, tmp_path, assets, "gpt2", "zerotrain", 2, "zt", stage=3, steps=3, save_model=str(folder))[0]
    assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()
    model, info = transformers.AutoModelForCausalLM.from_pretrained(str(folder), output_loading_info=True)
    assert all(not v for v in info.values()), info
    ids = torch.arange(32).remainder(model.config.vocab_size).unsqueeze(0)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.flatten()
    assert torch.allclose(logits, torch.tensor(r["logits"]), atol=1e-6, rtol=0)


def test_plain_training_arguments_with_deepspeed_refused(assets):
    import transformers
    from zerotrain.hf import Trainer
    from zerotrain.errors import UsageError

    class Args:   # transformers' TrainingArguments(deepspeed=...) would need the deepspeed package
        deepspeed = {"zero_optimization": {"stage": 2}}
    model = transformers.AutoModelForCausalLM.from_pretrained(assets["models"]["gpt2"])
    with pytest.raises(UsageError, match="zerotrain.hf import TrainingArguments"):
        Trainer(model=model, args=Args())


def test_mismatched_config_values_refused(tmp_path):
    from zerotrain.hf import TrainingArguments
    from zerotrain.errors import ConfigError
    cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto",
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "zero_optimization": {"stage": 2}}
    with pytest.raises(ConfigError) as e:
        TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, learning_rate=3e-4,
                          deepspeed=cfg, report_to="none", use_cpu=True)
    text = str(e.value)
    assert "train_micro_batch_size_per_gpu" in text and "optimizer.params.lr" in text


def test_auto_values_filled_as_hf_fills_them(tmp_path):
    """Every "auto" key HF fills, from the arguments and the model (the bucket sizes from
    hidden_size; the stage-3 ones only at stage 3), with a path, a dict and a JSON string."""
    import transformers
    from zerotrain.hf import TrainingArguments
    from zerotrain.hf import auto_values
    cfg = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
           "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
           "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                       "weight_decay": "auto"}},
           "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                              "warmup_num_steps": "auto",
                                                              "total_num_steps": "auto"}},
           "bf16": {"enabled": "auto"},
           "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                                 "stage3_param_persistence_threshold": "auto"}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=64, n_layer=1, n_head=2, vocab_size=50))
    for given in (str(path), cfg, json.dumps(cfg)):
        args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=3,
                                 gradient_accumulation_steps=2, learning_rate=2e-4, adam_beta1=0.8,
                                 adam_beta2=0.95, adam_epsilon=1e-7, weight_decay=0.1, max_grad_norm=0.5,
                                 warmup_steps=0.1, deepspeed=given, report_to="none", use_cpu=True)
        out = auto_values.resolve(args.zerotrain_config, args, num_training_steps=95, model=model).raw()
        assert out["train_batch_size"] == 6 and out["train_micro_batch_size_per_gpu"] == 3
        assert out["gradient_accumulation_steps"] == 2 and out["gradient_clipping"] == 0.5
        assert out["optimizer"]["params"] == {"lr": 2e-4, "betas": [0.8, 0.95], "eps": 1e-7, "weight_decay": 0.1}
        assert out["scheduler"]["params"] == {"warmup_min_lr": 0.0, "warmup_max_lr": 2e-4, "warmup_num_steps": 10,
                                              "total_num_steps": 95}
        assert out["bf16"] == {"enabled": False}
        z = out["zero_optimization"]
        assert z["reduce_bucket_size"] == 64 * 64
        assert z["stage3_prefetch_bucket_size"] == int(0.9 * 64 * 64)
        assert z["stage3_param_persistence_threshold"] == 640
    cfg2 = dict(cfg, zero_optimization={"stage": 2, "reduce_bucket_size": "auto",
                                        "stage3_prefetch_bucket_size": "auto"})
    args = TrainingArguments(output_dir=str(tmp_path), deepspeed=cfg2, report_to="none", use_cpu=True)
    out = auto_values.resolve(args.zerotrain_config, args, num_training_steps=10, model=model).raw()
    assert out["zero_optimization"]["stage3_prefetch_bucket_size"] == "auto"   # HF: stage 3 only

"""Hugging Face model folders out of zerotrain's engine (zerotrain.hf.save_hf_folder, and
`zerotrain zero-to-fp32 --hf_config`): a tiny GPT-2 (tied embeddings) and Llama, trained at
stages 2 and 3 on 1 and 2 ranks, load with transformers' AutoModelForCausalLM.from_pretrained
with no missing, unexpected or mismatched key and no warning, and give the trained engine's
logits. Workers: hf_save_worker.py."""

import json
import logging
import os
import subprocess
import warnings

import pytest
import torch

import zerotrain

transformers = pytest.importorskip("transformers")
from safetensors import safe_open  # noqa: E402


def load(folder, **kwargs):
    """from_pretrained with its loading info, and every warning it gave (Python warnings and
    transformers' logger, which reports missing and unexpected keys)."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep(level=logging.WARNING)
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, info = transformers.AutoModelForCausalLM.from_pretrained(str(folder), output_loading_info=True,
                                                                            **kwargs)
    finally:
        logger.removeHandler(handler)
    return model, info, records + [str(w.message) for w in caught]


def assert_loads_as_trained(folder, reference, dtype=None):
    model, info, warned = load(folder, **({"dtype": dtype} if dtype else {}))
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert not info.get("error_msgs"), info
    assert warned == [], warned
    loaded = model.state_dict()
    for name, t in reference.get("state_dict", {}).items():
        assert torch.equal(loaded[name], t), name
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=reference["ids"]).logits.float()
    # fp32: the same weights and the same kernels, the same logits. bf16: the engine casts
    # every floating buffer to bf16, as DeepSpeed does, Llama's rotary inv_freq included,
    # which transformers keeps in fp32; the weights are compared exactly above.
    atol = 1e-6 if model.dtype == torch.float32 else 2e-2
    assert torch.allclose(logits, reference["logits"], rtol=0, atol=atol), \
        (logits - reference["logits"]).abs().max().item()
    return model


def saved_tensors(folder):
    """{name: (file, dtype)} of every tensor in the folder's safetensors files."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors"):
            with safe_open(os.path.join(folder, name), "pt") as f:
                assert f.metadata() == {"format": "pt"}, name
                for key in f.keys():
                    assert key not in out, f"{key} written twice"
                    out[key] = (name, f.get_slice(key).get_dtype())
    return out


CASES = [  # model, stage, world, dtype
    ("gpt2", 2, 1, "fp32"),
    ("gpt2", 3, 2, "fp32"),
    ("llama", 3, 1, "fp32"),
    ("llama", 2, 2, "bf16"),
]


@pytest.mark.parametrize("model,stage,world,dtype", CASES)
def test_folder_loads_with_from_pretrained(ranks, tmp_path, model, stage, world, dtype):
    folder, shards, ckpt, hf_dir = (tmp_path / n for n in ("folder", "shards", "ckpt", "hf"))
    results = ranks("hf_save_worker.py", ["--model", model, "--stage", stage, "--dtype", dtype, "--save", folder,
                                          "--shards", shards, "--checkpoint", ckpt, "--hf_dir", hf_dir], world)
    assert all(r == {"saved": True, "saved_shards": True} for r in results), results
    reference = torch.load(tmp_path / "result.pt")
    config_dtype = "bfloat16" if dtype == "bf16" else "float32"
    # bf16: loaded in the dtype the config names, as the engine ran.
    load_dtype = "auto" if dtype == "bf16" else None

    # One file, with HF's config files.
    assert sorted(os.listdir(folder)) == ["config.json", "generation_config.json", "model.safetensors"]
    config = json.loads((folder / "config.json").read_text())
    assert config["dtype"] == config_dtype and config["architectures"] == [
        {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}[model]]
    tensors = saved_tensors(folder)
    # As save_pretrained writes it: every parameter once (a tied head under the embedding's
    # name), the training dtype, no non-persistent buffer (Llama's rotary inv_freq).
    trained = assert_loads_as_trained(folder, reference, load_dtype)
    hf_folder = tmp_path / "hf_saved"
    trained.save_pretrained(hf_folder)
    assert set(tensors) == set(saved_tensors(hf_folder)), set(tensors) ^ set(saved_tensors(hf_folder))
    if model == "gpt2":
        assert "transformer.wte.weight" in tensors and "lm_head.weight" not in tensors
    assert {d for _, d in tensors.values()} == {"BF16" if dtype == "bf16" else "F32"}

    # In shards past max_shard_size, with HF's index.
    index = json.loads((shards / "model.safetensors.index.json").read_text())
    files = sorted(n for n in os.listdir(shards) if n.endswith(".safetensors"))
    assert len(files) > 2 and "model.safetensors" not in files
    assert files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    assert index["weight_map"] == {k: f for k, (f, _) in saved_tensors(shards).items()}
    assert set(index["weight_map"]) == set(tensors)
    assert index["metadata"]["total_size"] == sum(
        os.path.getsize(shards / f) for f in files) - sum(header_bytes(shards / f) for f in files)
    assert_loads_as_trained(shards, reference, load_dtype)

    # Any checkpoint of it through the command, with the model's config files: the same.
    if dtype == "fp32":
        out = tmp_path / "consolidated"
        zt = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")
        proc = subprocess.run([zt, "zero-to-fp32", str(ckpt), str(out), "--hf_config", str(hf_dir)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert sorted(os.listdir(out)) == ["config.json", "generation_config.json", "model.safetensors"]
        assert (out / "config.json").read_bytes() == (hf_dir / "config.json").read_bytes()
        assert set(saved_tensors(out)) == set(tensors)   # a tied weight once, here too
        # The fp32 master weights: the trained model's exactly, in fp32.
        assert_loads_as_trained(out, reference)


def header_bytes(path):
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


def test_stage3_without_gathering_writes_nothing(ranks, tmp_path):
    folder = tmp_path / "folder"
    results = ranks("hf_save_worker.py", ["--model", "gpt2", "--stage", 3, "--save", folder, "--no_gather"], 1)
    assert results == [{"saved": False}]
    assert not folder.exists()


def test_hf_config_without_config_json_is_a_usage_error(tmp_path):
    zt = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")
    (tmp_path / "model").mkdir()
    proc = subprocess.run([zt, "zero-to-fp32", str(tmp_path / "ckpt"), str(tmp_path / "out"), "--hf_config",
                           str(tmp_path / "model")], capture_output=True, text=True)
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    assert "config.json is missing" in message and "save_pretrained" in message, message
    assert not (tmp_path / "out").exists()


def test_stage3_save_streams(ranks, tmp_path):
    """Rank 0's peak memory during a stage-3 save of a ~100 MB model stays far below the
    model; holding the gathered state dict instead (the measure's check) costs the model."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs /proc/self/clear_refs to reset the peak resident memory")
    r = ranks("hf_save_worker.py", ["--memory", "--save", tmp_path / "big"], 2)[0]
    assert r["saved"]
    model = r["model_bytes"]
    assert r["state_dict_peak_bytes"] > 0.9 * model, r
    # The engine's own count first: a failure of the memory bound below then says whether more
    # than one module was gathered at once, or the memory went elsewhere.
    assert r["gathered_peak_bytes"] <= r["largest_param_bytes"] + 4096, r   # one Linear's weight and bias
    assert r["save_peak_bytes"] < 0.25 * model, (f"save peak {r['save_peak_bytes']} B, gathered peak "
                                                  f"{r['gathered_peak_bytes']} B, model {model} B")
    assert os.path.getsize(tmp_path / "big" / "model.safetensors") > model

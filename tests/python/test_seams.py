"""One interpreter of the engine's inputs: the Python package asks zerotrain._C and never
decides by itself what the C++ engine and the command line decide. Each test here gives the
package an input on which a Python copy of a C++ decision used to answer differently: a
model index pointing outside its folder, a device the machine lacks, a size written as the
command line takes it, a config JSON with a comment; and checks that one initialize reads its
config once, and that the errors' "[component]" prefixes are the C++ types'."""

import json
import os
import pickle
import subprocess
import sys

import pytest
import torch

import models
import zerotrain
import zerotrain as deepspeed
from zerotrain import _C
from zerotrain.utils import zero_to_fp32

HERE = os.path.dirname(os.path.abspath(__file__))
ZT = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")


# --- the model folder's weights: the C++ reader's rules -----------------------------------------

def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16,
                                      bos_token_id=0, eos_token_id=0))


def _save_gpt2(directory, shards):
    """A tiny GPT-2 folder saved by transformers, in several shard files or one."""
    _gpt2().save_pretrained(directory, max_shard_size="20KB" if shards else "1GB")


@pytest.mark.parametrize("where", ["../elsewhere/model.safetensors", "/abs/model.safetensors", ".."])
def test_a_weight_map_entry_that_leaves_the_folder_is_refused(tmp_path, where):
    """The C++ loader (zerotrain train --model hf:DIR) refuses a shard named outside the folder;
    the Python ZeRO-3 loader read whatever file the index named."""
    import zerotrain.hf as zhf
    folder, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    _save_gpt2(folder, shards=True)
    _save_gpt2(elsewhere, shards=False)   # a real file there: only the rule can refuse it
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    first = sorted(index["weight_map"])[0]
    index["weight_map"][first] = where
    index_path.write_text(json.dumps(index))
    with pytest.raises(zerotrain.ConfigError, match="is not a file of the folder"):
        _C.HfWeights(str(folder))
    keep = zhf.HfZeroConfig(models.config(3, 1, 2, 1))
    with pytest.raises(zerotrain.ConfigError, match="is not a file of the folder"):
        zhf.AutoModelForCausalLM.from_pretrained(folder)
    del keep


def test_the_reader_reads_exact_ranges_of_every_dtype(tmp_path):
    """Every flat range of tensors of several shapes and dtypes, into chunks of the same or
    another dtype; a truncated file, a TensorFlow-layout file and pickled weights refused."""
    from safetensors.torch import save_file
    torch.manual_seed(0)
    tensors = {"scalar": torch.tensor(2.5), "vec": torch.randn(7), "mat": torch.randn(3, 5),
               "cube": torch.randn(2, 3, 4), "bf16": torch.randn(4, 3).bfloat16(), "ids": torch.arange(6),
               "mask": torch.tensor([True, False, True]), "half": torch.randn(5).half()}
    save_file(tensors, tmp_path / "model.fp16.safetensors", metadata={"format": "pt"})
    with pytest.raises(zerotrain.IoError, match="model.safetensors"):
        _C.HfWeights(str(tmp_path))   # the variant's file only
    files = _C.HfWeights(str(tmp_path), "fp16")
    try:
        assert sorted(files.keys()) == sorted(tensors)
        for name, t in tensors.items():
            flat = t.reshape(-1)
            assert files.shape(name) == tuple(t.shape) and torch.equal(files.read(name), t)
            for begin in range(flat.numel() + 1):
                for end in range(begin, flat.numel() + 1):
                    for dtype in {t.dtype, torch.float64}:
                        out = torch.empty(end - begin, dtype=dtype)
                        files.read_range(name, begin, end, out)
                        assert torch.equal(out, flat[begin:end].to(dtype)), (name, begin, end, dtype)
        with pytest.raises(zerotrain.UsageError, match="vec"):
            files.read_range("vec", 5, 9, torch.empty(4))
    finally:
        files.close()
    cut = tmp_path / "cut"
    cut.mkdir()
    data = (tmp_path / "model.fp16.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[:-8])
    with pytest.raises(zerotrain.IoError, match="model.safetensors"):
        _C.HfWeights(str(cut))   # the header names bytes past the file's end
    tf = tmp_path / "tf"
    tf.mkdir()
    save_file({"w": torch.ones(2)}, tf / "model.safetensors", metadata={"format": "tf"})
    with pytest.raises(zerotrain.NotSupportedError, match="tf"):
        _C.HfWeights(str(tf))
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    torch.save({"w": torch.ones(2)}, pickled / "pytorch_model.bin")
    with pytest.raises(zerotrain.NotSupportedError, match="pytorch_model.bin"):
        _C.HfWeights(str(pickled))


# --- the training device: trainer/device.h ------------------------------------------------------

@pytest.mark.parametrize("value,match", [("cuda", "no GPU is visible"), ("cuda:0", "no GPU is visible"),
                                         ("gpu", "not a device")])
def test_a_device_the_machine_lacks_is_refused(monkeypatch, value, match):
    """`zerotrain train --device cuda` refuses a machine without GPUs; the Python engine
    trained on the CPU without a word (and took any other value as "auto")."""
    if torch.cuda.is_available() and value != "gpu":
        pytest.skip("a GPU is visible: the request can be met")
    monkeypatch.setenv("ZEROTRAIN_DEVICE", value)
    with pytest.raises(zerotrain.UsageError, match=match) as info:
        deepspeed.initialize(model=models.build("toy"), config=models.config(1, 1, 2, 1))
    assert "ZEROTRAIN_DEVICE" in str(info.value)


def test_the_cpu_is_chosen_as_the_command_line_chooses_it(monkeypatch):
    monkeypatch.setenv("ZEROTRAIN_DEVICE", "cpu")
    engine, *_ = deepspeed.initialize(model=models.build("toy"), config=models.config(1, 1, 2, 1))
    assert engine.device == torch.device("cpu")
    engine.destroy()


# --- sizes: core/strings.h parse_bytes ----------------------------------------------------------

@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ckpt")
    engine, *_ = deepspeed.initialize(model=models.build("toy"), config=models.config(2, 1, 2, 1))
    engine.save_checkpoint(str(directory))
    engine.destroy()
    return directory


@pytest.mark.parametrize("size", ["16G", "1,000", "2_000", "1.5KiB", "3kb", "5GB", 700])
def test_a_size_is_read_as_the_command_line_reads_it(tmp_path, saved_checkpoint, size):
    """zero-to-fp32's max_shard_size from Python and from `zerotrain zero-to-fp32`: the same
    shards for every spelling; Python's own parser refused "16G" and "1,000"."""
    ours = tmp_path / "python"
    files = zero_to_fp32.convert_zero_checkpoint_to_fp32_state_dict(saved_checkpoint, ours, max_shard_size=size)
    cli = tmp_path / "cli"
    proc = subprocess.run([ZT, "zero-to-fp32", str(saved_checkpoint), str(cli), "--max_shard_size", str(size)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.path.basename(f) for f in files) == sorted(os.listdir(cli))
    assert _C.parse_bytes(size, "max_shard_size") == {"16G": 16 * 2**30, "1,000": 1000, "2_000": 2000,
                                                       "1.5KiB": 1536, "3kb": 3000, "5GB": 5 * 10**9,
                                                       700: 700}[size]


@pytest.mark.parametrize("size", ["", "5 parsecs", "-3", -3, 1.5, None])
def test_a_bad_size_names_the_argument(size):
    with pytest.raises(zerotrain.UsageError, match="max_shard_size"):
        _C.parse_bytes(size, "max_shard_size")


# --- the config: read once, by the C++ reader -----------------------------------------------------

def test_one_initialize_reads_its_config_once(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(models.config(2, 1, 2, 1)))
    no_optimizer = {k: v for k, v in models.config(2, 1, 2, 1).items() if k != "optimizer"}
    cases = {
        "dict": lambda m: dict(model=m, config=models.config(2, 1, 2, 1)),
        "path": lambda m: dict(model=m, config=str(path)),
        "client optimizer": lambda m: dict(model=m, config=no_optimizer,
                                           optimizer=torch.optim.AdamW(m.parameters(), lr=1e-3)),
        "a Config": lambda m: dict(model=m, config=zerotrain.config.load(models.config(2, 1, 2, 1))),
    }
    for name, kwargs in cases.items():
        model = models.build("toy")
        given = kwargs(model)
        before = _C._config_reads()
        engine, *_ = deepspeed.initialize(**given)
        assert _C._config_reads() - before == (0 if name == "a Config" else 1), name
        engine.destroy()


def test_the_hf_path_reads_the_config_once():
    """TrainingArguments read it; the auto values are filled into new Config objects, which
    HfZeroConfig and initialize take as they are."""
    import zerotrain.hf as zhf
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
           "train_batch_size": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
           "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}, "bf16": {"enabled": "auto"}}
    before = _C._config_reads()
    args = zhf.TrainingArguments(output_dir="unused", deepspeed=cfg, per_device_train_batch_size=2,
                                 learning_rate=1e-3, report_to=[], use_cpu=True)
    assert _C._config_reads() - before == 1
    from zerotrain.hf import auto_values
    model = _gpt2()
    resolved = auto_values.resolve(args.zerotrain_config, args, num_training_steps=3, model=model)
    assert resolved is not args.zerotrain_config and args.zerotrain_config.unresolved_auto_keys
    assert resolved.unresolved_auto_keys == [] and resolved.train_micro_batch_size_per_gpu == 2
    assert resolved.raw()["zero_optimization"]["reduce_bucket_size"] == 32 * 32   # the model's hidden_size^2
    engine, *_ = deepspeed.initialize(model=model, config=resolved)
    assert _C._config_reads() - before == 1
    engine.destroy()


def test_a_config_file_with_comments_reads_alike_everywhere(tmp_path):
    """DeepSpeed reads its config with hjson: comments and trailing commas. The command line
    and initialize took them; TrainingArguments' own json.loads did not."""
    import zerotrain.hf as zhf
    path = tmp_path / "ds.json"
    path.write_text('{\n  // ZeRO-2, as the guide says\n  "train_micro_batch_size_per_gpu": "auto",\n'
                    '  "zero_optimization": {"stage": 2,},\n}\n')
    args = zhf.TrainingArguments(output_dir="unused", deepspeed=str(path), report_to=[], use_cpu=True)
    assert args.zerotrain_config.stage == 2 and args.hf_zero_config.is_zero2()
    proc = subprocess.run([ZT, "config", "check", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("cfg,stage,precision,offload", [
    ({}, 0, "fp32", False),
    ({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}, "bf16": {"enabled": True}}, 3, "bf16",
     True),
    ({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}, "fp16": {"enabled": "auto"}}, 2,
     None, False),
    ({"zero_optimization": {"stage": 1}, "bfloat16": {"enabled": True}}, 1, "bf16", False),
])
def test_the_config_answers_typed_questions(cfg, stage, precision, offload):
    c = zerotrain.config.load(cfg)
    assert (c.stage, c.precision, c.offload) == (stage, precision, offload)
    assert c.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    assert c.raw() == cfg and c.raw() is not c.raw()
    back = pickle.loads(pickle.dumps(c))
    assert (back.stage, back.precision, back.raw()) == (c.stage, c.precision, c.raw())


def test_auto_values_are_written_under_the_users_spelling():
    cfg = {"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": "auto",
                                 "stage3_param_persistence_threshold": "auto"},
           "bfloat16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}
    c = zerotrain.config.load(cfg)
    filled = c.resolve_auto({"per_device_train_batch_size": 4, "bf16": True, "hidden_size": 10})
    raw = filled.raw()
    assert raw["zero_optimization"] == {"stage": 3, "stage3_prefetch_bucket_size": 90,
                                        "stage3_param_persistence_threshold": 100}
    assert raw["bfloat16"] == {"enabled": True} and "bf16" not in raw
    assert raw["train_micro_batch_size_per_gpu"] == 4
    assert c.raw() == cfg   # the Config resolved is unchanged


def test_a_dict_that_is_not_json_is_refused_naming_the_key():
    with pytest.raises(zerotrain.ConfigError, match="optimizer.params.lr"):
        zerotrain.config.load({"optimizer": {"type": "Adam", "params": {"lr": float("nan")}}})
    with pytest.raises(zerotrain.ConfigError, match="zero_optimization.stage"):
        zerotrain.config.load({"zero_optimization": {"stage": torch.tensor(2)}})


# --- the communication group: adopt or open -------------------------------------------------------

def test_backend_auto_adopts_the_scripts_group(tmp_path):
    """`zerotrain launch --backend auto` exports ZEROTRAIN_COMM_BACKEND=auto, which names no
    backend: the engine runs on the script's torch.distributed group (the Python package
    counted it as a named backend and opened a second group beside torch.distributed's)."""
    cmd = [sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--backend", "auto", "--",
           sys.executable, os.path.join(HERE, "dist_worker.py"), "--torch_first", "--out", f"{tmp_path}/result"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for r in range(2):
        with open(f"{tmp_path}/result.rank{r}.json") as f:
            assert json.load(f)["backend"] == "torch.distributed"
    assert "opens its own process group" not in proc.stdout + proc.stderr


# --- errors: one prefix per C++ type --------------------------------------------------------------

def test_python_raised_errors_take_the_cpp_prefix():
    components = _C.error_components()
    for name, component in components.items():
        cls = getattr(zerotrain.errors, name)
        error = cls("what went wrong")
        assert str(error) == f"[{component}] what went wrong" and error.component == component
        assert str(pickle.loads(pickle.dumps(error))) == str(error)
    with pytest.raises(zerotrain.ConfigError) as info:
        zerotrain.init_distributed(dist_backend="carrier-pigeon")
    assert str(info.value).startswith(f"[{components['ConfigError']}] init_distributed")
    with pytest.raises(zerotrain.NotSupportedError) as info:
        zerotrain._C._raise_for_test("not_supported", "x")
    assert str(info.value) == f"[{components['NotSupportedError']}] x"

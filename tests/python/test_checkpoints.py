"""Checkpoints saved from Python reshard: save at world 2 stage 3, resume at world 1 stage 0
(and the reverse) with the next steps' losses of the uninterrupted run; zero_to_fp32 gives a
state dict the Python model loads strictly; the C++ command reads what Python saved."""

import os
import subprocess

import pytest
import torch

import models
import zerotrain
from zerotrain.utils import zero_to_fp32

STEPS = 4


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def mean_losses(results):
    return [sum(r["losses"][s] for r in results) / len(results) for s in range(len(results[0]["losses"]))]


@pytest.mark.parametrize("saved,resumed", [((2, 3, 1), (1, 0, 2)), ((1, 0, 2), (2, 3, 1))],
                         ids=["w2s3-to-w1s0", "w1s0-to-w2s3"])
def test_resume_at_another_world_size_and_stage(ranks, tmp_path, saved, resumed):
    # (world, stage, accumulation): the same global batch of 4 samples either way.
    (w0, s0, a0), (w1, s1, a1) = saved, resumed
    ckpt = tmp_path / "ckpt"
    whole = ranks("parity_worker.py", ["--stage", s0, "--accum", a0, "--steps", 2 * STEPS], w0)
    first = ranks("parity_worker.py", ["--stage", s0, "--accum", a0, "--steps", STEPS, "--save", ckpt], w0)
    assert mean_losses(first) == pytest.approx(mean_losses(whole)[:STEPS], rel=1e-6)
    second = ranks("parity_worker.py", ["--stage", s1, "--accum", a1, "--steps", STEPS, "--load", ckpt,
                                        "--start_step", STEPS], w1)
    want = mean_losses(whole)[STEPS:]
    got = mean_losses(second)
    for s in range(STEPS):
        assert rel(got[s], want[s]) <= 1e-5, f"resumed step {STEPS + s}: loss {got[s]} vs {want[s]}"
    # Resumed weights end where the uninterrupted run's do.
    for name, values in whole[0]["state"].items():
        a, b = torch.tensor(values), torch.tensor(second[0]["state"][name])
        assert (a - b).norm().item() <= 1e-4 * max(a.norm().item(), 1e-12), name

    # zero_to_fp32: the whole model, the tied head included, loads strictly.
    state = zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint(ckpt)
    model = models.build("toy")
    model.load_state_dict(state, strict=True)
    for name, values in first[0]["state"].items():
        assert torch.equal(model.state_dict()[name].float(), torch.tensor(values).reshape(state[name].shape)), name
    loaded = zero_to_fp32.load_state_dict_from_zero_checkpoint(models.build("toy", seed=7), ckpt)
    assert torch.equal(loaded.embed.weight, state["embed.weight"])

    # The consolidated file (streamed by the C++ reader): the tied weight once, under its
    # first name, as Hugging Face saves it.
    out = tmp_path / "fp32"
    files = zero_to_fp32.convert_zero_checkpoint_to_fp32_state_dict(ckpt, out)
    assert [os.path.basename(f) for f in files] == ["model.safetensors"]
    from safetensors.torch import load_file
    on_disk = load_file(str(out / "model.safetensors"))
    assert set(on_disk) == set(state) - {"head.weight"}
    fresh = models.build("toy", seed=7)
    missing, unexpected = fresh.load_state_dict(on_disk, strict=False)
    assert missing == ["head.weight"] and unexpected == []   # it is embed.weight: loading one sets both
    assert torch.equal(fresh.head.weight, state["embed.weight"])

    # The C++ command reads the Python checkpoint.
    zt = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")
    proc = subprocess.run([zt, "checkpoint", "inspect", str(ckpt)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "complete" in proc.stdout


def test_an_async_save_is_the_same_files_and_is_published_at_the_scripts_end(ranks, tmp_path):
    # The script saves as its last act and ends without waiting: the engine publishes the
    # checkpoint at exit, with the bytes a synchronous save writes.
    sync, background = tmp_path / "sync", tmp_path / "async"
    ranks("parity_worker.py", ["--stage", 2, "--steps", STEPS, "--save", sync], 2)
    ranks("parity_worker.py", ["--stage", 2, "--steps", STEPS, "--save", background, "--async_save"], 2)
    tag = f"global_step{STEPS}"
    assert (background / "latest").read_text() == tag
    assert sorted(os.listdir(background)) == [tag, "latest"]
    for name in ("rank_00000.safetensors", "rank_00001.safetensors"):
        assert (sync / tag / name).read_bytes() == (background / tag / name).read_bytes(), name


def test_python_reads_a_checkpoint_the_command_saved(tmp_path):
    zt = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")
    cfg = tmp_path / "ds.json"
    cfg.write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}, '
                   '"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}')
    out = tmp_path / "out"
    proc = subprocess.run([zt, "train", "--model", "mlp", "--model_config", "n_in=8,n_hidden=16,n_layer=2,n_out=4",
                           "--dataset", "synthetic", "--deepspeed", str(cfg), "--max_steps", "3", "--output_dir",
                           str(out), "--save_steps", "3"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ckpt = out / "checkpoint-3"
    state = zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint(ckpt)
    assert state, "no tensors read"
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    assert sum(v.numel() for v in state.values()) == 8 * 16 + 16 + 16 * 16 + 16 + 16 * 4 + 4, shapes

"""The API around training: errors as Python exceptions with the C++ messages, DeepSpeed's
estimators digit for digit, the report, config arguments, a client optimizer and schedule."""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch

import models
import zerotrain
import zerotrain as deepspeed

HERE = os.path.dirname(os.path.abspath(__file__))
ZT = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")


@pytest.mark.parametrize("kind,cls,builtin", [
    ("config", zerotrain.ConfigError, ValueError),
    ("usage", zerotrain.UsageError, ValueError),
    ("not_supported", zerotrain.NotSupportedError, NotImplementedError),
    ("comm", zerotrain.CommError, RuntimeError),
    ("timeout", zerotrain.CommTimeoutError, TimeoutError),
    ("io", zerotrain.IoError, OSError),
    ("checkpoint", zerotrain.CheckpointError, OSError),
    ("numerics", zerotrain.NumericsError, RuntimeError),
    ("resource", zerotrain.ResourceError, MemoryError),
    ("internal", zerotrain.InternalError, RuntimeError),
])
def test_cpp_errors_arrive_as_typed_exceptions(kind, cls, builtin):
    with pytest.raises(cls) as info:
        zerotrain._C._raise_for_test(kind, "what went wrong")
    assert isinstance(info.value, builtin) and isinstance(info.value, zerotrain.Error)
    assert str(info.value).endswith("what went wrong")


def test_error_messages_keep_what_follows_a_nul_and_show_controls_escaped(tmp_path):
    with pytest.raises(zerotrain.IoError) as info:
        zerotrain._C._raise_for_test("io", "file a\x00b\x1b[31mc: no such file")
    assert str(info.value).endswith("file a\\x00b\\x1b[31mc: no such file"), str(info.value)
    # A key with NUL and ESC in a config file, through the config reader.
    path = tmp_path / "ds.json"
    path.write_text('{"train_micro_batch_size_per_gpu": 2, "a\\u0000b\\u001bc": 1}')
    with pytest.raises(zerotrain.ConfigError) as info:
        deepspeed.initialize(model=models.build("toy"), config=str(path))
    assert "a\\x00b\\x1bc: unknown key" in str(info.value), str(info.value)


BAD_CONFIGS = [
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 7}},
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3, "stage3_max_live_parameter": 10}},
    {"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": -1}}},
    {"train_batch_size": 3, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1},
]


@pytest.mark.parametrize("cfg", BAD_CONFIGS, ids=["stage", "typo", "negative-lr", "batch-triangle"])
def test_bad_config_raises_the_message_config_check_prints(tmp_path, cfg):
    with pytest.raises(zerotrain.ConfigError) as info:
        deepspeed.initialize(model=models.build("toy"), config=cfg)
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(cfg))
    proc = subprocess.run([ZT, "config", "check", str(path), "--world_size", "1"], capture_output=True, text=True)
    assert proc.returncode != 0
    # The same finding, word for word (the CLI names the file where Python says <config dict>).
    message = str(info.value).split(": ", 1)[-1]
    assert message.splitlines()[0][-60:] in proc.stdout + proc.stderr, (str(info.value), proc.stderr)


def test_config_from_args_and_path(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(models.config(2, 1, 2, 1)))
    parser = deepspeed.add_config_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--deepspeed", "--deepspeed_config", str(path)])
    engine, optimizer, loader, scheduler = deepspeed.initialize(args=args, model=models.build("toy"))
    assert engine.zero_optimization_stage() == 2
    assert engine.train_micro_batch_size_per_gpu() == 2 and engine.train_batch_size() == 2
    assert engine.gradient_accumulation_steps() == 1
    assert loader is None and scheduler is None
    assert optimizer.param_groups[0]["lr"] == pytest.approx(3e-3)
    with pytest.raises(zerotrain.ConfigError, match="both"):
        deepspeed.initialize(args=args, model=models.build("toy"), config=str(path))
    with pytest.raises(zerotrain.ConfigError, match="cannot read"):
        deepspeed.initialize(model=models.build("toy"), config=str(tmp_path / "missing.json"))


def test_client_optimizer_and_torch_schedule_match_plain_pytorch():
    torch.manual_seed(0)
    ref = models.build("toy")
    model = models.build("toy")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    # Plain PyTorch does not clip; the engine clips at 1.0 unless told not to (DeepSpeed 0.19's default).
    cfg = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}, "gradient_clipping": 0}
    engine, optimizer, _, lr_scheduler = deepspeed.initialize(model=model, optimizer=opt, lr_scheduler=sched,
                                                              config=cfg)
    assert lr_scheduler is sched
    ref_params = [p for p in ref.parameters() if p.requires_grad]
    ref_opt = torch.optim.AdamW(ref_params, lr=1e-2, weight_decay=0.0)
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.5)
    x, y = models.batches(12)
    for s in range(6):
        bx, by = x[2 * s:2 * s + 2], y[2 * s:2 * s + 2]
        loss = engine(bx, by)
        engine.backward(loss)
        engine.step()
        ref_loss = ref(bx, by)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        ref_sched.step()
        assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
        assert engine.get_lr() == pytest.approx(ref_sched.get_last_lr())
    assert engine.get_lr()[0] == pytest.approx(1e-2 * 0.5 ** 3)


def test_unsupported_client_optimizer_is_refused():
    model = models.build("toy")
    opt = torch.optim.RMSprop([p for p in model.parameters() if p.requires_grad])
    with pytest.raises(zerotrain.NotSupportedError, match="RMSprop"):
        deepspeed.initialize(model=model, optimizer=opt, config={"train_micro_batch_size_per_gpu": 1})


def read_golden():
    cases = {}
    with open(os.path.join(HERE, "..", "data", "deepspeed_estimates.txt")) as f:
        text = f.read()
    for block in text.split("\n\n"):
        lines = [l for l in block.splitlines() if not l.startswith("#")]
        if not lines:
            continue
        key = tuple(float(v) for v in lines[0].strip("()").split(","))
        cases[key] = "\n".join(lines[1:]) + "\n"
    return cases


def test_estimators_print_what_deepspeed_prints():
    from zerotrain.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold
    from zerotrain.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold
    cases = read_golden()
    assert len(cases) >= 3
    for (total, largest, gpus, nodes, abf), want in cases.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            estimate_zero2_model_states_mem_needs_all_cold(total, int(gpus), int(nodes), abf)
            estimate_zero3_model_states_mem_needs_all_cold(total, largest, int(gpus), int(nodes), abf)
        assert out.getvalue() == want, (total, largest, gpus, nodes)


def test_estimators_all_live_count_the_model():
    from zerotrain.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_live, model_to_params
    model = models.build("toy")
    total, largest = model_to_params(model)
    # The tied head counted once (parameters() yields it once); the largest module's own
    # parameters: block.fc1's 32x64 weights and 64 biases, more than the 64x32 embedding.
    assert total == sum(p.numel() for p in model.parameters()) == 64 * 32 + (32 * 64 + 64) + (64 * 32 + 32) + (32 * 32 + 32) + 2 * 32
    assert largest == 32 * 64 + 64
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        estimate_zero3_model_states_mem_needs_all_live(model, num_gpus_per_node=2)
    assert "2 GPUs per node" in out.getvalue() and "zero_init=1" in out.getvalue()


def test_report_prints_what_the_command_prints():
    cmd = subprocess.run([ZT, "report", "--json"], capture_output=True, text=True)
    py = subprocess.run([sys.executable, "-m", "zerotrain.report", "--json"], capture_output=True, text=True)
    assert cmd.returncode == py.returncode
    assert json.loads(cmd.stdout).keys() == json.loads(py.stdout).keys()


def test_a_rank_that_dies_ends_the_job_naming_it(tmp_path):
    script = tmp_path / "die.py"
    script.write_text(
        "import os, sys, time\n"
        "import zerotrain as deepspeed\n"
        "sys.path.insert(0, %r)\n"
        "import models\n"
        "engine, *_ = deepspeed.initialize(model=models.build('toy'), config=models.config(2, 1, 2, 2))\n"
        "if engine.global_rank == 1:\n"
        "    os._exit(13)\n"
        "x, y = models.batches(4)\n"
        "engine.backward(engine(x[:2], y[:2]))\n"
        "engine.step()\n" % HERE)
    proc = subprocess.run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--", sys.executable,
                           str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, ZEROTRAIN_COMM_TIMEOUT_S="30"))
    assert proc.returncode == 13, proc.stderr[-3000:]
    assert "rank 1" in proc.stderr, proc.stderr[-3000:]

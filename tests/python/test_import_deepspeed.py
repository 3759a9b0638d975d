"""DeepSpeed 0.19's checkpoints (tests/data/deepspeed: stages 0-3, world sizes 1 and 2, fp32,
bf16 and fp16), imported with `zerotrain checkpoint import-deepspeed`, resume under
`import zerotrain as deepspeed` at the world size they were saved at, to the losses DeepSpeed's
own resumed run had: the first step after the checkpoint (same weights, same batch) and the
one after it (Adam's states and step, the schedule and the loss scaler carried over). Where
DeepSpeed is installed (the bench venv), also on checkpoints it writes during the test."""

import json
import os
import subprocess

import pytest

import zerotrain
from conftest import batch_result, run_batches

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "deepspeed")
CASES = sorted(d for d in os.listdir(DATA) if os.path.isfile(os.path.join(DATA, d, "expected.json")))
# Relative bounds on the two resumed losses. The first is the same forward pass on the same
# weights, so it must agree to rounding. The second follows an Adam step: in fp32 the same
# formula in another order. In fp16 that step is one where the loss scale doubles, on which
# DeepSpeed divides the gradients by the new scale, half size (docs/precision.md, "One
# deliberate difference"); in bf16, masters one fp32 rounding apart can round to bf16 weights
# one bf16 step apart (2^-8). Either moves this model's loss by up to about 1%.
BOUNDS = {"fp32": (1e-6, 1e-5), "bf16": (1e-6, 2e-2), "fp16": (1e-6, 2e-2)}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def imported(case_dir, out):
    """`zerotrain checkpoint import-deepspeed case_dir out`; returns the case's expected.json."""
    zt = os.path.join(os.path.dirname(zerotrain.__file__), "_bin", "zerotrain")
    proc = subprocess.run([zt, "checkpoint", "import-deepspeed", case_dir, str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.load(open(os.path.join(case_dir, "expected.json")))


def check_resumed(results, expected, case):
    got, want = results[0]["losses"], expected["resumed_losses"]
    first, second = BOUNDS[expected["dtype"]]
    assert rel(got[0], want[0]) <= first, f"{case}: first resumed loss {got[0]} vs DeepSpeed's {want[0]}"
    assert rel(got[1], want[1]) <= second, f"{case}: second resumed loss {got[1]} vs DeepSpeed's {want[1]}"
    assert results[0]["global_steps"] == expected["global_steps"] + len(want)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """Every committed case imported, then resumed: one process per rank for all the cases of a
    world size (conftest.run_batches). Returns (case -> expected.json, the batches' outcome)."""
    tmp = tmp_path_factory.mktemp("imported")
    runs, expected = {}, {}
    for case in CASES:
        expected[case] = imported(os.path.join(DATA, case), tmp / case)
        runs[case] = (["--case", os.path.join(DATA, case), "--load", tmp / case], expected[case]["world_size"])
    return expected, run_batches("ds_import_worker.py", runs, tmp_path_factory.mktemp("runs"))


@pytest.mark.parametrize("case", CASES)
def test_an_imported_checkpoint_resumes_to_deepspeeds_losses(resumed, case):
    expected, outcome = resumed
    check_resumed(batch_result(outcome, case), expected[case], case)


# Checkpoints DeepSpeed writes now, where its venv exists (bench/stage3_vs_peers.py makes it):
# the committed ones must not be the only DeepSpeed output the import has met.
DS_PYTHON = os.path.join(os.environ.get("ZEROTRAIN_HOME", os.path.expanduser("~/.cache/zerotrain")), "bench-venv",
                         "bin", "python")
FRESH = ["s0_fp16_w1", "s2_bf16_w2", "s3_fp32_w2"]


@pytest.mark.parametrize("case", FRESH)
def test_a_checkpoint_deepspeed_writes_now_resumes_to_its_losses(ranks, tmp_path, case):
    if not os.access(DS_PYTHON, os.X_OK):
        pytest.skip(f"no DeepSpeed venv at {DS_PYTHON} (bench/stage3_vs_peers.py creates it)")
    fresh = tmp_path / "fresh"
    proc = subprocess.run([DS_PYTHON, os.path.join(DATA, "make_checkpoints.py"), str(fresh), "--only", case],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0 and f"{case}: ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    expected = imported(str(fresh / case), tmp_path / "imported")
    results = ranks("ds_import_worker.py", ["--case", fresh / case, "--load", tmp_path / "imported"],
                    expected["world_size"])
    check_resumed(results, expected, case)

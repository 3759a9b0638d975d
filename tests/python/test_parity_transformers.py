"""transformers' GPT-2 (its lm_head tied to wte) and Llama, built from small random configs,
trained through the Python front end at stages 0-3 x world 1/2 x accumulation 1/2 (fp32) and
in bf16, against plain single-process PyTorch (test_parity.py's oracle)."""

import pytest
import torch

import models
from conftest import batch_result, run_batches
from test_parity import MICRO, STEPS, check


NAMES = ["gpt2", "llama"]


def parity_args(name, stage, accum, dtype="fp32", *extra):
    return ["--model", name, "--stage", stage, "--accum", accum, "--micro", MICRO, "--steps", STEPS, "--dtype", dtype,
            *extra]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run of this file, one process per rank for each world size (conftest.run_batches)."""
    runs = {}
    for name in NAMES:
        for stage in (0, 1, 2, 3):
            for accum in (1, 2):
                for world in (1, 2):
                    runs[("fp32", name, stage, accum, world)] = (parity_args(name, stage, accum), world)
        for stage in (0, 3):
            runs[("bf16", name, stage)] = (parity_args(name, stage, 2, "bf16"), 2)
        runs[("evaluate", name)] = (parity_args(name, 3, 1, "fp32", "--evaluate"), 2)
    return run_batches("parity_worker.py", runs, tmp_path_factory.mktemp("runs"))


# transformers' GPT-2 (its lm_head tied to wte) and Llama, built from small random configs.
@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("accum", [1, 2])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_transformers_fp32(runs, name, stage, accum, world):
    results = batch_result(runs, ("fp32", name, stage, accum, world))
    check(results, models.reference(name, STEPS, world, accum, MICRO), "fp32", world, accum, name)


@pytest.mark.parametrize("stage", [0, 3])
@pytest.mark.parametrize("name", NAMES)
def test_transformers_bf16(runs, name, stage):
    results = batch_result(runs, ("bf16", name, stage))
    check(results, models.reference(name, STEPS, 2, 2, MICRO, "bf16"), "bf16", 2, 2, name)


@pytest.mark.parametrize("name", NAMES)
def test_stage3_no_grad_evaluation_and_generate(runs, name):
    """Under stage 3 at world 2, a torch.no_grad() evaluation and a greedy model.generate() on the
    trained model give what the plain PyTorch model with the oracle's weights gives."""
    results = batch_result(runs, ("evaluate", name))
    ref_losses, ref_norms, ref_state = models.reference(name, STEPS, 2, 1, MICRO)
    check(results, (ref_losses, ref_norms, ref_state), "fp32", 2, 1, name)
    model = models.build(name)
    model.load_state_dict(ref_state)
    model.eval()
    x, y = models.batches(4, seed=7)
    with torch.no_grad():
        want_loss = model(x, y).item()
        want_tokens = model.lm.generate(x[:2, :3], max_new_tokens=5, do_sample=False, pad_token_id=0).tolist()
    for r in results:
        assert abs(r["eval_loss"] - want_loss) <= 1e-5 * abs(want_loss), f"rank {r['rank']}: {r['eval_loss']} vs {want_loss}"
        assert r["generated"] == want_tokens, f"rank {r['rank']}: generated {r['generated']}, want {want_tokens}"

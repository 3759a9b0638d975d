"""Stages 0-3 x world 1/2 x accumulation 1/2, fp32 and bf16: the Python front end trains the
same model to the same numbers as plain single-process PyTorch (AdamW, same seed, same
global batches)."""

import math

import pytest
import torch

import models

STEPS = 10
MICRO = 2
BOUNDS = {"fp32": {"loss": 1e-5, "norm": 1e-5, "param": 1e-4}, "bf16": {"loss": 2e-2, "norm": 2e-2, "param": 5e-2}}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def check(results, ref, dtype, world, accum):
    ref_losses, ref_norms, ref_state = ref
    bound = BOUNDS[dtype]
    losses = [sum(r["losses"][s] for r in results) / len(results) for s in range(STEPS)]
    for s in range(STEPS):
        assert rel(losses[s], ref_losses[s]) <= bound["loss"], f"step {s}: loss {losses[s]} vs {ref_losses[s]}"
        for r in results:
            assert rel(r["norms"][s], ref_norms[s]) <= bound["norm"], \
                f"rank {r['rank']} step {s}: grad norm {r['norms'][s]} vs {ref_norms[s]}"
    # Training moved the weights far past the bound: otherwise matching them proves nothing.
    start = models.build("toy").state_dict()
    moved = sum((ref_state[k] - start[k].float()).norm().item() ** 2 for k in ref_state) ** 0.5
    size = sum(ref_state[k].norm().item() ** 2 for k in ref_state) ** 0.5
    assert moved / size > 10 * bound["param"], f"training moved the weights by {moved / size} only"
    state = results[0]["state"]
    assert set(state) == set(ref_state), "state_dict names differ from the model's"
    for name, ref_t in ref_state.items():
        got = torch.tensor(state[name]).reshape(ref_t.shape)
        err = (got - ref_t).norm().item() / max(ref_t.norm().item(), 1e-12)
        assert err <= bound["param"], f"{name}: relative L2 error {err}"
    assert results[0]["global_steps"] == STEPS
    assert results[0]["micro_steps"] == STEPS * accum
    assert results[0]["global_samples"] == STEPS * accum * MICRO * world


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("accum", [1, 2])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_toy_fp32(ranks, stage, accum, world):
    results = ranks("parity_worker.py", ["--model", "toy", "--stage", stage, "--accum", accum, "--micro", MICRO,
                                         "--steps", STEPS], world)
    check(results, models.reference("toy", STEPS, world, accum, MICRO), "fp32", world, accum)


@pytest.mark.parametrize("stage", [0, 3])
def test_toy_bf16(ranks, stage):
    results = ranks("parity_worker.py", ["--model", "toy", "--stage", stage, "--accum", 2, "--micro", MICRO,
                                         "--steps", STEPS, "--dtype", "bf16"], 2)
    check(results, models.reference("toy", STEPS, 2, 2, MICRO, "bf16"), "bf16", 2, 2)

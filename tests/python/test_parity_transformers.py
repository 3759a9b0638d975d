"""transformers' GPT-2 (its lm_head tied to wte) and Llama, built from small random configs,
trained through the Python front end at stages 0-3 x world 1/2 x accumulation 1/2 (fp32) and
in bf16, against plain single-process PyTorch (test_parity.py's oracle)."""

import pytest

import models
from test_parity import MICRO, STEPS, check


# transformers' GPT-2 (its lm_head tied to wte) and Llama, built from small random configs.
@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("accum", [1, 2])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_transformers_fp32(ranks, name, stage, accum, world):
    results = ranks("parity_worker.py", ["--model", name, "--stage", stage, "--accum", accum, "--micro", MICRO,
                                         "--steps", STEPS], world)
    check(results, models.reference(name, STEPS, world, accum, MICRO), "fp32", world, accum, name)


@pytest.mark.parametrize("stage", [0, 3])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_transformers_bf16(ranks, name, stage):
    results = ranks("parity_worker.py", ["--model", name, "--stage", stage, "--accum", 2, "--micro", MICRO,
                                         "--steps", STEPS, "--dtype", "bf16"], 2)
    check(results, models.reference(name, STEPS, 2, 2, MICRO, "bf16"), "bf16", 2, 2, name)

"""zero.Init: a model built inside it is never whole on any rank (building it takes a rank
its half of the model and little more), and it trains at ZeRO stage 3 to the same losses as
the same model built whole."""

import pytest


def test_built_in_pieces_and_trained(ranks):
    # glibc's heap would keep freed blocks and hide the drop in memory (docs/estimator.md).
    env = {"MALLOC_MMAP_THRESHOLD_": "1048576"}
    cut = ranks("zero_init_worker.py", [], 2, env=env)
    whole = ranks("zero_init_worker.py", ["--whole"], 2, env=env)
    model_bytes = cut[0]["model_bytes"]
    assert model_bytes >= 128 * 2**20
    for r in cut:
        assert r["freed"], f"rank {r['rank']}: a parameter kept its memory after zero.Init"
        # A rank keeps its half, and holds one layer (1/33 of the model) whole while it is
        # built: an eighth of the model is room for that and for what the runtime allocates.
        assert r["build_peak"] <= model_bytes * (1 / 2 + 1 / 8), (r["build_peak"], model_bytes)
        assert r["frozen_whole"] > 0, "the frozen layer was not made whole for the forward"
        assert r["bias0"] == pytest.approx([0.01] * 4), "rank 0's change under GatheredParameters was lost"
    for r in whole:
        assert r["build_peak"] >= model_bytes * 0.9, "the whole build should take the whole model"
    for c, w in zip(cut, whole):
        assert c["losses"] == pytest.approx(w["losses"], rel=1e-6)

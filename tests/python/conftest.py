"""Runs parity workers as real processes: world 1 directly, world > 1 under `python -m
zerotrain.launcher` (zerotrain launch), as a user would."""

import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# A row of the engine's effective-config table: "[rank 0]   zero_optimization.stage   2   [file]".
_CONFIG_ROW = re.compile(r"^(\[rank \d+\])?\s+[\w.]+\s+.*\[(default|derived|file|auto|auto \(unresolved\))\]$")


def _launch(script, args, world, timeout, env):
    """Runs `script args` on `world` ranks; returns (command, the finished process)."""
    cmd = [sys.executable, os.path.join(HERE, script), *map(str, args)]
    if world > 1:
        cmd = [sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", str(world), "--no_local_rank", "--",
               *cmd]
    full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    return cmd, subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


def _failure(cmd, proc):
    # At --log_level debug the engine's effective-config table is a hundred lines per rank:
    # left out, so that the end of the output, where a failure shows, is what a truncated report keeps.
    stderr = "\n".join(line for line in proc.stderr.splitlines() if not _CONFIG_ROW.search(line))
    return (f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-1500:]}\n"
            f"--- stderr (the effective-config rows left out)\n{stderr[-3000:]}")


def _results(out, world):
    results = []
    for r in range(world):
        with open(f"{out}.rank{r}.json") as f:
            results.append(json.load(f))
    return results


def run_ranks(script, args, world, tmp_path, timeout=300, env=None):
    """Runs `script args` on `world` ranks; returns each rank's JSON result."""
    out = str(tmp_path / "result")
    cmd, proc = _launch(script, [*args, "--out", out], world, timeout, env)
    if proc.returncode != 0:
        raise AssertionError(_failure(cmd, proc))
    return _results(out, world)


@pytest.fixture
def ranks(tmp_path):
    return lambda script, args, world, **kw: run_ranks(script, args, world, tmp_path, **kw)


def run_batches(script, runs, tmp_path, timeout=900):
    """Runs many runs of `script` (worker_batch.py) with one process per rank for all the runs
    of a world size, so that LibTorch and transformers are imported once per rank instead of
    once per run. `runs`: key -> (argument list, world). Returns key -> each rank's results, or
    the report of the run that failed (and, for the runs after it in its batch, which one did)."""
    by_world = {}
    for key, (args, world) in runs.items():
        by_world.setdefault(world, []).append((key, args))
    outcome = {}
    for world, batch in sorted(by_world.items()):
        folder = tmp_path / f"world{world}"
        folder.mkdir()
        outs = [str(folder / f"run{i}") for i in range(len(batch))]
        with open(folder / "batch.json", "w") as f:
            json.dump([[*map(str, args), "--out", out] for (_, args), out in zip(batch, outs)], f)
        cmd, proc = _launch(script, ["--batch", folder / "batch.json"], world, timeout, None)
        failed = None
        for (key, _), out in zip(batch, outs):
            if failed is None:
                try:
                    outcome[key] = _results(out, world)
                    continue
                except FileNotFoundError:
                    failed = key
                    outcome[key] = f"run {key} failed: " + _failure(cmd, proc)
                    continue
            outcome[key] = f"not run: run {failed} before it in the same processes failed"
        if failed is None and proc.returncode != 0:
            raise AssertionError(_failure(cmd, proc))
    return outcome


def batch_result(outcome, key):
    """The results of one run of run_batches, or its failure raised."""
    result = outcome[key]
    if isinstance(result, str):
        raise AssertionError(result)
    return result

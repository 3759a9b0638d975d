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


def run_ranks(script, args, world, tmp_path, timeout=300, env=None):
    """Runs `script args` on `world` ranks; returns each rank's JSON result."""
    out = str(tmp_path / "result")
    cmd = [sys.executable, os.path.join(HERE, script), *map(str, args), "--out", out]
    if world > 1:
        cmd = [sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", str(world), "--", *cmd]
    full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    if proc.returncode != 0:
        # The engine's effective-config table is a hundred lines per rank: left out, so that
        # the end of the output, where a failure shows, is what a truncated report keeps.
        stderr = "\n".join(line for line in proc.stderr.splitlines() if not _CONFIG_ROW.search(line))
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-1500:]}\n"
                             f"--- stderr (the effective-config rows left out)\n{stderr[-3000:]}")
    results = []
    for r in range(world):
        with open(f"{out}.rank{r}.json") as f:
            results.append(json.load(f))
    return results


@pytest.fixture
def ranks(tmp_path):
    return lambda script, args, world, **kw: run_ranks(script, args, world, tmp_path, **kw)

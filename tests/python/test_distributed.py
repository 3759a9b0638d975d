"""The engine under other launchers: torchrun (whose agent serves the rendezvous store), and a
script that initialised torch.distributed itself before initialize. The engine's collectives
run on torch.distributed's group (one group, not two) unless the config names a backend;
torch.distributed is usable beside the engine; every rank gets the same gradient norm."""

import json
import os
import subprocess
import sys

import pytest

from held_port import held_port

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, tmp_path):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    results = []
    (tmp_path / "output.txt").write_text(proc.stdout + proc.stderr)
    for r in range(2):
        with open(f"{tmp_path}/result.rank{r}.json") as f:
            results.append(json.load(f))
    return results


def check(results, backend="torch.distributed"):
    assert [r["backend"] for r in results] == [backend, backend]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert all(r["steps"] == 1 for r in results)
    assert results[0]["norm"] == pytest.approx(results[1]["norm"], rel=1e-12)


def test_under_torchrun(tmp_path):
    check(run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(held_port()),
               os.path.join(HERE, "dist_worker.py"), "--out", f"{tmp_path}/result"], tmp_path))


def test_initialize_under_zerotrain_launch(tmp_path):
    """initialize() initialises torch.distributed itself: its store listens on MASTER_ADDR's
    address (127.0.0.1) only, where env:// would listen on every interface."""
    results = run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--", sys.executable,
                   os.path.join(HERE, "dist_worker.py"), "--out", f"{tmp_path}/result"], tmp_path)
    check(results)
    listens = results[0]["store_listens"]
    assert listens and all(line.endswith(" loopback") for line in listens), listens


def test_torch_distributed_initialised_by_the_script(tmp_path):
    check(run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--", sys.executable,
               os.path.join(HERE, "dist_worker.py"), "--torch_first", "--out", f"{tmp_path}/result"], tmp_path))


def test_a_named_backend_opens_the_engines_own_group(tmp_path):
    # The engine's own group: gloo, with shared memory between the two ranks of this host.
    check(run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--", sys.executable,
               os.path.join(HERE, "dist_worker.py"), "--torch_first", "--own_group", "--out", f"{tmp_path}/result"],
              tmp_path), backend="shm")
    assert 'comm: the engine opens its own process group: the job names the "gloo" backend' in (tmp_path / "output.txt").read_text()


@pytest.mark.parametrize("made_by", ["init_distributed", "the script"])
def test_the_group_is_released_before_python_finalizes(tmp_path, made_by):
    """At interpreter exit the package's handler has the engine let go of torch.distributed's
    group and destroys it, whether init_distributed or the script (an HF Trainer's accelerate)
    made it: Gloo's worker threads end while Python still runs (one that frees a Python tensor
    during finalization aborts the process). After it, the engine's collectives raise CommError
    instead of touching a group that is gone."""
    first = ["--torch_first"] if made_by == "the script" else []
    results = run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--", sys.executable,
                   os.path.join(HERE, "dist_worker.py"), *first, "--exit_release", "--out", f"{tmp_path}/result"],
                  tmp_path)
    check(results)
    for r in results:
        assert r["gloo_threads_before"] > 0 and r["gloo_threads_after"] == 0, r
        assert "released at interpreter exit" in r["error_after_release"], r

"""`python -m zerotrain.launcher` with standard output and error closed: Python has no
sys.stdout then, and the job runs as with /dev/null there (`zerotrain launch`, docs/launch.md)."""

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("closed", [(1, 2), (0, 1, 2)])
def test_launcher_with_closed_standard_descriptors(tmp_path, closed):
    def close_them():
        for fd in closed:
            os.close(fd)

    logs = tmp_path / "logs"
    proc = subprocess.run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--backend", "gloo",
                           "--log_dir", str(logs), "--", "sh", "-c", 'echo "out $RANK"; echo "err $RANK" >&2'],
                          preexec_fn=close_them, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0
    for rank in range(2):
        # Both streams of a rank reach its log; their order between streams is not kept.
        assert sorted((logs / f"rank{rank}.log").read_text().splitlines()) == [f"err {rank}", f"out {rank}"]

"""The package as installed, not as the build tree holds it: `cmake --install --component
python` (what scripts/setup.sh and pip run) into an empty prefix, then a world-2 job under
`python -m zerotrain.launcher` from that prefix alone. Catches a file the install leaves out
(the launcher's per-rank helper, the extension, the command the package carries)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import zerotrain

HERE = os.path.dirname(os.path.abspath(__file__))


def build_dir():
    # build/python/zerotrain/__init__.py in the build tree the tests run from
    return os.environ.get("ZEROTRAIN_BUILD_DIR") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(zerotrain.__file__))))


def test_installed_package_runs_a_world_2_job(tmp_path):
    cmake = shutil.which("cmake")
    if cmake is None or not os.path.exists(os.path.join(build_dir(), "CMakeCache.txt")):
        pytest.skip("needs cmake and the build tree (ZEROTRAIN_BUILD_DIR)")
    prefix = tmp_path / "site"
    subprocess.run([cmake, "--install", build_dir(), "--component", "python", "--prefix", str(prefix)], check=True,
                   capture_output=True)
    package = prefix / "zerotrain"
    for name in ("__init__.py", "_bin/zerotrain", "_bin/zerotrain-mpi-rank"):
        assert (package / name).exists(), f"the install has no zerotrain/{name}"
    assert not any(p.is_symlink() for p in package.rglob("*")), "the install links into the build tree"
    env = dict(os.environ, PYTHONPATH=str(prefix), OMP_NUM_THREADS="1")
    out = tmp_path / "result"
    proc = subprocess.run([sys.executable, "-m", "zerotrain.launcher", "--nproc_per_node", "2", "--", sys.executable,
                           os.path.join(HERE, "dist_worker.py"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for r in range(2):
        result = json.loads((tmp_path / f"result.rank{r}.json").read_text())
        assert result["steps"] == 1 and result["sum"] == 3.0
        assert result["module"].startswith(str(prefix)), f"rank {r} imported zerotrain from {result['module']}"

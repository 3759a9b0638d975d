"""The Python environments the peers run in.

- The pinned venv ($ZEROTRAIN_HOME/venv, made by scripts/setup.sh): the torch wheel zerotrain
  builds against, transformers, tokenizers; PyTorch's peers (DDP, FSDP2) and zerotrain's
  Python package run here.
- The DeepSpeed venv ($ZEROTRAIN_HOME/bench-venv), made on first use by ensure_ds_venv: a venv
  that sees the pinned venv's packages (a .pth file names its site-packages, so torch and
  transformers are the same files, not downloaded again) and adds deepspeed from PyPI. The
  pinned venv itself is left alone: CI runs the tests there, without DeepSpeed.
"""
import os
import subprocess
import sys

ZEROTRAIN_HOME = os.environ.get("ZEROTRAIN_HOME", os.path.expanduser("~/.cache/zerotrain"))
PINNED_PYTHON = os.path.join(ZEROTRAIN_HOME, "venv", "bin", "python")
DS_VENV = os.path.join(ZEROTRAIN_HOME, "bench-venv")
DS_PYTHON = os.path.join(DS_VENV, "bin", "python")
DS_LAUNCHER = os.path.join(DS_VENV, "bin", "deepspeed")
DEEPSPEED_VERSION = "0.19.8"
# zero_to_fp32.py writes through safetensors and shards with huggingface_hub: both usually
# come with the pinned venv (scripts/setup.sh pins safetensors; transformers brings the hub).
SAFETENSORS_VERSION = "0.8.0"
HUGGINGFACE_HUB_VERSION = "2.4.0"


def _purelib(python):
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def ensure_ds_venv():
    """The DeepSpeed venv's Python, made once per machine (the stamp says it is complete)."""
    stamp = os.path.join(DS_VENV, f".zerotrain-deepspeed-{DEEPSPEED_VERSION}-on-pinned-venv")
    if os.path.exists(stamp):
        return DS_PYTHON
    if not os.path.exists(PINNED_PYTHON):
        # an OSError, which gpu_train.py catches to go on without DeepSpeed
        raise FileNotFoundError(f"no {PINNED_PYTHON}: run scripts/setup.sh first")
    print(f"creating {DS_VENV} with deepspeed=={DEEPSPEED_VERSION} (once per machine)", file=sys.stderr)
    if not os.path.exists(DS_PYTHON):
        subprocess.run([PINNED_PYTHON, "-m", "venv", DS_VENV], check=True)
    # A .pth entry comes after the venv's own site-packages: what pip installs here wins.
    with open(os.path.join(_purelib(DS_PYTHON), "zz_pinned_venv.pth"), "w") as f:
        f.write(_purelib(PINNED_PYTHON) + "\n")
    subprocess.run([DS_PYTHON, "-m", "pip", "install", "-q", f"deepspeed=={DEEPSPEED_VERSION}"], check=True)
    subprocess.run([DS_PYTHON, "-c", "import torch, deepspeed"], check=True, env=dict(os.environ, DS_ACCELERATOR="cpu"))
    open(stamp, "w").close()
    return DS_PYTHON


def ensure_zero_to_fp32_deps():
    """What DeepSpeed's zero_to_fp32.py imports, installed into the DeepSpeed venv if missing."""
    python = ensure_ds_venv()
    if subprocess.run([python, "-c", "import safetensors, huggingface_hub"], capture_output=True).returncode != 0:
        subprocess.run([python, "-m", "pip", "install", "-q", f"safetensors=={SAFETENSORS_VERSION}",
                        f"huggingface_hub=={HUGGINGFACE_HUB_VERSION}"], check=True)
    return python

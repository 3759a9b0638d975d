"""deepspeed.comm, the part a training script calls: where this process is in its job, read
from the launcher's environment as the engine reads it (zerotrain launch, torchrun, the
deepspeed launcher, Slurm, mpirun), and init_distributed."""

import os

from .._ext import _C
from ..errors import ConfigError

_backend = None


def init_distributed(dist_backend=None, auto_mpi_discovery=True, distributed_port=29500, verbose=True,
                     timeout=None, init_method=None, dist_init_required=None, config=None, rank=-1, world_size=-1):
    """Checks the launcher's environment and records the backend. The engine joins the job
    when initialize runs (its rendezvous needs the config's "comm" block too)."""
    global _backend
    if dist_backend is not None:
        if dist_backend not in ("gloo", "mpi", "nccl", "ccl"):
            raise ConfigError(f"[config] init_distributed(dist_backend={dist_backend!r}): give \"gloo\", \"mpi\" or "
                              "\"nccl\"")
        _backend = "gloo" if dist_backend == "ccl" else dist_backend
        os.environ.setdefault("ZEROTRAIN_COMM_BACKEND", _backend)
    if rank >= 0 and world_size > 0:
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(world_size))
    _C.rendezvous_from_env()   # ConfigError naming the variable when the environment is inconsistent


def is_initialized():
    return True


def get_rank(group=None):
    return _C.rendezvous_from_env()["rank"]


def get_world_size(group=None):
    return _C.rendezvous_from_env()["world_size"]


def get_local_rank():
    return _C.rendezvous_from_env()["local_rank"]


def get_global_rank(group=None, group_rank=0):
    return group_rank

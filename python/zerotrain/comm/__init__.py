"""deepspeed.comm, the part a training script calls: where this process is in its job, read
from the launcher's environment as the engine reads it (zerotrain launch, torchrun, the
deepspeed launcher, Slurm, mpirun), and init_distributed, which makes torch.distributed
usable as DeepSpeed's does."""

import atexit
import datetime
import os

import torch

from .._ext import _C
from ..errors import ConfigError

_BACKENDS = ("gloo", "mpi", "nccl", "ccl")


def _share_torch_store():
    """torch.distributed's default store, when it is the TCP store at MASTER_ADDR:MASTER_PORT
    served by rank 0's process, is where the engine meets the other ranks too: it connects to
    it instead of serving a second one on the same port."""
    if not torch.distributed.is_initialized():
        return
    store = torch.distributed.distributed_c10d._get_default_store()
    while isinstance(store, torch.distributed.PrefixStore):   # the default group's prefixes
        store = store.underlying_store
    port = _C.rendezvous_from_env()["master_port"]   # MASTER_PORT as the engine reads it (0: none)
    if isinstance(store, torch.distributed.TCPStore) and port and store.port == port:
        os.environ["ZEROTRAIN_STORE_SERVED"] = "1"


_exit_handler = {"registered": False, "destroy": False}
# Run at exit before the group is released, while it still works: the engine's publishing of
# the checkpoints still being written in the background (runtime/engine.py adds it).
_before_release = []


def _release_at_exit():
    """At interpreter exit, before Python finalizes: the engines let go of torch.distributed's
    group, and the group is destroyed, so that its worker threads end now: the group
    init_distributed made, and the script's own (an HF Trainer's, made by accelerate) when an
    engine ran on it, since the script is done with it by then. Left for finalization, a Gloo worker thread that frees the last reference to a Python
    tensor (one of the script's own collectives, such as the Trainer's gathers) wants the GIL
    after Python has stopped giving it, and the process aborts ("terminate called without an
    active exception") after the script succeeded. Checkpoints still being written in the
    background are published first: that takes the group."""
    try:
        for work in _before_release:
            work()
    finally:
        _C.release_adopted_groups()
        if _exit_handler["destroy"] and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _release_group_at_exit(destroy=False):
    _exit_handler["destroy"] = _exit_handler["destroy"] or destroy
    if not _exit_handler["registered"]:
        _exit_handler["registered"] = True
        atexit.register(_release_at_exit)


def _adoptable_group(config, device):
    """The script's torch.distributed default group and its store, for the engine to run its
    collectives on (no second group), or (None, None) for the engine's own group. The engine
    decides (_C.reason_to_open_own_group: a backend the job names, a group of another job, a
    group with no backend for `device`), and its reason goes to the engine's log."""
    if not torch.distributed.is_initialized():
        return None, None
    group = torch.distributed.distributed_c10d._get_default_group()
    reason = _C.reason_to_open_own_group(group, device, config)
    if reason is not None:
        if _C.rendezvous_from_env()["rank"] == 0:
            _C.log_info(f"comm: the engine opens its own process group: {reason}")
        return None, None
    _release_group_at_exit(destroy=True)
    return group, torch.distributed.distributed_c10d._get_default_store()


def init_distributed(dist_backend=None, auto_mpi_discovery=True, distributed_port=29500, verbose=True,
                     timeout=datetime.timedelta(minutes=30), init_method=None, dist_init_required=None, config=None,
                     rank=-1, world_size=-1):
    """Checks the launcher's environment and, in a job of more than one process, initialises
    torch.distributed (gloo; nccl where GPUs are) unless the script did, so that its own
    torch.distributed calls work. The engine then runs its collectives on that group
    (_adoptable_group). A single process with no launcher environment needs neither."""
    if dist_backend is not None and dist_backend not in _BACKENDS:
        raise ConfigError(f"init_distributed(dist_backend={dist_backend!r}): give \"gloo\", \"mpi\" or "
                          "\"nccl\"")
    if rank >= 0 and world_size > 0:
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(world_size))
    where = _C.rendezvous_from_env()   # ConfigError naming the variable when the environment is inconsistent
    if dist_init_required is False or torch.distributed.is_initialized():
        _share_torch_store()
        return
    if where["world_size"] == 1 or not where["master_addr"] or not where["master_port"]:
        return   # one process, or mpirun without MASTER_ADDR: the engine's own backend only
    backend = dist_backend if dist_backend in ("gloo", "nccl", "mpi") else \
        ("nccl" if torch.cuda.is_available() else "gloo")
    os.environ.setdefault("LOCAL_RANK", str(where["local_rank"]))
    if init_method is None and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        torch.distributed.init_process_group(backend=backend, store=_job_store(where, timeout),
                                             rank=where["rank"], world_size=where["world_size"], timeout=timeout)
    else:   # the script's rendezvous, or torchrun's agent serving the store: theirs
        torch.distributed.init_process_group(backend=backend, init_method=init_method or "env://",
                                             rank=where["rank"], world_size=where["world_size"], timeout=timeout)
    _release_group_at_exit(destroy=True)
    _share_torch_store()


def _job_store(where, timeout):
    """The store at MASTER_ADDR:MASTER_PORT as the engine makes its own (docs/launch.md,
    "Network exposure"): rank 0 serves it on MASTER_ADDR's address only, where env:// would
    listen on every interface, and every rank checks that it is this job's
    (ZEROTRAIN_JOB_TOKEN) before torch.distributed writes anything there."""
    host, port, rank = where["master_addr"], where["master_port"], where["rank"]
    listen_fd = None
    if rank == 0:
        listen_fd, port = _C.listen_for_store(host, port, where["local_world_size"] < where["world_size"])
    store = torch.distributed.TCPStore(host, port, where["world_size"], rank == 0, timeout,
                                       wait_for_workers=False, master_listen_fd=listen_fd)
    _C.check_job_token(store, rank, timeout.total_seconds())
    return store


def is_initialized():
    return torch.distributed.is_initialized() or _C.rendezvous_from_env()["world_size"] == 1


def get_rank(group=None):
    return _C.rendezvous_from_env()["rank"]


def get_world_size(group=None):
    return _C.rendezvous_from_env()["world_size"]


def get_local_rank():
    return _C.rendezvous_from_env()["local_rank"]


def get_global_rank(group=None, group_rank=0):
    return group_rank


def barrier(group=None):
    if torch.distributed.is_initialized():
        torch.distributed.barrier(group)

"""One rank of a job started by another launcher (torchrun), or whose script initialised
torch.distributed itself first (--torch_first): the engine runs its collectives on
torch.distributed's group (or, with --own_group, on its own group over the same store), and
torch.distributed works beside it."""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

import zerotrain as deepspeed  # noqa: E402


def gloo_threads():
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    return sum(1 for n in names if n == "pt_gloo_runloop")


def exit_release(engine, x, y, world, rank):
    from zerotrain.comm import _release_at_exit
    from zerotrain.errors import CommError
    before = gloo_threads()
    _release_at_exit()
    after = gloo_threads()
    try:
        loss = engine(*models.micro_batch(x, y, 0, world, 1, 2, rank, 0))
        engine.backward(loss)
        engine.step()
        error = ""
    except CommError as e:
        error = str(e)
    return {"gloo_threads_before": before, "gloo_threads_after": after, "error_after_release": error}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch_first", action="store_true")
    ap.add_argument("--own_group", action="store_true", help="the config names a backend: the engine opens its own")
    ap.add_argument("--exit_release", action="store_true",
                    help="then run the package's exit handler by hand: Gloo's threads must be gone after it, and "
                         "the engine's next collective must raise CommError")
    ap.add_argument("--out", required=True)
    ap.add_argument("--local_rank", type=int, default=-1, help="given by the launcher, as DeepSpeed's does")
    args = ap.parse_args()
    if args.torch_first:
        dist.init_process_group("gloo")
    world = int(os.environ["WORLD_SIZE"])
    cfg = models.config(2, 1, 2, world)
    if args.own_group:
        cfg["comm"] = {"backend": "gloo"}
    engine, *_ = deepspeed.initialize(model=models.build("toy"), config=cfg)
    rank = engine.global_rank
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)   # torch.distributed works beside the engine
    x, y = models.batches(2 * world)
    loss = engine(*models.micro_batch(x, y, 0, world, 1, 2, rank, 0))
    engine.backward(loss)
    engine.step()
    # Where the rendezvous store listens (tests/mp/listening_sockets.py: "ADDRESS PORT - REACH").
    import subprocess
    sockets = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mp", "listening_sockets.py")
    store = subprocess.run([sys.executable, sockets, "--port", os.environ["MASTER_PORT"]], capture_output=True,
                           text=True, check=True).stdout.split("\n")
    released = exit_release(engine, x, y, world, rank) if args.exit_release else {}
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump({**released, "rank": rank, "sum": t.item(), "steps": engine.global_steps,
                   "norm": engine.get_global_grad_norm(),
                   "backend": engine._engine.backend(), "module": deepspeed.__file__,
                   "store_listens": [line for line in store if line]}, f)


if __name__ == "__main__":
    main()

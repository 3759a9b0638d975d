"""One rank of a parity run: a DeepSpeed training script with `import zerotrain as
deepspeed`. Writes this rank's per-step losses (mean over its micro-steps), the engine's
gradient norms, and on rank 0 the final weights (gathered) to --out."""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import worker_batch  # noqa: E402

import zerotrain as deepspeed  # noqa: E402


def evaluate(engine, name):
    """What a script does between training runs: eval mode, no autograd, then train mode again."""
    engine.eval()
    x, y = models.batches(4, seed=7)
    with torch.no_grad():
        result = {"eval_loss": engine(x, y).item()}
        if isinstance(engine.module, models.HFWrapper):
            result["generated"] = engine.module.lm.generate(x[:2, :3], max_new_tokens=5, do_sample=False,
                                                             pad_token_id=0).tolist()
    engine.train()
    return result


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="toy")
    ap.add_argument("--stage", type=int, default=0)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--micro", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--save", default=None, help="save a checkpoint here at the end")
    ap.add_argument("--load", default=None, help="load this checkpoint first, then train --steps more")
    ap.add_argument("--async_save", action="store_true",
                    help="checkpoint.async_save; the script never waits for it (its end publishes it)")
    ap.add_argument("--start_step", type=int, default=0, help="the global step the data starts at")
    ap.add_argument("--evaluate", action="store_true",
                    help="after training: a torch.no_grad() evaluation loss, and for transformers models a greedy "
                         "model.generate(), both through the engine's module (gathered per unit at stage 3)")
    deepspeed.add_config_arguments(ap)
    args = ap.parse_args(argv)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    model = models.build(args.model)
    cfg = models.config(args.stage, args.accum, args.micro, world, args.dtype)
    if args.async_save:
        cfg["checkpoint"] = {"async_save": True}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    if args.load:
        path, client = engine.load_checkpoint(args.load)
        assert path is not None, "nothing loaded"
    total_steps = args.start_step + args.steps
    x, y = models.batches(total_steps * world * args.accum * args.micro)
    losses, norms = [], []
    for s in range(args.start_step, total_steps):
        step_loss = 0.0
        for a in range(args.accum):
            bx, by = models.micro_batch(x, y, s, world, args.accum, args.micro, rank, a)
            loss = engine(bx, by)
            engine.backward(loss)
            engine.step()
            step_loss += loss.item() / args.accum
        losses.append(step_loss)
        norms.append(engine.get_global_grad_norm())
    if args.save:
        engine.save_checkpoint(args.save, client_state={"losses": losses})
    evaluated = evaluate(engine, args.model) if args.evaluate else {}
    state = {}
    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        if rank == 0:
            state = {k: v.detach().float().tolist() for k, v in model.state_dict().items()}
    result = {"rank": rank, "world": world, "losses": losses, "norms": norms, "state": state,
              "global_steps": engine.global_steps, "micro_steps": engine.micro_steps,
              "global_samples": engine.global_samples, "stage": engine.zero_optimization_stage(),
              "state_bytes": engine.model_state_bytes(), **evaluated}
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    worker_batch.run(main)

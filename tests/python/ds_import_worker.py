"""One rank resuming from a DeepSpeed checkpoint that `zerotrain checkpoint import-deepspeed`
converted: the model, config and batches of tests/data/deepspeed/make_checkpoints.py, under
`import zerotrain as deepspeed`. Writes the losses of the steps after the checkpoint to --out."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data", "deepspeed"))

import make_checkpoints as ds_case  # noqa: E402
import worker_batch  # noqa: E402
import zerotrain as deepspeed  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, help="the DeepSpeed case folder (its expected.json)")
    ap.add_argument("--load", required=True, help="the imported checkpoint")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    expected = json.load(open(os.path.join(args.case, "expected.json")))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    model = ds_case.make_model(expected.get("frozen_names", ()))
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=expected["config"])
    path, _ = engine.load_checkpoint(args.load)
    assert path is not None, "nothing loaded"
    losses = []
    for step in range(ds_case.STEPS, ds_case.STEPS + len(expected["resumed_losses"])):
        loss = ds_case.loss_of(engine, ds_case.batch(step, rank, world, expected["dtype"]))
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump({"rank": rank, "losses": losses, "global_steps": engine.global_steps}, f)


if __name__ == "__main__":
    worker_batch.run(main)

"""A DeepSpeed training script, as DeepSpeed's tutorials write it, for a GPT-2 built from a
small config (nothing downloaded). The one change for zerotrain is the import.

    zerotrain launch --nproc_per_node 2 -- python examples/python/train_gpt2.py \
        --deepspeed --deepspeed_config examples/python/ds_config_zero3.json
"""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import zerotrain as deepspeed   # was: import deepspeed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--save_dir", default="runs/python-gpt2")
    parser.add_argument("--local_rank", type=int, default=-1, help="local rank passed from distributed launcher")
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()

    deepspeed.init_distributed()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=1024, n_positions=64, n_embd=128, n_layer=4, n_head=4, bos_token_id=0,
                        eos_token_id=0)
    model = GPT2LMHeadModel(config)
    engine, optimizer, _, scheduler = deepspeed.initialize(args=args, model=model,
                                                           model_parameters=model.parameters())
    rank = engine.global_rank
    batch = engine.train_micro_batch_size_per_gpu()
    g = torch.Generator().manual_seed(1000 + rank)
    for step in range(args.steps * engine.gradient_accumulation_steps()):
        # Sequences that count up from a random start: learnable, so the loss falls.
        start = torch.randint(0, config.vocab_size, (batch, 1), generator=g)
        tokens = (start + torch.arange(64)) % config.vocab_size
        loss = engine(input_ids=tokens, labels=tokens).loss
        engine.backward(loss)
        boundary = engine.is_gradient_accumulation_boundary()   # this micro-step ends a step
        engine.step()
        if boundary and rank == 0 and engine.global_steps % 5 == 0:
            print(f"step {engine.global_steps}: loss {loss.item():.4f}, lr {engine.get_lr()[0]:.2e}, "
                  f"grad norm {engine.get_global_grad_norm():.3f}", flush=True)
    engine.save_checkpoint(args.save_dir)
    if rank == 0:
        print(f"saved {args.save_dir}/global_step{engine.global_steps}")


if __name__ == "__main__":
    main()

"""One run of bench/hf_trainer_worker.py, the Hugging Face Trainer script that
bench/hf_trainer.py and bench/finetune_cli.py time: with DeepSpeed under its own launcher
(`deepspeed --num_gpus N`, DS_ACCELERATOR=cpu, from the DeepSpeed venv), or with zerotrain
under `python -m zerotrain.launcher` (the pinned venv, the build tree's package)."""
import json
import os
import subprocess

from lib.peer_envs import DS_LAUNCHER, PINNED_PYTHON
from lib.ports import free_port
from lib.procs import error_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, "bench", "hf_trainer_worker.py")
WORLD = 2
GPT2_SIZES = {   # GPT-2's layout: "124m" is GPT2Config's defaults, "small" a smoke-test size
    "124m": dict(n_layer=12, n_embd=768, n_head=12),
    "small": dict(n_layer=2, n_embd=128, n_head=4),
}


def trainer_ds_config(stage, gather_on_save):
    """A Trainer user's ds_config: every value the Trainer knows is "auto"."""
    return {
        "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "optimizer": {"type": "AdamW",
                      "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupDecayLR",
                      "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto",
                                 "total_num_steps": "auto"}},
        "zero_optimization": {"stage": stage, "stage3_gather_16bit_weights_on_model_save": gather_on_save},
        "steps_per_print": 1_000_000,
    }


def run_worker(impl, stage, args, base, tokenizer_dir, final_dir, extra=()):
    """One run of bench/hf_trainer_worker.py on WORLD ranks under `impl`'s launcher, in `base`:
    each rank's result, or {"error"}. The final step is each framework's route to a folder:
    save_model for zerotrain (gathering the weights), the ZeRO checkpoint for DeepSpeed.
    args: model_size, steps, warmup, micro, seq."""
    config = os.path.join(base, "ds_config.json")
    with open(config, "w") as f:   # zerotrain's route to the folder gathers the weights on save
        json.dump(trainer_ds_config(stage, gather_on_save=impl == "zerotrain"), f, indent=1)
    worker = [WORKER, "--impl", impl, "--ds-config", config, "--tokenizer-dir", tokenizer_dir,
              "--model-size", args.model_size, "--steps", str(args.steps), "--warmup", str(args.warmup),
              "--micro", str(args.micro), "--seq", str(args.seq),
              "--final", "zero_checkpoint" if impl == "deepspeed" else "save_model", "--final-dir", final_dir,
              "--work-dir", os.path.join(base, "work"), "--out", os.path.join(base, "result"), *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    if impl == "deepspeed":
        env["DS_ACCELERATOR"] = "cpu"
        cmd = [DS_LAUNCHER, "--num_gpus", str(WORLD), "--master_port", str(free_port()), *worker]
    else:
        env["PYTHONPATH"] = os.path.join(ROOT, "build", "python")
        cmd = [PINNED_PYTHON, "-m", "zerotrain.launcher", "--nproc_per_node", str(WORLD), "--", PINNED_PYTHON,
               *worker]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    with open(os.path.join(base, "log.txt"), "w") as f:
        f.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return {"error": error_of(proc)}
    return [json.load(open(os.path.join(base, f"result.rank{r}.json"))) for r in range(WORLD)]

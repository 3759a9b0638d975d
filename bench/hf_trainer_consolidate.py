"""DeepSpeed's route from a ZeRO checkpoint to a Hugging Face folder, as its documentation
gives it, run as its own process by bench/hf_trainer.py: zero_to_fp32 gathers the fp32
weights from every rank's shards, the model takes them, save_pretrained writes the folder
(with the tokenizer the training script left next to the checkpoint). Writes its peak RSS as JSON to --out.

    python bench/hf_trainer_consolidate.py CHECKPOINT_DIR OUTPUT_DIR --out FILE
"""

import argparse
import json
import resource


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint_dir", help="holds `latest`, global_step*/, config.json and the tokenizer")
    ap.add_argument("output_dir")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from deepspeed.utils.zero_to_fp32 import load_state_dict_from_zero_checkpoint
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(args.checkpoint_dir))
    model = load_state_dict_from_zero_checkpoint(model, args.checkpoint_dir)
    model.save_pretrained(args.output_dir)
    AutoTokenizer.from_pretrained(args.checkpoint_dir).save_pretrained(args.output_dir)
    with open(args.out, "w") as f:
        json.dump({"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}, f)


if __name__ == "__main__":
    main()

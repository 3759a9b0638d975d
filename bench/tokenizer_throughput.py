"""Tokenizer throughput: zerotrain's tokenizer.json encode (bench/tokenizer_throughput.cpp)
against the tokenizers package's, on one core, on the King James Bible line by line, with the
same tokenizer file: GPT-2-, Llama-3- and Llama-2-style tokenizers trained here
(bench/lib/tokenizer_styles.py). Each round runs the two, which goes first alternating with
the round; each run loads the tokenizer afresh (an empty word cache) and times the encode
only. Prints a Markdown table of the medians.

    python bench/tokenizer_throughput.py --build build [--rounds 3] [--vocab 16000]

Needs the Debian packages bible-kjv-text and bible-kjv, and the tokenizers package; the
tokenizers are trained here, offline. docs/benchmarks.md has the figures."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"   # one core for the package too
os.environ.setdefault("RAYON_NUM_THREADS", "1")

from tokenizers import Tokenizer  # noqa: E402

from lib.cpu import cpu_line  # noqa: E402
from lib.rounds import run_rounds  # noqa: E402
from lib.stats import median  # noqa: E402
from lib.tokenizer_styles import BUILDERS  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "hf"))
import kjv_data  # noqa: E402


NAMES = {"gpt2": "GPT-2-style byte-level BPE", "llama3": "Llama-3-style byte-level BPE",
         "llama2": "Llama-2-style BPE with byte fallback"}


def python_round(tokenizer_file, lines, text_bytes):
    tok = Tokenizer.from_file(tokenizer_file)
    start = time.perf_counter()
    encodings = tok.encode_batch(lines, add_special_tokens=False)
    seconds = time.perf_counter() - start
    return text_bytes / seconds / 1e6, sum(len(e.ids) for e in encodings)


def cpp_round(binary, directory, text_file):
    out = subprocess.run([binary, directory, text_file], check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    return result["mb_per_s"], result["tokens"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=16000)
    args = parser.parse_args()
    binary = os.path.join(args.build, "bench", "tokenizer_throughput")
    text = kjv_data.kjv_text()
    lines = text.split("\n")
    text_bytes = sum(len(line.encode("utf-8")) for line in lines)
    print(f"CPU: {cpu_line()}; text: the KJV, {len(lines)} lines, {text_bytes / 1e6:.2f} MB; vocabulary {args.vocab}; "
          f"median of {args.rounds} rounds\n")
    print("| tokenizer | zerotrain MB/s | tokenizers MB/s | ratio |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "kjv.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        for style in ("gpt2", "llama3", "llama2"):
            directory = os.path.join(tmp, style)
            os.makedirs(directory)
            tokenizer_file = os.path.join(directory, "tokenizer.json")
            BUILDERS[style](text, args.vocab).save(tokenizer_file)
            sides = {"zerotrain": lambda: cpp_round(binary, directory, text_file),
                     "tokenizers": lambda: python_round(tokenizer_file, lines, text_bytes)}

            def same_tokens(r, got):   # (MB/s, tokens) per side
                if got["zerotrain"][1] != got["tokenizers"][1]:
                    sys.exit(f"{style}: zerotrain made {got['zerotrain'][1]} tokens, tokenizers "
                             f"{got['tokenizers'][1]}")
            runs = run_rounds(args.rounds, list(sides), lambda side, r: sides[side](), end_round=same_tokens)
            a, b = (median(mb_s for mb_s, _ in runs[side]) for side in sides)
            print(f"| {NAMES[style]} | {a:.2f} | {b:.2f} | {a / b:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

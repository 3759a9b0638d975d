"""The King James Bible, tokenised, for the Hugging Face examples, tests and benchmarks.

    kjv_text()                              the whole text (4.3 MB of ASCII English)
    train_kjv_tokenizer(save_dir)           a byte-level BPE tokenizer trained on it
    KjvBlocks(tokenizer, "train")           fixed-length blocks of token ids (a torch Dataset)
    kjv_hf_dataset(tokenizer, "train")      the same blocks as a datasets.Dataset

The text comes from the Debian packages bible-kjv-text (the text) and bible-kjv (the `bible`
program that prints it), as `zerotrain train --dataset kjv` reads it, and is split the same
way: the last 10% of the bytes are held out for evaluation. Each split is tokenised on its
own, so no block crosses the boundary.

Plain module, no zerotrain import: the DeepSpeed side of the benchmarks imports it too.
"""

import hashlib
import os
import subprocess

import numpy as np

EOS = "<|endoftext|>"   # GPT-2's end-of-text token; also BOS and padding (the corpus is one document)
DEFAULT_VOCAB_SIZE = 8192   # the KJV has ~13k distinct words; 8k merges cover the frequent ones
TOKENIZER_FILE = "tokenizer.json"
MIN_TEXT_BYTES = 4_000_000   # the whole Bible is 4.3 MB; much less means `bible` printed something else
_INSTALL = "install them with `apt-get install bible-kjv-text bible-kjv`, or run `bash scripts/setup.sh`"
_PASSAGE = "Gen1:1-Rev22:21"


class KjvUnavailableError(OSError):
    """The packages that provide the text are missing or broken; the message says how to fix it."""


def kjv_text(program="bible", data_dir="/usr/lib"):
    """The whole King James Bible as `bible -l79 -p DATA_DIR Gen1:1-Rev22:21` prints it. The
    fixed line width keeps the text (and so every token and block) the same whatever the
    terminal's COLUMNS."""
    data = os.path.join(data_dir, "bible.data")
    if not os.path.isfile(data):
        raise KjvUnavailableError(f"[io] the King James Bible's text ({data}, Debian package bible-kjv-text) "
                                  f"is missing; {_INSTALL}")
    try:
        proc = subprocess.run([program, "-l79", "-p", data_dir, _PASSAGE], stdin=subprocess.DEVNULL,
                              capture_output=True)
    except OSError as e:
        raise KjvUnavailableError(f"[io] cannot run `{program}`, the program that prints the King James Bible "
                                  f"(Debian package bible-kjv): {e.strerror}; {_INSTALL}") from e
    if proc.returncode != 0:
        how = f"exit status {proc.returncode}" if proc.returncode > 0 else f"killed by signal {-proc.returncode}"
        err = proc.stderr.decode(errors="replace")[:500].rstrip()
        raise KjvUnavailableError(f"[io] `{program} {_PASSAGE}` failed ({how}{': ' + err if err else ''}); "
                                  f"reinstall the packages bible-kjv-text and bible-kjv: {_INSTALL}")
    if len(proc.stdout) <= MIN_TEXT_BYTES:
        raise KjvUnavailableError(f"[io] `{program} {_PASSAGE}` printed only {len(proc.stdout)} bytes, not the "
                                  f"whole King James Bible (4.3 MB); reinstall bible-kjv-text and bible-kjv: "
                                  f"{_INSTALL}")
    return proc.stdout.decode("ascii")


def _check_split(split):
    if split not in ("train", "eval"):
        raise ValueError(f"[usage] split must be 'train' or 'eval', not {split!r}")


def split_text(text, split):
    """`split` ("train" or "eval") of `text`: eval is the last floor(n / 10) characters (bytes:
    the text is ASCII), as the C++ text datasets split."""
    _check_split(split)
    train_chars = len(text) - len(text) // 10
    return text[:train_chars] if split == "train" else text[train_chars:]


def _wrap(tokenizer_file):
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=tokenizer_file, bos_token=EOS, eos_token=EOS, pad_token=EOS,
                                   model_max_length=1024)


def _write_atomically(path, write):
    """Ranks that start together may all build the same file: each writes a temporary file
    and renames it, so a reader never sees half of one."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def train_kjv_tokenizer(save_dir, vocab_size=DEFAULT_VOCAB_SIZE, text=None):
    """A byte-level BPE tokenizer (GPT-2's pre-tokenisation and decoder) trained on the whole
    KJV text, saved as save_dir/tokenizer.json, returned as a transformers
    PreTrainedTokenizerFast with <|endoftext|> as its eos, bos and pad token. A tokenizer.json
    already in save_dir with this vocabulary size is reused. Training is deterministic (the
    same text and vocabulary size give the same file) and takes about 2 s."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    os.makedirs(save_dir, exist_ok=True)
    path = os.path.join(save_dir, TOKENIZER_FILE)
    if os.path.isfile(path) and Tokenizer.from_file(path).get_vocab_size() == vocab_size:
        return _wrap(path)
    text = kjv_text() if text is None else text
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    # Line by line: the pre-tokeniser's words never span a line break anyway, and lines let
    # the trainer count words in parallel.
    lines = text.splitlines(keepends=True)
    tokenizer.train_from_iterator(lines, trainer=trainer, length=len(lines))
    _write_atomically(path, tokenizer.save)
    return _wrap(path)


def _as_tokenizer(tokenizer):
    """(tokenizer, the directory it was saved in or None) from a tokenizer or a directory."""
    if isinstance(tokenizer, (str, os.PathLike)):
        directory = os.fspath(tokenizer)
        path = os.path.join(directory, TOKENIZER_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"[io] {path} does not exist; make it with train_kjv_tokenizer({directory!r})")
        return _wrap(path), directory
    return tokenizer, None


def kjv_token_ids(tokenizer, split, cache_dir=None):
    """The token ids of `split` (int64 numpy array). Encoding the whole text takes seconds, so
    with a cache_dir both splits are kept there, in a file named after the tokenizer's hash."""
    _check_split(split)
    backend = tokenizer.backend_tokenizer
    cache = None
    if cache_dir is not None:
        digest = hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]
        cache = os.path.join(cache_dir, f"kjv-ids-{digest}.npz")
        if os.path.isfile(cache):
            with np.load(cache) as ids:
                return ids[split].astype(np.int64)
    text = kjv_text()
    # The backend directly: the wrapper would warn that the text is longer than model_max_length.
    ids = {s: np.asarray(backend.encode(split_text(text, s), add_special_tokens=False).ids, dtype=np.int32)
           for s in ("train", "eval")}
    if cache is not None:
        os.makedirs(cache_dir, exist_ok=True)

        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez(f, **ids)
        _write_atomically(cache, write)
    return ids[split].astype(np.int64)


def kjv_blocks(tokenizer, split="train", block_size=128, limit=None, cache_dir=None):
    """(blocks, block_size) int64 numpy array: consecutive, non-overlapping runs of the split's
    tokens (the tail shorter than a block is dropped); the first `limit` blocks when given.
    `tokenizer`: a tokenizer, or the directory train_kjv_tokenizer saved one in (then also the
    default cache_dir)."""
    tokenizer, directory = _as_tokenizer(tokenizer)
    if block_size < 1:
        raise ValueError(f"[usage] block_size must be at least 1, not {block_size}")
    ids = kjv_token_ids(tokenizer, split, cache_dir if cache_dir is not None else directory)
    blocks = len(ids) // block_size
    if limit is not None:
        blocks = min(blocks, int(limit))
    return ids[:blocks * block_size].reshape(blocks, block_size)


try:
    from torch.utils.data import Dataset as _TorchDataset
except ImportError:   # torch is only needed for KjvBlocks
    _TorchDataset = object


class KjvBlocks(_TorchDataset):
    """Blocks of `block_size` token ids of one split, as a causal LM takes them:
    {"input_ids": LongTensor[block_size], "labels": the same} (the model shifts the labels)."""

    def __init__(self, tokenizer, split="train", block_size=128, limit=None, cache_dir=None):
        import torch
        self.blocks = torch.from_numpy(kjv_blocks(tokenizer, split, block_size, limit, cache_dir))

    def __len__(self):
        return self.blocks.shape[0]

    def __getitem__(self, index):
        ids = self.blocks[index]
        return {"input_ids": ids, "labels": ids.clone()}


def kjv_hf_dataset(tokenizer, split="train", block_size=128, limit=None, cache_dir=None):
    """The same blocks as KjvBlocks, as a datasets.Dataset with columns input_ids and labels in
    torch format (int64 tensors)."""
    import datasets
    blocks = kjv_blocks(tokenizer, split, block_size, limit, cache_dir)
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int64")),
                                  "labels": datasets.Sequence(datasets.Value("int64"))})
    rows = blocks.tolist()
    return datasets.Dataset.from_dict({"input_ids": rows, "labels": rows}, features=features).with_format("torch")

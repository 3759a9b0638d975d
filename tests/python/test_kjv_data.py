"""examples/hf/kjv_data.py: the tokenised King James Bible that the Hugging Face examples,
tests and benchmarks train on. The text needs the Debian packages bible-kjv-text and
bible-kjv (scripts/setup.sh installs them)."""

import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "hf"))
import kjv_data  # noqa: E402

VOCAB = 2048   # smaller than the default: quicker to train, the same code
VERSE = "  1 In the beginning God created the heaven and the earth.\n"


def bible_installed():
    return os.path.isfile("/usr/lib/bible.data") and shutil.which("bible") is not None


needs_bible = pytest.mark.skipif(not bible_installed(),
                                 reason="the Debian packages bible-kjv-text and bible-kjv are not installed")


@pytest.fixture(scope="module")
def text():
    return kjv_data.kjv_text()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, text):
    directory = str(tmp_path_factory.mktemp("kjv-tokenizer"))
    kjv_data.train_kjv_tokenizer(directory, vocab_size=VOCAB, text=text)
    return directory


def test_missing_data_names_the_packages(tmp_path):
    with pytest.raises(kjv_data.KjvUnavailableError) as e:
        kjv_data.kjv_text(data_dir=str(tmp_path))
    assert "package bible-kjv-text" in str(e.value)
    assert "apt-get install bible-kjv-text bible-kjv" in str(e.value)
    assert "bash scripts/setup.sh" in str(e.value)


def test_missing_program_names_the_packages(tmp_path):
    (tmp_path / "bible.data").write_bytes(b"\1\2\3")
    with pytest.raises(kjv_data.KjvUnavailableError) as e:
        kjv_data.kjv_text(program="zerotrain-test-no-such-bible", data_dir=str(tmp_path))
    assert "cannot run `zerotrain-test-no-such-bible`" in str(e.value)
    assert "package bible-kjv)" in str(e.value)
    assert "apt-get install bible-kjv-text bible-kjv" in str(e.value)


@needs_bible
def test_whole_text_and_split(text):
    assert text.startswith("\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.\n")
    assert text.rstrip().endswith("The grace of our Lord Jesus Christ be with you all. Amen.")
    train, held_out = kjv_data.split_text(text, "train"), kjv_data.split_text(text, "eval")
    assert train + held_out == text and len(held_out) == len(text) // 10


@needs_bible
def test_tokenizer_is_deterministic_and_reused(tmp_path, tokenizer_dir, text):
    again = str(tmp_path / "again")
    kjv_data.train_kjv_tokenizer(again, vocab_size=VOCAB, text=text)
    first = open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb").read()
    assert open(os.path.join(again, "tokenizer.json"), "rb").read() == first
    # An existing tokenizer.json of this size is loaded, not trained again (the text is not even read).
    reused = kjv_data.train_kjv_tokenizer(tokenizer_dir, vocab_size=VOCAB, text="not the Bible")
    assert len(reused) == VOCAB
    assert open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb").read() == first


@needs_bible
def test_verse_round_trip_and_special_tokens(tmp_path, tokenizer_dir):
    tok = kjv_data.train_kjv_tokenizer(tokenizer_dir, vocab_size=VOCAB)
    assert len(tok) == VOCAB
    assert tok.eos_token == tok.bos_token == tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    ids = tok(VERSE)["input_ids"]
    assert 5 < len(ids) < len(VERSE) // 2   # BPE merged the common words
    assert tok.decode(ids) == VERSE
    # It sits next to a model: save_pretrained, then AutoTokenizer gives the same tokens.
    from transformers import AutoTokenizer
    tok.save_pretrained(str(tmp_path / "model"))
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "model"))
    assert loaded(VERSE)["input_ids"] == ids and loaded.eos_token_id == tok.eos_token_id


@needs_bible
def test_blocks_cover_the_split_in_order(tokenizer_dir, text):
    import torch
    train = kjv_data.KjvBlocks(tokenizer_dir, "train", block_size=64, limit=300)
    assert len(train) == 300
    item = train[7]
    assert item["input_ids"].shape == (64,) and item["input_ids"].dtype == torch.long
    assert torch.equal(item["labels"], item["input_ids"])
    tok = kjv_data.train_kjv_tokenizer(tokenizer_dir, vocab_size=VOCAB)
    decoded = tok.decode(train.blocks.flatten().tolist())
    assert kjv_data.split_text(text, "train").startswith(decoded)
    held_out = kjv_data.KjvBlocks(tokenizer_dir, "eval", block_size=64)
    assert kjv_data.split_text(text, "eval").startswith(tok.decode(held_out.blocks.flatten().tolist()))
    whole_train = kjv_data.KjvBlocks(tokenizer_dir, "train", block_size=64)
    assert 8 * len(held_out) < len(whole_train) < 10 * len(held_out)   # the 90/10 split, in tokens
    with pytest.raises(ValueError, match="split must be"):
        kjv_data.KjvBlocks(tokenizer_dir, "test")


@needs_bible
def test_hf_dataset_equals_torch_dataset(tokenizer_dir):
    pytest.importorskip("datasets")
    import torch
    blocks = kjv_data.KjvBlocks(tokenizer_dir, "eval", block_size=32, limit=200)
    ds = kjv_data.kjv_hf_dataset(tokenizer_dir, "eval", block_size=32, limit=200)
    assert len(ds) == len(blocks) == 200 and set(ds.column_names) == {"input_ids", "labels"}
    for i in (0, 1, 199):
        for key in ("input_ids", "labels"):
            assert ds[i][key].dtype == torch.long
            assert torch.equal(ds[i][key], blocks[i][key])

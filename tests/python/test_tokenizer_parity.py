"""zerotrain's tokenizer.json reader (zerotrain/text) against the tokenizers package: the same
ids, with and without special tokens, and the same decoded text, for four tokenizers built
offline in the styles of GPT-2, Llama 3, Qwen2 and Llama 2, on the King James Bible, an
adversarial Unicode list and the project's own docs. tests/support/tokenize_main.cpp is the
C++ side (the zt_tokenize binary)."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,  # noqa: E402
                        processors, trainers)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "hf"))
import kjv_data  # noqa: E402

BUILD = os.environ.get("ZEROTRAIN_BUILD_DIR", os.path.join(ROOT, "build"))
ZT_TOKENIZE = os.path.join(BUILD, "tests", "zt_tokenize")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 3000
TRAIN_BYTES = 400_000   # of the KJV: training stays a few seconds on 2 cores

pytestmark = pytest.mark.skipif(not (os.path.isfile("/usr/lib/bible.data") and shutil.which("bible")),
                                reason="the Debian packages bible-kjv-text and bible-kjv are not installed")


def adversarial_texts():
    """Texts that stress the regexes, normalization and byte handling; bytes are invalid UTF-8."""
    texts = [
        "", " ", "a", "  leading and trailing  ", "e\u0301 vs \u00e9, A\u030a vs \u00c5, \u1e9b\u0323",   # NFC
        "\U0001F469\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family, \U0001F44D\U0001F3FD thumbs",
        "\U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA flags",
        "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5 "
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
        "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 RTL \u202eevil\u202c",
        "nb\u00a0sp zero\u200bwidth \ufeffbom",
        "line\r\nline\rline\n\n\r\n end\n", "\ttabs\t\tand\t mixed \t\n", "x\u0085next-line \u2028ls \u2029ps \u3000ideo",
        "1 22 333 4444 55555 123456789012 \u0661\u0662\u0663 \u00bd \u2163", "it's THEY'LL we'VE I'M you'd 'S 'll",
        "\u017fs LONG-S 's\u017f", "a\u24b6b a\u0345b a\u203fb a\u00aab \u00b9\u00b2\u00b3 \u216b \u0663x a\u200db",
        "<|endoftext|> inside <|endoftext|><|endoftext|> text", "<s> </s> <unk> <0x41>",
        "<|begin_of_text|>Hello<|end_of_text|>", "\u2581already\u2581metaspace \u2581",
        "ümlaut Straße İstanbul ǅ ΣΑΣ ΌΣΟΣ Ω ẞ",
        "\u00ad soft hyphen, \u0000 nul, \x7f del, \x01\x02 controls", "a" * 500, "ab" * 300, "🙂" * 50,
        "mixed 中文and English混合123数字", "punctuation!!! ??? ... --- ___ *** ///", "emoji🙂word🙂 🙂",
        "ﬁ ligature ① circled ｆｕｌｌｗｉｄｔｈ ㌀", "Zalgo: Z\u0351\u0357\u035b\u0312a\u0310\u036ag\u0304o",
    ]
    texts += [" " * n for n in (1, 2, 3, 7, 16, 31, 64, 100, 255, 300)]
    texts += ["x" + " " * n + "y" for n in (1, 2, 5, 300)] + ["\n" * 5 + " " * 3 + "\n"]
    byte_texts = [b"\xff", b"a\xffb", b"\xe2\x82", b"\xf0\x9f\x98 tail", b"\xed\xa0\x80 surrogate",
                  b"\xc0\xaf overlong", b"\xf4\x90\x80\x80 too big", b"ok \xc3\xa9 \xc3", b"\x80\x80\x80"]
    return texts, byte_texts


def _bpe_trainer(special, alphabet=None):
    return trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special, show_progress=False,
                               initial_alphabet=alphabet or [])


def build_gpt2(text, flagged=True):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], _bpe_trainer(["<|endoftext|>"], pre_tokenizers.ByteLevel.alphabet()))
    if flagged:
        tok.add_tokens(FLAGGED_TOKENS)
    return tok


def build_llama3(text, flagged=True):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], _bpe_trainer(["<|begin_of_text|>", "<|end_of_text|>"],
                                                 pre_tokenizers.ByteLevel.alphabet()))
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def build_qwen2(text, flagged=True):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], _bpe_trainer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                                 pre_tokenizers.ByteLevel.alphabet()))
    if flagged:
        tok.add_tokens(FLAGGED_TOKENS)
    return tok


def build_llama2(text, flagged=True):
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    # Lines as words (no pre-tokenizer, as Llama 2's): a shorter slice keeps training quick.
    tok.train_from_iterator(text[:TRAIN_BYTES // 2].splitlines(), _bpe_trainer(["<unk>", "<s>", "</s>"] + byte_tokens))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    # As Llama 2's file: the byte tokens are vocabulary entries, not added tokens.
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in byte_tokens]
    tok = Tokenizer.from_str(json.dumps(spec))
    if flagged:
        tok.add_tokens(FLAGGED_TOKENS)   # normalized ones get Prepend's "▁", as in tokenizers
    return tok


def build_metaspace(text, flagged=True):
    """SentencePiece's spaces as a pre-tokenizer (older Llama/Mistral files, T5): Metaspace
    splitting before each "▁", prepended to the first piece only; NFKC; Digits."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True),
        pre_tokenizers.Digits(individual_digits=True)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.train_from_iterator([text[:TRAIN_BYTES // 2]], _bpe_trainer(["<unk>", "<s>", "</s>"]))
    if flagged:
        tok.add_tokens(FLAGGED_TOKENS)
    return tok


# Added tokens with each flag that decides where they match and what they take with them.
FLAGGED_TOKENS = [
    AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True),
    AddedToken("[sep]", lstrip=False, rstrip=True, normalized=False),
    AddedToken("lord", single_word=True, normalized=False),
    AddedToken("ﬁsh", normalized=True),   # its NFKC form "fish" is what the normalized text holds
    AddedToken("Moses", normalized=True, single_word=True),
]
FLAGGED_TEXTS = [
    "a <mask> b  <mask>c<mask>", "x [sep]   y [sep]", "the lord LORD lords overlord lord_ lord's (lord) lord",
    "ﬁsh fish fishes", "Moses and Moses' Mosesx xMoses", "<mask>[sep]lord Moses ﬁsh",
]

BUILDERS = {"gpt2": build_gpt2, "llama3": build_llama3, "qwen2": build_qwen2, "llama2": build_llama2,
            "metaspace": build_metaspace}


@pytest.fixture(scope="module")
def kjv():
    return kjv_data.kjv_text()


@pytest.fixture(scope="module")
def corpus(kjv):
    """(python_texts, cpp_entries): the same texts; invalid UTF-8 goes to C++ as bytes."""
    lines = kjv.splitlines()
    middle = len(lines) // 2
    texts = lines[:1500] + lines[middle:middle + 1500]
    texts += ["\n".join(lines[i:i + 20]) + "\n" for i in range(0, 4000, 20)]   # paragraphs, newlines inside
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    adversarial, byte_texts = adversarial_texts()
    texts += adversarial + FLAGGED_TEXTS
    cpp = list(texts) + [{"hex": b.hex()} for b in byte_texts]
    texts += [b.decode("utf-8", errors="replace") for b in byte_texts]
    return texts, cpp


def run_zt_tokenize(directory, entries, tmp_path):
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(entries), encoding="utf-8")
    proc = subprocess.run([ZT_TOKENIZE, directory, str(texts_file)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout)


@pytest.mark.parametrize("style", sorted(BUILDERS))
def test_ids_and_decode_match(style, kjv, corpus, tmp_path):
    tok = BUILDERS[style](kjv[:TRAIN_BYTES])
    directory = tmp_path / style
    directory.mkdir()
    tok.save(str(directory / "tokenizer.json"))
    texts, cpp_entries = corpus
    if style == "gpt2":   # one whole-file pass: 4 MB as a single text
        texts, cpp_entries = texts + [kjv], cpp_entries + [kjv]
    ours = run_zt_tokenize(str(directory), cpp_entries, tmp_path)
    theirs = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    theirs_special = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
    assert ours["vocab_size"] == tok.get_vocab_size(with_added_tokens=True)
    for name, got, want in (("ids", ours["ids"], theirs), ("ids_special", ours["ids_special"], theirs_special)):
        mismatched = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert len(got) == len(want)
        assert not mismatched, (f"{style} {name}: {len(mismatched)} of {len(want)} texts differ; the first, "
                                f"{texts[mismatched[0]][:200]!r}:\nzerotrain  {got[mismatched[0]][:60]}\n"
                                f"tokenizers {want[mismatched[0]][:60]}")
    decoded = tok.decode_batch(theirs, skip_special_tokens=False)
    mismatched = [i for i, (g, w) in enumerate(zip(ours["decoded"], decoded)) if g != w]
    assert not mismatched, (f"{style} decode: {len(mismatched)} differ; the first: zerotrain "
                            f"{ours['decoded'][mismatched[0]][:200]!r}, tokenizers {decoded[mismatched[0]][:200]!r}")


def test_malformed_merge_names_the_field(kjv, tmp_path):
    tok = build_gpt2(kjv[:50_000])
    spec = json.loads(tok.to_str())
    spec["model"]["merges"][3] = ["only-one"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    texts = tmp_path / "texts.json"
    texts.write_text("[]")
    proc = subprocess.run([ZT_TOKENIZE, str(tmp_path), str(texts)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr   # a ConfigError
    assert "tokenizer.json: model.merges[3]: expected a pair of tokens" in proc.stderr, proc.stderr


def _variant(pre_tokenizer=None, normalizer=None, decoder=None, post=None, model=None, trainer_args=None):
    def build(text):
        tok = Tokenizer(model() if model else models.BPE(unk_token="<unk>"))
        tok.normalizer = normalizer
        tok.pre_tokenizer = pre_tokenizer
        tok.decoder = decoder
        args = dict(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
        tok.train_from_iterator([text[:100_000]], trainers.BpeTrainer(**args, **(trainer_args or {})))
        if post:
            tok.post_processor = post(tok)
        tok.add_tokens(FLAGGED_TOKENS)
        return tok
    return build


def _split(behavior, invert=False):
    return pre_tokenizers.Split(Regex(r"\s+|[,.;:]"), behavior=behavior, invert=invert)


# Each supported option that the four model styles above leave out, on a small vocabulary.
VARIANTS = {
    "split_removed": _variant(_split("removed")),
    "split_merged_previous": _variant(_split("merged_with_previous")),
    "split_merged_next": _variant(_split("merged_with_next")),
    "split_contiguous": _variant(_split("contiguous")),
    "split_inverted": _variant(_split("isolated", invert=True)),
    "split_string": _variant(pre_tokenizers.Split(" ", behavior="merged_with_next")),
    "whitespace": _variant(pre_tokenizers.Whitespace()),
    "split_word_classes": _variant(pre_tokenizers.Split(Regex(r"\w+|\d|[^\w\s]+|\s+(?!\S)|\W"), behavior="isolated")),
    "whitespace_split_digits": _variant(pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                                 pre_tokenizers.Digits(individual_digits=False)])),
    "metaspace_always_unsplit": _variant(pre_tokenizers.Metaspace(prepend_scheme="always", split=False),
                                         decoder=decoders.Metaspace(prepend_scheme="always", split=False)),
    "metaspace_never": _variant(pre_tokenizers.Metaspace(prepend_scheme="never"),
                                decoder=decoders.Metaspace(prepend_scheme="never")),
    "byte_level_prefix_space": _variant(pre_tokenizers.ByteLevel(add_prefix_space=True),
                                        decoder=decoders.ByteLevel(),
                                        post=lambda t: processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                                                    ("<s>", t.token_to_id("<s>")))),
    "nfd_strip_regex_replace": _variant(
        pre_tokenizers.WhitespaceSplit(),
        normalizers.Sequence([normalizers.NFD(), normalizers.Strip(), normalizers.Replace(Regex(r"[0-9]+"), "#")]),
        decoder=decoders.Sequence([decoders.Replace("#", "N"), decoders.Strip("e", 0, 1)])),
    "nfkd_lowercase_bert_post": _variant(pre_tokenizers.Whitespace(),
                                         normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase()]),
                                         post=lambda t: processors.BertProcessing(("</s>", t.token_to_id("</s>")),
                                                                                  ("<s>", t.token_to_id("<s>")))),
    "subword_affixes": _variant(pre_tokenizers.Whitespace(),
                                model=lambda: models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                                                         end_of_word_suffix="</w>"),
                                trainer_args=dict(continuing_subword_prefix="##", end_of_word_suffix="</w>")),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_option_matches(variant, kjv, tmp_path):
    tok = VARIANTS[variant](kjv)
    tok.save(str(tmp_path / "tokenizer.json"))
    adversarial, byte_texts = adversarial_texts()
    texts = kjv.splitlines()[:300] + adversarial + FLAGGED_TEXTS
    ours = run_zt_tokenize(str(tmp_path), texts, tmp_path)
    for name, special in (("ids", False), ("ids_special", True)):
        want = [e.ids for e in tok.encode_batch(texts, add_special_tokens=special)]
        mismatched = [i for i, (g, w) in enumerate(zip(ours[name], want)) if g != w]
        assert not mismatched, (f"{variant} {name}: {len(mismatched)} of {len(want)} differ; the first, "
                                f"{texts[mismatched[0]][:120]!r}:\nzerotrain  {ours[name][mismatched[0]][:40]}\n"
                                f"tokenizers {want[mismatched[0]][:40]}")
    decoded = tok.decode_batch([e.ids for e in tok.encode_batch(texts, add_special_tokens=False)],
                               skip_special_tokens=False)
    mismatched = [i for i, (g, w) in enumerate(zip(ours["decoded"], decoded)) if g != w]
    assert not mismatched, (f"{variant} decode: {len(mismatched)} differ; the first: zerotrain "
                            f"{ours['decoded'][mismatched[0]][:120]!r}, tokenizers {decoded[mismatched[0]][:120]!r}")

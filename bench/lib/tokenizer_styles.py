"""Tokenizers in the styles of GPT-2, Llama 3 and Llama 2, trained offline on a text with the
tokenizers package, for bench/tokenizer_throughput.py. The same builders as the parity test's
(tests/python/test_tokenizer_parity.py), without its extra added tokens: the benchmark times
the files as those models ship them."""
import json

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
TRAIN_BYTES = 400_000   # Llama 2's BPE trains on half of this: training stays a few seconds on 2 cores


def _bpe_trainer(vocab, special, alphabet=None):
    return trainers.BpeTrainer(vocab_size=vocab, special_tokens=special, show_progress=False,
                               initial_alphabet=alphabet or [])


def build_gpt2(text, vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], _bpe_trainer(vocab, ["<|endoftext|>"], pre_tokenizers.ByteLevel.alphabet()))
    return tok


def build_llama3(text, vocab):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], _bpe_trainer(vocab, ["<|begin_of_text|>", "<|end_of_text|>"],
                                                 pre_tokenizers.ByteLevel.alphabet()))
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def build_llama2(text, vocab):
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    # Lines as words (no pre-tokenizer, as Llama 2's): a shorter slice keeps training quick.
    tok.train_from_iterator(text[:TRAIN_BYTES // 2].splitlines(),
                            _bpe_trainer(vocab, ["<unk>", "<s>", "</s>"] + byte_tokens))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    # As Llama 2's file: the byte tokens are vocabulary entries, not added tokens.
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in byte_tokens]
    return Tokenizer.from_str(json.dumps(spec))


BUILDERS = {"gpt2": build_gpt2, "llama3": build_llama3, "llama2": build_llama2}

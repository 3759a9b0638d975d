"""The built-in GPT of zerotrain (zerotrain/models/models.cpp) in Python, op for op, with its
synthetic dataset (zerotrain/data/synthetic.cpp), for the benchmarks that train a Python
peer on the same model and data. The head is tied to the token embedding (head.weight is
wte.weight, no head bias), as GPT-2 does.

Only make_gpt imports torch, so a launcher can parse configs and count parameters without it.
"""
import math

PRESETS = {  # the same as zerotrain/models/models.cpp
    "tiny": dict(n_layer=2, n_head=2, n_embd=64, vocab_size=128, block_size=32),
    "small": dict(n_layer=4, n_head=4, n_embd=256, vocab_size=1024, block_size=128),
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, block_size=1024),
}


def parse_model_config(text):
    """--model_config's "preset=NAME,key=value,...": the preset (default tiny), then the overrides."""
    fields, preset = {}, "tiny"
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, _, value = item.partition("=")
        if key == "preset":
            preset = value
        else:
            fields[key] = int(value)
    cfg = dict(PRESETS[preset])
    unknown = set(fields) - set(cfg)
    if unknown:
        raise ValueError(f"--model_config: unknown keys {sorted(unknown)} (gpt has {sorted(cfg)})")
    cfg.update(fields)
    return cfg


def param_count(cfg, tied=True):
    c, v, t, n = cfg["n_embd"], cfg["vocab_size"], cfg["block_size"], cfg["n_layer"]
    block = 2 * 2 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c)
    return v * c + t * c + n * block + 2 * c + (0 if tied else v * c)


def make_gpt(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):  # zerotrain/models/models.cpp's Block, op for op
        def __init__(self, c, h):
            super().__init__()
            self.h = h
            self.ln1 = nn.LayerNorm(c)
            self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.ln2 = nn.LayerNorm(c)
            self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, 2)
            q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
            att = q @ k.transpose(-2, -1) / math.sqrt(c // self.h)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)  # on the model's device (GPU runs)
            att = torch.softmax(att.masked_fill(mask, float("-inf")), -1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
            self.wpe = nn.Embedding(cfg["block_size"], cfg["n_embd"])
            self.blocks = nn.ModuleList(Block(cfg["n_embd"], cfg["n_head"]) for _ in range(cfg["n_layer"]))
            self.ln_f = nn.LayerNorm(cfg["n_embd"])
            self.head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
            self.head.weight = self.wte.weight  # tied, as GPT-2 (a module owning it, so ZeRO-3 gathers it)
            with torch.no_grad():  # GPT-2's initialisation, as zerotrain/models/models.cpp
                self.wte.weight.normal_(0.0, 0.02)
                self.wpe.weight.normal_(0.0, 0.02)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    return Gpt()


def gpt_loss(logits, targets):
    import torch.nn.functional as F
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def synthetic_batch(cfg, seed, first, count):
    """zerotrain/data/synthetic.cpp's gpt sequences first .. first+count-1: (inputs, targets)."""
    return synthetic_rows(cfg, seed, range(first, first + count))


TRAIN_SIZE = 65536  # `zerotrain train --dataset synthetic`'s training set (tools/train_data.cpp)


def trainer_batches(cfg, seed, micro, steps):
    """The batches `zerotrain train --dataset synthetic --seed SEED` trains on at world size 1,
    in its order: the Trainer's sampler shuffles as torch's DistributedSampler does
    (randperm under manual_seed(seed + epoch)), so a peer fed these trains on the same data."""
    import torch
    order = torch.randperm(TRAIN_SIZE, generator=torch.Generator().manual_seed(seed)).tolist()
    assert micro * steps <= TRAIN_SIZE, "more than one epoch of synthetic data"
    return [synthetic_rows(cfg, seed, order[step * micro:(step + 1) * micro]) for step in range(steps)]


def synthetic_rows(cfg, seed, indices):
    """zerotrain/data/synthetic.cpp's gpt sequences of these indices: (inputs, targets)."""
    import torch
    vocab, length = cfg["vocab_size"], cfg["block_size"]
    a, c = 1 + 2 * (seed % 7), 1 + seed % 13
    rows = []
    for index in indices:
        token = (index * 2654435761 + seed) % vocab
        row = []
        for _ in range(length + 1):
            row.append(token)
            token = (a * token + c) % vocab
        rows.append(row)
    t = torch.tensor(rows)
    return t[:, :-1], t[:, 1:]

"""Seeded models and batches for the Python tests: a plain module with what real models do
(a submodule called twice, tied weights, a frozen part, a buffer), and transformers' GPT-2
and Llama built from small random configs (nothing downloaded)."""

import torch
import torch.nn.functional as F

VOCAB = 64
SEQ = 8


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, 2 * d)
        self.fc2 = torch.nn.Linear(2 * d, d)

    def forward(self, h):
        return self.fc2(F.gelu(self.fc1(h)))


class Toy(torch.nn.Module):
    def __init__(self, d=32, checkpointing=None):
        super().__init__()
        self.checkpointing = checkpointing          # None, "reentrant" or "non-reentrant"
        self.embed = torch.nn.Embedding(VOCAB, d)
        self.block = Block(d)                       # called twice in forward
        if checkpointing:
            self.block2 = Block(d)
        self.frozen = torch.nn.Linear(d, d)         # not trained
        self.frozen.requires_grad_(False)
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.embed.weight        # tied, as GPT-2's lm_head and wte
        self.register_buffer("mix", torch.tensor(0.5))
        with torch.no_grad():
            self.embed.weight.normal_(0.0, 0.02)    # GPT-2's: the tied head starts near uniform

    def forward(self, input_ids, labels):
        h = self.embed(input_ids)
        if self.checkpointing:
            # Each region its own block: a parameter used in two reentrant regions would get
            # two gradients in one backward, which ZeRO refuses (DeepSpeed too).
            from torch.utils.checkpoint import checkpoint
            for block in (self.block, self.block2):
                h = h + checkpoint(block, h, use_reentrant=self.checkpointing == "reentrant")
        else:
            h = h + self.block(h)
            h = h + self.block(h)
        h = h + self.mix * self.frozen(h)
        logits = self.head(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, VOCAB).float(), labels.reshape(-1))


class ExternalUser(torch.nn.Module):
    """A module whose forward uses a parameter another module owns (DeepSpeed's
    register_external_parameter case): `proj` reads `embed.weight` directly."""

    def __init__(self, d=32):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, d)
        self.proj = Projection(self.embed)
        import zerotrain
        zerotrain.zero.register_external_parameter(self.proj, self.embed.weight)

    def forward(self, input_ids, labels):
        return F.cross_entropy(self.proj(self.embed(input_ids)).reshape(-1, VOCAB), labels.reshape(-1))


class Projection(torch.nn.Module):
    def __init__(self, embed):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(VOCAB))
        self.__dict__["embed"] = embed   # not a child: its weight is used from here

    def forward(self, h):
        return F.linear(h, self.embed.weight, self.bias)


class HFWrapper(torch.nn.Module):
    """A transformers causal LM called with labels, returning the loss (a ModelOutput's)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, labels):
        return self.lm(input_ids=input_ids, labels=labels).loss.float()


def build(name, seed=1234):
    torch.manual_seed(seed)
    if name == "toy":
        return Toy()
    if name.startswith("toy-ckpt-"):
        return Toy(checkpointing=name[len("toy-ckpt-"):])
    if name == "toy-external":
        return ExternalUser()
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=0,
                         eos_token_id=0)
        return HFWrapper(GPT2LMHeadModel(cfg))
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                          use_cache=False, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
        return HFWrapper(LlamaForCausalLM(cfg))
    raise ValueError(name)


def batches(n_samples, seed=99):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (n_samples, SEQ), generator=g)
    return x, torch.roll(x, -1, dims=1)


def micro_batch(x, y, step, world, accum, micro, rank, a):
    """Rank `rank`'s micro-step `a` of global step `step`: the global batch is rows
    [step*G, (step+1)*G), G = world*accum*micro."""
    g = world * accum * micro
    start = step * g + (a * world + rank) * micro
    return x[start:start + micro], y[start:start + micro]


LR = 3e-3   # AdamW's, in the engine's config and the reference alike


def config(stage, accum, micro, world, dtype="fp32", **zero):
    cfg = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "train_batch_size": micro * accum * world,
        "gradient_clipping": 1.0,
        # eps 1e-6, not 1e-8: GPT-2's key biases get gradients that are zero but for rounding
        # (softmax ignores a shift), which Adam with a tiny eps would turn into steps of lr.
        "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": [0.9, 0.999], "eps": 1e-6,
                                                  "weight_decay": 0.01}},
        "zero_optimization": {"stage": stage, **zero},
    }
    if stage == 3:
        # Every parameter gathered and released around its unit, not kept as small.
        cfg["zero_optimization"].setdefault("stage3_param_persistence_threshold", 0)
    if dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    if dtype == "fp16":
        # A scale that does not overflow these gradients: no step is skipped, as in the reference.
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8}
    return cfg


def reference(name, steps, world, accum, micro, dtype="fp32"):
    """Plain PyTorch, one process: AdamW on the same model and global batches, clipped as
    the engine clips. Returns (losses, grad_norms, final state_dict)."""
    model = build(name)
    if dtype in ("bf16", "fp16"):
        model = model.to(torch.bfloat16 if dtype == "bf16" else torch.float16)
    params = [p for p in model.parameters() if p.requires_grad]
    master = [p.detach().float().clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(master, lr=LR, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    x, y = batches(steps * world * accum * micro)
    scale = 2.0 ** 8 if dtype == "fp16" else 1.0   # fp16 gradients scaled as the engine scales them
    losses, norms = [], []
    for s in range(steps):
        total = 0.0
        for a in range(accum):
            for r in range(world):
                bx, by = micro_batch(x, y, s, world, accum, micro, r, a)
                loss = model(bx, by)
                (loss * scale / (accum * world)).backward()
                total += loss.item() / (accum * world)
        grads = [p.grad.float() / scale for p in params]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        clip = (norm + 1e-6) / 1.0
        for m, g in zip(master, grads):
            m.grad = g / clip if clip > 1 else g.clone()
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, master):
                p.copy_(m.to(p.dtype))
                p.grad = None
        losses.append(total)
        norms.append(norm)
    return losses, norms, {k: v.detach().float().clone() for k, v in model.state_dict().items()}

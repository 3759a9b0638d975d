"""`zerotrain train --model hf:DIR` against transformers (docs/finetune.md): the C++ engine
fine-tunes a Hugging Face folder at world 2, ZeRO stage 3 (the model built under ZeroInit,
each rank reading its chunks from the safetensors file), on JSONL prompt/completion data
tokenised in C++, and must train the same numbers as a single-process PyTorch loop of the
transformers model over the same batches; the folder it writes back loads into transformers
strictly. Real processes under `zerotrain launch`; nothing is downloaded."""
import json
import os
import subprocess
import sys

import pytest
import torch

torch.set_num_threads(1)
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "hf"))
import kjv_data  # noqa: E402

BLOCK, MICRO, WORLD, STEPS, LR = 32, 2, 2, 10, 3e-3


def zerotrain_bin():
    build = os.environ.get("ZEROTRAIN_BUILD_DIR") or os.path.join(ROOT, "build")
    path = os.path.join(build, "tools", "zerotrain")
    if not os.path.isfile(path):
        pytest.skip(f"needs the zerotrain program of the build tree ({path}); set ZEROTRAIN_BUILD_DIR")
    return path


@pytest.fixture(scope="module")
def kjv():
    try:
        return kjv_data.kjv_text()
    except kjv_data.KjvUnavailableError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory, kjv):
    return kjv_data.train_kjv_tokenizer(str(tmp_path_factory.mktemp("tok")), 1024, kjv[:400_000])


def make_folder(path, kind, tokenizer):
    common = dict(vocab_size=len(tokenizer), bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    if kind == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, **common)
    else:   # grouped-query attention, untied head
        config = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          hidden_size=32, intermediate_size=64, max_position_embeddings=64,
                                          tie_word_embeddings=False, **common)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_jsonl(path, kjv, count=60):
    """Prompt/completion pairs (verse reference -> verse) and plain documents, alternating."""
    lines = [l.strip() for l in kjv.splitlines() if l.startswith("  ") and l.strip()[:1].isdigit()][:count]
    with open(path, "w") as f:
        for i, line in enumerate(lines):
            number, _, words = line.partition(" ")
            doc = {"prompt": f"Verse {number}: ", "completion": words} if i % 2 == 0 else {"text": words}
            f.write(json.dumps(doc) + "\n")
    return path


def packed_train_stream(path, tokenizer):
    """The train split as docs/finetune.md packs it: each document's prompt and text encoded
    whole, then eos; the prompt's tokens (the leading ids the prompt alone encodes to) not
    trained; the last floor(n / 10) documents held out."""
    docs = [json.loads(l) for l in open(path) if l.strip()]
    docs = docs[:len(docs) - len(docs) // 10]
    ids, trained = [], []
    for d in docs:
        prompt = d.get("prompt", "")
        whole = tokenizer(prompt + d.get("completion", d.get("text")), add_special_tokens=False).input_ids
        alone = tokenizer(prompt, add_special_tokens=False).input_ids if prompt else []
        shared = 0
        while shared < min(len(alone), len(whole)) and alone[shared] == whole[shared]:
            shared += 1
        ids += whole + [tokenizer.eos_token_id]
        trained += [False] * shared + [True] * (len(whole) - shared + 1)
    return torch.tensor(ids), torch.tensor(trained)


def reference_losses(folder, ids, mask, seed, steps):
    """transformers' model, one process, the ranks' batches: what zerotrain must reproduce."""
    blocks = (len(ids) - 1) // BLOCK
    g = torch.Generator()
    g.manual_seed(seed)   # epoch 0: the DistributedSampler's permutation
    order = torch.randperm(blocks, generator=g).tolist()
    per_rank = [order[r::WORLD] for r in range(WORLD)]
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()   # no dropout: the C++ models apply none (docs/finetune.md); gradients flow all the same
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    losses = []
    for step in range(steps):
        total = 0.0
        opt.zero_grad()
        for r in range(WORLD):
            idx = per_rank[r][step * MICRO:(step + 1) * MICRO]
            x = torch.stack([ids[i * BLOCK:i * BLOCK + BLOCK] for i in idx])
            y = torch.stack([torch.where(mask[i * BLOCK + 1:i * BLOCK + BLOCK + 1], ids[i * BLOCK + 1:i * BLOCK + BLOCK + 1],
                                         torch.tensor(-100)) for i in idx])
            logits = model(input_ids=x).logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            (loss / WORLD).backward()   # ZeRO averages the ranks' gradients
            total += loss.item() / WORLD
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(total)
    return model, losses


def train(folder, data, out, stage, extra=(), micro=MICRO):
    metrics = out.parent / f"{out.name}-metrics.jsonl"
    cmd = [zerotrain_bin(), "launch", "--nproc_per_node", str(WORLD), zerotrain_bin(), "train",
           "--model", f"hf:{folder}", "--model_config", f"block_size={BLOCK}", "--dataset", f"jsonl:{data}",
           "--zero_stage", str(stage), "--max_steps", str(STEPS), "--per_device_train_batch_size", str(micro),
           "--learning_rate", str(LR), "--lr_scheduler_type", "constant", "--weight_decay", "0",
           "--logging_steps", "1", "--output_dir", str(out), "--seed", "42",
           *([] if "--save_strategy" in extra else ["--save_strategy", "no"]),
           "--metrics_file", str(metrics), "--disable_tqdm", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    logs = [json.loads(l) for l in open(metrics)]
    return [l["loss"] for l in logs if "loss" in l and "step" in l and "event" not in l], proc


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_stage3_world2_trains_as_transformers_and_saves_a_folder_it_loads(tmp_path, kjv, tokenizer, kind):
    folder = make_folder(str(tmp_path / kind), kind, tokenizer)
    data = write_jsonl(str(tmp_path / "data.jsonl"), kjv)
    out = tmp_path / "out"
    losses, _ = train(folder, data, out, stage=3, extra=["--save_hf_steps", "5", "--max_shard_size", "20KB"])
    stream = packed_train_stream(data, tokenizer)
    model, expected = reference_losses(folder, *stream, seed=42, steps=STEPS)
    assert len(losses) == STEPS
    for step, (got, want) in enumerate(zip(losses, expected), 1):
        assert got == pytest.approx(want, rel=1e-5), f"step {step}: zerotrain {got}, transformers {want}"
    # The final folder, sharded past 20 KB, loads strictly and holds the trained weights.
    assert os.path.isfile(out / "model.safetensors.index.json")
    assert os.path.isfile(out / "hf-5" / "config.json") and os.path.isfile(out / "hf-10" / "tokenizer.json")
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(str(out), output_loading_info=True)
    assert not any(info.values()), info
    # The weights: Adam moves an element whose gradient is at rounding level (a rare token's
    # embedding row) by up to the learning rate either way, so two exact implementations can
    # differ there by 2 x lr per step; elsewhere they agree. The logits are the test that matters.
    ref = dict(model.named_parameters())
    for name, p in loaded.named_parameters():
        diff = (p - ref[name].detach()).abs()
        assert diff.max() <= 2 * LR * STEPS, f"{name}: differs by {diff.max()}"
        assert (diff > 1e-5).float().mean() < 0.02, f"{name}: {(diff > 1e-5).sum()} elements differ"
    ids, _ = stream
    x = ids[:4 * BLOCK].view(4, BLOCK)
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=x).logits, model(input_ids=x).logits, rtol=1e-4, atol=1e-4)


def test_the_stage_does_not_change_the_numbers(tmp_path, kjv, tokenizer):
    folder = make_folder(str(tmp_path / "llama"), "llama", tokenizer)
    data = write_jsonl(str(tmp_path / "data.jsonl"), kjv)
    a, _ = train(folder, data, tmp_path / "s3", stage=3)
    b, _ = train(folder, data, tmp_path / "s1", stage=1)
    assert a == pytest.approx(b, rel=1e-6)


def test_a_folder_that_is_not_a_model_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 10}))
    proc = subprocess.run([zerotrain_bin(), "train", "--model", f"hf:{tmp_path}", "--dataset", "synthetic",
                           "--max_steps", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "model_type" in proc.stderr and "bert" in proc.stderr, proc.stderr


def test_a_resumed_run_continues_mid_epoch_with_the_same_numbers(tmp_path, kjv, tokenizer):
    """Checkpoints of an HF model on tokenised data resume mid-epoch, at another stage too:
    steps 6-10 after resuming from step 5 are those of the run that went on."""
    folder = make_folder(str(tmp_path / "llama"), "llama", tokenizer)
    data = write_jsonl(str(tmp_path / "data.jsonl"), kjv)
    whole, _ = train(folder, data, tmp_path / "whole", stage=3, extra=["--save_strategy", "steps", "--save_steps", "5"])
    resumed, _ = train(folder, data, tmp_path / "resumed", stage=2,
                       extra=["--resume_from_checkpoint", str(tmp_path / "whole" / "checkpoint-5")])
    assert len(resumed) == 5
    assert resumed == pytest.approx(whole[5:], rel=1e-6)


def test_a_block_of_prompt_only_trains_nothing_instead_of_nan(tmp_path, kjv, tokenizer):
    """Prompts longer than a block leave micro-batches with no trained target: their loss is 0
    (nothing to learn), never 0/0, whose NaN gradient would reach every rank's weights."""
    folder = make_folder(str(tmp_path / "llama"), "llama", tokenizer)
    words = " ".join(l.strip() for l in kjv.splitlines()[:400])
    data = tmp_path / "long_prompts.jsonl"
    with open(data, "w") as f:
        for i in range(12):
            f.write(json.dumps({"prompt": words[i * 50:i * 50 + 2000], "completion": " Amen."}) + "\n")
    losses, _ = train(folder, str(data), tmp_path / "out", stage=3, micro=1)
    assert all(loss == loss and abs(loss) < 1e3 for loss in losses), losses   # no NaN
    assert 0.0 in losses, f"no micro-batch was all prompt, so the test tested nothing: {losses}"


def test_the_model_folder_is_not_an_output_dir(tmp_path, kjv, tokenizer):
    """Writing the trained folder over the one being fine-tuned is refused before training."""
    folder = make_folder(str(tmp_path / "llama"), "llama", tokenizer)
    data = write_jsonl(str(tmp_path / "data.jsonl"), kjv)
    before = open(os.path.join(folder, "model.safetensors"), "rb").read()
    proc = subprocess.run([zerotrain_bin(), "train", "--model", f"hf:{folder}", "--dataset", f"jsonl:{data}",
                           "--max_steps", "1", "--output_dir", folder], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "is the model folder" in proc.stderr, proc.stderr
    assert open(os.path.join(folder, "model.safetensors"), "rb").read() == before


def test_a_bf16_run_saves_bf16_weights_under_a_config_that_says_so(tmp_path, kjv, tokenizer):
    """--bf16 trains and saves in bf16; config.json names that dtype, so transformers'
    dtype="auto" loads the folder as saved rather than upcast under the original float32."""
    folder = make_folder(str(tmp_path / "gpt2"), "gpt2", tokenizer)
    assert json.load(open(os.path.join(folder, "config.json")))["dtype"] == "float32"
    data = write_jsonl(str(tmp_path / "data.jsonl"), kjv)
    out = tmp_path / "out"
    losses, _ = train(folder, data, out, stage=2, extra=["--bf16"])
    assert all(loss == loss for loss in losses), losses
    config = json.load(open(out / "config.json"))
    assert config["dtype"] == "bfloat16", config
    assert config["n_embd"] == 32 and config["model_type"] == "gpt2", "the rest of the config is kept"
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype="auto", output_loading_info=True)
    assert not any(info.values()), info
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}

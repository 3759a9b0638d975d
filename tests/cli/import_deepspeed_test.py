"""`zerotrain checkpoint import-deepspeed` on DeepSpeed 0.19's own checkpoints (tests/data/
deepspeed, written by its make_checkpoints.py): ZeRO stages 0-3, world sizes 1 and 2, fp32,
bf16 and fp16, and a frozen parameter. Each import must hold, for every parameter, the fp32
master and Adam's two states exactly as DeepSpeed's engine had them when it saved
(expected.json), spread over the ranks' fragments; the buffers and frozen parameters; the step counters, each group's Adam step, learning rate and
weight decay; the schedule's iteration; and fp16's loss scale. Then the refusals: a folder
that is not a checkpoint, a missing tag, a rank's file gone, a damaged pickle, an existing
output tag. Plain Python: no torch.

    import_deepspeed_test.py ZEROTRAIN DATA_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ZT, DATA = sys.argv[1], sys.argv[2]
failures = []


def run(*args):
    return subprocess.run([ZT, "checkpoint", "import-deepspeed", *args], capture_output=True, text=True)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        lo, hi = entry["data_offsets"]
        raw = data[lo:hi]
        fmt = {"F32": "f", "F64": "d", "I64": "q"}.get(entry["dtype"])
        out[key] = list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw)) if fmt else raw
    return out


def f32(values):   # DeepSpeed's values (Python floats of fp32 numbers) as fp32, for exact comparison
    return [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]


def check(name, case_dir, out):
    expected = json.load(open(os.path.join(case_dir, "expected.json")))
    result = run(case_dir, out)
    if result.returncode != 0:
        return [f"exited {result.returncode}: {result.stderr.strip()}"]
    problems = []
    tag_dir = os.path.join(out, open(os.path.join(out, "latest")).read())
    manifest = json.load(open(os.path.join(tag_dir, "manifest.json")))
    files = {f["rank"]: read_safetensors(os.path.join(tag_dir, f["name"])) for f in manifest["files"]}
    if manifest["zero_stage"] != expected["zero_stage"] or manifest["model_dtype"] != expected["dtype"]:
        problems.append(f"stage {manifest['zero_stage']} {manifest['model_dtype']}, expected "
                        f"{expected['zero_stage']} {expected['dtype']}")
    params = {p["name"]: p for p in manifest["params"]}
    if sorted(params) != sorted(expected["params"]):
        problems.append(f"parameters {sorted(params)}, expected {sorted(expected['params'])}")
    for pname, want in expected["params"].items():
        p = params.get(pname)
        if p is None:
            continue
        if p["shape"] != want["shape"]:
            problems.append(f"{pname}: shape {p['shape']}, expected {want['shape']}")
        for state in ("fp32", "exp_avg", "exp_avg_sq"):
            got = []
            for rank, begin, end in p["fragments"]:
                got += files[rank][f"{state}/{pname}[{begin}:{end}]"]
            if got != f32(want[state]):
                worst = max((abs(a - b) for a, b in zip(got, f32(want[state]))), default=None)
                problems.append(f"{pname}: {state} differs ({len(got)} vs {len(want[state])} elements, "
                                f"worst difference {worst})")
        group = manifest["groups"][p["group"]]
        steps = expected["adam_steps"][0] if len(expected["adam_steps"]) == 1 else expected["adam_steps"]
        if group["optimizer_steps"] != steps:
            problems.append(f"{pname}: its group's Adam step is {group['optimizer_steps']}, expected {steps}")
        if abs(group["lr"] - expected["lr"]) > 1e-12 or group["weight_decay"] != 0.1:
            problems.append(f"{pname}: its group has lr {group['lr']} and weight decay {group['weight_decay']}, "
                            f"expected {expected['lr']} and 0.1")
    frozen = {t["name"] for t in manifest["frozen"]}
    if frozen != set(expected["frozen"]):
        problems.append(f"frozen parameters {sorted(frozen)}, expected {sorted(expected['frozen'])}")
    for fname, want in expected["frozen"].items():
        got = files[0].get(f"frozen/{fname}")
        if got != f32(want):
            problems.append(f"frozen {fname}: {got}, expected {want}")
    for bname, want in expected["buffers"].items():
        got = files[0].get(f"buffer/{bname}")
        if got != f32(want):
            problems.append(f"buffer {bname}: {got}, expected {want}")
    counters = manifest["counters"]
    if (counters["global_steps"], counters["global_samples"], counters["skipped_steps"]) != (
            expected["global_steps"], expected["global_samples"], expected["skipped_steps"]):
        problems.append(f"counters {counters}, expected {expected['global_steps']} steps, "
                        f"{expected['global_samples']} samples, {expected['skipped_steps']} skipped")
    if manifest["lr_scheduler"] != {"type": "WarmupLR", "last_batch_iteration": expected["last_batch_iteration"]}:
        problems.append(f"lr_scheduler {manifest['lr_scheduler']}, expected WarmupLR at {expected['last_batch_iteration']}")
    if expected["loss_scale"] is None:
        if manifest["loss_scaler"] is not None:
            problems.append(f"a loss scaler {manifest['loss_scaler']} without fp16")
    elif not manifest["loss_scaler"] or manifest["loss_scaler"]["scale"] != expected["loss_scale"]:
        problems.append(f"loss scaler {manifest['loss_scaler']}, expected scale {expected['loss_scale']}")
    if manifest["optimizer"]["type"] != "AdamW (fused)" or manifest["optimizer_states"] != ["exp_avg", "exp_avg_sq"]:
        problems.append(f"optimizer {manifest['optimizer']['type']} with states {manifest['optimizer_states']}")
    # The zerotrain checkpoint is intact by its own reader's account.
    inspected = subprocess.run([ZT, "checkpoint", "inspect", out, "--json"], capture_output=True, text=True)
    if inspected.returncode != 0:
        problems.append(f"`zerotrain checkpoint inspect` exited {inspected.returncode}: {inspected.stderr.strip()}")
    return problems


def refusal(what, args, needle):
    result = run(*args)
    if result.returncode == 0 or needle not in result.stderr:
        failures.append(f"{what}: exit {result.returncode}, stderr {result.stderr.strip()!r} (wanted {needle!r})")
    else:
        print(f"ok   refused: {what}")


cases = sorted(d for d in os.listdir(DATA) if os.path.isfile(os.path.join(DATA, d, "expected.json")))
if len(cases) != 25:
    failures.append(f"{len(cases)} DeepSpeed checkpoints in {DATA}, expected 25 (stages 0-3 x world 1, 2 x 3 dtypes, "
                    "and one with a frozen parameter)")
with tempfile.TemporaryDirectory() as tmp:
    for case in cases:
        problems = check(case, os.path.join(DATA, case), os.path.join(tmp, case))
        print(("ok   " if not problems else "FAIL ") + case)
        failures += [f"{case}: {p}" for p in problems]

    sample = os.path.join(DATA, "s2_fp32_w2")
    refusal("an existing output tag", [sample, os.path.join(tmp, "s2_fp32_w2")], "exists already")
    refusal("a folder that is no checkpoint", [DATA, os.path.join(tmp, "x1")], "not a DeepSpeed checkpoint tag")
    refusal("a tag that is not there", [sample, os.path.join(tmp, "x2"), "--tag", "global_step9"], "no such tag directory")
    broken = os.path.join(tmp, "broken")
    shutil.copytree(sample, broken)
    os.remove(os.path.join(broken, "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
    refusal("a rank's optimizer file missing (stage 2)", [broken, os.path.join(tmp, "x3")], "a rank's file missing")
    shutil.rmtree(broken)
    shutil.copytree(os.path.join(DATA, "s3_fp32_w2"), broken)
    os.remove(os.path.join(broken, "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
    refusal("a rank's optimizer file missing (stage 3)", [broken, os.path.join(tmp, "x5")], "a rank's file missing")
    shutil.rmtree(broken)
    shutil.copytree(sample, broken)
    model = os.path.join(broken, "global_step3", "mp_rank_00_model_states.pt")
    with open(model, "r+b") as f:
        f.truncate(os.path.getsize(model) // 2)
    refusal("a truncated model file", [broken, os.path.join(tmp, "x4")], "mp_rank_00_model_states.pt")
    if any(name.endswith(".importing") or name.startswith("x") and os.listdir(os.path.join(tmp, name))
           for name in os.listdir(tmp) if os.path.isdir(os.path.join(tmp, name))):
        failures.append(f"a refused import left files: {os.listdir(tmp)}")

for f in failures:
    print("FAIL", f)
print(f"{len(cases)} checkpoints, {len(failures)} failures")
sys.exit(1 if failures else 0)

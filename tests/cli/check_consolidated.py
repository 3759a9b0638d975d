"""Reads what `zerotrain zero-to-fp32` wrote with the safetensors package (as Hugging Face
loads it) and compares every tensor bit for bit with the weights make_checkpoint saved in
expected.json, converted to --dtype by torch. Used by tests/cli/checkpoint_tools_test.sh.

    check_consolidated.py EXPECTED_JSON OUT_DIR DTYPE [--sharded]

Exit status 0 when everything matches; 1 with one line per difference otherwise.
"""
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def fail(problems, message):
    problems.append(message)
    print("check_consolidated.py: " + message)


def load_output(out_dir, sharded, problems):
    index_path = os.path.join(out_dir, "model.safetensors.index.json")
    single = os.path.join(out_dir, "model.safetensors")
    if not sharded:
        if os.path.exists(index_path):
            fail(problems, "an index was written for a single file")
        files = [single]
        weight_map = None
    else:
        if os.path.exists(single):
            fail(problems, "model.safetensors was written beside shards")
        with open(index_path) as f:
            index = json.load(f)
        weight_map = index["weight_map"]
        files = sorted(set(weight_map.values()))
        count = len(files)
        want = ["model-%05d-of-%05d.safetensors" % (i + 1, count) for i in range(count)]
        if files != want:
            fail(problems, "shard names %s, want %s" % (files, want))
        files = [os.path.join(out_dir, f) for f in files]
    tensors = {}
    for path in files:
        with safe_open(path, framework="pt") as f:
            if f.metadata() != {"format": "pt"}:
                fail(problems, "%s: metadata %s, want {'format': 'pt'}" % (path, f.metadata()))
        for name, tensor in load_file(path).items():
            if name in tensors:
                fail(problems, "%s appears in two files" % name)
            if weight_map is not None and weight_map.get(name) != os.path.basename(path):
                fail(problems, "%s is in %s but the index says %s" % (name, os.path.basename(path), weight_map.get(name)))
            tensors[name] = tensor
    if weight_map is not None:
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        if index["metadata"]["total_size"] != total:
            fail(problems, "index total_size %d, the tensors hold %d bytes" % (index["metadata"]["total_size"], total))
    return tensors


def main():
    expected_path, out_dir, dtype_name = sys.argv[1:4]
    sharded = "--sharded" in sys.argv[4:]
    dtype = DTYPES[dtype_name]
    problems = []
    with open(expected_path) as f:
        expected = json.load(f)
    tensors = load_output(out_dir, sharded, problems)
    if set(tensors) != set(expected):
        fail(problems, "names %s, want %s" % (sorted(tensors), sorted(expected)))
    for name, e in expected.items():
        if name not in tensors:
            continue
        want = torch.tensor(e["values"], dtype=torch.float32).reshape(e["shape"]).to(dtype)
        got = tensors[name]
        if got.dtype != dtype or list(got.shape) != list(want.shape):
            fail(problems, "%s: %s %s, want %s %s" % (name, got.dtype, list(got.shape), dtype, list(want.shape)))
            continue
        bits = torch.int32 if dtype == torch.float32 else torch.int16
        if not torch.equal(got.view(bits), want.view(bits)):
            diff = (got.float() - want.float()).abs().max().item()
            fail(problems, "%s: values differ (largest difference %g)" % (name, diff))
    print("check_consolidated.py: %d tensors, %s%s: %s" % (len(tensors), dtype_name, " sharded" if sharded else "",
                                                           "FAILED" if problems else "identical"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Regenerates deepspeed_estimates.txt: DeepSpeed's own estimate_zero{2,3}_model_states_mem_needs_all_cold,
taken from its source release and run on the cases below. The output is the oracle that
`zerotrain estimate` must print byte for byte (tests/unit/estimator_test.cpp).

    python3 tests/data/gen_deepspeed_estimates.py > tests/data/deepspeed_estimates.txt

Needs pip and PyPI; only the two functions' source is executed, nothing of DeepSpeed is installed.
"""
import ast
import contextlib
import enum
import glob
import io
import os
import subprocess
import sys
import tarfile
import tempfile

VERSION = "0.19.8"
CASES = [  # total params, largest layer params, GPUs per node, nodes, additional buffer factor
    (2783959040, 65798144, 1, 1, 1.5),  # bigscience/T0_3B: the table in HF's DeepSpeed guide
    (2783959040, 65798144, 8, 1, 1.5),
    (13e9, 325e6, 8, 1, 1.5),
    (7e9, 131e6, 4, 2, 1.5),
    (124439808, 38597376, 2, 1, 1.0),
    (1000, 10, 3, 3, 2.0),
    (2783e6, 65e6, 1, 1, 1.5),
]


class OffloadDeviceEnum(str, enum.Enum):
    none = "none"
    cpu = "cpu"
    nvme = "nvme"

    # "cpu " as the guide prints it. DeepSpeed's f'{OffloadDeviceEnum.cpu:4}' gives that on
    # Python 3.10 and older; newer Pythons format a str-mixin enum member by its name
    # ("OffloadDeviceEnum.cpu"), which only changes those two labels.
    def __format__(self, spec):
        return format(self.value, spec)


def functions(path, names):
    namespace = {"OffloadDeviceEnum": OffloadDeviceEnum}
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            exec(compile(ast.Module([node], []), path, "exec"), namespace)
    return namespace


def main():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", f"deepspeed=={VERSION}", "--no-deps", "--no-binary",
                        ":all:", "-d", tmp], check=True, capture_output=True)
        with tarfile.open(glob.glob(os.path.join(tmp, "deepspeed-*.tar.gz"))[0]) as tar:
            tar.extractall(tmp)
        zero = os.path.join(tmp, f"deepspeed-{VERSION}", "deepspeed", "runtime", "zero")
        z2 = functions(os.path.join(zero, "stage_1_and_2.py"),
                       {"estimate_zero2_model_states_mem_needs", "estimate_zero2_model_states_mem_needs_all_cold"})
        z3 = functions(os.path.join(zero, "stage3.py"),
                       {"estimate_zero3_model_states_mem_needs", "estimate_zero3_model_states_mem_needs_all_cold"})
    print(f"# DeepSpeed {VERSION}'s estimators on each case (tests/data/gen_deepspeed_estimates.py): a line")
    print("# (total params, largest layer params, GPUs per node, nodes, buffer factor), the ZeRO-2")
    print("# then the ZeRO-3 printout, and an empty line.")
    for p, l, g, n, f in CASES:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            z2["estimate_zero2_model_states_mem_needs_all_cold"](p, g, n, f)
            z3["estimate_zero3_model_states_mem_needs_all_cold"](p, l, g, n, f)
        print(repr((p, l, g, n, f)))
        print(out.getvalue())


if __name__ == "__main__":
    main()

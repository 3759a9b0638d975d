#!/usr/bin/env python3
"""Compiles zerotrain's LibTorch-facing sources against another torch's headers (syntax only).

Offline GPU machines may carry an older torch than the pinned one (2.11 was seen beside the
pinned 2.15); this checks, on any machine, that the sources that use version-sensitive LibTorch
APIs still compile there. It downloads the torch wheel (no install), unpacks its include/
folder, and reruns each chosen compilation of an existing build with those headers instead.

    python3 scripts/check_torch_headers.py --torch 2.11.0 [--build build] [--work /tmp/zt-torch]

Exit status 0 when every source compiles. docs/gpu.md.
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What differs between LibTorch versions: c10d, autograd internals, the accelerator API.
SENSITIVE = re.compile(r"torch/csrc|DeviceAccelerator|c10d|ProcessGroup|accelerator::|pinned_memory|grad_accumulator")


def headers(version, work):
    include = os.path.join(work, version, "torch", "include")
    if os.path.isdir(include):
        return include
    os.makedirs(work, exist_ok=True)
    wheels = glob.glob(os.path.join(work, f"torch-{version}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", f"torch=={version}", "--no-deps", "-d", work],
                       check=True)
        wheels = glob.glob(os.path.join(work, f"torch-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(os.path.join(work, version), [n for n in z.namelist() if n.startswith("torch/include/")])
    return include


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch", required=True, help="the torch version whose headers to compile against")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="a configured build (compile_commands.json)")
    ap.add_argument("--work", default="/tmp/zt-torch-headers", help="where the wheel and its headers go")
    args = ap.parse_args()
    include = headers(args.torch, args.work)
    commands = json.load(open(os.path.join(args.build, "compile_commands.json")))
    seen, failed = set(), 0
    for entry in commands:
        source = os.path.abspath(os.path.join(entry["directory"], entry["file"]))
        if source in seen or not source.startswith(ROOT) or "/tests/" in source:
            continue
        seen.add(source)
        if not SENSITIVE.search(open(source, errors="replace").read()):
            continue
        argv, skip = [], False
        for a in shlex.split(entry["command"]):
            if skip:
                skip = False
            elif a in ("-o", "-MF", "-MT", "-include"):   # outputs, and the precompiled header
                skip = True
            elif a != "-MD":
                argv.append(re.sub(r"\S*/site-packages/torch/include", include, a))
        compiler = next(i for i, a in enumerate(argv) if re.search(r"(c\+\+|g\+\+|clang\+\+)$", a))
        result = subprocess.run(argv[compiler:] + ["-fsyntax-only"], cwd=entry["directory"], capture_output=True,
                                text=True)
        print(("ok   " if result.returncode == 0 else "FAIL ") + os.path.relpath(source, ROOT), flush=True)
        if result.returncode:
            failed += 1
            print(result.stderr[:4000])
    print(f"{len(seen)} sources seen; {failed} failed against torch {args.torch}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The CPU line every table names its machine with: the model, the core count and the flags
that decide which kernels run (AVX2, AVX-512, bf16 dot products, AMX), each listed, with
" no" after those the CPU lacks, e.g.
"AMD EPYC, 2 cores (avx2, avx512f no, avx512_bf16 no, amx_tile no, amx_bf16 no)"."""
import os
import re

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")


def cpu_line(cpuinfo_text=None, cores=None):
    """This machine's line (or the one for the given /proc/cpuinfo text and core count)."""
    if cpuinfo_text is None:
        with open("/proc/cpuinfo") as f:
            cpuinfo_text = f.read()
    cores = os.cpu_count() if cores is None else cores
    name = re.search(r"^model name\s*:\s*(.*)$", cpuinfo_text, re.M)
    flags_line = re.search(r"^flags\s*:\s*(.*)$", cpuinfo_text, re.M)
    flags = set(flags_line.group(1).split()) if flags_line else set()
    return (f"{name.group(1).strip() if name else 'unknown CPU'}, {cores} cores "
            f"({', '.join(f + ('' if f in flags else ' no') for f in FLAGS)})")

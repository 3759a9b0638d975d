"""Checks of the bench library itself (not part of ctest or CI): the rounds' rotation and
indexing, the medians, the CPU line's format, and that no bench script imports another one
or anything from tests/.

    python3 -m pytest bench/lib -q      or      python3 bench/lib/test_lib.py
"""
import ast
import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)   # `lib` as the scripts import it

from lib.cpu import cpu_line  # noqa: E402
from lib.ds_config import gpt_ds_config  # noqa: E402
from lib.rounds import rotated, run_rounds  # noqa: E402
from lib.stats import median, median_of, median_ratio  # noqa: E402

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme avx avx2 fma f16c avx512_bf16

processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu vme avx avx2 fma f16c avx512_bf16
"""


def test_rotated_starts_each_round_one_later():
    assert rotated("abc", 0) == ["a", "b", "c"]
    assert rotated("abc", 1) == ["b", "c", "a"]
    assert rotated("abc", 2) == ["c", "a", "b"]
    assert rotated("abc", 3) == ["a", "b", "c"]
    assert rotated([], 5) == []


def test_every_setup_runs_first_equally_often():
    firsts = [rotated(["x", "y"], r)[0] for r in range(4)]
    assert firsts == ["x", "y", "x", "y"]


def test_run_rounds_indexes_results_by_round_whatever_the_order():
    ran, starts, ends = [], [], []
    results = run_rounds(3, ["a", "b", "c"], lambda s, r: (ran.append((r, s)), f"{s}{r}")[1],
                         start_round=lambda r, order: starts.append((r, order)),
                         end_round=lambda r, got: ends.append((r, got)))
    assert ran == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"), (2, "c"), (2, "a"), (2, "b")]
    assert results == {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "c": ["c0", "c1", "c2"]}
    assert starts == [(0, ["a", "b", "c"]), (1, ["b", "c", "a"]), (2, ["c", "a", "b"])]
    assert ends[1] == (1, {"a": "a1", "b": "b1", "c": "c1"})


def test_median_leaves_out_none():
    assert median([3, None, 1, 2]) == 2
    assert median([4, 1]) == 2.5
    assert median([]) is None
    assert median([None]) is None
    assert median(x for x in (5, 7, 6)) == 6


def test_median_of_leaves_out_failed_runs():
    runs = [{"v": 1.0}, {"error": "exit 1"}, {"v": 5.0}, {"v": None}, {"v": 3.0}]
    assert median_of(runs, "v") == 3.0
    assert median_of(runs, lambda run: run.get("v") and run["v"] * 2) == 6.0
    assert median_of([{"error": "x"}], "v") is None


def test_median_ratio_is_the_median_of_each_rounds_ratio():
    a = [{"v": 2.0}, {"v": 9.0}, {"v": 3.0}]
    b = [{"v": 1.0}, {"v": 3.0}, {"v": 3.0}]
    assert median_ratio(a, b, "v") == 2.0   # ratios 2, 3, 1 (the ratio of the medians would be 1.5)
    assert median_ratio(a, b, lambda run: run["v"] * 2) == 2.0


def test_median_ratio_leaves_out_failed_rounds_and_missing_values():
    a = [{"v": 2.0}, {"error": "exit 1"}, {"v": 4.0}, {"v": None}, {"v": 6.0}, None]
    b = [{"v": 1.0}, {"v": 1.0}, {"v": 1.0}, {"v": 1.0}, {"v": 0}, {"v": 1.0}]
    assert median_ratio(a, b, "v") == 3.0   # rounds 0 and 2 only
    assert median_ratio([{"error": "x"}], [{"v": 1.0}], "v") is None
    assert median_ratio([], [], "v") is None


def test_cpu_line_names_the_model_and_every_flag():
    assert cpu_line(CPUINFO, cores=2) == \
        "AMD EPYC, 2 cores (avx2, avx512f no, avx512_bf16, amx_tile no, amx_bf16 no)"
    assert cpu_line("flags : avx2 avx512f avx512_bf16 amx_tile amx_bf16\n", cores=16) == \
        "unknown CPU, 16 cores (avx2, avx512f, avx512_bf16, amx_tile, amx_bf16)"
    assert cpu_line("model name : Neoverse\n", cores=4) == \
        "Neoverse, 4 cores (avx2 no, avx512f no, avx512_bf16 no, amx_tile no, amx_bf16 no)"


def test_cpu_line_of_this_machine_has_the_format():
    line = cpu_line()
    assert f", {os.cpu_count()} cores (avx2" in line and line.endswith(")") and "amx_bf16" in line


def test_gpt_ds_config_writes_out_the_batch_for_deepspeed():
    auto = gpt_ds_config(3, 1e-3)
    assert auto["train_batch_size"] == "auto" and auto["optimizer"]["params"]["lr"] == "auto"
    assert auto["zero_optimization"] == {"stage": 3, "overlap_comm": True, "stage3_param_persistence_threshold": 0}
    concrete = gpt_ds_config(2, 1e-3, micro=8, concrete=True, world=2, gas=4, bf16=True,
                             zero_extra={"reduce_bucket_size": 5e7})
    assert concrete["train_batch_size"] == 64 and concrete["bf16"] == {"enabled": True}
    assert concrete["zero_optimization"]["reduce_bucket_size"] == 5e7
    assert gpt_ds_config(0, 1e-3, micro=8, concrete=True, world=1)["train_batch_size"] == 8


def imported_modules(path):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]


def bench_files():
    for folder in (BENCH, os.path.join(BENCH, "lib")):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


TESTS_PATHS = ('"tests", "python"', '"tests/python', "'tests', 'python'")   # as a sys.path entry is made


def test_no_bench_script_imports_another_or_the_tests():
    scripts = {name[:-3] for name in os.listdir(BENCH) if name.endswith(".py")}
    for path in bench_files():
        clash = scripts & set(imported_modules(path))
        assert not clash, f"{path} imports the bench script(s) {sorted(clash)}: put what they share in bench/lib"
        if path != os.path.abspath(__file__):   # the patterns below are in this file
            text = open(path).read()
            assert all(p not in text for p in TESTS_PATHS), f"{path} reaches into tests/"


if __name__ == "__main__":
    tests = [(name, f) for name, f in sorted(globals().items()) if name.startswith("test_") and callable(f)]
    for name, f in tests:
        f()
        print(f"ok {name}")
    print(f"{len(tests)} passed")

"""Table cells the benchmark scripts share."""


def fmt(value, spec, suffix=""):
    """`value` formatted with `spec`, then `suffix` (a unit); "n/a" for None."""
    return "n/a" if value is None else format(value, spec) + suffix


def versions_text(*result_sets):
    """"DeepSpeed's optimizer X, deepspeed V, torch V" from the runs' own reports: result_sets
    are {setup: [run, ...]} dicts whose runs may carry "torch", "deepspeed" and "optimizer"."""
    versions = {}
    for results in result_sets:
        for runs in results.values():
            for run in runs:
                versions.update({k: run[k] for k in ("torch", "deepspeed") if k in run})
                if "optimizer" in run:
                    versions["DeepSpeed's optimizer"] = run["optimizer"]
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "versions n/a"

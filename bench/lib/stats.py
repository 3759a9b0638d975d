"""The two statistics the tables give: a median over rounds, and the median over rounds of
each round's ratio (a ratio within a round compares runs that shared the machine's state,
so it is steadier than the ratio of two medians)."""
import statistics


def median(values):
    """The median of the values that are not None; None when none is left."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def median_of(runs, field):
    """The median over the runs that did not fail of their field (a key or a function of a
    run); None when none is left."""
    return median(_value(run, field) for run in runs)


def _value(run, field):
    if run is None or "error" in run:   # a failed run: {"error": ...}
        return None
    return field(run) if callable(field) else run.get(field)


def median_ratio(a_runs, b_runs, field):
    """The median over rounds of a's field ÷ b's in the same round. a_runs and b_runs hold one
    run per round (dicts; None or {"error": ...} for a failed one); field is a key or a
    function of a run. Rounds where either run failed, either value is None, or b's is 0 are
    left out; None when no round is left."""
    ratios = []
    for a, b in zip(a_runs, b_runs):
        x, y = _value(a, field), _value(b, field)
        if x is not None and y:
            ratios.append(x / y)
    return median(ratios)

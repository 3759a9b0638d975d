"""The interleaved rounds every side-by-side benchmark runs: each round runs every setup
once, so that the setups share the machine's noise (other jobs, thermal state, page cache)
round by round, and a ratio is taken within a round. The order is rotated by the round, so
that no setup always runs first (cold caches) or always after the same neighbour."""


def rotated(items, round_index):
    """`items` in round `round_index`'s order: rotated left by the round (round 0 as given)."""
    items = list(items)
    if not items:
        return items
    k = round_index % len(items)
    return items[k:] + items[:k]


def run_rounds(rounds, setups, run_one, start_round=None, end_round=None):
    """Runs run_one(setup, round_index) for every setup once per round, in rotated(setups, r)
    order; start_round(r, order) before a round's first run (a per-round baseline, a log
    line) and end_round(r, {setup: its result in round r}) after its last, when given.
    Returns {setup: [result of round 0, round 1, ...]}: index r is round r for every setup,
    whatever the order it ran in, so that results of one round pair up by index."""
    results = {s: [] for s in setups}
    for r in range(rounds):
        order = rotated(setups, r)
        if start_round is not None:
            start_round(r, order)
        for s in order:
            results[s].append(run_one(s, r))
        if end_round is not None:
            end_round(r, {s: results[s][r] for s in setups})
    return results

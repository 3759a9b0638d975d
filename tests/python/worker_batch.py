"""A worker's main() run once per argument list of `--batch FILE` (a JSON list of argument
lists), in order, in this one process: conftest.run_batches. Without --batch, main() runs
once on the command line's arguments. A run that raises ends the batch: at world > 1 its
ranks may be out of step, so the runs after it cannot be trusted to start together."""

import json
import sys


def run(main):
    if len(sys.argv) == 3 and sys.argv[1] == "--batch":
        with open(sys.argv[2]) as f:
            for argv in json.load(f):
                main(argv)
    else:
        main(None)

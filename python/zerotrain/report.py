"""`python -m zerotrain.report` (DeepSpeed's ds_report): what `zerotrain report` prints, by
the same code (the `zerotrain` command inside this package)."""

import os
import subprocess
import sys


def command_path():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "_bin", "zerotrain")


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    return subprocess.call([command_path(), "report", *args])


if __name__ == "__main__":
    sys.exit(main())

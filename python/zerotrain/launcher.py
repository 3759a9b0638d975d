"""`python -m zerotrain.launcher [flags] -- python train.py ...`: `zerotrain launch`
(docs/launch.md), the deepspeed launcher's job."""

import sys

from .report import command_path


def main(argv=None):
    import subprocess
    args = sys.argv[1:] if argv is None else list(argv)
    return subprocess.call([command_path(), "launch", *args])


if __name__ == "__main__":
    sys.exit(main())

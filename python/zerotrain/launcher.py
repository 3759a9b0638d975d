"""`python -m zerotrain.launcher [flags] -- python train.py ...`: `zerotrain launch`
(docs/launch.md), the deepspeed launcher's job."""

import sys

from .report import command_path


def main(argv=None):
    """Becomes `zerotrain launch` (exec): no Python process with torch loaded (about 500 MiB)
    stays behind for the length of the job, and signals reach the launcher directly."""
    import os
    args = sys.argv[1:] if argv is None else list(argv)
    command = command_path()
    # None when the descriptor is closed: `zerotrain launch` then runs as with /dev/null there.
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os.execv(command, [command, "launch", *args])


if __name__ == "__main__":
    sys.exit(main())

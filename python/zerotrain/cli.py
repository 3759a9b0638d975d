"""The `zerotrain` command of a pip install: the C++ command inside the package."""

import os
import sys

from .report import command_path


def main():
    path = command_path()
    os.execv(path, [path, *sys.argv[1:]])

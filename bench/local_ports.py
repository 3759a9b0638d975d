"""A TCP port for the rendezvous of the Python peers' process groups, held by this process
until it exits, so that no other socket on the host is given it before the peer's rank 0
listens there: tests/python/held_port.py, which says why and how."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from held_port import held_port as free_port  # noqa: E402,F401

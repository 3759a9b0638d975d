"""Prints a TCP port for a job's rendezvous store and holds it until its standard input
closes (the test script's end): tests/python/held_port.py says why a port is held, not only
found free. In bash: coproc holder { python3 hold_port.py; }; read -r port <&"${holder[0]}"."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from held_port import held_port  # noqa: E402

print(held_port(), flush=True)
sys.stdin.read()

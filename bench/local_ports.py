"""A TCP port for the rendezvous of the Python peers' process groups, held by this process
until it exits: bound on every address with SO_REUSEADDR and never listening, so that no
outgoing connection on the host is given it before the peer's rank 0 listens there (which
torch's TCPStore, binding with SO_REUSEADDR too, still can). A port bound and released at
once can be taken in that gap. tests/python/held_port.py is the tests' copy."""
import socket

_held = []


def free_port():
    family = socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
    _held.append(s)
    return s.getsockname()[1]

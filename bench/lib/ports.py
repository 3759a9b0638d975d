"""A TCP port for the rendezvous of a Python peer's process group, held by this process until
it exits.

A port found free by binding port 0 and closing the socket can be given to any outgoing
connection on the host before the peer's rank 0 listens there. Held instead (bound on every
address with SO_REUSEADDR, never listening), no other socket is given it, while rank 0's store,
which binds with SO_REUSEADDR (torch's TCPStore and zerotrain's both do), can still listen
there. `zerotrain launch` holds the ports it picks the same way (tests/python/held_port.py is
the tests' copy)."""
import socket

_held = []   # the sockets, open until the process exits


def free_port():
    family = socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
    _held.append(s)
    return s.getsockname()[1]

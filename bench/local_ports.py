"""A free TCP port on this host, for the rendezvous of the Python peers' process groups."""
import socket


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

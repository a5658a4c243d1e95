"""A free TCP port on loopback, for the benches that start servers (and the interop tests'
Spark cluster)."""
import socket


def free_port():
    """A port nothing listens on now: the kernel's pick, released for the caller to bind."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

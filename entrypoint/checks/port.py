"""Port: nothing else listens on HOST:PORT."""
from __future__ import annotations

import socket

from contract.verdict import Result, failed, passed

NAME = "port"


def check_port(host: str, port: int) -> Result:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        return failed(NAME, f"HOST {host!r} does not resolve ({error.strerror})", "set HOST to 0.0.0.0 or an address of this host")
    with socket.socket(family, kind, proto) as probe:
        # The server sets SO_REUSEADDR too, so connections in TIME_WAIT do not count as busy.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            return failed(NAME, f"{host}:{port} is not free ({error.strerror})",
                          "stop what listens there or set PORT to a free port")
    return passed(NAME, f"{host}:{port} is free")

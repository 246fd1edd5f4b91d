"""Refuse every outgoing connection and name lookup that is not for the loopback host.

Tests point the real client libraries at a local server; this guard proves they
do not also talk to anything else (telemetry, model-info look-ups, redirects).
It patches ``socket`` at the module/class level, so it covers both blocking and
asyncio connections made by httpx, urllib and friends, in every thread.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ExternalNetworkError", "localhost_only"]

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class ExternalNetworkError(ConnectionRefusedError):
    """Raised by the guard instead of reaching a non-loopback address."""


def _is_local_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _address_is_local(family: int, address: Any) -> bool:
    if family == getattr(socket, "AF_UNIX", object()):
        # Unix sockets never leave the machine (asyncio uses socketpairs internally).
        return True
    if isinstance(address, tuple) and address:
        return _is_local_host(address[0])
    return False


_lock = threading.Lock()
_depth = 0
_saved: dict[str, Any] = {}
_attempts: list[str] = []


def _install() -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        if not _address_is_local(self.family, address):
            _attempts.append(repr(address))
            raise ExternalNetworkError(f"ststrace test guard: refused connection to {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _address_is_local(self.family, address):
            _attempts.append(repr(address))
            raise ExternalNetworkError(f"ststrace test guard: refused connection to {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_local_host(host):
            _attempts.append(repr(host))
            raise ExternalNetworkError(f"ststrace test guard: refused name lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    _saved.update(connect=real_connect, connect_ex=real_connect_ex, getaddrinfo=real_getaddrinfo)
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo


def _uninstall() -> None:
    socket.socket.connect = _saved.pop("connect")  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = _saved.pop("connect_ex")  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = _saved.pop("getaddrinfo")


@contextmanager
def localhost_only() -> Iterator[list[str]]:
    """Within the block, connections and look-ups for non-loopback hosts raise `ExternalNetworkError`.

    Yields the list of refused attempts (as reprs), so a test can also assert it
    stayed empty when the client library would have swallowed the error. Nests
    and is safe to use from several threads; the patch is process-wide while any
    block is active.
    """
    global _depth
    with _lock:
        if _depth == 0:
            _attempts.clear()
            _install()
        _depth += 1
    try:
        yield _attempts
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _uninstall()

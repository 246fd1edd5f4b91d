"""The machine's id key: what keys the digest that follows a redacted id.

A redacted tool-call id is written as its redacted text plus a keyed digest
of the original, so a call and its result still pair up and two ids never
collide. The key is the same in every process of the user on the machine and
never written into a trace; it lives in a private file that is refused, as
ssh refuses a private key, when someone else could have chosen or read it.
"""

from __future__ import annotations

import errno
import os
import stat
import threading

from ._errors import logger

# Loaded on first use (see id_key).
_ID_KEY: bytes | None = None
_ID_KEY_LOCK = threading.Lock()
_ID_KEY_BYTES = 32


def key_file() -> str:
    """Where the machine's id key lives: ``$STSTRACE_KEY_FILE``, else
    ``$XDG_CACHE_HOME/ststrace/id-key`` (``~/.cache/ststrace/id-key``)."""
    given = os.environ.get("STSTRACE_KEY_FILE")
    if given:
        return os.path.expanduser(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "ststrace", "id-key")


def id_key() -> bytes:
    """The key of redacted ids' digests: the same in every process of the user
    on the machine (so a call recorded in one process pairs with its result
    recorded after ``resume=True`` in another, and a worker's ``parent="<id>"``
    links), never written into a trace. A random key in a private file, made by
    the first process that needs it: a digest of a short secret (an 8-character
    password in an id) cannot be brute-forced without it. If the file cannot be
    read or made, a key for this process alone, with a warning."""
    global _ID_KEY
    key = _ID_KEY
    if key is not None:
        return key
    with _ID_KEY_LOCK:
        if _ID_KEY is None:
            path = key_file()
            try:
                _ID_KEY = _load_or_make_key(path)
            except (OSError, ValueError) as exc:
                logger.warning(
                    "ststrace: cannot read or create the id key %s (%s); redacted ids will not match "
                    "those of other processes (set STSTRACE_KEY_FILE to a writable path)",
                    path,
                    exc,
                )
                _ID_KEY = os.urandom(_ID_KEY_BYTES)
        return _ID_KEY


def _read_private(path: str) -> bytes:
    """The key file's bytes, refused as ssh refuses a private key: when it is a
    symbolic link (someone else may point it at a key they know), not a regular
    file, another user's, or readable or writable by group or others."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{path} is a symbolic link; refused (make it a regular file of mode 0600)") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file; refused")
        if os.name == "posix":
            if st.st_uid != os.getuid():
                raise ValueError(f"{path} belongs to another user (uid {st.st_uid}); refused")
            if st.st_mode & 0o077:
                raise ValueError(
                    f"{path} is accessible by others (mode {stat.S_IMODE(st.st_mode):04o}); refused: chmod 600 it"
                )
        return f.read(4096)


def _load_or_make_key(path: str) -> bytes:
    for _ in range(3):
        try:
            key = _read_private(path)
        except FileNotFoundError:
            pass
        else:
            if len(key) < 16:
                raise ValueError(f"{path} holds {len(key)} bytes, not a key")
            return key
        # Written whole under a temporary name, then linked into place: a
        # process racing us reads a complete key or makes its own link fail.
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(_ID_KEY_BYTES))
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue  # another process made it first: read theirs
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    raise ValueError(f"{path} keeps changing")

"""Publishing traces to the Hugging Face Hub: a dataset repository or a
Storage Bucket (extra ``hub``: ``huggingface_hub``).

Nothing leaves the machine unchecked: every file is read once, validated and
scanned for secrets, and the very bytes that were checked are the ones sent.
A file with a format error or a detected secret is refused (not sent) unless
``force`` is given.

``sync(dir, to)`` uploads the closed sessions of a directory once;
``sync_in_background(dir, to, interval=...)`` repeats that on a thread;
``schedule_sync(path, to)`` is what ``Session(sync_to=...)`` calls when it
closes: the upload runs on a background thread and its failures are logged on
the ``ststrace`` logger, never raised.
"""

from __future__ import annotations

import atexit
import os
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import orjson

from . import _registry
from ._errors import internal_error, logger
from ._reader import validate
from ._redact import Redactor

__all__ = [
    "Finding",
    "SyncWatcher",
    "Target",
    "UploadItem",
    "check_file",
    "flush_sync",
    "parse_target",
    "schedule_sync",
    "sync",
    "sync_in_background",
    "upload",
]

Status = Literal["uploaded", "would-upload", "refused", "unchanged", "open"]


@dataclass(frozen=True)
class Finding:
    """Why a file is refused: a format error or a detected secret, at a line."""

    path: Path
    line: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.message}"


@dataclass
class UploadItem:
    """One local file and what happened to it."""

    path: Path
    dest: str
    status: Status
    findings: list[Finding] = field(default_factory=list)
    size: int = 0


@dataclass(frozen=True)
class Target:
    """Where files go: ``kind`` is ``"dataset"`` or ``"bucket"``."""

    kind: Literal["dataset", "bucket"]
    repo_id: str
    prefix: str = ""

    def dest(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def __str__(self) -> str:
        tail = f"/{self.prefix}" if self.prefix else ""
        return f"hf://{'datasets' if self.kind == 'dataset' else 'buckets'}/{self.repo_id}{tail}"


_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_ID_RE = re.compile(rf"^({_NAME})/({_NAME})(?:/(.*))?$")


def _split(kind: Literal["dataset", "bucket"], spec: str) -> Target:
    m = _ID_RE.match(spec.strip().strip("/"))
    if not m:
        raise ValueError(f"{spec!r} is not USER/NAME[/prefix]")
    prefix = "/".join(part for part in (m.group(3) or "").split("/") if part)
    if any(part in (".", "..") for part in prefix.split("/")):
        raise ValueError(f"{spec!r}: the prefix may not contain '.' or '..'")
    return Target(kind, f"{m.group(1)}/{m.group(2)}", prefix)


def parse_target(*, repo: str | None = None, bucket: str | None = None, to: str | None = None) -> Target:
    """A target from ``repo="USER/NAME[/prefix]"``, ``bucket=...`` or an
    ``hf://buckets/...`` / ``hf://datasets/...`` URI."""
    given = [x for x in (repo, bucket, to) if x is not None]
    if len(given) != 1:
        raise ValueError("give exactly one destination: a dataset repo or a bucket")
    if repo is not None:
        return _split("dataset", repo)
    if bucket is not None:
        return _split("bucket", bucket.removeprefix("hf://buckets/"))
    assert to is not None
    if to.startswith("hf://buckets/"):
        return _split("bucket", to[len("hf://buckets/") :])
    if to.startswith("hf://datasets/"):
        return _split("dataset", to[len("hf://datasets/") :])
    raise ValueError(f"{to!r}: expected hf://buckets/USER/NAME[/prefix] or hf://datasets/USER/NAME[/prefix]")


# -- checking ----------------------------------------------------------------------


def _redactor() -> Redactor:
    # Built per check: it also catches the values of secret-looking environment
    # variables as they are now (a key exported after import included).
    return Redactor()


def _strings(obj: Any) -> Iterable[str]:
    """Every string of decoded JSON, keys included; iterative (no depth is too deep)."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for k, v in item.items():
                yield k
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(reversed(item))


def scan_secrets(path: Path, data: bytes, detector: Redactor | None = None) -> list[Finding]:
    """Secrets the redaction detectors see, one finding per line and kind.

    What a reader of the file would see is scanned: the raw line, and its
    strings after decoding JSON any number of times (:meth:`Redactor.find`
    looks behind escapes at every depth: ``\\u0067hp_...`` in arguments that
    were ``json.dumps``-ed twice is a GitHub token).
    """
    det = detector if detector is not None else _redactor()
    findings: list[Finding] = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        text = raw.decode("utf-8", "replace")
        hits = {kind for kind, _, _ in det.find(text)}
        if "\\" in text:
            # JSON escapes split some secrets (a key's lines, a literal's
            # quote): look at the decoded strings, each on its own line, too.
            try:
                decoded = "\n".join(_strings(orjson.loads(raw)))
            except orjson.JSONDecodeError:
                decoded = ""
            if decoded:
                hits.update(kind for kind, _, _ in det.find(decoded))
        for kind in sorted(hits):
            findings.append(Finding(path, n, f"secret:{kind}", f"detected {kind.replace('_', ' ')}"))
    return findings


def _pi_layout(data: bytes) -> bool:
    """Whether *data* is a Pi session with a ``harness`` in its header (what
    ``convert --to pi`` writes; the Hub accepts it beside STS): its entries carry
    ``parentId``, which no STS line has."""
    lines = data.split(b"\n", 2)
    if len(lines) < 2:
        return False
    try:
        head, entry = orjson.loads(lines[0]), orjson.loads(lines[1])
    except orjson.JSONDecodeError:
        return False
    return (
        isinstance(head, dict)
        and head.get("type") == "session"
        and isinstance(head.get("version"), int)
        and isinstance(head.get("harness"), str)
        and bool(head["harness"])
        and isinstance(entry, dict)
        and "parentId" in entry
    )


def _pi_findings(path: Path) -> list[Finding]:
    """A Pi session is checked by reading it as Pi: every line whole JSON, and messages."""
    from ._convert import convert_file

    try:
        result = convert_file(path, "pi", redact=False)
    except Exception as exc:
        return [Finding(path, 0, "pi", " ".join(str(exc).split()) or type(exc).__name__)]
    findings = []
    if result.dropped.get("invalid_line"):
        findings.append(Finding(path, 0, "pi", "a line is not valid JSON"))
    if not result.traces:
        findings.append(Finding(path, 0, "pi", "no messages"))
    return findings


def check_file(path: Path, detector: Redactor | None = None) -> tuple[bytes, list[Finding]]:
    """The file's bytes and everything that stops it from being sent."""
    data = path.read_bytes()
    findings = [
        Finding(path, p.line, p.code, p.message) for p in validate(path) if p.severity == "error"
    ]
    if findings and _pi_layout(data):
        # Not STS, but Pi's layout (``convert --to pi``): check it as Pi instead.
        findings = _pi_findings(path)
    if path.read_bytes() != data:
        # Checked one version and would send another: refuse this round.
        findings.append(Finding(path, 0, "changed", "the file changed while it was being checked"))
    findings.extend(scan_secrets(path, data, detector))
    findings.sort(key=lambda f: f.line)
    return data, findings


# -- layouts -------------------------------------------------------------------------

#: What an upload sends: the STS file as written, or its Pi layout (``convert --to pi``),
#: whose dataset rows the Hub's ``datasets`` loader fills with tool calls,
#: reasoning, results and tools (it reads an STS file's messages as Pi
#: content blocks and finds none).
LAYOUTS = ("sts", "pi")


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown upload layout {layout!r}; choose one of: {', '.join(LAYOUTS)}")
    return layout


def as_layout(path: Path, data: bytes, layout: str) -> tuple[bytes, list[Finding]]:
    """*data* (the checked bytes of *path*) in *layout*; a Pi session stays as it is."""
    if layout == "sts" or _pi_layout(data):
        return data, []
    from ._convert.to_pi import pi_bytes
    from ._reader import Trace

    try:
        lines = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        trace = Trace(header=lines[0], messages=[e["message"] for e in lines[1:] if e.get("type") != "outcome"], path=path)
        return pi_bytes(trace), []
    except Exception as exc:  # a file forced past its errors
        return data, [Finding(path, 0, "pi", f"cannot be written as a Pi session: {type(exc).__name__}: {exc}")]


# -- sending -------------------------------------------------------------------------


def _default_api() -> Any:
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise ImportError(
            "uploading to the Hugging Face Hub needs huggingface_hub: pip install 'ststrace[hub]'"
        ) from None
    return HfApi()


def _send(api: Any, target: Target, payload: Sequence[tuple[str, bytes]], *, public: bool) -> None:
    if not payload:
        return
    if target.kind == "dataset":
        from huggingface_hub import CommitOperationAdd

        api.create_repo(target.repo_id, repo_type="dataset", private=not public, exist_ok=True)
        api.create_commit(
            target.repo_id,
            repo_type="dataset",
            operations=[CommitOperationAdd(path_in_repo=dest, path_or_fileobj=data) for dest, data in payload],
            commit_message=f"Upload {len(payload)} trace{'s' if len(payload) != 1 else ''} with ststrace",
        )
    else:
        api.create_bucket(target.repo_id, private=not public, exist_ok=True)
        api.batch_bucket_files(target.repo_id, add=[(data, dest) for dest, data in payload])


def _collect(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, str]]:
    """(file, path relative to what was named) for files and directories of ``*.jsonl``."""
    out: list[tuple[Path, str]] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*.jsonl")):
                if f.is_file():
                    out.append((f, f.relative_to(p).as_posix()))
        elif p.exists():
            out.append((p, p.name))
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    return out


def upload(
    paths: Iterable[str | os.PathLike[str]],
    *,
    repo: str | None = None,
    bucket: str | None = None,
    public: bool = False,
    force: bool = False,
    dry_run: bool = False,
    api: Any = None,
    layout: str = "sts",
) -> list[UploadItem]:
    """Upload trace files (or directories of them) to a dataset repo or a bucket.

    ``repo="USER/NAME"`` creates the dataset repository (private unless
    ``public``) if needed and adds the files in one commit; ``bucket=
    "USER/NAME[/prefix]"`` does the same for a Storage Bucket. Each file is
    validated and scanned first; a file with errors or secrets, or one a
    process is still writing, is returned with status ``"refused"`` and its
    findings, and not sent, unless ``force``.
    ``dry_run`` checks everything and sends nothing (status ``"would-upload"``).
    ``layout="pi"`` sends each STS trace as the Pi session ``convert --to pi``
    writes (same file name), the layout whose dataset rows the Hub fills in.
    Errors from the Hub propagate.
    """
    check_layout(layout)
    target = parse_target(repo=repo, bucket=bucket)
    files = _collect(paths)
    dests: dict[str, Path] = {}
    for f, rel in files:
        d = target.dest(rel)
        if d in dests and dests[d].resolve() != f.resolve():
            raise ValueError(f"{dests[d]} and {f} would both be uploaded as {d!r}")
        dests[d] = f
    detector = _redactor()
    items: list[UploadItem] = []
    payload: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for f, rel in files:
        d = target.dest(rel)
        if d in seen:
            continue
        seen.add(d)
        data, findings = check_file(f, detector)
        if not findings or force:
            data, more = as_layout(f, data, layout)
            findings.extend(more)
        if is_open(f):
            findings.insert(0, Finding(f, 0, "open", "the session is still being written (a process has it open)"))
        if findings and not force:
            for finding in findings:
                logger.warning("ststrace: not uploading %s", finding)
            items.append(UploadItem(f, d, "refused", findings, len(data)))
            continue
        items.append(UploadItem(f, d, "would-upload" if dry_run else "uploaded", findings, len(data)))
        payload.append((d, data))
    if dry_run or not payload:
        return items
    _send(api if api is not None else _default_api(), target, payload, public=public)
    return items


# -- syncing a directory ------------------------------------------------------------------

_synced: dict[tuple[str, str], tuple[int, int]] = {}  # (target, file) -> (size, mtime_ns) sent
_synced_lock = threading.Lock()


def can_see_open_files() -> bool:
    """Whether :func:`is_open` can tell that another process holds a file open
    (Linux ``/proc``); elsewhere only this process's sessions are known."""
    return Path("/proc/self/fd").is_dir()


def _open_elsewhere(path: Path, ignore_self: bool = False) -> bool:
    """Whether a process on this machine holds *path* open (Linux ``/proc``);
    *ignore_self*: but this one (``ststrace tail`` holds the file it follows)."""
    proc = Path("/proc")
    if not can_see_open_files():
        return False
    target = str(path.resolve())
    me = str(os.getpid())
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit() or (ignore_self and pid_dir.name == me):
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    return True
            except OSError:
                continue
    return False


def is_open(path: Path, *, min_age: float = 0.0, ignore_self: bool = False) -> bool:
    """Whether the session in *path* may still be written to.

    A file is taken as open while a ``Session`` of this process has it open,
    while any process here holds it open (but this one, with *ignore_self*),
    when its last line is not finished, or when it changed less than
    *min_age* seconds ago.
    """
    if _registry.is_open_here(path):
        return True
    try:
        st = path.stat()
        if min_age > 0 and time.time() - st.st_mtime < min_age:
            return True
        with open(path, "rb") as f:
            if st.st_size:
                f.seek(st.st_size - 1)
                if f.read(1) != b"\n":
                    return True
    except OSError:
        return True
    return _open_elsewhere(path, ignore_self)


def sync(
    dir: str | os.PathLike[str],
    to: str,
    *,
    api: Any = None,
    public: bool = False,
    min_age: float = 0.0,
    layout: str = "sts",
) -> list[UploadItem]:
    """Upload the closed session files under *dir* to *to*
    (``hf://buckets/USER/NAME[/prefix]`` or ``hf://datasets/USER/NAME[/prefix]``).

    Files still being written are skipped (status ``"open"``), as are files
    already sent unchanged by this process (``"unchanged"``); refused files
    are logged and not sent. Call it again (from cron, a loop, a worker's
    shutdown) to pick up sessions closed since.
    """
    check_layout(layout)
    target = parse_target(to=to)
    base = Path(dir)
    if not base.is_dir():
        raise NotADirectoryError(f"{base} is not a directory")
    detector = _redactor()
    items: list[UploadItem] = []
    payload: list[tuple[str, bytes]] = []
    marks: list[tuple[tuple[str, str], tuple[int, int]]] = []
    for f in sorted(base.rglob("*.jsonl")):
        if not f.is_file():
            continue
        dest = target.dest(f.relative_to(base).as_posix())
        if is_open(f, min_age=min_age):
            items.append(UploadItem(f, dest, "open"))
            continue
        st = f.stat()
        key, mark = (str(target), str(f.resolve())), (st.st_size, st.st_mtime_ns)
        with _synced_lock:
            if _synced.get(key) == mark:
                items.append(UploadItem(f, dest, "unchanged", size=st.st_size))
                continue
        data, findings = check_file(f, detector)
        if not findings:
            data, findings = as_layout(f, data, layout)
        if findings:
            for finding in findings:
                logger.warning("ststrace: not syncing %s", finding)
            items.append(UploadItem(f, dest, "refused", findings, len(data)))
            continue
        items.append(UploadItem(f, dest, "uploaded", [], len(data)))
        payload.append((dest, data))
        marks.append((key, mark))
    if payload:
        _send(api if api is not None else _default_api(), target, payload, public=public)
        with _synced_lock:
            _synced.update(marks)
    return items


class SyncWatcher:
    """A daemon thread that runs :func:`sync` every *interval* seconds.

    For long-running processes and many workers writing into one directory:
    each pass sends the sessions closed since the last one. Failures are logged
    on the ``ststrace`` logger and the next pass tries again. ``stop()`` ends
    the thread and, by default, runs one last pass in the caller's thread.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        to: str,
        *,
        interval: float = 60.0,
        api: Any = None,
        public: bool = False,
        min_age: float = 0.0,
        layout: str = "sts",
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        parse_target(to=to)  # a bad destination fails here, not in the thread
        self.layout = check_layout(layout)
        self.dir, self.to, self.interval = Path(dir), to, interval
        self._api, self._public, self._min_age = api, public, min_age
        self._stop = threading.Event()
        self.passes = 0
        self._thread = threading.Thread(target=self._run, name="ststrace-sync-watch", daemon=True)
        self._thread.start()

    def _pass(self) -> None:
        try:
            sync(self.dir, self.to, api=self._api, public=self._public, min_age=self._min_age, layout=self.layout)
        except Exception as exc:
            logger.error("ststrace: syncing %s to %s failed: %s", self.dir, self.to, exc, exc_info=exc)
        self.passes += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self._pass()
            self._stop.wait(self.interval)

    def stop(self, *, final: bool = True, timeout: float | None = None) -> None:
        """Stop the thread; with *final*, sync once more so nothing closed is left behind."""
        self._stop.set()
        self._thread.join(timeout)
        if final:
            self._pass()

    def __enter__(self) -> SyncWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sync_in_background(
    dir: str | os.PathLike[str],
    to: str,
    *,
    interval: float = 60.0,
    api: Any = None,
    public: bool = False,
    min_age: float = 0.0,
    layout: str = "sts",
) -> SyncWatcher:
    """Start a :class:`SyncWatcher`: sync *dir* to *to* now and every *interval* seconds."""
    return SyncWatcher(dir, to, interval=interval, api=api, public=public, min_age=min_age, layout=layout)


# -- background sync of closed sessions ---------------------------------------------------


class _Syncer:
    """One daemon thread per process that uploads files handed over by ``Session.close()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[Path, str, Any, str]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._atexit = False

    def submit(self, path: Path, to: str, api: Any, layout: str = "sts") -> None:
        with self._lock:
            if self._pid != os.getpid():
                # Forked: the parent's thread and queue do not exist here.
                self._queue = queue.Queue()
                self._thread = None
                self._pid = os.getpid()
            self._queue.put((path, to, api, layout))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ststrace-sync", daemon=True)
                self._thread.start()
            if not self._atexit:
                self._atexit = True
                atexit.register(self.drain, 30.0)

    def _run(self) -> None:
        q = self._queue
        while True:
            try:
                path, to, api, layout = q.get(timeout=1.0)
            except queue.Empty:
                with self._lock:
                    if q.empty():
                        self._thread = None
                        return
                continue
            try:
                _sync_one(path, to, api, layout)
            except Exception as exc:
                logger.error("ststrace: could not sync %s to %s: %s", path, to, exc, exc_info=exc)
            finally:
                q.task_done()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every handed-over file is processed; False on timeout."""
        q = self._queue
        deadline = None if timeout is None else time.monotonic() + timeout
        while q.unfinished_tasks:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True


_syncer = _Syncer()


def _sync_one(path: Path, to: str, api: Any, layout: str = "sts") -> None:
    target = parse_target(to=to)
    dest = target.dest(path.name)
    data, findings = check_file(path)
    if not findings:
        data, findings = as_layout(path, data, layout)
    if findings:
        for finding in findings:
            logger.warning("ststrace: not syncing %s", finding)
        return
    _send(api if api is not None else _default_api(), target, [(dest, data)], public=False)
    st = path.stat()
    with _synced_lock:
        _synced[(str(target), str(path.resolve()))] = (st.st_size, st.st_mtime_ns)


def schedule_sync(path: Path, to: str, layout: str = "sts", *, api: Any = None) -> None:
    """Upload the closed session file *path* to *to* (in *layout*) in the background; never raises."""
    try:
        parse_target(to=to)
        _syncer.submit(Path(path), to, api, check_layout(layout))
    except Exception as exc:
        if isinstance(exc, ValueError):
            logger.error("ststrace: sync_to=%r: %s", to, exc)
        else:
            internal_error(exc, "schedule_sync")


def flush_sync(timeout: float | None = None) -> bool:
    """Wait for background uploads started by ``schedule_sync``; False on timeout."""
    return _syncer.drain(timeout)


# Sessions opened with ``sync_to`` upload through this module once they close.
_registry.on_after_close(schedule_sync)


def _after_fork_in_child() -> None:
    # Locks a thread of the parent held at fork() would stay held here; the
    # parent's upload thread and queue do not exist in the child.
    global _synced_lock
    _synced_lock = threading.Lock()
    _syncer._lock = threading.Lock()
    _syncer._queue = queue.Queue()
    _syncer._thread = None
    _syncer._pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

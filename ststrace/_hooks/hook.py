"""The program an agent's hook runs on each event: note it, start the worker, exit 0.

Standard library only, and no import of the ``ststrace`` package, so the
settings can run it as a script (``python -I .../hook.py NAME``) in a few tens
of milliseconds: importing ststrace alone costs more than that. It prints
nothing (a hook's stdout is read by the agent and changes what it does), never
exits non-zero (its own errors go to the log in the state directory), and
reads at most the transcript's last 64 KiB (to keep its offset on a line end).
The conversion runs in ``worker.py``, detached, so the agent never waits on it.

The state directory (``<out>/.ststrace-hooks``) holds, per session
(``<agent>-<session id>``): ``KEY.json`` (the transcript, cwd, agent pid,
last event, offset, and ``gen``, bumped on every event), ``KEY.done`` (the
``gen`` the STS file is up to date with, written by the worker), ``KEY.conv``
(the worker's converter state, Claude Code), ``KEY.lock``
(held by the worker while it converts), and ``open/KEY`` while the session
has not ended.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Iterator

AGENTS = ("claude-code", "gemini", "codex")
STATE_DIR = ".ststrace-hooks"
LOG_NAME = "hooks.log"
#: Events after which the agent writes no more to the session.
END_EVENTS = frozenset({"SessionEnd"})
START_EVENTS = frozenset({"SessionStart"})
_MAX_EVENT = 16 << 20
_TAIL = 64 << 10
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "busybox"})


def default_out() -> str:
    """Where sessions go without ``--out``: ``$XDG_DATA_HOME/ststrace/sessions``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "ststrace", "sessions")


def safe_key(agent: str, session: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in session).strip("._")
    return f"{agent}-{keep[:150] or 'session'}"


class Options:
    def __init__(self, agent: str, out: str, sync_to: str | None, layout: str) -> None:
        self.agent, self.out, self.sync_to, self.layout = agent, out, sync_to, layout

    @property
    def state(self) -> str:
        return os.path.join(self.out, STATE_DIR)

    def argv(self) -> list[str]:
        """These options as hook / worker arguments."""
        args = [self.agent, "--out", self.out]
        if self.sync_to:
            args += ["--sync-to", self.sync_to]
        if self.layout != "sts":
            args += ["--as", self.layout]
        return args


def parse_options(argv: list[str]) -> tuple[Options, list[str]]:
    """``NAME [--out DIR] [--sync-to URL] [--as sts|pi] [rest...]``; unknown words are returned."""
    if not argv or argv[0] not in AGENTS:
        raise ValueError(f"the first argument must be one of {', '.join(AGENTS)}, not {argv[:1]}")
    agent, out, sync_to, layout, rest = argv[0], default_out(), None, "sts", []
    it = iter(argv[1:])
    for word in it:
        if word in ("--out", "--sync-to", "--as"):
            value = next(it, None)
            if value is None:
                raise ValueError(f"{word} needs a value")
            if word == "--out":
                out = value
            elif word == "--sync-to":
                sync_to = value
            elif value in ("sts", "pi"):
                layout = value
            else:
                raise ValueError(f"--as must be sts or pi, not {value!r}")
        else:
            rest.append(word)
    return Options(agent, os.path.abspath(os.path.expanduser(out)), sync_to, layout), rest


# -- files ---------------------------------------------------------------------------


class _Flock:
    """An exclusive ``flock`` on a lock file (blocking unless *wait* is False)."""

    def __init__(self, path: str, wait: bool = True) -> None:
        self.path, self.wait, self.fd, self.held = path, wait, -1, False

    def __enter__(self) -> _Flock:
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
            self.held = True
        except BlockingIOError:
            self.held = False
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing drops the lock


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def write_json(path: str, obj: dict[str, Any]) -> None:
    """Write *obj* whole or not at all (a killed hook leaves the old file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def log(state: str, text: str) -> None:
    """One line in the state directory's log; never raises."""
    try:
        os.makedirs(state, exist_ok=True)
        with open(os.path.join(state, LOG_NAME), "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [{os.getpid()}] {text}\n")
    except Exception:
        pass


# -- the agent process ---------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'.
    head, _, tail = data.rpartition(")")
    return [head.partition("(")[2], *tail.split()]


def agent_process() -> tuple[int, str] | None:
    """(pid, start time) of the agent that ran this hook: the parent, past the shell it used (Linux)."""
    pid = os.getppid()
    for _ in range(3):
        st = _stat(pid)
        if st is None:
            return None
        if st[0] not in _SHELLS:
            return pid, st[20]
        pid = int(st[2])
    return None


def alive(proc: Any) -> bool | None:
    """Whether the process noted as ``[pid, start]`` still runs (None: cannot tell)."""
    if not (isinstance(proc, list) and len(proc) == 2 and isinstance(proc[0], int)):
        return None
    if not os.path.isdir("/proc/self"):
        return None
    st = _stat(proc[0])
    return st is not None and st[20] == proc[1] and st[1] != "Z"


# -- the event -----------------------------------------------------------------------


def _event(agent: str, obj: Any, argv_rest: list[str]) -> dict[str, Any]:
    """session, transcript, cwd and name of a hook payload (all three agents use Claude Code's keys)."""
    if agent == "codex" and not obj and argv_rest:
        # Codex's ``notify`` program gets its JSON as the last argument.
        obj = json.loads(argv_rest[-1])
    if not isinstance(obj, dict):
        raise ValueError(f"the event is a JSON {type(obj).__name__}, not an object")
    session = obj.get("session_id") or obj.get("thread-id") or obj.get("thread_id")
    if not isinstance(session, str) or not session:
        raise ValueError(f"the event names no session_id (keys: {sorted(obj)[:12]})")
    name = obj.get("hook_event_name") or obj.get("type") or "?"
    transcript = obj.get("transcript_path")
    return {
        "session": session,
        "transcript": transcript if isinstance(transcript, str) and transcript else None,
        "cwd": obj.get("cwd") if isinstance(obj.get("cwd"), str) else None,
        "name": str(name),
        "agent_transcript": obj.get("agent_transcript_path") if isinstance(obj.get("agent_transcript_path"), str) else None,
    }


def _line_end(path: str, offset: int) -> int:
    """The end of the transcript's last whole line, reading only what was added after *offset* (at most 64 KiB)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size <= offset:
                return size
            start = max(offset, size - _TAIL)
            f.seek(start)
            tail = f.read(size - start)
    except OSError:
        return offset
    cut = tail.rfind(b"\n")
    return start + cut + 1 if cut >= 0 else offset


def note(opts: Options, ev: dict[str, Any], *, now: float | None = None) -> list[str]:
    """Record one event in the session's state; returns the keys whose STS file needs work."""
    state = opts.state
    # Session state names transcripts and folders: the user's eyes only.
    os.makedirs(os.path.join(state, "open"), mode=0o700, exist_ok=True)
    key = safe_key(opts.agent, ev["session"])
    now = time.time() if now is None else now
    with _Flock(os.path.join(state, key + ".state.lock")):
        path = os.path.join(state, key + ".json")
        st = read_json(path) or {"agent": opts.agent, "session": ev["session"], "gen": 0, "events": 0, "offset": 0}
        if ev["transcript"]:
            st["transcript"] = ev["transcript"]
            st["offset"] = _line_end(ev["transcript"], int(st.get("offset") or 0))
        if ev["cwd"]:
            st["cwd"] = ev["cwd"]
        if ev.get("agent_transcript"):
            subs = st.setdefault("subagents", [])
            if ev["agent_transcript"] not in subs:
                subs.append(ev["agent_transcript"])
        proc = agent_process()
        if proc is not None:
            st["process"] = list(proc)
        st["gen"] = int(st.get("gen") or 0) + 1
        st["events"] = int(st.get("events") or 0) + 1
        st["last_event"], st["last_event_at"] = ev["name"], now
        st["out"], st["sync_to"], st["layout"] = opts.out, opts.sync_to, opts.layout
        ended = ev["name"] in END_EVENTS
        st["closed"] = ended
        write_json(path, st)
        marker = os.path.join(state, "open", key)
        if ended:
            _unlink(marker)
        elif not os.path.exists(marker):
            with open(marker, "w", encoding="utf-8") as f:
                f.write(st.get("cwd") or "")
    keys = [key]
    if ev["name"] in START_EVENTS and ev["cwd"]:
        keys += close_abandoned(opts, cwd=ev["cwd"], skip=key)
    return keys


def close_abandoned(opts: Options, *, cwd: str | None, skip: str = "", force: bool = False) -> list[str]:
    """Mark ended the open sessions (of *cwd*, or all) whose agent process is gone; returns their keys.

    Their end event never came (a closed terminal, ``kill -9``, ``claude -p``
    in some versions): the worker completes them from their transcripts.
    *force* also closes sessions whose process cannot be checked.
    """
    state = opts.state
    opened = os.path.join(state, "open")
    try:
        names = os.listdir(opened)
    except OSError:
        return []
    out = []
    for key in names:
        if key == skip:
            continue
        if cwd is not None:
            try:
                with open(os.path.join(opened, key), encoding="utf-8") as f:
                    if f.read() != cwd:
                        continue
            except OSError:
                continue
        with _Flock(os.path.join(state, key + ".state.lock")):
            path = os.path.join(state, key + ".json")
            st = read_json(path)
            if st is None or st.get("closed"):
                _unlink(os.path.join(opened, key))
                continue
            running = alive(st.get("process"))
            if running or (running is None and not force):
                continue
            st["gen"] = int(st.get("gen") or 0) + 1
            st["closed"], st["closed_by"] = True, "reconcile"
            write_json(path, st)
            _unlink(os.path.join(opened, key))
        out.append(key)
    return out


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# -- the worker ----------------------------------------------------------------------


def needs_work(state: str, key: str) -> bool:
    st = read_json(os.path.join(state, key + ".json")) or {}
    done = read_json(os.path.join(state, key + ".done")) or {}
    return int(done.get("gen") or 0) < int(st.get("gen") or 0)


def spawn_worker(opts: Options, keys: list[str]) -> None:
    """Start ``worker.py`` for *keys*, detached (own session, no stdio), unless a worker already holds each key."""
    # A worker holding a key's lock re-reads its state after letting go, so
    # it picks up this event: no second process is needed then.
    wanted = []
    for key in keys:
        with _Flock(os.path.join(opts.state, key + ".lock"), wait=False) as lock:
            if lock.held:
                wanted.append(key)
    if not wanted:
        return
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    logf = open(os.path.join(opts.state, LOG_NAME), "ab")
    try:
        subprocess.Popen(
            [sys.executable, "-m", "ststrace._hooks.worker", *opts.argv(), "--keys", *wanted],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=logf,
            start_new_session=True,
            close_fds=True,
            env=env,
            cwd=opts.state,
        )
    finally:
        logf.close()


def run(argv: list[str], stdin: Any = None) -> int:
    """The hook: always 0, nothing on stdout."""
    out = argv[argv.index("--out") + 1] if "--out" in argv[:-1] else default_out()
    state = os.path.join(os.path.abspath(os.path.expanduser(out)), STATE_DIR)
    try:
        opts, rest = parse_options(argv)
        state = opts.state
        raw = (stdin if stdin is not None else sys.stdin.buffer).read(_MAX_EVENT)
        obj = json.loads(raw) if raw.strip() else None
        ev = _event(opts.agent, obj, rest)
        spawn_worker(opts, note(opts, ev))
    except BaseException as exc:  # the agent must never see our failure
        log(state, f"hook {' '.join(argv[:1])}: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    # Run as a script: sys.path[0] is this directory, which holds nothing the
    # standard library could take for its own (``-I`` drops it anyway).
    sys.exit(run(sys.argv[1:]))

"""Bring a hooked session's STS file up to date with its transcript (run detached by ``hook.py``).

The file is what ``ststrace convert`` writes for the transcript (the same
converter, redaction and bytes). A Claude Code session is kept up to date
from the lines its transcript gained since the last event (``live``, with
the converter's state in ``KEY.conv``); other agents' transcripts, and
``--as pi``, are converted whole each time and the file replaced
atomically. Events that come while a conversion runs are folded into the
next one.
A session that has ended is then uploaded once, if the hook was installed with
``--sync-to``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from . import hook


def _sources(agent: str, st: dict[str, Any]) -> list[Path]:
    """The transcript and the sub-agent transcripts beside it."""
    main = Path(st["transcript"])
    files = [main]
    if agent == "claude-code":
        # Newer Claude Code: <session>/subagents/agent-<id>.jsonl; the main
        # file's converter links them by the Agent / Task call.
        subdir = main.with_suffix("") / "subagents"
        if subdir.is_dir():
            files += sorted(subdir.glob("agent-*.jsonl"))
    for extra in st.get("subagents") or []:
        p = Path(extra)
        if p not in files and p.is_file():
            files.append(p)
    return files


_FORMAT = {"claude-code": "claude-code", "gemini": "gemini", "codex": "codex"}


def convert_session(agent: str, st: dict[str, Any], out: Path, layout: str, memo: Path | None = None) -> list[str]:
    """Write the session's STS files (main and sub-agents) into *out*; returns their names.

    With *memo* (where the converter's state is kept between events), a
    Claude Code session written as STS is brought up to date reading only
    what its transcript gained since (see ``live``).
    """
    sources = _sources(agent, st)
    if memo is not None and agent == "claude-code" and layout == "sts" and sources[0].is_file():
        from . import live

        return live.update(sources[0], sources[1:], out, memo)
    from .._convert import convert_file, output_name, sts_bytes, update_file
    from .._convert.to_pi import pi_bytes

    names: list[str] = []
    render = pi_bytes if layout == "pi" else sts_bytes
    for src in sources:
        if not src.is_file():
            continue
        for trace in convert_file(src, _FORMAT[agent]).traces:
            name = output_name(trace)
            data = render(trace)
            update_file(out / name, data)
            names.append(name)
    return names


def _sync(out: Path, names: list[str], to: str, layout: str) -> None:
    from .._hub import flush_sync, schedule_sync

    for name in names:
        schedule_sync(out / name, to, layout)
    flush_sync()


def process(opts: hook.Options, key: str) -> None:
    """Convert until the session's STS file is as new as its last event."""
    state = opts.state
    while True:
        with hook._Flock(os.path.join(state, key + ".lock")) as lock:
            # Who holds it, for `status` and for a test that kills the worker.
            os.ftruncate(lock.fd, 0)
            os.pwrite(lock.fd, str(os.getpid()).encode(), 0)
            while True:
                st = hook.read_json(os.path.join(state, key + ".json"))
                done = hook.read_json(os.path.join(state, key + ".done")) or {}
                if st is None or int(done.get("gen") or 0) >= int(st.get("gen") or 0):
                    break
                _step(opts, key, st, done)
        # An event that came while we held the lock found it taken and
        # started no worker: look again now that it is free.
        if not hook.needs_work(state, key):
            return


def _step(opts: hook.Options, key: str, st: dict[str, Any], done: dict[str, Any]) -> None:
    state = opts.state
    out = Path(st.get("out") or opts.out)
    layout = str(st.get("layout") or opts.layout)
    result: dict[str, Any] = {"gen": st.get("gen"), "at": time.time(), "files": done.get("files") or []}
    if st.get("transcript"):
        try:
            memo = Path(state, key + ".conv")
            result["files"] = convert_session(opts.agent, st, out, layout, memo)
            if st.get("closed"):
                # An ended session's converter state (MBs for a long one) is dropped:
                # if it is resumed, its next event converts the transcript whole once.
                memo.unlink(missing_ok=True)
        except Exception as exc:
            hook.log(state, f"worker {key}: cannot convert {st.get('transcript')}: {type(exc).__name__}: {exc}")
            result["error"] = f"{type(exc).__name__}: {exc}"
    sync_to = st.get("sync_to") or opts.sync_to
    if st.get("closed") and sync_to and result["files"] and "error" not in result:
        try:
            _sync(out, result["files"], str(sync_to), layout)
            result["synced"] = st.get("gen")
        except Exception as exc:
            hook.log(state, f"worker {key}: cannot sync to {sync_to}: {type(exc).__name__}: {exc}")
    hook.write_json(os.path.join(state, key + ".done"), result)


def reconcile(opts: hook.Options, *, force: bool = False) -> list[str]:
    """Complete every session of *opts.out* whose agent is gone, bring every file up to date; returns the keys worked on."""
    state = opts.state
    hook.close_abandoned(opts, cwd=None, force=force)
    keys = []
    try:
        names = sorted(os.listdir(state))
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json") or name.endswith(".tmp"):
            continue
        key = name[: -len(".json")]
        st = hook.read_json(os.path.join(state, name))
        if st is None:
            continue
        agent = st.get("agent") if st.get("agent") in hook.AGENTS else opts.agent
        mine = hook.Options(str(agent), opts.out, st.get("sync_to") or opts.sync_to, str(st.get("layout") or opts.layout))
        if st.get("transcript") and not st.get("closed"):
            # Lines may have come after the last event (the reply a closed
            # terminal never announced): convert again in any case.
            _bump(state, key)
        if hook.needs_work(state, key):
            process(mine, key)
            keys.append(key)
    return keys


def _bump(state: str, key: str) -> None:
    with hook._Flock(os.path.join(state, key + ".state.lock")):
        path = os.path.join(state, key + ".json")
        st = hook.read_json(path)
        if st is not None:
            st["gen"] = int(st.get("gen") or 0) + 1
            hook.write_json(path, st)


def main(argv: list[str]) -> int:
    state = os.path.join(hook.default_out(), hook.STATE_DIR)
    try:
        import logging

        # stderr is the hook log: the converters' and the sync's warnings land there.
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker %(levelname)s %(name)s: %(message)s")
        opts, rest = hook.parse_options(argv)
        state = opts.state
        keys = rest[rest.index("--keys") + 1 :] if "--keys" in rest else []
        for key in keys:
            process(opts, key)
    except BaseException as exc:
        hook.log(state, f"worker: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``ststrace hooks``: live capture of coding agents through their own hooks."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ._common import CliError

__all__ = ["run", "setup"]

_AGENTS = ("claude-code", "gemini", "codex")
_DESCRIPTION = """\
Capture coding agents' sessions live, as STS files, through the agents' own hooks.

  install AGENT    add ststrace's entries to the agent's settings (project or user scope)
  status           what is installed where, where the sessions go, the last event seen
  uninstall AGENT  remove them again (the file comes back as it was before install)
  run AGENT        the hook itself (the agent runs it on each event; reads the event on stdin)
  reconcile        complete sessions whose end event never came, bring every file up to date

AGENT is claude-code, gemini or codex. Each agent session becomes one
STS file in --out (default: $XDG_DATA_HOME/ststrace/sessions), kept up to date
event by event, redacted, equal to what `ststrace convert` writes for its
transcript; sub-agents become linked child sessions. The hook prints nothing
and always exits 0; its errors go to OUT/.ststrace-hooks/hooks.log.
"""


def setup(p: argparse.ArgumentParser) -> None:
    p.description = _DESCRIPTION
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def scope(q: argparse.ArgumentParser) -> None:
        g = q.add_mutually_exclusive_group()
        g.add_argument("--project", metavar="DIR", help="the project's settings (DIR/.claude/settings.json, DIR/.gemini/settings.json, DIR/.codex/hooks.json); default: the current directory")
        g.add_argument("--user", action="store_true", help="the user's settings (~/.claude/settings.json, ~/.gemini/settings.json, ~/.codex/hooks.json)")

    i = sub.add_parser("install", help="add the hooks to an agent's settings")
    i.add_argument("agent", choices=_AGENTS, metavar="AGENT", help="claude-code, gemini or codex")
    scope(i)
    i.add_argument("--out", metavar="DIR", help="directory for the STS files (default: $XDG_DATA_HOME/ststrace/sessions)")
    i.add_argument("--sync-to", metavar="URL", help="upload each session once it has ended (hf://buckets/USER/NAME[/prefix] or hf://datasets/...)")
    i.add_argument("--as", dest="layout", choices=("sts", "pi"), default="sts", help="file layout: sts (default) or pi")

    u = sub.add_parser("uninstall", help="remove the hooks from an agent's settings")
    u.add_argument("agent", choices=_AGENTS, metavar="AGENT")
    scope(u)

    s = sub.add_parser("status", help="what is installed, where sessions go, the last event seen")
    s.add_argument("--project", metavar="DIR", help="the project directory to look at (default: the current one)")

    r = sub.add_parser("run", help="the hook (run by the agent; reads the event JSON on stdin, always exits 0)")
    r.add_argument("words", nargs=argparse.REMAINDER, metavar="AGENT [--out DIR] [--sync-to URL] [--as sts|pi]")

    c = sub.add_parser("reconcile", help="complete the sessions whose end event never came")
    c.add_argument("--out", metavar="DIR", help="the sessions directory (default: $XDG_DATA_HOME/ststrace/sessions)")
    c.add_argument("--all", action="store_true", help="also close open sessions whose agent process cannot be checked (not Linux)")


def run(args: argparse.Namespace) -> int:
    action = args.action
    if action == "run":
        from .._hooks import hook

        return hook.run(list(args.words))
    if action == "install":
        return _install(args)
    if action == "uninstall":
        return _uninstall(args)
    if action == "status":
        return _status(args)
    return _reconcile(args)


def _place(args: argparse.Namespace) -> object:
    from .._hooks import settings

    try:
        return settings.place(args.agent, project=args.project, user=args.user)
    except settings.SettingsError as exc:
        raise CliError(str(exc)) from None


def _install(args: argparse.Namespace) -> int:
    from .._hooks import hook, settings

    where = _place(args)
    assert isinstance(where, settings.Place)
    if args.sync_to:
        from .._hub import parse_target

        try:
            parse_target(to=args.sync_to)
        except ValueError as exc:
            raise CliError(f"--sync-to: {exc}") from None
    out = os.path.abspath(os.path.expanduser(args.out or hook.default_out()))
    opts = hook.Options(args.agent, out, args.sync_to, args.layout)
    try:
        done = settings.install(where, settings.hook_command(opts))
    except settings.SettingsError as exc:
        raise CliError(str(exc)) from None
    print(f"{args.agent} ({where.scope}): {done} in {where.path}; sessions go to {out}")
    if args.agent == "codex" and done != "already installed":
        print("codex runs these hooks only once you trust them: start `codex` here and review them with /hooks")
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    from .._hooks import settings

    where = _place(args)
    assert isinstance(where, settings.Place)
    try:
        done = settings.uninstall(where)
    except settings.SettingsError as exc:
        raise CliError(str(exc)) from None
    print(f"{args.agent} ({where.scope}): {done} ({where.path})")
    return 0


def _status(args: argparse.Namespace) -> int:
    from .._hooks import hook, settings

    for agent in settings.EVENTS:
        for user in (False, True):
            where = settings.place(agent, project=args.project, user=user)
            command, error = settings.read_installed(where)
            head = f"{agent} ({where.scope}, {where.path})"
            if error:
                print(f"{head}: cannot read: {error}")
                continue
            if command is None:
                print(f"{head}: not installed")
                continue
            opts = settings.options_of(command)
            if opts is None:
                print(f"{head}: installed, but its command cannot be read: {command}")
                continue
            extra = f", synced to {opts.sync_to}" if opts.sync_to else ""
            print(f"{head}: installed; sessions in {opts.out}{extra}; log {Path(opts.state) / hook.LOG_NAME}")
            if agent == "codex":
                # Codex keeps trust as hashes only it computes: its /hooks view is the authority.
                print("  trust: not checked by ststrace; Codex skips untrusted hooks (see /hooks in codex)")
            print(f"  last event: {_last_event(opts)}")
    return 0


def _last_event(opts: object) -> str:
    from .._hooks import hook

    assert isinstance(opts, hook.Options)
    best: dict[str, object] | None = None
    try:
        names = os.listdir(opts.state)
    except OSError:
        return "none yet"
    for name in names:
        if name.startswith(opts.agent + "-") and name.endswith(".json"):
            st = hook.read_json(os.path.join(opts.state, name))
            if st and isinstance(st.get("last_event_at"), (int, float)):
                if best is None or float(st["last_event_at"]) > float(best["last_event_at"]):  # type: ignore[arg-type]
                    best = st
    if best is None:
        return "none yet"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(best["last_event_at"])))  # type: ignore[arg-type]
    ended = "ended" if best.get("closed") else "open"
    return f"{best.get('last_event')} at {when}, session {best.get('session')} ({ended})"


def _reconcile(args: argparse.Namespace) -> int:
    from .._hooks import hook, worker

    out = os.path.abspath(os.path.expanduser(args.out or hook.default_out()))
    if not os.path.isdir(os.path.join(out, hook.STATE_DIR)):
        print(f"no hooked sessions in {out}", file=sys.stderr)
        return 0
    keys = worker.reconcile(hook.Options("claude-code", out, None, "sts"), force=args.all)
    print(f"brought {len(keys)} session{'' if len(keys) == 1 else 's'} up to date in {out}")
    return 0

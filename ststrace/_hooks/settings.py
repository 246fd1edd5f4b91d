"""Install, find and remove ststrace's hook entries in the agents' settings files.

Claude Code (``.claude/settings.json``) and Gemini CLI (``.gemini/settings.json``)
keep hooks in JSON as ``hooks: {Event: [{matcher?, hooks: [{type: command,
command}]}]}``. Our entries are the ones whose command runs ``hook.py`` (or
``ststrace hooks run``); everything else in the file is left as it is. The
file as it was before the first install is kept aside, so uninstall gives it
back byte for byte when nothing else changed in between (and removes only our
entries when something did).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import hook

#: The events each agent is hooked on: every one after which its transcript has grown, and its start and end.
EVENTS: dict[str, tuple[str, ...]] = {
    "claude-code": ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop", "PreCompact", "SessionEnd"),
    # Not AfterModel: it fires on every streamed chunk.
    "gemini": ("SessionStart", "AfterAgent", "AfterTool", "PreCompress", "SessionEnd"),
    # Codex has no end event: sessions close at the next start or by reconcile.
    "codex": ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"),
}
#: Seconds (Claude Code) or milliseconds (Gemini CLI) the agent waits at most.
_TIMEOUT = {"claude-code": 10, "gemini": 10_000, "codex": 10}
_OURS = re.compile(r"ststrace[/\\]_hooks[/\\]hook\.py|(^|[\s'\"/])ststrace['\"]?\s+hooks\s+run\s|-m\s+ststrace\s+hooks\s+run\s")


class SettingsError(Exception):
    """A settings file ststrace will not edit (it left the file untouched)."""


@dataclass(frozen=True)
class Place:
    agent: str
    scope: str  # "project" or "user"
    path: Path


def place(agent: str, *, project: str | None = None, user: bool = False) -> Place:
    """The settings file of *agent* for the project directory *project* (default: the current one) or the user."""
    if agent not in EVENTS:
        raise SettingsError(f"unknown agent {agent!r}; choose one of: {', '.join(EVENTS)}")
    if agent == "codex":
        # Codex reads hooks.json beside each config layer (the user's is $CODEX_HOME).
        if user:
            return Place(agent, "user", Path(os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")) / "hooks.json")
        return Place(agent, "project", Path(project or ".").resolve() / ".codex" / "hooks.json")
    folder = ".claude" if agent == "claude-code" else ".gemini"
    if user:
        if agent == "claude-code" and os.environ.get("CLAUDE_CONFIG_DIR"):
            return Place(agent, "user", Path(os.environ["CLAUDE_CONFIG_DIR"]) / "settings.json")
        home = os.environ.get("GEMINI_CLI_HOME") if agent == "gemini" else None
        return Place(agent, "user", Path(home or os.path.expanduser("~")) / folder / "settings.json")
    return Place(agent, "project", Path(project or ".").resolve() / folder / "settings.json")


def hook_command(opts: hook.Options) -> str:
    """The shell command the agent runs: this interpreter, in isolated mode, on ``hook.py`` (absolute paths)."""
    return shlex.join([sys.executable, "-I", os.path.abspath(hook.__file__), *opts.argv()])


def is_ours(command: Any) -> bool:
    return isinstance(command, str) and _OURS.search(command) is not None


def _backup_path(path: Path) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return Path(base) / "ststrace" / "settings-backup" / f"{digest}.json"


def _load(path: Path) -> tuple[dict[str, Any], bytes | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    try:
        obj = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise SettingsError(f"{path}: not valid JSON ({exc}); left untouched") from None
    if not isinstance(obj, dict):
        raise SettingsError(f"{path}: holds a JSON {type(obj).__name__}, not an object; left untouched")
    hooks = obj.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise SettingsError(f"{path}: its \"hooks\" is not an object; left untouched")
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise SettingsError(f"{path}: hooks.{event} is not a list; left untouched")
    return obj, raw


def _dump(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    """*obj* without our entries (and without the lists and groups that held only ours)."""
    out = dict(obj)
    hooks = obj.get("hooks")
    if not isinstance(hooks, dict):
        return out
    new_hooks: dict[str, Any] = {}
    for event, groups in hooks.items():
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept.append(group)
                continue
            mine = [h for h in inner if isinstance(h, dict) and is_ours(h.get("command"))]
            if not mine:
                kept.append(group)
            elif len(mine) < len(inner):
                kept.append({**group, "hooks": [h for h in inner if h not in mine]})
        if kept or not groups:
            new_hooks[event] = kept
    if new_hooks or not hooks:
        out["hooks"] = new_hooks
    else:
        del out["hooks"]
    return out


def installed_commands(obj: dict[str, Any]) -> dict[str, str]:
    """Event -> our command in it."""
    found: dict[str, str] = {}
    hooks = obj.get("hooks")
    for event, groups in (hooks.items() if isinstance(hooks, dict) else []):
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            for h in inner if isinstance(inner, list) else []:
                if isinstance(h, dict) and is_ours(h.get("command")):
                    found[event] = h["command"]
    return found


def install(where: Place, command: str) -> str:
    """Add our entries to *where*; returns what was done, in a few words."""
    obj, raw = _load(where.path)
    wanted = {e: command for e in EVENTS[where.agent]}
    if installed_commands(obj) == wanted:
        return "already installed"
    updating = bool(installed_commands(obj))
    backup = _backup_path(where.path)
    if not updating or not backup.exists():
        backup.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "path": str(where.path),
            "existed": raw is not None,
            "dir_existed": where.path.parent.is_dir(),
            "text": raw.decode("utf-8", "surrogateescape") if raw else "",
        }
        backup.write_text(json.dumps(record), encoding="utf-8")
    new = _strip(obj)
    hooks = dict(new.get("hooks") or {})
    for event in EVENTS[where.agent]:
        entry: dict[str, Any] = {"type": "command", "command": command, "timeout": _TIMEOUT[where.agent]}
        if where.agent == "gemini":
            entry["name"] = "ststrace"
        group: dict[str, Any] = {"hooks": [entry]}
        if where.agent == "gemini" and event in ("AfterTool",):
            group = {"matcher": "*", **group}
        hooks[event] = [*(hooks.get(event) or []), group]
    new["hooks"] = hooks
    _write(where.path, _dump(new))
    return "updated" if updating else "installed"


def uninstall(where: Place) -> str:
    obj, raw = _load(where.path)
    if raw is None or not installed_commands(obj):
        return "not installed"
    stripped = _strip(obj)
    backup = _backup_path(where.path)
    record = hook.read_json(str(backup))
    before: Any = None
    if record is not None and record.get("path") == str(where.path):
        text = str(record.get("text") or "")
        try:
            before = json.loads(text) if text.strip() else {}
        except ValueError:
            before = None
    if before is not None and before == stripped:
        # Nothing else changed since install: give the file back as it was.
        if record is not None and not record.get("existed"):
            where.path.unlink()
            if record.get("dir_existed") is False:
                try:
                    where.path.parent.rmdir()  # ours, if still empty
                except OSError:
                    pass
        else:
            _write(where.path, str(record.get("text") if record else "").encode("utf-8", "surrogateescape"))
    else:
        _write(where.path, _dump(stripped))
    backup.unlink(missing_ok=True)
    return "uninstalled"


def read_installed(where: Place) -> tuple[str | None, str | None]:
    """(our command, or None; an error reading the file, or None)."""
    try:
        obj, _ = _load(where.path)
    except SettingsError as exc:
        return None, str(exc)
    found = installed_commands(obj)
    return (next(iter(found.values())) if found else None), None


def options_of(command: str) -> hook.Options | None:
    """The options an installed command passes to the hook."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, w in enumerate(words):
        if w in hook.AGENTS:
            try:
                return hook.parse_options(words[i:])[0]
            except ValueError:
                return None
    return None

"""STS message trees, as llama.app (the llama.cpp web UI) writes them.

Every message carries ``id``, ``parent`` and ``children``; the header's
``currNode`` is the message the user last looked at. The first message is a
``type: "root"`` placeholder (``role: "system"``, empty content) that only
anchors the tree, and a regenerated reply or an edited prompt leaves the old
one as a sibling. What llama.app shows is the path from the root to
``currNode`` (else to the last leaf), without the placeholder; the other
leaves are branches the user moved away from.

Pure functions over message dicts, shared by the reader, ``convert`` and
``view``; a file without tree fields is a flat list and passes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["Branch", "branches", "is_placeholder", "is_tree", "resolve", "side_branches"]

Message = dict[str, Any]


def is_placeholder(msg: Mapping[str, Any]) -> bool:
    """The tree's root: no message, only an anchor."""
    return msg.get("type") == "root" and not msg.get("content")


def is_tree(header: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the messages form a llama.app tree: linked by ``id`` and ``parent`` /
    ``children`` (a ``currNode`` in the header of a flat file changes nothing)."""
    return any(
        isinstance(m.get("id"), str) and ("parent" in m or isinstance(m.get("children"), list)) for m in messages[:4]
    )


@dataclass
class Branch:
    """One root-to-leaf path: its messages (no placeholder), its leaf id, and
    whether it is the one llama.app shows."""

    leaf: str | None
    messages: list[Message]
    active: bool


def _index(messages: Sequence[Message]) -> dict[str, Message]:
    by_id: dict[str, Message] = {}
    for m in messages:
        mid = m.get("id")
        if isinstance(mid, str) and mid not in by_id:
            by_id[mid] = m
    return by_id


def _path(node: Message, by_id: Mapping[str, Message]) -> list[Message]:
    """Root-to-*node* messages, placeholder left out; a cycle or a missing parent ends the walk."""
    out: list[Message] = []
    seen: set[int] = set()
    current: Message | None = node
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if not is_placeholder(current):
            out.append(current)
        parent = current.get("parent")
        current = by_id.get(parent) if isinstance(parent, str) else None
    out.reverse()
    return out


def _leaves(messages: Sequence[Message], by_id: Mapping[str, Message]) -> list[Message]:
    parents = {p for m in messages if isinstance(p := m.get("parent"), str) and p in by_id}
    return [m for m in messages if not (isinstance(m.get("id"), str) and m["id"] in parents) and not is_placeholder(m)]


def _start(header: Mapping[str, Any], messages: Sequence[Message], by_id: Mapping[str, Message]) -> Message | None:
    """The message the active path ends at: ``currNode``, else the last leaf."""
    curr = header.get("currNode")
    if isinstance(curr, str) and curr in by_id:
        return by_id[curr]
    leaves = _leaves(messages, by_id)
    return leaves[-1] if leaves else None


def resolve(header: Mapping[str, Any], messages: list[Message]) -> list[Message]:
    """The messages llama.app shows: the active path of a tree, or *messages*
    themselves (placeholders left out) when they are a flat list."""
    if not is_tree(header, messages):
        return [m for m in messages if not is_placeholder(m)] if any(map(is_placeholder, messages)) else messages
    by_id = _index(messages)
    start = _start(header, messages, by_id)
    return _path(start, by_id) if start is not None else []


def branches(header: Mapping[str, Any], messages: list[Message]) -> list[Branch]:
    """Every root-to-leaf path, the active one first (``convert --all-branches``)."""
    active = resolve(header, messages)
    if not is_tree(header, messages):
        return [Branch(None, active, True)]
    by_id = _index(messages)
    start = _start(header, messages, by_id)
    out = [Branch(start.get("id") if start is not None else None, active, True)]
    for leaf in _leaves(messages, by_id):
        if leaf is start:
            continue
        path = _path(leaf, by_id)
        if path:
            out.append(Branch(leaf.get("id"), path, False))
    return out


def side_branches(header: Mapping[str, Any], messages: list[Message]) -> list[dict[str, Any]]:
    """The branches off the active path, for ``view``: each as ``{"after": i,
    "leaf": id, "messages": [...]}``, its messages from where it leaves the
    active path, ``after`` the index (in the active path) of the last message
    they share (-1: none)."""
    all_branches = branches(header, messages)
    active = all_branches[0].messages
    out: list[dict[str, Any]] = []
    for b in all_branches[1:]:
        shared = 0
        while shared < min(len(active), len(b.messages)) and active[shared] is b.messages[shared]:
            shared += 1
        rest = b.messages[shared:]
        if rest:
            out.append({"after": shared - 1, "leaf": b.leaf, "messages": rest})
    return out

"""The conversation across turns: record each input message once.

Agent loops resend the whole conversation with every model call; ``@llm`` and
the integrations hand it to ``Session._record_inputs``, which records only
what the session has not recorded yet. Messages are compared by
:func:`fingerprint`; a session remembers the last few conversations
(:data:`MAX_CONVERSATIONS`, several agents may share one session) and the
fingerprints of its own latest replies (:data:`MAX_REPLIES`), which anchor
where a conversation kept to a sliding window continues.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from . import _pairing, _records
from ._text import content_text

__all__ = [
    "MAX_CONVERSATIONS",
    "MAX_REPLIES",
    "InputState",
    "after_new_reply",
    "continue_conversation",
    "fingerprint",
    "new_inputs",
    "new_start",
]


class InputState(Protocol):
    """What a session keeps for :func:`new_inputs` (``Session`` has these)."""

    #: Recent conversations, as fingerprint lists (at most MAX_CONVERSATIONS).
    _conversations: deque[list[int]]
    #: (server-side conversation, turn's fingerprints) already recorded.
    _stateful_turns: deque[tuple[str, tuple[int, ...]]]
    #: Fingerprints of the session's latest replies.
    _replies: deque[int]
    #: Messages recorded with s.user()/s.system() since the last model call.
    _direct: deque[dict[str, Any]]
    #: The last system message recorded from inputs.
    _last_system: int | None
    #: Tool calls waiting for their result (see _pairing).
    _pending: OrderedDict[str, _pairing.Call]


def fingerprint(msg: Mapping[str, Any]) -> int:
    """What tells two messages apart across turns (role, content, ids), as one int."""
    calls = msg.get("toolCalls")
    call_ids = tuple(c.get("id") for c in calls) if calls else ()
    return hash((msg.get("role"), msg.get("content"), msg.get("toolCallId"), call_ids))


def new_start(prev: list[int], cur: list[int]) -> int:
    """Index in *cur* where messages not seen in *prev* begin.

    Agent loops resend the whole conversation every turn, and sometimes drop
    old messages. Align by position: the common case is a pure append; else
    find where the tail of *prev* sits in *cur*, preferring the placement with
    the longest matching run, so a repeated "ok" is still told apart.
    """
    n, m = len(prev), len(cur)
    if n == 0:
        return 0
    if m >= n and cur[:n] == prev:
        return n
    for i in range(n - 1, -1, -1):
        best_j, best_run = -1, 0
        target = prev[i]
        for j in range(m):
            if cur[j] != target:
                continue
            run = 1
            while run <= j and run <= i and cur[j - run] == prev[i - run]:
                run += 1
            if run > best_run:
                best_j, best_run = j, run
        if best_j >= 0:
            return best_j + 1
    return 0


#: Conversations remembered per session (several agents may share one).
MAX_CONVERSATIONS = 8
#: Latest replies remembered (see :func:`after_new_reply`).
MAX_REPLIES = 64


def continue_conversation(
    convs: list[list[int]], cur: list[int], replies: Iterable[int] = ()
) -> tuple[int, int]:
    """(index in *cur* where new messages begin, which of *convs* it continues or -1).

    A planner and its workers, or sub-agents, may share one session, each with
    its own conversation: *cur* continues the one it overlaps most. A pure
    append is checked first, since it is by far the common case.
    """
    best_start, best_slot = 0, -1
    for slot, prev in enumerate(convs):
        n = len(prev)
        if n > best_start and len(cur) >= n and cur[:n] == prev:
            best_start, best_slot = n, slot
    if best_slot >= 0:
        return best_start, best_slot
    for slot, prev in enumerate(convs):
        start = new_start(prev, cur)
        if start > best_start:
            best_start, best_slot = start, slot
    if best_slot >= 0 and replies:
        # Checked on the conversation *cur* continues only: another one
        # lacks the reply as well.
        anchored = after_new_reply(convs[best_slot], cur, replies)
        if anchored is not None:
            best_start = anchored
    return best_start, best_slot


def after_new_reply(prev: list[int], cur: list[int], replies: Iterable[int]) -> int | None:
    """Index in *cur* after the last reply this session recorded (*replies*,
    fingerprints) that *prev* did not hold, if any: that reply answered an
    earlier call, so what follows it is new. Without this anchor a history kept
    to a sliding window ([system, reply 1, "ok"] after [system, reply 0, "ok"])
    had its new "ok" matched to the old one and the user's turn dropped."""
    recorded = set(replies)  # one C call over ints: no other thread runs meanwhile
    known = set(prev)
    for k in range(len(cur) - 1, -1, -1):
        if cur[k] in recorded and cur[k] not in known:
            return k + 1
    return None


def new_inputs(
    state: InputState,
    messages: list[dict[str, Any]],
    fps: list[int],
    stateful: str | None = None,
) -> list[dict[str, Any]]:
    """The records for the user/system/tool messages of a model call's
    conversation *messages* (fingerprints *fps*) that *state*'s session has not
    recorded yet (see :func:`new_start`); updates *state* to have seen them.

    *stateful* names a server-side conversation the call continues
    (``previous_response_id=...``): *messages* are then the new turn only, all
    new unless the very same turn was sent on the same conversation before (a
    retry). The caller holds the session's state lock."""
    to_emit: list[dict[str, Any]] = []
    direct: list[int] | None = None
    new_system: dict[str, Any] | None = None
    # A conversation this session has not seen (the first call of a
    # session started from an earlier one) holds assistant turns no reply
    # here recorded: they are history and are recorded with the rest.
    history: set[int] | None = None
    if stateful is not None:
        turn = (stateful, tuple(fps))
        start = len(messages) if turn in state._stateful_turns else 0
        state._stateful_turns.append(turn)
    else:
        start, slot = continue_conversation(list(state._conversations), fps, state._replies)
        if slot < 0:
            state._conversations.append(fps)
            history = set(state._replies)
        else:
            if start > 0 and messages[0].get("role") == "system" and fps[0] not in state._conversations[slot]:
                # The same conversation under new instructions (an
                # agent handing off to another): record them where
                # they start to apply.
                new_system = messages[0]
            state._conversations[slot] = fps
    for m, fp in zip(messages[start:], fps[start:]):
        role = m.get("role")
        if role == "tool":
            cid = m.get("toolCallId")
            if not isinstance(cid, str):
                # A result sent back without its call's id (CrewAI's
                # streamed LiteLLM calls drop it) answers the oldest
                # call still waiting, of its tool when it names one.
                name = m.get("name")
                cid = _pairing.oldest_named(state._pending, name)
            # Only results of calls still waiting: a result already
            # recorded by @tool (or one with no call) is skipped.
            if isinstance(cid, str) and _pairing.answer(state._pending, cid):
                to_emit.append(_records.tool_result(cid, content_text(m.get("content"))))
        elif role == "assistant":
            if history is None or fp in history:
                continue  # this session's own reply, recorded when it came
            calls = m.get("toolCalls")
            if calls:
                _pairing.register(state._pending, calls)  # so the results that follow are recorded
            to_emit.append(_records.message("assistant", m.get("content"), tool_calls=calls or None))
        elif role in ("user", "system"):
            if direct is None:
                direct = [fingerprint(d) for d in list(state._direct)]
            if fp in direct:
                direct.remove(fp)  # recorded directly with s.user()
                continue
            if role == "system":
                # Instructions are sent again with every stateful
                # call (the server does not keep them): recorded
                # again only when they change.
                if stateful is not None and fp == state._last_system:
                    continue
                state._last_system = fp
            to_emit.append(_records.message(role, m.get("content")))
    if new_system is not None:
        state._last_system = fps[0]
        at = next((i for i, m in enumerate(to_emit) if m["role"] == "user"), len(to_emit))
        to_emit.insert(at, _records.message("system", new_system.get("content")))
    state._direct.clear()
    return to_emit

"""The conversation across turns: record each input message once.

Agent loops resend the whole conversation with every model call; ``@llm`` and
the integrations hand it to ``Session._record_inputs``, which records only
what the session has not recorded yet. Messages are compared by
:func:`fingerprint`; a session remembers the last few conversations
(:data:`MAX_CONVERSATIONS`, several agents may share one session) and the
fingerprints of its own latest replies (:data:`MAX_REPLIES`), which anchor
where a conversation kept to a sliding window continues.

A conversation that only grew is recognised without reading it again
(:class:`Known`, :func:`appended`): the call's message objects are compared
by identity with those it held last time, so only the new ones are
converted and fingerprinted; any doubt falls back to converting the whole
conversation and :func:`continue_conversation`.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from . import _pairing, _records
from ._text import content_text

__all__ = [
    "MAX_CONVERSATIONS",
    "MAX_REPLIES",
    "InputState",
    "Known",
    "after_new_reply",
    "appended",
    "continue_conversation",
    "fingerprint",
    "new_inputs",
    "new_start",
    "remember",
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
    #: The conversations as last given, item by item (see :func:`appended`).
    _histories: deque[Known]


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
    return _emit_from(state, messages, fps, start, history, stateful, new_system)


def _emit_from(
    state: InputState,
    messages: list[dict[str, Any]],
    fps: list[int],
    start: int,
    history: set[int] | None,
    stateful: str | None,
    new_system: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """The records for ``messages[start:]`` (see :func:`new_inputs`)."""
    to_emit: list[dict[str, Any]] = []
    direct: list[int] | None = None
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


#: The fast path of :func:`appended`; the tests turn it off to compare both paths.
INCREMENTAL = True

Convert = Callable[[Sequence[Any]], list[dict[str, Any]] | None]


class Known:
    """A conversation as the session last saw it given, item by item.

    *items* are the caller's message objects (a copy of the list, never the
    caller's list itself), *conv* the fingerprints recorded for them, the very
    list :attr:`InputState._conversations` holds (extended in place), *lead*
    the system messages given beside the list (``system=``), *tail* what the
    last item converted to, compared again on the next call.
    """

    __slots__ = ("raw", "items", "conv", "lead", "tail")

    def __init__(
        self, raw: Sequence[Any], lead: list[dict[str, Any]], conv: list[int], tail: list[dict[str, Any]]
    ) -> None:
        self.raw = raw
        self.items = list(raw)
        self.lead = lead
        self.conv = conv
        self.tail = tail


def _still_holds(known: Known, raw: Sequence[Any], convert: Convert) -> bool:
    """Whether *raw* starts with the items *known* holds, unchanged.

    The same list object grown (``messages.append``) is checked in constant
    time: its first and its last known item are the same objects, and that last
    one still converts to what it did (an edit in place of the latest message
    is seen). A replaced or edited message before that, in the same list, is
    not seen: today's full comparison records nothing for it either (it aligns
    the conversations on their tail). A new list object is compared item by
    item at C speed (identity first, then ``==``).
    """
    items = known.items
    n = len(items)
    if n == 0 or len(raw) < n:
        return False
    if raw is known.raw:
        if raw[n - 1] is not items[n - 1] or raw[0] is not items[0]:
            return False
    else:
        try:
            if raw[n - 1] is not items[n - 1] and raw[n - 1] != items[n - 1]:
                return False
            prefix = raw[:n]
            if (prefix if type(prefix) is list else list(prefix)) != items:
                return False
        except Exception:  # an item whose == raises (numpy arrays): not the same
            return False
    return convert(raw[n - 1 : n]) == known.tail


def appended(
    state: InputState, lead: list[dict[str, Any]], raw: Sequence[Any], convert: Convert
) -> list[dict[str, Any]] | None:
    """The records for a conversation that only grew since the session last
    saw it (what :func:`new_inputs` would give for it, converting and
    fingerprinting only the new items), or ``None`` when that is not sure:
    then the caller converts it whole and calls :func:`new_inputs`.
    The caller holds the session's state lock."""
    if not INCREMENTAL:
        return None
    convs = state._conversations
    for known in state._histories:
        if known.lead != lead or not any(c is known.conv for c in convs):
            continue
        if not _still_holds(known, raw, convert):
            continue
        conv = known.conv
        # continue_conversation would pick another conversation at least as
        # long that starts the same way: rare (agents sharing a history),
        # left to the full comparison.
        if any(c is not conv and len(c) >= len(conv) and c[:1] == conv[:1] for c in convs):
            return None
        n = len(known.items)
        new_items = raw[n:]
        messages = convert(new_items)
        if messages is None:
            return None
        fps = [fingerprint(m) for m in messages]
        tail = (convert(raw[-1:]) or []) if len(raw) > n else known.tail
        # Nothing above changed *known*: a conversion that raised left it whole.
        if raw is known.raw:
            known.items.extend(new_items)
        else:
            known.raw = raw
            known.items = list(raw)
        known.tail = tail
        conv.extend(fps)
        return _emit_from(state, messages, fps, 0, None, None, None)
    return None


def remember(
    state: InputState, lead: list[dict[str, Any]], raw: Sequence[Any], fps: list[int], convert: Convert
) -> None:
    """After :func:`new_inputs` recorded the conversation *raw* (fingerprints
    *fps*): remember it for :func:`appended`."""
    convs = state._conversations
    if not raw or not any(c is fps for c in convs):
        return
    keep = [k for k in state._histories if k.raw is not raw and k.conv is not fps and any(c is k.conv for c in convs)]
    state._histories.clear()
    state._histories.extend(keep)
    tail = convert(raw[-1:])
    if tail is not None:
        state._histories.append(Known(raw, lead, fps, tail))

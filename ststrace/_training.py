"""Training rows from outcomes: ``export(format="rewards" | "kto" | "dpo")``.

Built on the ``sft`` row of :mod:`ststrace._export` (messages in TRL's
conversational shape, tools). What each format adds:

``rewards``: the ``sft`` row plus ``reward``, ``rewards``, ``outcome_labels``
(not ``labels``: transformers' trainers take that column for token labels),
``task_id``, ``group_id``, ``sample``; assistant messages keep ``token_ids``
and ``logprobs`` where the trace recorded them.

``kto``: TRL's unpaired preference shape: ``prompt`` (the messages before the
first assistant message), ``completion`` (the rest), ``label`` (``success``
where set, else ``reward >= threshold``), ``tools``, ``reward``, ``session_id``.

``dpo``: TRL's conversational preference shape with an explicit prompt, from
sessions of one ``taskId`` whose rewards differ: ``prompt`` (the longest
common prefix of the two conversations that ends before an assistant
message), ``chosen`` / ``rejected`` (the rest of each), ``tools`` (offered in
either), ``chosen_reward``, ``rejected_reward``, ``task_id``,
``chosen_session``, ``rejected_session``. Pairing needs every session's
reward first: the first pass keeps one small :class:`Summary` per session,
the second reads back only the sessions of one task at a time.

Task and group ids are written as strings (a header may hold either a string
or an int; one column type keeps JSONL and Parquet loadable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ._reader import Trace
from ._tools import merge

__all__ = ["PAIRINGS", "Summary", "dpo_pairs", "dpo_row", "kto_row", "rewards_row", "task_key"]

PAIRINGS = ("best-worst", "all")


def task_key(header: dict[str, Any], key: str = "taskId") -> str | None:
    value = header.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    return str(value)


def _sample(header: dict[str, Any]) -> int | None:
    value = header.get("sample")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _with_tokens(trace: Trace, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """*messages* (the sft row's) with ``token_ids`` / ``logprobs`` of the
    assistant turns that recorded them. The sft row keeps every assistant
    message of the trace, in order: the two lists pair up one to one."""
    recorded = [m for m in trace.messages if m.get("role") == "assistant"]
    out: list[dict[str, Any]] = []
    turn = 0
    for msg in messages:
        if msg.get("role") == "assistant" and turn < len(recorded):
            src = recorded[turn]
            turn += 1
            ids, lps = src.get("tokenIds"), src.get("logprobs")
            if isinstance(ids, list) or isinstance(lps, list):
                msg = dict(msg)
                if isinstance(ids, list):
                    msg["token_ids"] = ids
                if isinstance(lps, list):
                    msg["logprobs"] = lps
        out.append(msg)
    return out


def rewards_row(trace: Trace, sft: dict[str, Any]) -> dict[str, Any]:
    outcome = trace.outcome
    row = dict(sft)
    row["messages"] = _with_tokens(trace, sft["messages"])
    row.update(
        reward=outcome["reward"],
        rewards=dict(outcome["rewards"]),
        outcome_labels=dict(outcome["labels"]),
        success=outcome["success"],
        task_id=task_key(trace.header),
        group_id=task_key(trace.header, "groupId"),
        sample=_sample(trace.header),
    )
    return row


def kto_label(outcome: dict[str, Any], threshold: float) -> bool | None:
    if outcome["success"] is not None:
        return bool(outcome["success"])
    if outcome["reward"] is not None:
        return bool(outcome["reward"] >= threshold)
    return None


def kto_row(trace: Trace, sft: dict[str, Any], threshold: float) -> dict[str, Any] | None:
    """None when the session has no assistant message (nothing to judge)."""
    messages = sft["messages"]
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
    if first is None or first == 0:
        return None
    return {
        "prompt": messages[:first],
        "completion": messages[first:],
        "label": kto_label(trace.outcome, threshold),
        "tools": sft["tools"],
        "reward": trace.outcome["reward"],
        "session_id": trace.id,
    }


class Summary(NamedTuple):
    """What pairing needs of one session: where it is and its reward."""

    file: int  # index into the export's input files
    position: int  # the trace's index among that file's sessions
    reward: float
    session_id: str


def dpo_pairs(sessions: list[Summary], how: str) -> Iterator[tuple[Summary, Summary]]:
    """(chosen, rejected) pairs of one task: the higher reward chosen.

    ``best-worst``: one pair, highest and lowest (the first seen wins a tie);
    ``all``: every pair whose rewards differ."""
    if how == "best-worst":
        best = max(sessions, key=lambda s: s.reward)
        worst = min(sessions, key=lambda s: s.reward)
        if best.reward > worst.reward:
            yield best, worst
        return
    for i, a in enumerate(sessions):
        for b in sessions[i + 1 :]:
            if a.reward > b.reward:
                yield a, b
            elif b.reward > a.reward:
                yield b, a


def _prompt_length(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    """Length of the longest common prefix of *a* and *b* that ends right
    before an assistant message of both (0 when there is none)."""
    k = 0
    for x, y in zip(a, b):
        if x != y:
            break
        k += 1
    while k > 0 and not (k < len(a) and k < len(b) and a[k]["role"] == "assistant" and b[k]["role"] == "assistant"):
        k -= 1
    return k


def dpo_row(
    task: str,
    chosen: tuple[Summary, Trace, dict[str, Any]],
    rejected: tuple[Summary, Trace, dict[str, Any]],
    skipped: Counter[str],
) -> dict[str, Any] | None:
    """The preference row of two sessions of *task*, or None (counted in *skipped*)."""
    (cs, ct, crow), (rs, rt, rrow) = chosen, rejected
    a, b = crow["messages"], rrow["messages"]
    k = _prompt_length(a, b)
    if not any(m["role"] == "user" for m in a[:k]):
        skipped["pairs without a common prompt (system and first user message)"] += 1
        return None
    if a[k:] == b[k:]:
        skipped["pairs whose completions are the same"] += 1
        return None
    return {
        "prompt": a[:k],
        "chosen": a[k:],
        "rejected": b[k:],
        "tools": merge([crow["tools"], rrow["tools"]]),
        "chosen_reward": cs.reward,
        "rejected_reward": rs.reward,
        "task_id": task,
        "chosen_session": ct.id,
        "rejected_session": rt.id,
    }


def group(summaries: Iterable[tuple[str, Summary]]) -> dict[str, list[Summary]]:
    tasks: dict[str, list[Summary]] = {}
    for task, s in summaries:
        tasks.setdefault(task, []).append(s)
    return tasks


#: The Parquet columns of each format, as ``datasets`` feature types.
_JSON_LIST: dict[str, Any] = {"feature": {"_type": "Json"}, "_type": "List"}


def _value(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "_type": "Value"}


FEATURES: dict[str, dict[str, Any]] = {
    "kto": {
        "prompt": _JSON_LIST,
        "completion": _JSON_LIST,
        "label": _value("bool"),
        "tools": _JSON_LIST,
        "reward": _value("float64"),
        "session_id": _value("string"),
    },
    "dpo": {
        "prompt": _JSON_LIST,
        "chosen": _JSON_LIST,
        "rejected": _JSON_LIST,
        "tools": _JSON_LIST,
        "chosen_reward": _value("float64"),
        "rejected_reward": _value("float64"),
        "task_id": _value("string"),
        "chosen_session": _value("string"),
        "rejected_session": _value("string"),
    },
    # rewards: the sft columns (see _export) and these.
    "rewards": {
        "reward": _value("float64"),
        "rewards": {"_type": "Json"},
        "outcome_labels": {"_type": "Json"},
        "success": _value("bool"),
        "task_id": _value("string"),
        "group_id": _value("string"),
        "sample": _value("int64"),
    },
}

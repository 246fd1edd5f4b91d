"""``@llm`` records the conversation it is given exactly once, however the agent
loop resends, grows and truncates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ststrace import Session, llm, tool
from test_decorators_helpers import assert_paired, valid_messages
from test_instrument_helpers import patched, strip

SYSTEM = {"role": "system", "content": "Be brief."}


def roles_and_content(path: Path) -> list[tuple[str, str]]:
    msgs = valid_messages(path)
    assert_paired(msgs)
    return [(m["role"], m["content"]) for m in msgs]


class ScriptedModel:
    """Replies from a script, as OpenAI-style assistant message dicts; keeps what it was sent."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.seen.append([dict(m) for m in messages])
        return self.replies.pop(0)


def openai_call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": orjson.dumps(args).decode()}}


@pytest.mark.parametrize("decorated_tools", [True, False], ids=["@tool", "plain-tools"])
def test_five_turn_loop_with_resend_and_truncation(decorated_tools: bool, tmp_path: Path) -> None:
    """Every turn resends the history; turn 5 keeps only the system prompt and the last
    messages. Each message is recorded once, in order; "ok" sent twice is recorded twice;
    tool results are recorded once whether @tool or the input recorded them."""
    model = ScriptedModel(
        [
            {"role": "assistant", "content": "", "tool_calls": [openai_call("c1", "search", {"q": "cats"})]},
            {"role": "assistant", "content": "Cats sleep a lot."},
            {"role": "assistant", "content": "Anything else?"},
            {"role": "assistant", "content": "", "tool_calls": [openai_call("c2", "search", {"q": "dogs"})]},
            {"role": "assistant", "content": "Dogs too."},
        ]
    )
    chat = llm(model)

    def search(q: str) -> str:
        return f"facts about {q}"

    run_tool = tool(search) if decorated_tools else search

    history: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Tell me about cats."}]
    user_turns = {2: "ok", 3: "ok"}
    path = tmp_path / "t.jsonl"
    with Session(path):
        for turn in range(1, 6):
            sent = history if turn < 5 else [SYSTEM] + history[-3:]  # truncated: system + last three
            reply = chat(messages=sent)
            history.append(reply)
            for tc in reply.get("tool_calls", ()):
                args = orjson.loads(tc["function"]["arguments"])
                history.append({"role": "tool", "tool_call_id": tc["id"], "content": run_tool(**args)})
            if turn in user_turns:
                history.append({"role": "user", "content": user_turns[turn]})
    assert len(model.seen[4]) == 4  # the truncation really happened
    assert roles_and_content(path) == [
        ("system", "Be brief."),
        ("user", "Tell me about cats."),
        ("assistant", ""),
        ("tool", "facts about cats"),
        ("assistant", "Cats sleep a lot."),
        ("user", "ok"),
        ("assistant", "Anything else?"),
        ("user", "ok"),
        ("assistant", ""),
        ("tool", "facts about dogs"),
        ("assistant", "Dogs too."),
    ]
    msgs = valid_messages(path)
    assert [m.get("toolCallId") for m in msgs if m["role"] == "tool"] == ["c1", "c2"]


def test_same_text_twice_in_one_call(tmp_path: Path) -> None:
    """Two identical user messages in one conversation are two messages."""
    chat = llm(ScriptedModel([{"role": "assistant", "content": "a"}]))
    path = tmp_path / "t.jsonl"
    with Session(path):
        chat(messages=[{"role": "user", "content": "ok"}, {"role": "user", "content": "ok"}])
    assert roles_and_content(path) == [("user", "ok"), ("user", "ok"), ("assistant", "a")]


def test_new_conversation_after_a_summary(tmp_path: Path) -> None:
    """A loop that replaces its history with a summary records the new messages, not the system prompt again."""
    chat = llm(ScriptedModel([{"role": "assistant", "content": "a1"}, {"role": "assistant", "content": "a2"}]))
    path = tmp_path / "t.jsonl"
    with Session(path):
        chat(messages=[SYSTEM, {"role": "user", "content": "long question"}])
        chat(messages=[SYSTEM, {"role": "user", "content": "Summary: long question, a1"}, {"role": "user", "content": "next"}])
    assert roles_and_content(path) == [
        ("system", "Be brief."),
        ("user", "long question"),
        ("assistant", "a1"),
        ("user", "Summary: long question, a1"),
        ("user", "next"),
        ("assistant", "a2"),
    ]


def test_messages_recorded_directly_are_not_repeated(tmp_path: Path) -> None:
    """``s.system()`` / ``s.user()`` before the call: the same messages in the input are not recorded again."""
    chat = llm(ScriptedModel([{"role": "assistant", "content": "hello"}]))
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.system("Be brief.")
        s.user("hi")
        chat(messages=[SYSTEM, {"role": "user", "content": "hi"}])
    assert roles_and_content(path) == [("system", "Be brief."), ("user", "hi"), ("assistant", "hello")]


def test_capture_input_false(tmp_path: Path) -> None:
    chat = llm(capture_input=False)(ScriptedModel([{"role": "assistant", "content": "x"}]))
    path = tmp_path / "t.jsonl"
    with Session(path):
        chat(messages=[SYSTEM, {"role": "user", "content": "secret"}])
    assert roles_and_content(path) == [("assistant", "x")]


def anthropic_use(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": args}


@pytest.mark.parametrize("decorated_tools", [True, False], ids=["@tool", "plain-tools"])
def test_anthropic_tool_result_blocks(decorated_tools: bool, tmp_path: Path) -> None:
    """Anthropic form: ``system=``, tool_use blocks, then a user turn holding tool_result blocks
    (and some text). Results keep their tool_use id and are recorded once."""
    replies = [
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, anthropic_use("toolu_a", "lookup", {"k": 1}), anthropic_use("toolu_b", "lookup", {"k": 2})]},
        {"role": "assistant", "content": [{"type": "text", "text": "Both found."}]},
    ]
    seen: list[Any] = []

    @llm
    def chat(messages: list[Any], system: str) -> Any:
        seen.append(list(messages))
        return replies.pop(0)

    def lookup(k: int) -> str:
        return f"value {k}"

    run = tool(lookup) if decorated_tools else lookup
    history: list[dict[str, Any]] = [{"role": "user", "content": "Look up 1 and 2."}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        reply = chat(messages=history, system="Be brief.")
        history.append(reply)
        uses = [b for b in reply["content"] if b["type"] == "tool_use"]
        results = [{"type": "tool_result", "tool_use_id": b["id"], "content": run(**b["input"])} for b in reversed(uses)]
        history.append({"role": "user", "content": results + [{"type": "text", "text": "Please hurry."}]})
        chat(messages=history, system="Be brief.")
    msgs = valid_messages(path)
    assert_paired(msgs)
    summary = [(m["role"], m["content"], m.get("toolCallId")) for m in msgs]
    assert summary == [
        ("system", "Be brief.", None),
        ("user", "Look up 1 and 2.", None),
        ("assistant", "Checking.", None),
        ("tool", "value 2", "toolu_b"),
        ("tool", "value 1", "toolu_a"),
        ("user", "Please hurry.", None),
        ("assistant", "Both found.", None),
    ]


def test_openai_responses_input_items(tmp_path: Path) -> None:
    """Responses form: ``instructions=`` and ``input`` with function_call / function_call_output items."""
    replies = [
        {"role": "assistant", "content": "", "toolCalls": [{"id": "call_1", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "assistant", "content": "done"},
    ]

    @llm
    def respond(input: Any, instructions: str) -> Any:
        return replies.pop(0)

    items: list[Any] = [{"role": "user", "content": "go"}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        respond(input=items, instructions="Be brief.")
        items.append({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": "call_1", "output": "f-result"})
        respond(input=items, instructions="Be brief.")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [(m["role"], m["content"], m.get("toolCallId")) for m in msgs] == [
        ("system", "Be brief.", None),
        ("user", "go", None),
        ("assistant", "", None),
        ("tool", "f-result", "call_1"),
        ("assistant", "done", None),
    ]


def test_identical_resend_is_not_a_new_turn(tmp_path: Path) -> None:
    """The same conversation sent again (a retry, a regenerate) adds no input messages."""

    @llm
    def respond(input: Any) -> str:
        return "r"

    path = tmp_path / "t.jsonl"
    with Session(path):
        respond(input="hello")
        respond(input="hello")
    assert roles_and_content(path) == [("user", "hello"), ("assistant", "r"), ("assistant", "r")]


def test_previous_response_id_inputs_are_new_turns(tmp_path: Path) -> None:
    """Stateful Responses calls: each ``input`` is a new turn even when its text repeats."""

    @llm
    def respond(input: Any, previous_response_id: str | None = None) -> str:
        return "r"

    path = tmp_path / "t.jsonl"
    with Session(path):
        respond(input="ok")
        respond(input="ok", previous_response_id="resp_1")
        respond(input="ok", previous_response_id="resp_2")
    assert roles_and_content(path) == [("user", "ok"), ("assistant", "r")] * 3


def test_stateful_calls_record_resent_instructions_once(tmp_path: Path) -> None:
    """Responses calls resend ``instructions`` with every ``previous_response_id``
    call (the server does not keep them): the system message is recorded once,
    each user turn every time; instructions are recorded again when they change."""

    @llm
    def respond(input: Any, instructions: str, previous_response_id: str | None = None) -> str:
        return "r"

    path = tmp_path / "t.jsonl"
    with Session(path):
        respond(input="one", instructions="Be brief.")
        respond(input="two", instructions="Be brief.", previous_response_id="resp_1")
        respond(input="two", instructions="Be brief.", previous_response_id="resp_2")
        respond(input="three", instructions="Be verbose.", previous_response_id="resp_3")
        respond(input="four", instructions="Be brief.", previous_response_id="resp_4")
    assert roles_and_content(path) == [
        ("system", "Be brief."),
        ("user", "one"),
        ("assistant", "r"),
        ("user", "two"),
        ("assistant", "r"),
        ("user", "two"),
        ("assistant", "r"),
        ("system", "Be verbose."),
        ("user", "three"),
        ("assistant", "r"),
        ("system", "Be brief."),
        ("user", "four"),
        ("assistant", "r"),
    ]


def test_a_retried_stateful_turn_is_recorded_once(tmp_path: Path) -> None:
    """The same new turn sent again on the same server-side conversation (a
    retry) adds no input; on another conversation it is a turn of its own."""

    @llm
    def respond(input: Any, previous_response_id: str | None = None, conversation: Any = None) -> str:
        return "r"

    path = tmp_path / "t.jsonl"
    with Session(path):
        respond(input=[{"role": "user", "content": "next"}], previous_response_id="resp_1")
        respond(input=[{"role": "user", "content": "next"}], previous_response_id="resp_1")
        respond(input=[{"role": "user", "content": "next"}], conversation={"id": "conv_9"})
    assert roles_and_content(path) == [
        ("user", "next"),
        ("assistant", "r"),
        ("assistant", "r"),
        ("user", "next"),
        ("assistant", "r"),
    ]


def test_tool_result_for_an_unknown_call_is_skipped(tmp_path: Path) -> None:
    """A tool result in the input that answers no recorded call is not written (it would be an orphan)."""
    chat = llm(ScriptedModel([{"role": "assistant", "content": "x"}]))
    path = tmp_path / "t.jsonl"
    with Session(path):
        chat(messages=[{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "ghost", "content": "r"}])
    assert roles_and_content(path) == [("user", "q"), ("assistant", "x")]


def test_positional_messages(tmp_path: Path) -> None:
    """The conversation passed positionally is found too."""

    @llm
    def chat(model: str, messages: list[Any]) -> str:
        return "ans"

    path = tmp_path / "t.jsonl"
    with Session(path):
        chat("m", [{"role": "user", "content": "pos"}])
    assert roles_and_content(path) == [("user", "pos"), ("assistant", "ans")]


def test_two_agents_alternating_in_one_session(tmp_path: Path) -> None:
    """A planner and a worker with separate conversations take turns: neither conversation's
    earlier messages are recorded again when it comes back."""
    planner = llm(ScriptedModel([{"role": "assistant", "content": f"plan {i}"} for i in range(2)]))
    worker = llm(ScriptedModel([{"role": "assistant", "content": f"work {i}"} for i in range(2)]))
    plan_history: list[dict[str, Any]] = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "goal"}]
    work_history: list[dict[str, Any]] = [{"role": "system", "content": "You work."}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        for i in range(2):
            plan_history.append(planner(messages=plan_history))
            work_history.append({"role": "user", "content": plan_history[-1]["content"]})
            work_history.append(worker(messages=work_history))
            plan_history.append({"role": "user", "content": f"worker said: {work_history[-1]['content']}"})
    assert roles_and_content(path) == [
        ("system", "You plan."),
        ("user", "goal"),
        ("assistant", "plan 0"),
        ("system", "You work."),
        ("user", "plan 0"),
        ("assistant", "work 0"),
        ("user", "worker said: work 0"),
        ("assistant", "plan 1"),
        ("user", "plan 1"),
        ("assistant", "work 1"),
    ]


def test_new_instructions_mid_conversation_are_recorded_where_they_apply(tmp_path: Path) -> None:
    """An agent hands the conversation to another (new system prompt, same
    history): the new instructions are recorded once, after the new tool
    result and before the next user turn; the old ones are not repeated."""
    model = ScriptedModel(
        [
            {"role": "assistant", "content": "", "tool_calls": [openai_call("h1", "transfer_to_b", {})]},
            {"role": "assistant", "content": "B here."},
            {"role": "assistant", "content": "Still B."},
        ]
    )
    chat = llm(model)
    other = {"role": "system", "content": "You are agent B."}
    path = tmp_path / "t.jsonl"
    with Session(path):
        history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
        reply = chat([SYSTEM, *history])
        history += [reply, {"role": "tool", "tool_call_id": "h1", "content": "{}"}]
        history.append(chat([other, *history]))
        history.append({"role": "user", "content": "and?"})
        chat([other, *history])
    assert roles_and_content(path) == [
        ("system", "Be brief."),
        ("user", "hi"),
        ("assistant", ""),
        ("tool", "{}"),
        ("system", "You are agent B."),
        ("assistant", "B here."),
        ("user", "and?"),
        ("assistant", "Still B."),
    ]


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
]


def _roles_contents(path: Path) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in valid_messages(path)]


# -- a session started from an earlier conversation records it whole ---------------


def test_llm_first_call_records_the_history_assistant_turns(tmp_path: Path) -> None:
    """[system, u1, a1, u2] sent by the first @llm call: all four, then the reply."""
    chat = llm(lambda messages: {"role": "assistant", "content": "r2"})
    with Session(tmp_path / "t.jsonl") as s:
        chat(HISTORY)
        chat([*HISTORY, {"role": "assistant", "content": "r2"}, {"role": "user", "content": "u3"}])
    assert _roles_contents(s.path) == [
        ("system", "Be brief."), ("user", "u1"), ("assistant", "a1"), ("user", "u2"),
        ("assistant", "r2"), ("user", "u3"), ("assistant", "r2"),
    ]


def test_history_tool_calls_and_results_are_recorded_paired(tmp_path: Path) -> None:
    """An earlier turn's tool call and its result, resent in the first call, are both recorded."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
    ]
    chat = llm(lambda messages: "r2")
    with Session(tmp_path / "t.jsonl") as s:
        chat(history)
    msgs = valid_messages(s.path)
    assert [(m["role"], m["content"], m.get("toolCallId")) for m in msgs] == [
        ("user", "u1", None), ("assistant", "", None), ("tool", "42", "c1"),
        ("assistant", "a1", None), ("user", "u2", None), ("assistant", "r2", None),
    ]
    assert msgs[1]["toolCalls"] == [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]


def test_instrumented_openai_first_call_records_history(tmp_path: Path, patched: None) -> None:
    """The real openai client, instrumented, against the fake server."""
    from fakeapi_fixtures import openai_client
    from ststrace.testing import FakeAPI

    with FakeAPI(text_reply="r2") as api, Session(tmp_path / "t.jsonl") as s:
        client = openai_client(api)
        client.chat.completions.create(model="m", messages=HISTORY)
        client.close()
    assert [(m["role"], m["content"]) for m in strip(valid_messages(s.path))] == [
        ("system", "Be brief."), ("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "r2"),
    ]

"""``@tool`` on every kind of function: results recorded with a session, nothing
without one, and the decorated callable introspects like the original."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import orjson
import pytest

from ststrace import Session, tool
from test_decorators_helpers import assert_paired, tool_results, trace_dir_files, valid_messages

# -- the undecorated originals -------------------------------------------------


def sync_fn(x: int, y: int = 2) -> str:
    """Sync doc."""
    return f"{x}+{y}"


async def async_fn(x: int, y: int = 2) -> str:
    """Async doc."""
    return f"{x}+{y}"


def gen_fn(x: int, y: int = 2) -> Iterator[str]:
    """Gen doc."""
    yield f"{x}"
    yield f"+{y}"


async def agen_fn(x: int, y: int = 2) -> AsyncIterator[str]:
    """Agen doc."""
    yield f"{x}"
    yield f"+{y}"


ORIGINALS = {"sync": sync_fn, "async": async_fn, "gen": gen_fn, "agen": agen_fn}


async def run(kind: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call *fn* to completion the way its kind is meant to be used."""
    if kind == "sync":
        return fn(*args, **kwargs)
    if kind == "async":
        return await fn(*args, **kwargs)
    if kind == "gen":
        return "".join(fn(*args, **kwargs))
    return "".join([v async for v in fn(*args, **kwargs)])


def decorated(kind: str) -> Any:
    return tool(ORIGINALS[kind])


KINDS = list(ORIGINALS)


@pytest.mark.parametrize("kind", KINDS)
async def test_records_an_unrequested_call_and_its_result(kind: str, tmp_path: Path) -> None:
    """A tool no model asked for gets a synthesized assistant call, then its result."""
    fn = decorated(kind)
    path = tmp_path / "t.jsonl"
    with Session(path):
        out = await run(kind, fn, 1, y=5)
    assert out == "1+5"
    msgs = valid_messages(path)
    assert [m["role"] for m in msgs] == ["assistant", "tool"]
    call = msgs[0]["toolCalls"][0]
    assert call["function"]["name"] == ORIGINALS[kind].__name__
    assert orjson.loads(call["function"]["arguments"]) == {"x": 1, "y": 5}
    assert msgs[1]["toolCallId"] == call["id"]
    assert msgs[1]["content"] == "1+5"
    assert isinstance(msgs[1]["timestamp"], int)


@pytest.mark.parametrize("kind", KINDS)
async def test_without_a_session_nothing_is_recorded(kind: str) -> None:
    """With no current session the call goes straight through and writes no file."""
    fn = decorated(kind)
    assert await run(kind, fn, 3) == "3+2"
    assert trace_dir_files() == []


@pytest.mark.parametrize("kind", KINDS)
def test_introspection_matches_the_original(kind: str) -> None:
    """signature, name, doc, __wrapped__ and the inspect predicates answer as for the original."""
    orig = ORIGINALS[kind]
    fn = decorated(kind)
    assert inspect.signature(fn) == inspect.signature(orig)
    assert fn.__name__ == orig.__name__
    assert fn.__qualname__ == orig.__qualname__
    assert fn.__doc__ == orig.__doc__
    assert fn.__wrapped__ is orig
    for pred in (
        inspect.iscoroutinefunction,
        inspect.isasyncgenfunction,
        inspect.isgeneratorfunction,
        inspect.isfunction,
    ):
        assert pred(fn) == pred(orig), pred.__name__


@pytest.mark.parametrize("kind", ["gen", "agen"])
def test_generator_objects_are_real_generators(kind: str) -> None:
    """Calling a decorated generator function gives a real (async) generator, with or without a session."""
    fn = decorated(kind)
    check = inspect.isgenerator if kind == "gen" else inspect.isasyncgen
    obj = fn(1)
    assert check(obj)
    if kind == "gen":
        obj.close()


def test_decorator_with_arguments_and_empty_parentheses(tmp_path: Path) -> None:
    """``@tool()`` and ``@tool(name=...)`` work like ``@tool``; the name is used for the call."""

    @tool()
    def plain(a: int) -> int:
        return a

    @tool(name="lookup")
    def renamed(a: int) -> int:
        return a

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert plain(1) == 1
        assert renamed(2) == 2
    msgs = valid_messages(path)
    names = [m["toolCalls"][0]["function"]["name"] for m in msgs if m["role"] == "assistant"]
    assert names == ["plain", "lookup"]
    assert renamed.__name__ == "renamed"


@pytest.mark.parametrize(
    ("result", "content"),
    [
        ("text", "text"),
        ("", ""),
        (None, ""),
        ({"a": [1, 2]}, '{"a":[1,2]}'),
        ([1, "b"], '[1,"b"]'),
        (3.5, "3.5"),
        (True, "true"),
    ],
)
def test_result_content_encoding(result: Any, content: str, tmp_path: Path) -> None:
    """Strings are kept as they are; other values become JSON text."""

    @tool
    def f() -> Any:
        return result

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert f() is result
    assert tool_results(valid_messages(path))[0]["content"] == content


def test_unencodable_result_still_recorded(tmp_path: Path) -> None:
    """A result orjson cannot encode is recorded through the safe encoder, not lost."""

    class Thing:
        def __repr__(self) -> str:
            return "<Thing 7>"

    thing = Thing()

    @tool
    def f() -> Any:
        return {"t": thing, "b": b"xy"}

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert f()["t"] is thing
    content = orjson.loads(tool_results(valid_messages(path))[0]["content"])
    assert content["t"] == "<Thing 7>"
    assert content["b"].startswith("<bytes: 2 bytes")


@pytest.mark.parametrize("kind", KINDS)
async def test_capture_flags(kind: str, tmp_path: Path) -> None:
    """capture_args=False writes "{}", capture_result=False writes "" -- and the pairing still happens."""
    fn = tool(capture_args=False, capture_result=False)(ORIGINALS[kind])
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[{"id": "c1", "function": {"name": ORIGINALS[kind].__name__, "arguments": '{"x": 1}'}}])
        assert await run(kind, fn, 1) == "1+2"
        assert await run(kind, fn, 2) == "2+2"
    msgs = valid_messages(path)
    assert_paired(msgs)
    results = tool_results(msgs)
    assert [r["content"] for r in results] == ["", ""]
    assert results[0]["toolCallId"] == "c1"
    synthesized = msgs[2]
    assert synthesized["role"] == "assistant"
    assert synthesized["toolCalls"][0]["function"]["arguments"] == "{}"


# -- methods, classmethods, staticmethods --------------------------------------


class Plain:
    def method(self, q: str, limit: int = 3) -> str:
        """Method doc."""
        return f"{q}:{limit}"

    async def amethod(self, q: str, limit: int = 3) -> str:
        return f"{q}:{limit}"

    def gmethod(self, q: str, limit: int = 3) -> Iterator[str]:
        yield f"{q}:{limit}"

    async def agmethod(self, q: str, limit: int = 3) -> AsyncIterator[str]:
        yield f"{q}:{limit}"

    @classmethod
    def cmethod(cls, q: str, limit: int = 3) -> str:
        """Classmethod doc."""
        return f"{cls.__name__}{q}:{limit}"

    @classmethod
    async def acmethod(cls, q: str, limit: int = 3) -> str:
        return f"{cls.__name__}{q}:{limit}"

    @staticmethod
    def smethod(q: str, limit: int = 3) -> str:
        """Staticmethod doc."""
        return f"{q}:{limit}"

    @staticmethod
    async def asmethod(q: str, limit: int = 3) -> str:
        return f"{q}:{limit}"


class Decorated:
    @tool
    def method(self, q: str, limit: int = 3) -> str:
        """Method doc."""
        return f"{q}:{limit}"

    @tool
    async def amethod(self, q: str, limit: int = 3) -> str:
        return f"{q}:{limit}"

    @tool
    def gmethod(self, q: str, limit: int = 3) -> Iterator[str]:
        yield f"{q}:{limit}"

    @tool
    async def agmethod(self, q: str, limit: int = 3) -> AsyncIterator[str]:
        yield f"{q}:{limit}"

    # Both decorator orders for classmethod / staticmethod.
    @tool
    @classmethod
    def cmethod(cls, q: str, limit: int = 3) -> str:
        """Classmethod doc."""
        return f"{cls.__name__}{q}:{limit}"

    @classmethod
    @tool
    def cmethod2(cls, q: str, limit: int = 3) -> str:
        """Classmethod doc."""
        return f"{cls.__name__}{q}:{limit}"

    @tool
    @classmethod
    async def acmethod(cls, q: str, limit: int = 3) -> str:
        return f"{cls.__name__}{q}:{limit}"

    @tool
    @staticmethod
    def smethod(q: str, limit: int = 3) -> str:
        """Staticmethod doc."""
        return f"{q}:{limit}"

    @staticmethod
    @tool
    def smethod2(q: str, limit: int = 3) -> str:
        """Staticmethod doc."""
        return f"{q}:{limit}"

    @tool
    @staticmethod
    async def asmethod(q: str, limit: int = 3) -> str:
        return f"{q}:{limit}"


# (name on Decorated, name on Plain, kind, value prefix)
METHODS = [
    ("method", "method", "sync", ""),
    ("amethod", "amethod", "async", ""),
    ("gmethod", "gmethod", "gen", ""),
    ("agmethod", "agmethod", "agen", ""),
    ("cmethod", "cmethod", "sync", "Decorated"),
    ("cmethod2", "cmethod", "sync", "Decorated"),
    ("acmethod", "acmethod", "async", "Decorated"),
    ("smethod", "smethod", "sync", ""),
    ("smethod2", "smethod", "sync", ""),
    ("asmethod", "asmethod", "async", ""),
]


@pytest.mark.parametrize(("name", "plain", "kind", "prefix"), METHODS)
@pytest.mark.parametrize("via", ["instance", "class"])
async def test_methods_record_arguments_without_self_or_cls(
    name: str, plain: str, kind: str, prefix: str, via: str, tmp_path: Path
) -> None:
    """Bound through an instance or the class, self / cls never appear in the recorded arguments."""
    obj = Decorated()
    if via == "class" and name in ("method", "amethod", "gmethod", "agmethod"):
        fn: Callable[..., Any] = getattr(Decorated, name)
        args: tuple[Any, ...] = (obj, "k")
    else:
        fn = getattr(obj if via == "instance" else Decorated, name)
        args = ("k",)
    path = tmp_path / "t.jsonl"
    with Session(path):
        out = await run(kind, fn, *args, limit=7)
    assert out == f"{prefix}k:7"
    msgs = valid_messages(path)
    assert_paired(msgs)
    call = msgs[0]["toolCalls"][0]
    assert call["function"]["name"] == name
    assert orjson.loads(call["function"]["arguments"]) == {"q": "k", "limit": 7}
    assert tool_results(msgs)[0]["content"] == f"{prefix}k:7"


@pytest.mark.parametrize(("name", "plain", "kind", "prefix"), METHODS)
async def test_methods_without_a_session(name: str, plain: str, kind: str, prefix: str) -> None:
    """Methods of every kind call straight through with no session."""
    assert await run(kind, getattr(Decorated(), name), "z") == f"{prefix}z:3"
    assert trace_dir_files() == []


@pytest.mark.parametrize(("name", "plain", "kind", "prefix"), METHODS)
@pytest.mark.parametrize("via", ["instance", "class"])
def test_method_introspection_matches(name: str, plain: str, kind: str, prefix: str, via: str) -> None:
    """Bound and unbound attributes introspect like the undecorated class's."""
    dec = getattr(Decorated() if via == "instance" else Decorated, name)
    orig = getattr(Plain() if via == "instance" else Plain, plain)
    assert inspect.signature(dec) == inspect.signature(orig)
    assert dec.__name__ == name
    assert dec.__doc__ == orig.__doc__
    for pred in (inspect.iscoroutinefunction, inspect.isasyncgenfunction, inspect.isgeneratorfunction):
        assert pred(dec) == pred(orig), pred.__name__


def test_positional_only_and_var_arguments(tmp_path: Path) -> None:
    """*args, **kwargs and positional-only parameters are recorded by name."""

    @tool
    def f(a: int, /, b: int, *rest: int, key: str = "k", **extra: Any) -> int:
        return a + b + sum(rest)

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert f(1, 2, 3, 4, flag=True) == 10
    call = valid_messages(path)[0]["toolCalls"][0]
    assert orjson.loads(call["function"]["arguments"]) == {"a": 1, "b": 2, "rest": [3, 4], "flag": True}


def test_callable_without_signature(tmp_path: Path) -> None:
    """A builtin with no introspectable signature still records its arguments."""
    wrapped = tool(name="maximum")(max)
    path = tmp_path / "t.jsonl"
    with Session(path):
        assert wrapped(3, 9) == 9
    msgs = valid_messages(path)
    args = orjson.loads(msgs[0]["toolCalls"][0]["function"]["arguments"])
    assert list(args.values()) == [3, 9]
    assert tool_results(msgs)[0]["content"] == "9"


def test_wrapping_a_bound_method(tmp_path: Path) -> None:
    """``tool(obj.method)`` records the method's own arguments, not the instance."""
    obj = Plain()
    wrapped = tool(obj.method)
    path = tmp_path / "t.jsonl"
    with Session(path):
        assert wrapped("w") == "w:3"
    call = valid_messages(path)[0]["toolCalls"][0]
    assert call["function"]["name"] == "method"
    assert orjson.loads(call["function"]["arguments"]) == {"q": "w"}


def test_disabled_session_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STSTRACE_DISABLED=1: decorated calls run and no file is written."""
    monkeypatch.setenv("STSTRACE_DISABLED", "1")
    fn = decorated("sync")
    path = tmp_path / "t.jsonl"
    with Session(path):
        assert fn(1) == "1+2"
    assert not path.exists()


def test_nested_tools_each_follow_their_call(tmp_path: Path) -> None:
    """A tool that calls another tool (and itself, recursively): every result follows its call."""

    @tool
    def leaf(n: int) -> int:
        return n

    @tool
    def fact(n: int) -> int:
        return leaf(1) if n <= 1 else n * fact(n - 1)

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert fact(3) == 6
    msgs = valid_messages(path)
    assert_paired(msgs)
    names = [m["toolCalls"][0]["function"]["name"] for m in msgs if m["role"] == "assistant"]
    assert names == ["fact", "fact", "fact", "leaf"]
    assert [m["content"] for m in tool_results(msgs)] == ["1", "1", "2", "6"]


def test_a_decorated_function_is_copied_as_itself() -> None:
    """SDKs deep-copy the tools they are given (google-genai does on every
    automatic-function-calling request); a function copies as itself, and so
    must its wrapper, bound or not, rather than raise."""
    import copy

    @tool
    def lookup(city: str) -> str:
        return city

    class Tools:
        @tool
        def find(self, city: str) -> str:
            return city

    bound = Tools().find
    assert copy.deepcopy(lookup) is lookup and copy.copy(lookup) is lookup
    assert copy.deepcopy(bound) is bound and copy.copy(bound) is bound
    assert copy.deepcopy({"tools": [lookup]})["tools"][0] is lookup


@tool
def _module_level_tool(city: str) -> str:
    return city


def test_a_decorated_function_pickles_by_name() -> None:
    """Process pools pickle the functions they run: like a function, by name."""
    import pickle

    assert pickle.loads(pickle.dumps(_module_level_tool)) is _module_level_tool

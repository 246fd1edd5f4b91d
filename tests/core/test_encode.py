"""The encoder never fails: every odd value a tool can return or receive comes
out as one line of valid UTF-8 JSON, directly and through ``@tool``."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import fractions
import hashlib
import pathlib
import uuid
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import orjson
import pydantic
import pydantic.v1
import pytest

from ststrace import Session, tool
from ststrace._encode import MAX_DEPTH, dumps
from ststrace._text import content_text, json_text
from test_decorators_helpers import calls_by_id, tool_results, valid_messages
import logging
from ststrace import read, validate


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class V2(pydantic.BaseModel):
    name: str
    tags: set[str] = set()
    when: datetime.date = datetime.date(2026, 1, 2)


class V1(pydantic.v1.BaseModel):
    name: str
    n: int = 1


@dataclasses.dataclass
class DC:
    x: int
    path: Path


@attrs.define
class AttrsPoint:
    x: int
    y: decimal.Decimal


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


class BadEverything:
    """Raises from every hook the encoder might try."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class BadDump(pydantic.BaseModel):
    x: int = 1

    def model_dump(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise RuntimeError("dump failed")


class StrSub(str):
    pass


class IntSub(int):
    pass


class FloatSub(float):
    pass


def _cyclic_list() -> list[Any]:
    a: list[Any] = [1]
    a.append(a)
    return a


def _cyclic_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"k": 1}
    d["self"] = d
    return d


def _deep(n: int) -> Any:
    v: Any = "leaf"
    for _ in range(n):
        v = [v]
    return v


#: (id, value, check on the decoded JSON)
ODD: list[tuple[str, Any, Any]] = [
    (
        "pydantic-v2",
        V2(name="n", tags={"b", "a"}),
        lambda v: v["name"] == "n" and sorted(v["tags"]) == ["a", "b"] and v["when"] == "2026-01-02",
    ),
    ("pydantic-v1", V1(name="old"), {"name": "old", "n": 1}),
    ("dataclass", DC(1, Path("/tmp/x")), {"x": 1, "path": "/tmp/x"}),
    ("attrs", AttrsPoint(1, decimal.Decimal("2.50")), {"x": 1, "y": "2.50"}),
    ("enum", Color.RED, "red"),
    ("int-enum", Level.HIGH, 3),
    ("datetime", datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), "2026-01-02T03:04:05+00:00"),
    ("naive-datetime", datetime.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
    ("date", datetime.date(2026, 1, 2), "2026-01-02"),
    ("time", datetime.time(3, 4, 5), "03:04:05"),
    ("time-tz", datetime.time(3, 4, 5, tzinfo=datetime.timezone.utc), "03:04:05+00:00"),
    ("timedelta", datetime.timedelta(seconds=90), "datetime.timedelta(seconds=90)"),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678"), "12345678-1234-5678-1234-567812345678"),
    ("decimal", decimal.Decimal("1.10"), "1.10"),
    ("decimal-nan", decimal.Decimal("NaN"), "NaN"),
    ("fraction", fractions.Fraction(1, 3), "1/3"),
    ("complex", 1 + 2j, "(1+2j)"),
    ("path", pathlib.PurePosixPath("/a/b"), "/a/b"),
    ("set", {3, 1, 2}, [1, 2, 3]),
    ("frozenset", frozenset({"b", "a"}), ["a", "b"]),
    ("mixed-set", {1, "a"}, lambda v: sorted(map(str, v)) == ["1", "a"]),
    ("np-float", np.float64(1.5), 1.5),
    ("np-float32", np.float32(0.25), 0.25),
    ("np-int", np.int64(7), 7),
    ("np-bool", np.bool_(True), True),
    ("np-small-array", np.arange(6).reshape(2, 3), [[0, 1, 2], [3, 4, 5]]),
    ("np-large-array", np.zeros((1000, 1000)), "<ndarray shape=(1000, 1000) dtype=float64>"),
    ("np-datetime", np.datetime64("2026-01-02"), "2026-01-02"),
    ("np-strided", np.arange(20)[::3], [0, 3, 6, 9, 12, 15, 18]),
    ("big-int", 2**70, str(2**70)),
    ("negative-big-int", -(2**80), str(-(2**80))),
    ("huge-int", 10**5000, lambda v: v.startswith("<int: ") and v.endswith(" bits>")),
    ("int-sub", IntSub(5), 5),
    ("float-sub", FloatSub(2.5), 2.5),
    ("str-sub", StrSub("s"), "s"),
    ("nan", float("nan"), None),
    ("inf", float("inf"), None),
    ("neg-inf", [float("-inf")], [None]),
    ("lone-surrogate", "a\ud800b", "a\ufffdb"),
    ("surrogate-pair", "\ud83d\ude00", "\U0001f600"),
    ("nul", "a\x00b", "a\x00b"),
    ("control-chars", "\x01\x1f\x7f", "\x01\x1f\x7f"),
    ("int-keys", {1: "a", 2: "b"}, {"1": "a", "2": "b"}),
    ("none-key", {None: 1}, {"null": 1}),
    ("tuple-key", {(1, 2): "t"}, {"(1, 2)": "t"}),
    ("object-key", {BadRepr(): 1}, lambda v: list(v.values()) == [1] and "unrepresentable" in list(v)[0]),
    ("surrogate-key", {"k\udc80": 1}, {"k\ufffd": 1}),
    ("cyclic-list", _cyclic_list(), [1, "<cycle>"]),
    ("cyclic-dict", _cyclic_dict(), {"k": 1, "self": "<cycle>"}),
    ("deep", _deep(5000), lambda v: "<max depth>" in orjson.dumps(v).decode()),
    ("bad-repr", BadRepr(), "<unrepresentable BadRepr>"),
    ("bad-everything", BadEverything(), "<unrepresentable BadEverything>"),
    ("bad-dump", BadDump(), lambda v: isinstance(v, str) and "BadDump" in v),
    ("bytes", b"\x00\xffabc", "<bytes: 5 bytes, sha256 " + hashlib.sha256(b"\x00\xffabc").hexdigest() + ">"),
    ("bytearray", bytearray(b"xy"), "<bytes: 2 bytes, sha256 " + hashlib.sha256(b"xy").hexdigest() + ">"),
    ("memoryview", memoryview(b"hello")[1:3], "<bytes: 2 bytes, sha256 " + hashlib.sha256(b"el").hexdigest() + ">"),
    ("strided-memoryview", memoryview(b"abcdef")[::2], "<bytes: 3 bytes, sha256 " + hashlib.sha256(b"ace").hexdigest() + ">"),
    ("generator", (i for i in range(3)), lambda v: v.startswith("<generator object")),
    ("range", range(10**12), "range(0, 1000000000000)"),
    ("deque", deque([1, 2]), [1, 2]),
    ("ordered-dict", OrderedDict(b=1, a=2), {"b": 1, "a": 2}),
    ("type", int, "<class 'int'>"),
    ("function", len, "<built-in function len>"),
    ("exception", ValueError("bad"), "ValueError('bad')"),
    ("ellipsis", ..., "Ellipsis"),
]


def _check(decoded: Any, expected: Any) -> None:
    if callable(expected) and not isinstance(expected, type):
        assert expected(decoded), decoded
    else:
        assert decoded == expected


def _assert_one_json_line(out: bytes) -> Any:
    assert isinstance(out, bytes)
    out.decode("utf-8")  # strict: no surrogates, valid UTF-8
    assert b"\n" not in out and b"\r" not in out
    return orjson.loads(out)


@pytest.mark.parametrize("value, expected", [(v, e) for _, v, e in ODD], ids=[i for i, _, _ in ODD])
def test_dumps_odd_value(value: Any, expected: Any) -> None:
    """Each odd value encodes to valid single-line UTF-8 JSON of the documented form."""
    _check(_assert_one_json_line(dumps(value)), expected)


def test_all_odd_values_together() -> None:
    """One structure holding every odd value at once: the slow path handles them all together."""
    value = {i: v for i, v, _ in ODD}
    value[(1, 2)] = "tuple key forces the sanitising pass"  # type: ignore[index]
    decoded = _assert_one_json_line(dumps(value))
    for i, _, expected in ODD:
        if i in ("deep", "cyclic-list", "cyclic-dict"):
            continue  # depth and cycle markers move when nested one level deeper
        _check(decoded[i], expected)


def test_nesting_depth_is_bounded() -> None:
    """Very deep structures are cut at MAX_DEPTH instead of exhausting the stack."""
    decoded = orjson.loads(dumps({"x": _deep(10_000), "bad": {1j: 1}}))
    depth, v = 0, decoded["x"]
    while isinstance(v, list):
        v, depth = v[0], depth + 1
    assert v == "<max depth>" and depth < MAX_DEPTH + 2


def test_fast_path_output_is_orjson_output() -> None:
    """Ordinary values take orjson's own path: compact, byte-identical, no trailing newline."""
    value = {"role": "user", "content": "hi ü", "n": [1, 2.5, None, True], "t": 1767225600000}
    assert dumps(value) == orjson.dumps(value)
    assert not dumps(value).endswith(b"\n")


def test_json_text_and_content_text() -> None:
    """content_text: str as is, None as '', bytes as the plain placeholder, others as JSON text."""
    s = "already text"
    assert content_text(s) is s
    assert content_text(None) == ""
    assert content_text(b"ab") == "<bytes: 2 bytes, sha256 " + hashlib.sha256(b"ab").hexdigest() + ">"
    assert content_text({"a": {1, 2}}) == '{"a":[1,2]}'
    assert json_text("x") == '"x"'
    assert json_text(V2(name="n")) == '{"name":"n","tags":[],"when":"2026-01-02"}'


_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
_PNG_B64 = __import__("base64").b64encode(_PNG).decode()


@pytest.mark.parametrize(
    "value, path",
    [
        ({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_PNG_B64}"}}, ("image_url", "url")),
        ({"type": "input_image", "image_url": f"data:image/png;base64,{_PNG_B64}"}, ("image_url",)),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG_B64}}, ("source", "data")),
        ({"type": "image", "data": _PNG_B64, "mimeType": "image/png"}, ("data",)),
        ({"inline_data": {"mime_type": "image/png", "data": _PNG_B64}}, ("inline_data", "data")),
        ({"data": [{"b64_json": _PNG_B64}]}, ("data", 0, "b64_json")),
    ],
    ids=["openai-chat", "openai-responses", "anthropic", "mcp", "gemini", "openai-images"],
)
def test_images_become_placeholders(value: Any, path: tuple[Any, ...]) -> None:
    """Inline images in tool values are replaced by their media type and decoded size."""
    out = orjson.loads(json_text(value))
    for key in path:
        out = out[key]
    assert out == f"<image/png: {len(_PNG)} bytes>"
    assert _PNG_B64[:40] not in json_text([value, "x"])


def test_short_or_plain_data_values_are_kept() -> None:
    """A short 'data' string, or one under a non-media dict, is not mistaken for an image."""
    for value in ({"data": "aGVsbG8="}, {"data": "x" * 500}, {"type": "row", "data": "A" * 400}):
        assert orjson.loads(json_text(value)) == value


# -- through @tool ------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [(v, e) for _, v, e in ODD], ids=[i for i, _, _ in ODD])
def test_odd_value_through_tool(tmp_path: Path, value: Any, expected: Any) -> None:
    """An odd value as a @tool argument and as its result: the call works and the trace is valid."""

    @tool
    def echo(x: Any) -> Any:
        return x

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert echo(value) is value
    messages = valid_messages(path)
    (call,) = calls_by_id(messages).values()
    _check(orjson.loads(call["arguments"])["x"], expected)
    (result,) = tool_results(messages)
    if isinstance(value, (bytes, bytearray, memoryview)):
        assert result["content"] == expected  # a placeholder, not a quoted JSON string
    elif isinstance(value, str):
        assert result["content"] == expected
    else:
        _check(orjson.loads(result["content"]), expected)



# -- objects that raise on __class__ (lazy proxies) never reach the caller ----------


class BrokenProxy:
    """A lazy proxy whose set-up failed: even isinstance() on it raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D401
        raise RuntimeError("lazy object could not be set up")

    def __repr__(self) -> str:
        raise RuntimeError("lazy object could not be set up")


RECORDINGS = {
    "user": lambda s, p: s.user(p),
    "system": lambda s, p: s.system(p),
    "tool": lambda s, p: s.tool("call_1", p),
    "assistant content": lambda s, p: s.assistant(p),
    "reasoning": lambda s, p: s.assistant("ok", reasoning=p),
    "arguments": lambda s, p: s.assistant("", tool_calls=[{"name": "f", "arguments": p}]),
    "tool call": lambda s, p: s.assistant("", tool_calls=[p]),
    "model": lambda s, p: s.assistant("ok", model=p),
    "record content": lambda s, p: s.record({"role": "user", "content": p}),
    "record message": lambda s, p: s.record(p),
}


@pytest.mark.parametrize("where", list(RECORDINGS))
def test_a_raising_proxy_never_reaches_user_code(tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture) -> None:
    """The record is dropped, counted in ``lost`` and logged; the session goes on."""
    caplog.set_level(logging.WARNING, logger="ststrace")
    with Session(tmp_path) as s:
        RECORDINGS[where](s, BrokenProxy())
        s.user("still recording")
    assert [m["content"] for m in read(s.path).messages][-1] == "still recording"
    assert s.stats()["lost"] == 1
    assert any("not recorded" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert [p for p in validate(s.path) if p.severity == "error"] == []

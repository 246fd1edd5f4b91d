"""``ststrace._adapters._common.get``: its fast paths answer exactly like ``getattr``.

``get`` reads plain objects and pydantic models through their ``__dict__`` and
``__pydantic_extra__`` instead of ``getattr``; every case here compares it with
the plain definition (``obj.get(key)`` for mappings, ``getattr(obj, key, None)``
otherwise) on real classes: openai / anthropic / huggingface_hub types, pydantic
models with extras, properties, private attributes and class variables,
dataclasses with and without slots, and classes with their own attribute hooks.
"""

from __future__ import annotations

import collections
import dataclasses
import types
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import anthropic.types
import huggingface_hub
import openai.types.chat
import pydantic
import pytest
import wrapt

from ststrace._adapters._common import _layouts, get

KEYS = (
    "content",
    "type",
    "model",
    "choices",
    "reasoning_content",
    "shown",
    "json",
    "limit",
    "_secret",
    "missing",
    "boom",
    "__class__",
    "__dict__",
)


def reference(obj: Any, key: str) -> Any:
    """``get`` as first written: the behaviour the fast paths must keep."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    try:
        return getattr(obj, key, None)
    except Exception:
        return None


# --------------------------------------------------------------------------- objects


class Extra(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    content: str | None = None
    limit: ClassVar[int] = 3
    _secret: str = pydantic.PrivateAttr(default="hidden")

    @property
    def shown(self) -> str:
        return "property"

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def type(self) -> str:
        return "computed"

    @property
    def boom(self) -> str:
        raise RuntimeError("a property that fails")


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    content: str = "strict"


class OwnGetattr(Strict):
    def __getattr__(self, item: str) -> Any:
        return f"hook:{item}"


@dataclasses.dataclass
class Plain:
    content: str = "default"
    model: str | None = None

    @property
    def shown(self) -> str:
        return "property"


@dataclasses.dataclass(slots=True)
class Slotted:
    content: str = "slot"
    type: ClassVar[str] = "class variable"


class Shadowed:
    """An instance ``__dict__`` entry under a property's name: the property wins."""

    @property
    def content(self) -> str:
        return "property"

    @property
    def boom(self) -> str:
        raise ValueError("fails")


class Hooked:
    def __getattr__(self, item: str) -> Any:
        if item == "missing":
            raise AttributeError(item)
        return f"hook:{item}"


class Intercepting:
    def __getattribute__(self, item: str) -> Any:
        if item == "content":
            return "intercepted"
        return object.__getattribute__(self, item)


class FakeDict:
    """A class whose ``__dict__`` attribute is not the instance dictionary."""

    @property  # type: ignore[misc]
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        return {"content": "fake"}


class CustomMapping(Mapping[str, Any]):
    def __init__(self, **items: Any) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def _objects() -> list[tuple[str, Any]]:
    extra = Extra.model_validate(
        {"content": "hello", "reasoning_content": "thinking", "json": "extra json", "shown": "extra shown"}
    )
    extra.__dict__["boom"] = "not a property"  # the failing property still wins
    partial = Extra.model_construct(content="constructed")
    strict = Strict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "field name shadows an attribute in parent BaseModel"

        class ShadowsMethod(pydantic.BaseModel):
            json: str = "field"  # type: ignore[assignment]

    plain = Plain(model="m")
    plain.__dict__["type"] = "instance"
    shadowed = Shadowed()
    shadowed.__dict__["content"] = "instance"
    shadowed.__dict__["model"] = "instance"
    intercepting = Intercepting()
    intercepting.__dict__["model"] = "instance"
    fake = FakeDict()
    object.__setattr__(fake, "model", "real")

    delta = openai.types.chat.chat_completion_chunk.ChoiceDelta.model_validate(
        {"content": "hi", "reasoning_content": "because"}
    )
    chunk = openai.types.chat.ChatCompletionChunk.model_validate(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt",
            "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}],
        }
    )
    message = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    hf = huggingface_hub.ChatCompletionOutput.parse_obj(
        {
            "id": "x",
            "created": 1,
            "model": "hf-model",
            "system_fingerprint": "fp",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )
    return [
        ("dict", {"content": "d", "type": "t"}),
        ("OrderedDict", collections.OrderedDict(content="o")),
        ("mappingproxy", types.MappingProxyType({"model": "p"})),
        ("custom Mapping", CustomMapping(content="c")),
        ("huggingface_hub dict subclass", hf),
        ("pydantic with extras", extra),
        ("pydantic model_construct", partial),
        ("pydantic extra=forbid", strict),
        ("pydantic field shadowing a method", ShadowsMethod()),
        ("pydantic with its own __getattr__", OwnGetattr()),
        ("openai ChoiceDelta with an extra", delta),
        ("openai ChatCompletionChunk", chunk),
        ("anthropic Message", message),
        ("dataclass", plain),
        ("slots dataclass", Slotted()),
        ("property over __dict__", shadowed),
        ("__getattr__", Hooked()),
        ("__getattribute__", intercepting),
        ("redefined __dict__", fake),
        ("SimpleNamespace", types.SimpleNamespace(content="ns")),
        ("wrapt proxy of a pydantic model", wrapt.ObjectProxy(extra)),
        ("None", None),
        ("str", "text"),
        ("int", 7),
        ("list", ["content"]),
        ("class", Plain),
        ("module", types),
    ]


OBJECTS = _objects()


@pytest.mark.parametrize(("label", "obj"), OBJECTS, ids=[label for label, _ in OBJECTS])
def test_get_answers_like_getattr(label: str, obj: Any) -> None:
    """Every key, read twice (the second time from the cached type layout)."""
    for _ in range(2):
        for key in KEYS:
            expected = reference(obj, key)
            actual = get(obj, key)
            assert actual is expected or actual == expected, (label, key, actual, expected)


def test_values_that_change_after_the_first_read_are_seen() -> None:
    """The per-type layout caches class facts only; instance values are read live."""
    model = Extra(content="one")
    assert get(model, "reasoning_content") is None
    model.content = "two"
    assert model.__pydantic_extra__ is not None
    model.__pydantic_extra__["reasoning_content"] = "later"
    assert (get(model, "content"), get(model, "reasoning_content")) == ("two", "later")
    plain = Plain()
    assert get(plain, "choices") is None
    plain.choices = ["c"]  # type: ignore[attr-defined]
    assert get(plain, "choices") == ["c"]


def test_the_type_cache_is_bounded() -> None:
    """Classes made on the fly do not pile up in the layout cache."""
    for i in range(1500):
        made = pydantic.create_model(f"Made{i}", content=(str, "x"))
        assert get(made(), "content") == "x"
    assert 0 < len(_layouts) <= 1024


def test_common_shapes_take_the_fast_paths() -> None:
    """Provider models, dataclasses and mappings are read without ``getattr``;
    classes with their own attribute hooks are not."""
    kinds: dict[str, str] = {}
    for label, obj in OBJECTS:
        get(obj, "content")
        if type(obj) is not dict:  # answered before any layout is looked up
            kinds[label] = _layouts[type(obj)].kind
    assert kinds["openai ChatCompletionChunk"] == kinds["anthropic Message"] == "pydantic"
    assert kinds["pydantic with extras"] == kinds["pydantic extra=forbid"] == "pydantic"
    assert kinds["dataclass"] == "plain"
    assert kinds["slots dataclass"] == kinds["None"] == "no dict"
    assert kinds["huggingface_hub dict subclass"] == kinds["OrderedDict"] == "mapping"
    for label in ("pydantic with its own __getattr__", "__getattr__", "__getattribute__", "redefined __dict__"):
        assert kinds[label] == "slow", label



def test_generated_call_ids_leave_the_programs_random_numbers_alone() -> None:
    """Ids made up for id-less tool calls (Gemini's) come from ststrace's own
    generator: a program that seeds ``random`` gets the same numbers traced or not."""
    import random
    import re

    from ststrace._adapters._common import new_call_id

    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    ids = [new_call_id() for _ in range(100)]
    assert [random.random() for _ in range(3)] == expected
    assert len(set(ids)) == 100 and all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)

"""``SpanProcessor``: GenAI spans of any instrumentation -> one STS session per trace.

The application thread that ends a span pays one ``isdisjoint`` over the span's
attribute keys (plus, for a root span, one set lookup); GenAI spans are handed
to one worker thread that maps them (:mod:`.mapping`) and writes the sessions,
so no file is created, written or closed on the application's threads or its
event loop. The worker runs the spans in the order they ended.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import queue
import re
import threading
import weakref
from collections import OrderedDict
from typing import Any, Mapping

import orjson

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.sdk.trace import SpanProcessor as _SdkSpanProcessor

from .._errors import internal_error, logger
from .._ids import new_tool_call_id
from .._reader import read
from .._dedup import fingerprint as _fingerprint
from .._session import Session
from .mapping import MARKERS, InputCache, Step, parse_span

__all__ = ["SpanProcessor"]

#: Session options a processor cannot take: it names and opens each file itself.
_PER_TRACE = frozenset({"path", "id", "resume"})
#: Traces (and conversations) whose root never ended: the oldest are closed past this.
MAX_OPEN = 10_000
_MAX_REMEMBERED = 10_000
_MAX_CLOSED = 1024
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")

_STOP = object()


def _record_reply(session: Session, msg: dict[str, Any], usage: dict[str, int] | None) -> None:
    """Record one assistant reply with its token usage. ``record`` (not
    ``assistant``) keeps the span's own timestamp; it checks ``usage`` and
    applies ``usage=False`` / ``prices`` as ``assistant`` does."""
    if usage is not None:
        msg["usage"] = usage
    session.record(msg)


def _attributes(span: ReadableSpan) -> Mapping[str, Any] | None:
    """The span's attributes without the read-only proxy ``span.attributes`` allocates.

    The SDK keeps them in a ``BoundedAttributes`` whose plain dict ``_dict``
    answers ``isdisjoint`` in C; both are private, so fall back to the API."""
    attrs = getattr(span, "_attributes", None)
    if attrs is None:
        return span.attributes
    plain = getattr(attrs, "_dict", None)
    return plain if isinstance(plain, dict) else attrs  # type: ignore[no-any-return]


#: Span attributes ``ststrace otlp`` writes for a sub-agent session -> header fields.
_LINKS = {
    "ststrace.session.parent_session_id": "parentSessionId",
    "ststrace.session.parent_tool_call_id": "parentToolCallId",
}


def _links(attrs: Mapping[str, Any]) -> dict[str, str]:
    return {field: attrs[attr] for attr, field in _LINKS.items() if isinstance(attrs.get(attr), str) and attrs[attr]}


def _is_root(span: ReadableSpan) -> bool:
    """The root of this process's part of the trace (a parent in another service counts as none)."""
    parent = span.parent
    return parent is None or parent.is_remote


def _ms(ns: int | None) -> int | None:
    return None if ns is None else ns // 1_000_000


def _session_id(conversation: str, shown: str | None = None) -> str:
    """A conversation id as a session id (a file name): kept when it is one.

    Otherwise the file-safe part plus a digest of the whole id: replacing
    characters or cutting at 128 alone would merge distinct conversations
    ("user/1" and "user?1") into one file, and a random id would split one
    conversation ("." over several traces) into many. *shown* is the
    conversation id as redaction leaves it: a secret in it must not reach the
    file name (a digest of a high-entropy token does not give it away)."""
    clean = _BAD_ID_CHARS.sub("_", conversation if shown is None else shown)
    # A leading dot would make a hidden file ("....jsonl") that `traces/*.jsonl` skips.
    if clean == conversation and len(clean) <= 128 and not clean.startswith("."):
        return clean
    digest = hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{clean[:100].strip('.')}-{digest}".lstrip("-")


class _Remembered:
    """A bounded set: the oldest entries leave first."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def put(self, key: Any, value: Any = True) -> None:
        self._items[key] = value
        if len(self._items) > _MAX_REMEMBERED:
            self._items.popitem(last=False)

    def get(self, key: Any) -> Any:
        return self._items.get(key)

    def __contains__(self, key: Any) -> bool:
        return key in self._items


class _Trace:
    __slots__ = ("conversation", "agent", "harness", "name", "links", "keys", "key", "inputs")

    def __init__(self) -> None:
        self.conversation: str | None = None
        self.agent: str | None = None
        self.harness: str | None = None
        self.name: str | None = None
        self.links: dict[str, str] = {}  # a sub-agent session's parentSessionId / parentToolCallId
        self.keys: set[str] = set()  # sessions this trace wrote to
        self.key: str | None = None  # where its spans without a conversation id go
        self.inputs = InputCache()


class _Open:
    """One open session and what pairs its tool calls."""

    __slots__ = ("session", "traces", "calls", "nested", "conversation")

    def __init__(self, session: Session, conversation: str | None) -> None:
        self.session = session
        self.conversation = conversation
        self.traces: set[int] = set()
        self.calls = _Remembered()  # tool-call ids this session recorded
        self.nested = _Remembered()  # parent span id -> fingerprint of a reply already recorded


class SpanProcessor(_SdkSpanProcessor):
    """Write the GenAI spans of each trace as one STS session file.

    ``provider.add_span_processor(ststrace.otel.SpanProcessor("traces/"))``.
    *directory* defaults to ``$STSTRACE_DIR`` or ``./traces``; other keyword
    arguments are :class:`ststrace.Session` options (``harness``, ``name``,
    ``metadata``, ``redact``, ``max_field_chars``, ``durable``, ...), applied to
    every session. A trace's spans that carry ``gen_ai.conversation.id`` go to
    that conversation's session, so one conversation spread over several traces
    is one file; see docs/opentelemetry.md for the rule.

    *max_queue* bounds the spans waiting for the worker; past it spans are
    dropped, counted in :attr:`dropped` and logged.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, max_queue: int = 100_000, **session_options: Any) -> None:
        wrong = sorted(_PER_TRACE.intersection(session_options))
        if wrong:
            raise TypeError(
                f"SpanProcessor() does not take {', '.join(wrong)}: each trace gets its own session "
                "file in *directory*, named after its conversation or trace id"
            )
        if max_queue <= 0:
            raise ValueError("max_queue must be positive")
        if directory is not None and os.fspath(directory).endswith(".jsonl") and not os.path.isdir(directory):
            # Session would take it as one file: the first trace would get it and
            # every later trace be lost ("cannot resume").
            raise ValueError(
                f"SpanProcessor({os.fspath(directory)!r}): give a directory; each trace (or conversation) "
                "gets its own file in it"
            )
        # Checked now, with the user's own arguments: a typo fails here, not on a worker thread.
        Session(directory, **session_options)
        self._directory = directory
        self._options = session_options
        from .._guard import make_guard

        # The session redacts the header; the conversation id also names the file.
        self._id_guard = make_guard(session_options.get("redact", True), None)
        self._max_queue = max_queue
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._live: set[int] = set()  # trace ids seen with a GenAI span (app threads write)
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._pid = os.getpid()
        self._shut = False
        self.dropped = 0
        self._dropped_logged = False
        # Worker-thread state.
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        # GenAI events that came as log records, by span id, until their span ends.
        self._events: OrderedDict[int, list[tuple[str, Mapping[str, Any]]]] = OrderedDict()
        # De-dup state of recently closed sessions, for spans that come back to them.
        self._closed: OrderedDict[str, Any] = OrderedDict()
        ref = weakref.ref(self)
        atexit.register(_drain_at_exit, ref)

    # -- the application's threads ----------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            attrs = _attributes(span)
            if not attrs or MARKERS.isdisjoint(attrs):
                return
            trace_id = span.context.trace_id
            self._live.add(trace_id)
            # An agent span starts before the model calls inside it end: its
            # conversation id and agent name are known before the file opens.
            conversation = attrs.get("gen_ai.conversation.id") or attrs.get("session.id")
            agent = attrs.get("gen_ai.agent.name")
            harness = attrs.get("ststrace.session.harness")
            if conversation or agent or harness:
                name = attrs.get("ststrace.session.name")
                self._put(("start", trace_id, conversation, agent, harness, name, _links(attrs) if harness else {}))
        except Exception as exc:  # never into the application's span.start()
            internal_error(exc, "ststrace.otel.SpanProcessor.on_start")

    def on_end(self, span: ReadableSpan) -> None:
        try:
            attrs = _attributes(span)
            if attrs and not MARKERS.isdisjoint(attrs):
                self._live.add(span.context.trace_id)  # type: ignore[union-attr]
                self._put(span)
            elif _is_root(span):
                trace_id = span.context.trace_id  # type: ignore[union-attr]
                if trace_id in self._live:
                    self._put(("root", trace_id))
        except Exception as exc:  # never into the application's span.end()
            internal_error(exc, "ststrace.otel.SpanProcessor.on_end")

    def _put(self, item: Any) -> None:
        if self._shut:
            return
        worker = self._worker
        if worker is None or self._pid != os.getpid():
            worker = self._start()
        if self._queue.qsize() >= self._max_queue:
            self.dropped += 1
            if not self._dropped_logged:
                self._dropped_logged = True
                logger.warning(
                    "ststrace: the OpenTelemetry span queue is full (%d spans); spans are dropped and "
                    "counted in SpanProcessor.dropped",
                    self._max_queue,
                )
            return
        self._queue.put(item)

    def _start(self) -> threading.Thread:
        with self._lock:
            if self._worker is None or self._pid != os.getpid():
                if self._pid != os.getpid():  # forked: the parent's worker and queue stay there
                    self._pid = os.getpid()
                    self._queue = queue.SimpleQueue()
                    self._traces.clear()
                    self._open.clear()
                worker = threading.Thread(target=self._run, name="ststrace-otel", daemon=True)
                worker.start()
                self._worker = worker
            return self._worker

    def logs(self) -> Any:
        """A log record processor that hands GenAI events sent as log records to this processor.

        ``logger_provider.add_log_record_processor(span_processor.logs())``: the
        ``gen_ai.client.inference.operation.details`` event (openai-v2's
        ``EVENT_ONLY`` mode) and the earlier ``gen_ai.*.message`` /
        ``gen_ai.choice`` events then count as events of the span they were
        emitted in, when they come before that span ends (as the OpenTelemetry
        GenAI utilities emit them). Other log records cost one set lookup.
        """
        from ._logs import GenAILogProcessor

        return GenAILogProcessor(self._event)

    def _event(self, trace_id: int, span_id: int, name: str, attributes: Mapping[str, Any]) -> None:
        self._live.add(trace_id)
        self._put(("event", span_id, name, attributes))

    # -- flush and shutdown -------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Block until every span ended so far is written and its file flushed and closed
        (a later span of an unfinished trace reopens the file and appends)."""
        return self._barrier("flush", timeout_millis)

    def shutdown(self) -> None:
        """Write what is queued and close every session still open."""
        if self._shut:
            return
        self._barrier("close", 30000)
        self._shut = True
        worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(_STOP)
            worker.join(timeout=30)
        self._worker = None

    def _barrier(self, what: str, timeout_millis: int) -> bool:
        if self._shut or self._worker is None or self._pid != os.getpid():
            return True
        done = threading.Event()
        self._queue.put((what, done))
        return done.wait(max(timeout_millis, 0) / 1000)

    # -- the worker --------------------------------------------------------------------

    def _run(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if item is _STOP:
                return
            try:
                if isinstance(item, tuple):
                    self._control(item)
                else:
                    self._span(item)
            except Exception as exc:
                internal_error(exc, "ststrace.otel.SpanProcessor")

    def _control(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "start":
            _, trace_id, conversation, agent, harness, name, links = item
            trace = self._trace(trace_id)
            if isinstance(conversation, str) and conversation and trace.conversation is None:
                trace.conversation = conversation
            if isinstance(agent, str) and agent and trace.agent is None:
                trace.agent = agent
            if isinstance(harness, str) and harness:
                trace.harness = harness
            if isinstance(name, str) and name:
                trace.name = name
            if links and not trace.links:
                trace.links = links
        elif kind == "root":
            self._end_trace(item[1])
        elif kind == "event":
            _, span_id, name, attributes = item
            self._events.setdefault(span_id, []).append((name, attributes))
            while len(self._events) > MAX_OPEN:
                self._events.popitem(last=False)  # spans that never ended
        elif kind == "flush":
            try:
                # Closed, not just flushed: a process frozen or killed after
                # force_flush() (serverless) leaves whole files. A later span of
                # the same trace reopens its file and carries on.
                for key in list(self._open):
                    self._close(key)
            finally:
                item[1].set()
        elif kind == "close":
            try:
                for trace_id in list(self._traces):
                    self._end_trace(trace_id)
                for key in list(self._open):
                    self._close(key)
            finally:
                item[1].set()

    def _guarded(self, fn: Any) -> None:
        try:
            fn()
        except Exception as exc:
            logger.error("ststrace: %s", exc)

    def _trace(self, trace_id: int) -> _Trace:
        trace = self._traces.get(trace_id)
        if trace is None:
            trace = self._traces[trace_id] = _Trace()
            while len(self._traces) > MAX_OPEN:
                oldest = next(iter(self._traces))
                logger.warning("ststrace: more than %d traces open; closing the oldest", MAX_OPEN)
                self._end_trace(oldest)
        return trace

    def _span(self, span: ReadableSpan) -> None:
        ctx = span.context
        assert ctx is not None
        trace_id = ctx.trace_id
        attrs: Mapping[str, Any] = _attributes(span) or {}
        events = [(e.name, e.attributes or {}) for e in span.events] if span.events else []
        if self._events:
            logged = self._events.pop(ctx.span_id, None)
            if logged:
                events.extend(logged)
        trace = self._traces.get(trace_id)
        step = parse_span(attrs, events, trace.inputs if trace is not None else None)
        if step is not None:
            trace = self._trace(trace_id)
            if step.kind == "agent" and step.agent_name and trace.agent is None:
                trace.agent = step.agent_name
            harness = attrs.get("ststrace.session.harness")
            if isinstance(harness, str) and harness and trace.harness is None:
                # Spans replayed from a backend come without on_start: each
                # span that ststrace exported names its session's harness.
                trace.harness = harness
                name = attrs.get("ststrace.session.name")
                trace.name = name if isinstance(name, str) and name else trace.name
                trace.links = trace.links or _links(attrs)
            if step.inputs or step.outputs or step.kind == "tool":
                entry = self._entry(trace_id, trace, step.conversation_id)
                if entry is not None:
                    self._apply(entry, step, span)
        if _is_root(span):
            self._live.discard(trace_id)
            self._end_trace(trace_id)

    def _entry(self, trace_id: int, trace: _Trace, conversation: str | None) -> _Open | None:
        """The open session a span of *trace* with *conversation* goes to (opened on first use)."""
        if conversation is None:
            if trace.key is None:
                trace.key = ("conversation:" + trace.conversation) if trace.conversation else f"trace:{trace_id:032x}"
            key = trace.key
            conversation = trace.conversation
        else:
            key = "conversation:" + conversation
            if trace.key is None:
                trace.key = key
        entry = self._open.get(key)
        if entry is not None and entry.session.closed:
            # Closed under us (interpreter exit closes every session first):
            # reopen the same file rather than lose the rest.
            self._close(key)
            entry = None
        if entry is None:
            entry = self._new_session(key, trace_id, trace, conversation)
            if entry is None:
                return None
            self._open[key] = entry
            while len(self._open) > MAX_OPEN:
                self._close(next(iter(self._open)))
        entry.traces.add(trace_id)
        trace.keys.add(key)
        return entry

    def _new_session(self, key: str, trace_id: int, trace: _Trace, conversation: str | None) -> _Open | None:
        options = dict(self._options)
        metadata = dict(options.pop("metadata", None) or {})
        otel_meta: dict[str, Any] = {"traceId": f"{trace_id:032x}"}
        if conversation is not None:
            otel_meta["conversationId"] = conversation
        metadata.setdefault("otel", otel_meta)
        if trace.agent:
            metadata.setdefault("agent", trace.agent)
        for field, value in trace.links.items():
            metadata.setdefault(field, value)
        if trace.harness and "harness" not in options:
            options["harness"] = trace.harness
        if trace.name and "name" not in options:
            options["name"] = trace.name
        if conversation is not None:
            shown = self._id_guard.text(conversation) if self._id_guard is not None else conversation
            session_id = _session_id(conversation, shown)
        else:
            session_id = f"{trace_id:032x}"
        remembered = self._closed.pop(key, None)
        try:
            # resume=True appends when the file exists: a conversation seen in an
            # earlier trace or run, or a span that ended after its trace's root.
            session = Session(self._directory, id=session_id, metadata=metadata, resume=True, **options)
            existed = session._trace_path.exists()
            session._open_file()
        except Exception as exc:
            logger.error("ststrace: cannot open a session for OpenTelemetry trace %032x: %s", trace_id, exc)
            return None
        entry = _Open(session, conversation)
        if remembered is not None:
            # The history each model call resends was seen by the earlier
            # traces of this conversation: keep recognising it.
            session._conversations.extend(remembered[0])
            session._last_system = remembered[1]
            entry.calls = remembered[2]
        elif existed:
            self._seed_from_file(entry)
        return entry

    def _seed_from_file(self, entry: _Open) -> None:
        """A file from an earlier run, resumed: what it holds is history already recorded."""
        try:
            messages = read(entry.session._trace_path, strict=False).messages
        except Exception as exc:
            logger.warning("ststrace: could not read %s to resume it: %s", entry.session.path, exc)
            return
        if messages:
            entry.session._conversations.append([_fingerprint(m) for m in messages])
        for m in messages:
            for call in m.get("toolCalls") or ():
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    entry.calls.put(call["id"])

    def _end_trace(self, trace_id: int) -> None:
        trace = self._traces.pop(trace_id, None)
        self._live.discard(trace_id)
        if trace is None:
            return
        for key in trace.keys:
            entry = self._open.get(key)
            if entry is None:
                continue
            entry.traces.discard(trace_id)
            if not entry.traces:
                self._close(key)

    def _close(self, key: str) -> None:
        entry = self._open.pop(key, None)
        if entry is None:
            return
        session = entry.session
        self._closed[key] = (list(session._conversations), session._last_system, entry.calls)
        while len(self._closed) > _MAX_CLOSED:
            self._closed.popitem(last=False)
        self._guarded(session.close)

    # -- one step into one session ---------------------------------------------------------

    def _apply(self, entry: _Open, step: Step, span: ReadableSpan) -> None:
        session = entry.session
        start = _ms(span.start_time)
        end = _ms(span.end_time)
        if step.kind == "tool":
            self._tool(entry, step, start, end)
            return
        if step.inputs:
            session._record_inputs(step.inputs, timestamp=start, fingerprints=step.input_fingerprints)
        if not step.outputs:
            return
        # One reply per model call: further outputs are alternative choices.
        reply = step.outputs[0]
        fp = _fingerprint(reply)
        span_id = span.context.span_id  # type: ignore[union-attr]
        if entry.nested.get(span_id) == fp:
            # The same call seen by two instrumentations (a framework's span
            # around the client library's): recorded once, from the inner one.
            return
        if span.parent is not None:
            entry.nested.put(span.parent.span_id, fp)
        for call in reply.get("toolCalls", ()):
            entry.calls.put(call["id"])
        if end is not None:
            reply["timestamp"] = end
        _record_reply(session, reply, step.usage)

    def _tool(self, entry: _Open, step: Step, start: int | None, end: int | None) -> None:
        """Answer a tool call from its tool span, unless it was answered already."""
        session = entry.session
        name = step.tool_name or ""
        call_id = step.tool_call_id
        result = step.tool_result
        if call_id is not None and call_id in entry.calls:
            if result is not None and session._answer(call_id):
                session.record(_result(call_id, result, end))
            # else: answered already (by the next request's input), or no result
            # to give: the next request's input will answer it.
            return
        if call_id is None:
            if result is None:
                return  # nothing to say; the next request's input answers the call
            try:
                wanted = [orjson.loads(step.tool_arguments)]
            except orjson.JSONDecodeError:
                wanted = []
            claimed = session._claim_tool_call(name, wanted)
            if claimed is not None:
                session.record(_result(claimed, result, end))
                return
        if not name:
            return  # an unnamed tool no call asked for: nothing to record
        # A tool run that no recorded model call asked for: its call, then its result.
        call_id = call_id or new_tool_call_id()
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": call_id, "function": {"name": name, "arguments": step.tool_arguments}}],
        }
        if start is not None:
            message["timestamp"] = start
        entry.calls.put(call_id)
        session.record(message)
        if result is not None and session._answer(call_id):
            session.record(_result(call_id, result, end))


def _result(call_id: str, content: str, end: int | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "tool", "content": content, "toolCallId": call_id}
    if end is not None:
        msg["timestamp"] = end
    return msg


def _drain_at_exit(ref: weakref.ref[SpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        try:
            processor.shutdown()
        except Exception as exc:  # pragma: no cover - exit path
            internal_error(exc, "ststrace.otel.SpanProcessor at exit")

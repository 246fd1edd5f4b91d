"""``Session``: one STS trace file, the recording API, and the per-session state
that pairs tool calls with their results."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterable, Mapping

from orjson import dumps as _orjson_dumps

from . import _context, _dedup, _files, _links, _pairing, _records, _registry, _resume, _signals, _tools, _unrecorded
from ._encode import dumps
from ._text import content_text
from ._env import getenv as _getenv
from ._errors import BadArgument, WriteError, internal_error, logger
from ._guard import make_guard
from ._ids import check_id, file_stem, new_session_id
from ._redact import Redactor
from ._fds import create_exclusive
from ._session_calls import _SessionCalls
from ._session_checks import _check_path, _check_prices, _env_flag, _load_sync, _make_private_dirs, _note_disabled
from ._writer import DEFAULT_MAX_BUFFER, Writer

_time_ns = time.time_ns

# A session that ends without a message names the model client it may have missed.
_registry.on_ended_empty(_unrecorded.warn)

#: Older name of ``_dedup.fingerprint``, still imported by tests.
_fingerprint = _dedup.fingerprint

#: A closed session's repr() and notebook view read its file, up to this size.
_REPR_MAX_BYTES = 16 * 1024 * 1024


class Session(_SessionCalls):
    """One agent run, written as one STS JSONL file.

    Use ``with Session(...) as s:`` or ``async with``; decorated functions and
    instrumented clients inside record into it. See docs/sessions.md for arguments.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        harness: str | None = None,
        id: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        flush_interval: float = 1.0,
        buffer_size: int = 65536,
        durable: bool = False,
        resume: bool = False,
        redact: bool | Redactor = True,
        max_field_chars: int | None = 1_000_000,
        sync_to: str | None = None,
        sync_as: str = "sts",
        max_buffer: int = DEFAULT_MAX_BUFFER,
        usage: bool = True,
        prices: Any = None,
        parent: Session | str | None | _links._Auto = _links.AUTO,
        task_id: str | int | None = None,
        group_id: str | int | None = None,
        sample: int | None = None,
    ) -> None:
        self.disabled = _env_flag("STSTRACE_DISABLED")
        if id is not None:
            check_id(id)
        if name is not None and not isinstance(name, str):
            raise BadArgument(f"name must be a string, not {type(name).__name__}")
        harness = harness if harness is not None else _getenv("STSTRACE_HARNESS") or "ststrace"
        if not isinstance(harness, str) or not harness:
            raise BadArgument("harness must be a non-empty string")
        if flush_interval <= 0:
            raise BadArgument("flush_interval must be positive")
        if buffer_size <= 0:
            raise BadArgument("buffer_size must be positive")
        self.harness = harness
        self.name = name
        self.metadata = _records.check_metadata(metadata)
        # Sessions of one task with different outcomes are what export's preference formats pair.
        self.metadata.update(_records.check_task_fields(task_id, group_id, sample))
        self.flush_interval = flush_interval
        self.buffer_size = buffer_size
        self.durable = durable
        self.resume = resume
        if sync_as not in ("sts", "pi"):
            raise BadArgument(f"sync_as must be 'sts' or 'pi', not {sync_as!r}")
        if sync_to is not None:
            _load_sync(sync_to)
        self.sync_to = sync_to
        self.sync_as = sync_as
        self._max_buffer = max_buffer
        self._given_id = id
        # Token usage and sub-agent links (issue 18): see _record_usage and _links.
        self._keep_usage = bool(usage)
        self._prices = _check_prices(prices)
        self._parent = _links.check_parent(parent, Session)
        self._usage_total: dict[str, Any] = {}
        self._links: dict[str, str] | None = None  # sub-agent header links, when taken before opening
        self.id: str = id if id is not None else new_session_id()
        # The Path is built when first needed (pathlib parsing costs several
        # microseconds, paid off the event loop when `async with` opens the
        # file); the environment is read now, as it always was.
        self._path_arg: str | os.PathLike[str] = (
            os.fspath(path) if path is not None else (_getenv("STSTRACE_DIR") or "traces")
        )
        self._path_is_dir = path is None
        if path is not None:
            _check_path(self._path_arg)
        self._path_cache: Path | None = None
        if self.disabled:
            _note_disabled()
        self._guard = None if self.disabled else make_guard(redact, max_field_chars)
        #: The id as the header holds it (redacted like any id): what the file
        #: name and every message quoting the id use. Ids ststrace made hold nothing.
        self._shown_id: str = self.id if id is None or self._guard is None else self._guard.ident(id)
        self._writer: Writer | None = None
        self._append: Callable[[bytes], bool] | None = None  # the writer's append, once open
        self._tokens: list[Any] = []
        # Reentrant, and every section under it tolerates a nested one: a
        # signal handler may record on the main thread while it is held.
        self._state_lock = threading.RLock()
        _all_sessions.add(self)
        # OrderedDict: evicting the oldest of a plain dict (next(iter(d)) after
        # many deletions at the front) scans dead slots and costs O(n) per call.
        self._pending: OrderedDict[str, _pairing.Call] = OrderedDict()
        # Recent conversations seen by @llm inputs (several agents may share a session).
        self._conversations: deque[list[int]] = deque(maxlen=_dedup.MAX_CONVERSATIONS)
        self._stateful_turns: deque[tuple[str, tuple[int, ...]]] = deque(maxlen=_dedup.MAX_CONVERSATIONS)
        # The same conversations item by item, so one that only grew is not read again.
        self._histories: deque[_dedup.Known] = deque(maxlen=_dedup.MAX_CONVERSATIONS)
        self._last_system: int | None = None  # the last system message recorded from inputs
        # Messages recorded with s.user()/s.system() since the last model call,
        # so the conversation passed to that call does not record them again.
        # Fingerprinted only when a model call looks, not on every s.user().
        self._direct: deque[dict[str, Any]] = deque(maxlen=64)
        self._closed = False
        # close() finished: an interrupted close (Ctrl-C) leaves it False and
        # the session registered, so close_all at exit completes it.
        self._close_done = False
        self._dropped = 0  # records refused because building them raised
        self._warned_closed = False
        #: Streamed replies not finished yet (:class:`_adapters.streams.StreamState`):
        #: one the caller broke out of but still holds is recorded with what
        #: arrived when the session ends, not dropped as "made after close()".
        #: Weak references (each drops itself with its stream): set operations
        #: are single C calls, safe beside another thread adding one.
        self._streams: set[weakref.ref[Any]] = set()
        #: Fingerprints of the latest replies recorded (see _dedup.after_new_reply).
        self._replies: deque[int] = deque(maxlen=_dedup.MAX_REPLIES)
        #: Tool sets (and @tool schemas) recorded already, by key (see _offer_tools).
        self._tools_seen: set[Any] = set()
        #: The last plain ``tools=`` list offered, and a copy of it as it was then (see _begin_llm).
        self._tools_last: tuple[Any, Any] | None = None
        #: Tool definitions waiting for the next message, which carries them.
        self._tools_next: list[dict[str, Any]] | None = None
        self._tools_unwritten = 0
        #: Sub-agent sessions opened inside a @tool call of the lean path, by
        #: call id (see _links.links_for); taken when the call ends.
        self._call_children: dict[str, list[str]] = {}

    # -- path and file ----------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The trace file: the ``path`` given if it ends in ``.jsonl``, else
        ``<path or $STSTRACE_DIR or traces>/<id>.jsonl``; ``None`` when tracing
        is off (``STSTRACE_DISABLED=1``)."""
        return None if self.disabled else self._trace_path

    @property
    def _trace_path(self) -> Path:
        path = self._path_cache
        if path is None:
            p = Path(self._path_arg)
            path = self._path_cache = p if not self._path_is_dir and p.suffix == ".jsonl" else p / f"{file_stem(self._shown_id)}.jsonl"
        return path

    def _open_file(self) -> None:
        if self._writer is not None or self._closed:
            if self._closed:
                raise RuntimeError(f"session {self._shown_id} is closed; create a new Session to record again")
            return
        if self.disabled:
            return
        if self.resume:
            _make_private_dirs(self._trace_path.parent)
        if self.resume and (self._trace_path.exists() or self._trace_path.is_symlink()):
            fd = _resume.open_for_resume(self)
            header_line = b""
        else:
            try:
                try:
                    fd = create_exclusive(self._trace_path)
                except FileNotFoundError:
                    # A missing directory: made only then, so opening
                    # thousands of sessions in one directory costs no stat walk each.
                    _make_private_dirs(self._trace_path.parent)
                    fd = create_exclusive(self._trace_path)
            except FileExistsError:
                raise FileExistsError(
                    f"{self._trace_path} already exists; ststrace never overwrites a trace "
                    "(pass resume=True to append to it, or choose another path or id)"
                ) from None
            header = _records.header(self.harness, self.id, self.name, self.metadata)
            # A sub-agent: link to the session (and tool call) it was opened in.
            links = self._links if self._links is not None else _links.links_for(self, self._parent)
            for key, value in links.items():
                header.setdefault(key, value)
            if self._guard is not None:
                header = self._guard.header(header)
            header_line = dumps(header) + b"\n"
        try:
            if header_line:
                # The header reaches the file now, not with the first flush.
                os.write(fd, header_line)
                if self.durable:
                    os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            if header_line:
                # We created it: an empty file without a header would block this id.
                try:
                    os.unlink(self._trace_path)
                except OSError:
                    pass
            raise WriteError(self._trace_path, exc) from exc
        self._writer = Writer(
            self._trace_path,
            fd,
            flush_interval=self.flush_interval,
            buffer_size=self.buffer_size,
            durable=self.durable,
            max_buffer=self._max_buffer,
        )
        if header_line:
            self._writer.bytes_written += len(header_line)
        # Tools waiting to be written: s.user()'s fast path must step aside (see _offer_tools).
        self._append = self._writer.append if self._tools_next is None else None
        _registry.register(self)
        _signals.install()  # a no-op once installed, or off the main thread

    # -- lifecycle ----------------------------------------------------------

    def open(self) -> Session:
        """Open the file, write the header and make this the current session."""
        self._open_file()
        if not self.disabled:
            self._tokens.append(_context.current.set(self))
        return self

    def close(self) -> None:
        """Flush, fsync and close the file; restore the previous current session."""
        self._finish_streams()
        self._restore_context()
        err = self._close_file()
        if err is not None:
            raise err

    async def aclose(self) -> None:
        self._finish_streams()
        self._restore_context()
        err = await _files.run(self._close_file)
        if err is not None:
            raise err

    def _restore_context(self) -> None:
        if self._tokens:
            token = self._tokens.pop()
            try:
                _context.current.reset(token)
            except ValueError:
                # Closed from another context (e.g. a different task): just
                # make sure this context no longer points at a closed session.
                if _context.current.get() is self:
                    _context.current.set(None)
            restored = _context.current.get()
            if restored is not None and restored._closed:
                # Sessions closed in the order they were opened: the token
                # restores one that is already closed; nothing is current.
                _context.current.set(None)

    def _track_stream(self, state: Any) -> None:
        """Finish *state* (a stream's :class:`StreamState`) at the session's end
        if the caller has not by then."""
        streams = self._streams
        streams.add(weakref.ref(state, streams.discard))

    def _finish_streams(self) -> None:
        """Record the replies of streams still open as the session ends (read
        partly, then left with ``break``): what arrived so far, once. The
        caller may go on reading them; later chunks are not recorded."""
        if not self._streams or self._closed:
            return
        try:
            for ref in list(self._streams):
                state = ref()
                if state is not None and not state.done and state.received:
                    state.finish(ended=False)
            self._streams.clear()
        except Exception as err:
            internal_error(err, "session end streams")

    def _answer_open_calls(self, exc: BaseException) -> None:
        """The ``with`` block ends by *exc* while tool calls the model asked for
        have no result: a tool raised through the framework (LangGraph's
        ``ToolNode``, PydanticAI) and nothing recorded what happened. Answer
        each with the error, so the trace ends with it rather than with
        unanswered calls (as ``@tool`` and the Agents SDK runner already do)."""
        if self._closed or not self._pending:
            return
        try:
            with self._state_lock:
                open_calls = _pairing.take_all(self._pending)
            text = _records.error_text(exc)
            for call_id in open_calls:
                self._tool_result(call_id, text)
        except Exception as err:
            internal_error(err, "session end")

    def _close_file(self) -> BaseException | None:
        if self._close_done:
            return None
        self._closed = True
        if self._guard is not None:
            self._guard.stop_following()  # a closed session takes no later environment secret
        writer = self._writer
        if self._tools_next is not None and writer is not None:
            # Offered to a call that recorded nothing after (it raised): no
            # message is left to carry them.
            self._tools_next = None
            self.__dict__.pop("_write", None)
            self._tools_unwritten += 1
            # Info, not a warning: that call's own failure is what the user sees (or was warned about).
            logger.info(
                "ststrace: session %s: tool definitions offered to the last model call were not written "
                "(no message followed them; counted in stats()['lost'])",
                self.id,
            )
        if writer is None:
            self._close_done = True
            _registry.unregister(self)
            return None
        # Interrupted here (Ctrl-C), the session stays registered and the
        # writer keeps closing in the flusher: close_all at exit collects it.
        err = writer.close()
        if not writer.close_done:
            return err  # deferred (called from a signal handler): close_all finishes it
        self._close_done = True
        _registry.unregister(self)
        if not writer.records and not self._dropped:
            _registry.ended_empty(self.id)
        if err is None and self.sync_to:
            _registry.after_close(self._trace_path, self.sync_to, self.sync_as)
        return err

    def __enter__(self) -> Session:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish_streams()
        if exc is not None:
            self._answer_open_calls(exc)
        self._restore_context()
        err = self._close_file()
        if err is not None:
            if exc is not None:
                # The user's exception is what matters; ours is only logged.
                logger.error("%s", err)
            else:
                raise err

    async def __aenter__(self) -> Session:
        # File creation happens off the event loop thread, batched with other
        # sessions opened at the same time (see _files); the context variable
        # must be set here, in the task that entered the block.
        if self._writer is None and not self._closed and not self.disabled:
            # The sub-agent links come from this task's context variables,
            # which the worker thread creating the file does not see.
            try:
                self._links = _links.links_for(self, self._parent)
            except Exception as exc:
                internal_error(exc, "sub-agent links")
            # A task cancelled while its file is created leaves no open session behind.
            await _files.run(self._open_file, on_cancel=self._close_file)
        else:
            self._open_file()  # open already, disabled, or closed (which raises)
        if not self.disabled:
            _signals.install()  # _open_file ran off the main thread, where it cannot
            self._tokens.append(_context.current.set(self))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish_streams()
        if exc is not None:
            self._answer_open_calls(exc)
        self._restore_context()
        err = await _files.run(self._close_file)
        if err is not None:
            if exc is not None:
                logger.error("%s", err)
            else:
                raise err

    @property
    def closed(self) -> bool:
        return self._closed

    # -- flushing and stats ---------------------------------------------------

    def flush(self) -> None:
        """Write everything recorded so far (and fsync). Raises WriteError on disk failure."""
        if self._writer is not None:
            self._writer.flush(fsync=True)

    async def aflush(self) -> None:
        if self._writer is not None:
            await asyncio.to_thread(self._writer.flush, fsync=True)

    def stats(self) -> dict[str, Any]:
        if self._writer is None:
            # The same keys as an open writer's, so code reading stats works disabled too.
            out: dict[str, Any] = {"messages": 0, "bytes": 0, "flushes": 0, "write_errors": 0, "lost": 0, "buffered_bytes": 0}
        else:
            out = self._writer.stats()
        if self._dropped or self._tools_unwritten:
            out["lost"] += self._dropped + self._tools_unwritten
        out["pending_tool_calls"] = len(self._pending)
        out["redactions"] = dict(self._guard.counts) if self._guard is not None else {}
        with self._state_lock:
            out["usage"] = dict(self._usage_total)
        return out

    # -- recording API ----------------------------------------------------------

    def _emit(self, msg: dict[str, Any]) -> None:
        """Guard, encode and buffer *msg*."""
        guard = self._guard
        if guard is not None:
            msg = guard.message(msg)
        self._write(msg)

    def _write(self, msg: dict[str, Any]) -> None:
        """Encode and buffer *msg*, which has been through the guard already.
        Every record passes here, but for the lines s.user() and @tool encode
        in one step while the file is open and no tools wait to be written."""
        writer = self._writer
        if writer is None:
            if self.disabled:
                return
            if self._closed:
                self._dropped += 1
                if not self._warned_closed:
                    self._warned_closed = True
                    logger.warning(
                        "ststrace: session %s is closed; a %s message was not recorded "
                        "(counted in stats()['lost']; said once per session)",
                        self._shown_id,
                        msg.get("role"),
                    )
                return
            # Recording before entering the block opens the file on first use.
            self._open_file()
            writer = self._writer
            assert writer is not None
        try:
            line = b'{"type":"message","message":' + _orjson_dumps(msg) + b"}\n"
        except Exception:  # odd values: the encoder's fallbacks never fail
            line = b'{"type":"message","message":' + dumps(msg) + b"}\n"
        writer.append(line)

    # Each recording method builds its record inside ``try``: a value that
    # raises when looked at (a lazy proxy whose __class__ fails) must not
    # reach the caller. The record is then dropped, counted and logged.
    # ValueErrors of ststrace's own checks still tell the caller what is wrong.

    def user(self, content: Any) -> None:
        """Record a user turn."""
        # The hottest direct call: _records.simple and _emit written out, the
        # guard's message() cut to the one field there is.
        if type(content) is str:
            text = content
        else:
            try:
                text = content_text(content)
            except Exception as exc:
                self._not_recorded("user", exc)
                return
        msg = {"role": "user", "content": text, "timestamp": _time_ns() // 1_000_000}
        self._direct.append(msg)
        # The guard's screen is read from the guard each time: a secret set in
        # the environment later replaces it (see _envwatch).
        guard = self._guard
        if guard is not None and guard.screen(text):
            new = guard.text(text)
            if new is not text:
                # _direct keeps the message as given: model inputs are matched against it.
                msg = {"role": "user", "content": new, "timestamp": msg["timestamp"]}
        append = self._append
        if append is None:
            self._write(msg)
            return
        try:
            line = b'{"type":"message","message":' + _orjson_dumps(msg) + b"}\n"
        except Exception:
            line = b'{"type":"message","message":' + dumps(msg) + b"}\n"
        append(line)

    def system(self, content: Any) -> None:
        """Record a system prompt."""
        try:
            msg = _records.simple("system", content)
        except Exception as exc:
            self._not_recorded("system", exc)
            return
        self._direct.append(msg)
        self._emit(msg)

    def assistant(
        self,
        content: Any = "",
        *,
        reasoning: Any = None,
        tool_calls: Iterable[Any] | None = None,
        model: str | None = None,
        usage: Any = None,
    ) -> list[str]:
        """Record an assistant reply; returns the ids of its tool calls.

        *usage*: token counts, ``{"input", "output", "cacheRead", "cacheWrite"}``
        (``totalTokens`` is computed) or a provider's usage object."""
        try:
            calls = _records.normalize_tool_calls(tool_calls)
            if model is not None and type(model) is not str:
                model = content_text(model)
            msg = _records.message("assistant", content, reasoning=reasoning, tool_calls=calls, model=model, usage=usage)
        except Exception as exc:
            self._not_recorded("assistant", exc)
            return []
        self._record_assistant(msg)
        return [c["id"] for c in calls]

    def tool(self, tool_call_id: str, content: Any) -> None:
        """Record the result of tool call *tool_call_id*."""
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise BadArgument(f"tool_call_id must be a non-empty string, got {tool_call_id!r}")
        try:
            msg = _records.message("tool", content, tool_call_id=tool_call_id)
        except Exception as exc:
            self._not_recorded("tool", exc)
            return
        with self._state_lock:
            self._pending.pop(tool_call_id, None)
        self._emit(msg)

    def record(self, message: Mapping[str, Any]) -> None:
        """Record a raw STS message dict (checked; ValueError if malformed)."""
        try:
            msg = _records.check_message(message)
        except Exception as exc:
            self._not_recorded("", exc)
            return
        if msg["role"] == "assistant":
            self._record_assistant(msg)
            return
        if msg["role"] == "tool":
            with self._state_lock:
                self._pending.pop(msg["toolCallId"], None)
        self._emit(msg)

    def outcome(
        self,
        reward: float | None = None,
        *,
        rewards: Mapping[str, float] | None = None,
        labels: Mapping[str, str] | None = None,
        success: bool | None = None,
    ) -> None:
        """Record how the session went: a *reward*, named *rewards*, *labels*,
        *success*. Callable more than once: each key's last value stands;
        *rewards* and *labels* merge key by key (see :attr:`Trace.outcome`).

        Written at once as a line of its own (``{"type": "outcome", ...}``),
        which STS readers and the Hub's loader skip."""
        obj = _records.outcome(reward, rewards, labels, success)  # BadArgument: the caller's mistake
        if self.disabled:
            return
        writer = self._writer
        if writer is None:
            if self._closed:
                raise RuntimeError(
                    f"session {self._shown_id} is closed; set the outcome of its file with "
                    "ststrace.outcome(path, ...) or `ststrace outcome`"
                )
            self._open_file()
            writer = self._writer
            assert writer is not None
        try:
            guard = self._guard
            if guard is not None and "labels" in obj:
                obj["labels"] = {k: guard.text(v) for k, v in obj["labels"].items()}
            line = _records.outcome_line(obj, dumps)
        except Exception as exc:
            self._not_recorded("outcome", exc)
            return
        writer.append(line)

    def tools(self, tools: Iterable[Any]) -> None:
        """Record the tools offered to the model: JSON-schema definitions (the
        OpenAI, Responses, Anthropic or bare ``{name, description, parameters}``
        shape), ``@tool`` functions or plain functions (their schema is built
        from the signature). Written on the next message as its ``tools`` field,
        once per distinct set (see docs/tool-schemas.md)."""
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
            raise BadArgument(f"tools must be a list of tool definitions or functions, not {type(tools).__name__}")
        defs: list[dict[str, Any]] = []
        for i, item in enumerate(list(tools)):
            try:
                d = _tools.definition(item)
            except Exception as exc:
                raise BadArgument(f"tools[{i}]: cannot build a schema from {item!r}: {exc}") from None
            if d is None:
                raise BadArgument(
                    f"tools[{i}]: not a tool definition (a function, or a dict with a 'name' and "
                    f"'parameters' / 'input_schema'): {item!r}"[:300]
                )
            defs.append(d)
        try:
            self._offer_tools(defs)
        except Exception as exc:
            internal_error(exc, "s.tools()")

    def _offer_tools(self, definitions: list[dict[str, Any]], key: Any = None) -> None:
        """Record *definitions*, the tools a model call is offered, each already
        in the normalised shape of :func:`ststrace._tools.definition`
        (``{"type": "function", "function": {"name", "description", "parameters"}}``).

        The hook every integration calls with its provider's ``tools=``
        (converted by :func:`ststrace._tools.definitions`, or by its own code
        for a shape that does not cover). A set already recorded in this
        session (by *key*, default: its content) is not written again, so a
        call costs one set lookup once its tools are known. A new set is
        redacted now and written as the ``tools`` field of the next message.
        """
        if not definitions or self.disabled:
            return
        if key is None:
            key = _tools.fingerprint(definitions)
        seen = self._tools_seen
        if key in seen:
            return
        if len(seen) >= _MAX_TOOL_SETS:
            seen.clear()  # a set seen again after this is written again: bounded memory, nothing lost
        seen.add(key)
        guard = self._guard
        if guard is not None:
            definitions = guard.plain(definitions)
        with self._state_lock:
            waiting = self._tools_next
            self._tools_next = definitions if waiting is None else _tools.merge([waiting, definitions])
            # The next record takes them: _write is shadowed by _write_tools on
            # this instance until then, and s.user() leaves its fast path (it
            # writes without _write), so the records that carry no tools pay
            # nothing for them.
            self._write = self._write_tools  # type: ignore[method-assign]
            self._append = None

    def _write_tools(self, msg: dict[str, Any]) -> None:
        """:meth:`_write`, for the record that carries the tools waiting."""
        with self._state_lock:
            tools = self._tools_next
            self._tools_next = None
            self.__dict__.pop("_write", None)
            writer = self._writer
            if writer is not None:
                self._append = writer.append
        Session._write(self, msg if tools is None else {**msg, "tools": tools})

    def _not_recorded(self, role: str, exc: Exception) -> None:
        if isinstance(exc, BadArgument):
            raise exc  # the caller's mistake, said by ststrace's own check
        self._dropped += 1
        if self._dropped <= _MAX_DROP_WARNINGS:
            try:
                detail = f"{type(exc).__name__}: {exc}"
            except Exception:
                detail = "an exception"
            logger.warning(
                "ststrace: session %s: a %s message was not recorded: building it raised %s "
                "(counted in stats()['lost']%s)",
                self._shown_id,
                role or "raw",
                detail,
                "; further ones are only counted" if self._dropped == _MAX_DROP_WARNINGS else "",
            )

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._writer else "new")
        trace = self._written() if self._closed else None
        if trace is not None:
            from ._reader import summary

            state += ": " + summary(trace.header, trace.messages).split(" ", 1)[1]
        return f"<ststrace.Session id={self._shown_id!r} path={str(self._trace_path)!r} {state}>"

    def _written(self) -> Any:
        """The closed session's file as a Trace, or None (nothing written,
        unreadable, or too big to read for a repr)."""
        path = self.path
        try:
            if path is None or path.stat().st_size > _REPR_MAX_BYTES:
                return None
            from ._reader import read

            return read(path, strict=False)
        except (OSError, ValueError):
            return None

    def _repr_html_(self) -> str | None:
        """Jupyter, once closed: the trace in the viewer (see ``Trace._repr_html_``)."""
        trace = self._written() if self._closed else None
        return None if trace is None else str(trace._repr_html_())


def current_session() -> Session | None:
    """The session that recording calls in this context go to, or ``None``."""
    session: Session | None = _context.current.get()
    return session


def close_all() -> None:
    """Flush and close every session still open (run at interpreter exit)."""
    _registry.close_all()


_MAX_DROP_WARNINGS = 10
#: Distinct tool sets remembered per session (see Session._offer_tools).
_MAX_TOOL_SETS = 1024

# Every session, opened or not: a thread may hold one's state lock at fork.
_all_sessions: weakref.WeakSet[Session] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for s in list(_all_sessions):
        s._state_lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

"""The SIGTERM handler's decision whether it may close sessions right away.

End-to-end SIGTERM behaviour (real signals, real processes) is in
``reliability/test_exit.py``.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from ststrace import Session, _signals
from ststrace._writer import _flusher


def test_user_code_is_not_inside_ststrace() -> None:
    assert _signals._inside_ststrace(sys._getframe()) is False
    assert _signals._inside_ststrace(None) is False


def test_user_code_called_by_ststrace_is_not_inside_ststrace(tmp_path: Path) -> None:
    """A frame of user code run from ststrace (the encoder calling __repr__) holds no ststrace lock."""
    seen: list[bool] = []

    class Opaque:
        def __repr__(self) -> str:
            seen.append(_signals._inside_ststrace(sys._getframe()))
            return "opaque"

    with Session(tmp_path) as s:
        s.user(Opaque())
    assert seen and not any(seen)


def test_a_thread_waiting_inside_ststrace_is_inside(tmp_path: Path) -> None:
    """A recording thread blocked on a full buffer waits in threading.Condition.wait
    (stdlib) called from _writer.py: that is inside ststrace. The flusher's own
    idle wait is in _writer.py itself."""
    with Session(tmp_path, flush_interval=3600, buffer_size=1024, max_buffer=1024) as s:
        thread = _flusher.thread
        assert thread is not None and thread.ident is not None
        deadline = time.monotonic() + 120
        while _flusher._ident != thread.ident:  # set first thing in its loop
            assert time.monotonic() < deadline, "the flusher thread never started its loop"
            time.sleep(0.001)
        assert _signals._inside_ststrace(sys._current_frames()[thread.ident]) is True
        writer = s._writer
        assert writer is not None
        writer._io_lock.acquire()  # a stalled disk: the buffer cannot drain
        try:
            t = threading.Thread(target=lambda: [s.user("x" * 100) for _ in range(50)], daemon=True)
            t.start()
            # Until it blocks in Condition.wait: _waiting is set just before.
            deadline = time.monotonic() + 120
            while True:
                frame = sys._current_frames().get(t.ident or 0)
                if writer._waiting and frame is not None and frame.f_code.co_filename.endswith("threading.py"):
                    break
                assert time.monotonic() < deadline, "the recording thread never blocked on the full buffer"
                time.sleep(0.01)
            assert _signals._inside_ststrace(frame) is True
        finally:
            writer._io_lock.release()
        t.join(10)


def test_install_is_idempotent_and_main_thread_only(tmp_path: Path) -> None:
    """In this (pytest) process a session has been opened on the main thread already,
    or is opened now: the flag is set and a second call changes nothing."""
    with Session(tmp_path):
        pass
    assert _signals._installed is True
    result: list[BaseException] = []

    def off_main() -> None:
        try:
            _signals.install()
        except BaseException as exc:  # pragma: no cover - reported below
            result.append(exc)

    t = threading.Thread(target=off_main)
    t.start()
    t.join()
    assert result == []

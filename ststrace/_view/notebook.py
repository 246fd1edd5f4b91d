"""Traces in Jupyter: the viewer page inline.

``Trace._repr_html_`` and a closed ``Session``'s give :func:`iframe`: the
viewer's whole page (:func:`~ststrace._view.page.render_page`) in ``<iframe srcdoc=...>`` with
``sandbox="allow-scripts"`` and no ``allow-same-origin``. The page runs in an
opaque origin, so its script cannot reach the notebook's page, cookies or
storage; its own Content-Security-Policy (hashes of our script and stylesheet,
``default-src 'none'``) still forbids any request and any other script, and
trace text is only ever set as ``textContent``. The ``srcdoc`` attribute is
HTML-escaped, so the trace cannot close it.
"""

from __future__ import annotations

import html
from .page import TraceLike, render_page

__all__ = ["iframe"]

_HEIGHT = 640


def iframe(trace: TraceLike, *, height: int = _HEIGHT) -> str:
    """The viewer page of *trace* in a sandboxed ``srcdoc`` iframe."""
    page = render_page(trace)
    name = trace.header.get("name") or trace.header.get("id") or "trace"
    return (
        f'<iframe sandbox="allow-scripts" referrerpolicy="no-referrer" title="{html.escape(str(name), quote=True)}"'
        f' style="width:100%;height:{int(height)}px;border:1px solid #8884;border-radius:6px"'
        f' srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )

"""Live capture of coding agents (Claude Code, Gemini CLI, Codex) through their hooks.

``hook.py`` is what the agent runs on every event: standard library only, so
the agent can start it as a plain script (``python -I .../hook.py NAME``)
without importing ststrace; it notes the event and starts ``worker.py``
detached, which converts the transcript with the ``convert`` code and writes
the session's STS file. ``settings.py`` edits the agents' settings files.
This package imports nothing at its top: ``hook.py`` must stay lean.
"""

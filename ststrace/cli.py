"""The ``ststrace`` command line (``ststrace.cli:main``); the commands live in
``ststrace._cli``, one module each."""

from __future__ import annotations

import sys

from ._cli import COMMANDS, CliError, build_parser, main

__all__ = ["COMMANDS", "CliError", "build_parser", "main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

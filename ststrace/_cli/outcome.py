"""``ststrace outcome``: attach how a session went to its closed trace file."""

from __future__ import annotations

import argparse
import math
from typing import Any

import orjson

from ._common import CliError, one_line, warn

__all__ = ["run", "setup"]


def _reward(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a label is KEY=VALUE, got {text!r}")
    return key, value


def setup(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Append an outcome (reward, named rewards, labels, success) to closed trace files, without "
        "changing a byte already in them. Merges with earlier outcomes: each key's last value stands. "
        "A file a live session still holds is refused."
    )
    p.add_argument("files", nargs="+", metavar="TRACE", help="closed trace files (.jsonl)")
    p.add_argument("--reward", type=_reward, metavar="R", help="the session's reward (a number)")
    p.add_argument("--rewards-json", metavar="J", help='named rewards as a JSON object, e.g. \'{"tests": 1.0, "style": 0.2}\'')
    p.add_argument("--label", action="append", type=_label, default=[], metavar="K=V", help="a label (repeatable), e.g. --label verifier=pytest")
    ok = p.add_mutually_exclusive_group()
    ok.add_argument("--success", dest="success", action="store_const", const=True, help="the session succeeded")
    ok.add_argument("--failure", dest="success", action="store_const", const=False, help="the session failed")


def run(args: argparse.Namespace) -> int:
    from .._outcome import append_outcome

    rewards: Any = None
    if args.rewards_json is not None:
        try:
            rewards = orjson.loads(args.rewards_json)
        except orjson.JSONDecodeError as exc:
            raise CliError(f"--rewards-json is not valid JSON: {exc}") from None
        if not isinstance(rewards, dict):
            raise CliError("--rewards-json must be a JSON object of names to numbers")
    labels = dict(args.label) or None
    if args.reward is None and rewards is None and labels is None and args.success is None:
        raise CliError("nothing to set: give --reward, --rewards-json, --label, --success or --failure")
    failed = 0
    for name in args.files:
        try:
            path = append_outcome(name, args.reward, rewards=rewards, labels=labels, success=args.success)
        except (OSError, ValueError) as exc:
            failed += 1
            warn("ststrace outcome", one_line(str(exc)))
            continue
        print(f"outcome set: {path}")
    return 1 if failed else 0

"""``ststrace upload``: check traces, then send them to a Hub dataset repo or Storage Bucket."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
from typing import Any, Iterator, TextIO

from .convert import plural

__all__ = ["run", "setup"]


def setup(p: argparse.ArgumentParser) -> None:
    """Add ``upload``'s arguments and description to its sub-parser *p*."""
    p.description = (
        "Upload STS trace files to the Hugging Face Hub. Every file is validated and scanned for "
        "secrets first; a file with errors or secrets is refused unless --force. Needs huggingface_hub "
        "(pip install 'ststrace[hub]') and a token (hf auth login, or HF_TOKEN)."
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories (every *.jsonl under it)")
    dest = p.add_mutually_exclusive_group(required=True)
    dest.add_argument("--repo", metavar="USER/NAME", help="dataset repository (created private unless --public)")
    dest.add_argument("--bucket", metavar="USER/NAME[/PREFIX]", help="Storage Bucket, optionally under a prefix")
    p.add_argument("--public", action="store_true", help="create the repo or bucket public")
    p.add_argument("--force", action="store_true", help="send files even with errors or detected secrets")
    p.add_argument("--dry-run", action="store_true", help="check and show what would be sent; send nothing")
    p.add_argument(
        "--as",
        dest="layout",
        choices=("sts", "pi"),
        default="sts",
        help="what to send: sts (the files as they are, default) or pi (each STS trace as the Pi session "
        "'convert --to pi' writes: the Hub's datasets loader reads its tool calls, reasoning, results and tools)",
    )


@contextlib.contextmanager
def _quiet_refusals() -> Iterator[None]:
    """The library logs each refusal for Python callers; here the command prints
    its own ``refused ...`` line, so the logged copy would say it twice."""

    def drop(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("ststrace: not uploading ")

    log = logging.getLogger("ststrace")
    log.addFilter(drop)
    try:
        yield
    finally:
        log.removeFilter(drop)


# What an unreachable Hub raises, by class name: httpx, requests, urllib3 and
# huggingface_hub's offline mode (their classes need not be imported to be named).
_UNREACHABLE = frozenset(
    {"ConnectError", "ConnectTimeout", "ConnectionError", "NameResolutionError", "NewConnectionError",
     "MaxRetryError", "OfflineModeIsEnabled", "ReadTimeout", "Timeout", "TimeoutException", "ProxyError"}
)


def _hub_failure(exc: BaseException, api: Any) -> str:
    """One line for a failed upload that names the Hub's address and whether a token
    was found, the two things to check first (the token itself is never shown)."""
    endpoint, token = "the Hugging Face Hub", None
    with contextlib.suppress(Exception):
        from huggingface_hub import constants, get_token

        endpoint = str(getattr(api, "endpoint", None) or constants.ENDPOINT)
        token = getattr(api, "token", None) or get_token()
    found = "a Hugging Face token was found" if token else "no Hugging Face token was found (HF_TOKEN, or hf auth login)"
    chain, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    down = next((e for e in chain if type(e).__name__ in _UNREACHABLE or isinstance(e, (ConnectionError, TimeoutError))), None)
    if down is not None:
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(down).strip()) or type(down).__name__
        if type(down).__name__ == "OfflineModeIsEnabled":
            reason = "offline mode is on (HF_HUB_OFFLINE)"
        return f"cannot reach {endpoint}: {reason}; {found}"
    return f"upload to {endpoint} failed: {type(exc).__name__}: {exc}; {found}"


#: Findings printed per refused file.
MAX_SHOWN = 20


def run(args: argparse.Namespace, *, api: Any = None) -> int:
    from .._hub import parse_target, upload

    err: TextIO = sys.stderr
    try:
        target = parse_target(repo=args.repo, bucket=args.bucket)
        with _quiet_refusals():
            items = upload(
                args.paths,
                repo=args.repo,
                bucket=args.bucket,
                public=args.public,
                force=args.force,
                dry_run=args.dry_run,
                api=api,
                layout=args.layout,
            )
    except (ValueError, FileNotFoundError, IsADirectoryError, PermissionError, ImportError) as exc:
        # Bad arguments or unreadable local files: nothing was sent.
        print(f"ststrace upload: {exc}", file=err)
        return 1
    except Exception as exc:  # errors from the Hub (HTTP, auth) end the command with one line
        print(f"ststrace upload: {_hub_failure(exc, api)}", file=err)
        return 1
    refused = [i for i in items if i.status == "refused"]
    for item in refused:
        # As validate does: a file that is not a trace at all must not flood the terminal.
        for finding in item.findings[:MAX_SHOWN]:
            print(f"ststrace upload: refused {finding}", file=err)
        if len(item.findings) > MAX_SHOWN:
            more = len(item.findings) - MAX_SHOWN
            print(f"ststrace upload: refused {item.path}: ... and {more} more problems", file=err)
    for item in items:
        if item.status in ("uploaded", "would-upload"):
            forced = " (forced past: " + ", ".join(sorted({f.kind for f in item.findings})) + ")" if item.findings else ""
            verb = "would upload" if item.status == "would-upload" else "uploaded"
            layout = " as Pi" if args.layout == "pi" else ""
            print(f"{verb} {item.path}{layout} -> {target.kind} {target.repo_id}:{item.dest} ({plural(item.size, 'byte')}){forced}")
    sent = sum(1 for i in items if i.status in ("uploaded", "would-upload"))
    verb = "would send" if args.dry_run else "sent"
    print(
        f"{verb} {plural(sent, 'file')} to {target}"
        + (f" ({'public' if args.public else 'private'} if created)" if sent else "")
        + (f"; refused {plural(len(refused), 'file')} (use --force to send anyway)" if refused else "")
    )
    return 1 if refused else 0


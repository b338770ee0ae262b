"""File operations behind the ``read`` and ``grep`` tools, local and on an exec host.

Each takes JSON-ready arguments and returns a JSON-ready dict whose text is already
bounded (the first ``max_lines`` lines, cut at ``max_bytes`` UTF-8 bytes — the same
head window the tools' output sink applies), with exact totals. They run in a worker
thread (the exec host's, or ``run_file_op``'s for the local tools, so the event loop
never waits on a disk), read files in fixed-size chunks (``_filescan``) and check
``cancel`` between chunks: a huge file, a huge line or a huge tree never holds more
than the window plus a fixed buffer, and a cancelled call stops promptly.

Local and remote tools run this same code, so they skip, cut and count the same.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ._errors import ExecError
from ._filescan import FileOpError, Source, open_regular, read_window, search_lines
from ._headwindow import HeadWindow

__all__ = [
    "FILE_OPS",
    "SEARCH_MAX_LINE_CHARS",
    "SEARCH_SKIP_DIRS",
    "FileOpError",
    "iter_files",
    "op_error_text",
    "run_file_op",
    "search_file",
]

SEARCH_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
)
"""Directories never searched (version control, dependencies, caches)."""

SEARCH_MAX_LINE_CHARS = 500
"""A matching line longer than this is shown cut (minified files would drown the output)."""


def iter_files(root: Path, glob: str | None) -> Iterator[Path]:
    """Files under ``root`` (or ``root`` itself), sorted, skipping ``SEARCH_SKIP_DIRS`` and dot dirs."""
    if not root.is_dir():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SEARCH_SKIP_DIRS and not d.startswith(".")
        )
        for name in sorted(filenames):
            if glob is None or fnmatch.fnmatch(name, glob):
                yield Path(dirpath) / name


def search_file(
    path: Path, regex: re.Pattern[str], cancel: threading.Event | None = None
) -> Iterator[tuple[int, str]]:
    """(line number, line) for every matching line, as found; nothing for binary or
    unreadable files, devices and pipes. Reads a chunk at a time (``_filescan``)."""
    try:
        f, limit = open_regular(path)
    except (OSError, FileOpError):
        return
    with f:
        try:
            yield from search_lines(
                Source(f, limit, cancel or threading.Event()), regex, SEARCH_MAX_LINE_CHARS
            )
        except OSError:  # an I/O error mid-file: keep what was found
            return


READ_CHECK: ContextVar[Callable[[Path], str | None] | None] = ContextVar("read_check", default=None)
"""A sandbox's path rule for the file operations (``Sandbox.read_check``): set by whoever
runs them for a confined env; ``asyncio.to_thread`` carries it into the worker."""


def _resolve(args: dict[str, Any]) -> Path:
    path = args.get("path")
    cwd = args.get("cwd")
    if not isinstance(path, str) or not path:
        raise FileOpError(f"'path' must be a non-empty string, got {path!r}")
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = Path(cwd).expanduser() / p if isinstance(cwd, str) and cwd else Path.cwd() / p
    check = READ_CHECK.get()
    refused = check(p) if check is not None else None
    if refused is not None:
        raise FileOpError(refused)
    return p


def _positive(args: dict[str, Any], name: str, default: int | None = None) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FileOpError(f"'{name}' must be a positive integer, got {value!r}")
    return value


def stat(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """``{path, exists, is_dir, size}`` of ``path`` (resolved against ``cwd``)."""
    p = _resolve(args)
    try:
        st = p.stat()
    except OSError:
        return {"path": str(p), "exists": False, "is_dir": False, "size": 0}
    return {"path": str(p), "exists": True, "is_dir": p.is_dir(), "size": st.st_size}


def read_bytes(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """The whole file as base64, refused (``too_big``) when over ``max_bytes``."""
    p = _resolve(args)
    limit = _positive(args, "max_bytes")
    f, _ = open_regular(p)
    with f:
        data = _read_at_most(f, limit + 1, cancel)
        size = os.fstat(f.fileno()).st_size
    if len(data) > limit:
        return {"path": str(p), "too_big": True, "size": max(size, len(data))}
    return {
        "path": str(p),
        "too_big": False,
        "size": len(data),
        "data": base64.b64encode(data).decode(),
    }


def _read_at_most(f: Any, n: int, cancel: threading.Event) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < n and not cancel.is_set():
        data = f.read(min(n - got, 1 << 20))
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def read_lines(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """Lines ``start``.. (at most ``limit``) of a text file, head-windowed, starting
    ``line_byte`` bytes into line ``start``.

    Lines split on ``\\n`` only. Returns the window's fields plus what
    ``_filescan.read_window`` tells: ``shown``, ``more``, ``counted_all`` and where
    the first unshown byte is (``resume_line``, ``resume_byte``).
    """
    p = _resolve(args)
    start = _positive(args, "start", 1)
    line_byte = args.get("line_byte") or 0
    if isinstance(line_byte, bool) or not isinstance(line_byte, int) or line_byte < 0:
        raise FileOpError(f"'line_byte' must be a non-negative integer, got {line_byte!r}")
    limit = args.get("limit")
    if limit is not None:
        limit = _positive(args, "limit")
    window = HeadWindow(_positive(args, "max_bytes"), _positive(args, "max_lines"))
    f, scan_limit = open_regular(p)
    with f:
        found = read_window(Source(f, scan_limit, cancel), window, start, line_byte, limit)
    return {"path": str(p), **found, **window.result()}


def grep(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """``path:line:text`` for every matching line under ``path``, head-windowed, with
    the number of matches, files with matches and files searched."""
    pattern = args.get("pattern")
    if not isinstance(pattern, str):
        raise FileOpError(f"'pattern' must be a string, got {pattern!r}")
    try:
        regex = re.compile(
            re.escape(pattern) if args.get("literal") else pattern,
            re.IGNORECASE if args.get("ignore_case") else 0,
        )
    except re.error as exc:
        raise FileOpError(f"invalid regular expression {pattern!r}: {exc}") from exc
    glob = args.get("glob")
    root = _resolve(args)
    if not root.exists():
        return {"path": str(root), "missing": True}
    window = HeadWindow(_positive(args, "max_bytes"), _positive(args, "max_lines"))
    is_dir = root.is_dir()
    base = root if is_dir else root.parent
    matches = found = searched = 0
    check = READ_CHECK.get()
    for path in iter_files(root, glob if isinstance(glob, str) else None):
        if cancel.is_set():
            break
        if check is not None and check(path) is not None:
            continue  # hidden from a confined command too (a secret, a link out of view)
        searched += 1
        shown = os.path.relpath(path, base) if is_dir else path.name
        hits = 0
        for n, line in search_file(path, regex, cancel):
            hits += 1
            window.write(f"{shown}:{n}:{line}\n")
        if hits:
            found += 1
            matches += hits
    return {
        "path": str(root),
        "missing": False,
        "matches": matches,
        "files": found,
        "searched": searched,
        **window.result(),
    }


FILE_OPS: dict[str, Callable[[dict[str, Any], threading.Event], dict[str, Any]]] = {
    "stat": stat,
    "read_bytes": read_bytes,
    "read_lines": read_lines,
    "grep": grep,
}
"""What a ``call`` request may name."""


def op_error_text(exc: BaseException) -> str:
    """The one-line message a failed file operation answers with."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, FileOpError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


async def run_file_op(
    fn: str,
    args: Mapping[str, Any],
    cancel: asyncio.Event | None = None,
    *,
    check: Callable[[Path], str | None] | None = None,
) -> dict[str, Any]:
    """Run the file operation ``fn`` (``stat``, ``read_bytes``, ``read_lines``, ``grep``)
    on this machine, in a worker thread: what ``RemoteExecEnv.call`` does on an exec
    host. Its failure raises ``ExecError`` with the message the host would send.

    Setting ``cancel`` (or cancelling the awaiting task) stops the worker at its next
    chunk; the result then holds what was read so far. ``check`` (a sandbox's
    ``read_check``) refuses paths the confined command could not see.
    """
    op = FILE_OPS.get(fn)
    if op is None:
        raise ExecError(f"unknown file operation {fn!r}; expected one of {sorted(FILE_OPS)}")
    stop = threading.Event()
    watch: asyncio.Task[Any] | None = None
    if cancel is not None:
        if cancel.is_set():
            stop.set()
        watch = asyncio.ensure_future(cancel.wait())
        watch.add_done_callback(lambda _: stop.set())
    token = READ_CHECK.set(check)
    try:
        return await asyncio.to_thread(op, dict(args), stop)
    except Exception as exc:
        raise ExecError(op_error_text(exc)) from exc
    finally:
        READ_CHECK.reset(token)
        stop.set()  # an abandoned await must not leave the worker reading
        if watch is not None:
            watch.cancel()

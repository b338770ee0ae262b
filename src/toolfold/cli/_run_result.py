"""What ``toolfold run`` makes of a settled call, on either of its drivers (asyncio, or
the direct one): the session name, the exit status, the result printed, the store flag
of a hint. Imports no event loop and nothing of the harness."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from toolfold.output import output_text

from ._errors import StoreURLError
from ._store import StoreSpec, resolve_store

if TYPE_CHECKING:
    from toolfold.harness import ToolResult

    from ._view import CallWatcher

EXIT_CANCELLED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""


def new_session_name() -> str:
    """A fresh session name: ``run-YYYYmmdd-HHMMSS-xxxx`` (sortable, unique enough)."""
    # Four random hex digits from os.urandom: uuid (which imports platform) is not
    # loaded by a direct run.
    return f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.urandom(2).hex()}"


def exit_status(result: ToolResult, signalled: int | None) -> int:
    """The process exit status for a settled ``bash`` call: the command's own exit code,
    128 + signal after Ctrl-C / SIGTERM, else 1 for a call that failed without one."""
    if result.outcome in ("cancelled", "interrupted"):
        return 128 + signalled if signalled else EXIT_CANCELLED
    code = result.details.get("exit_code") if isinstance(result.details, dict) else None
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF if code >= 0 else 1
    return 1 if result.is_error else 0


def model_text(message: dict[str, Any]) -> str:
    """The text a model receives for a settled call (its text blocks joined)."""
    return output_text(message)


def print_result(message: dict[str, Any], *, as_json: bool) -> None:
    """Write the model-visible result to stdout, unmodified (a newline is added only when
    the text does not end with one, so the shell prompt starts on its own line)."""
    if as_json:
        sys.stdout.write(json.dumps(message, ensure_ascii=False, indent=2) + "\n")
    else:
        text = model_text(message)
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()


def _store_flag(spec: StoreSpec) -> str:
    """`` --store URL`` for a hint that must work as typed, unless ``spec`` is the store a
    bare command finds anyway (the default, or ``$TOOLFOLD_STORE``)."""
    try:
        bare = resolve_store(None).url
    except StoreURLError:
        bare = None
    return "" if spec.url == bare else f" --store {spec.describe()}"


def unrecorded_end(spec: StoreSpec, session: str, call_id: str, exc: Exception) -> str:
    """The error line of a call whose end the store refused to record (both run drivers):
    what was refused, what is kept, and what to do. A call whose lease another host took
    over is that host's to settle now (``toolfold resume`` here would be refused again);
    any other refusal (a full disk) is settled by ``toolfold resume`` once the store can
    be written."""
    from toolfold.durability import FencedError

    done = (
        f"store {spec.describe()} could not record the end of call {call_id}: "
        f"{' '.join(str(exc).split())} — the call is left unsettled with its output up to "
        "its last checkpoint; "
    )
    if isinstance(exc, FencedError):
        if exc.holder is None:
            return done + "it has since been settled by the host that took it over"
        return done + f"{exc.holder} holds it now and settles it"
    return done + (
        f"once the store can be written again, run `toolfold resume {session}{_store_flag(spec)}`"
    )


def print_summary(
    watcher: CallWatcher,
    message: dict[str, Any],
    status: int,
    spec: StoreSpec,
    session: str,
    call_id: str,
    *,
    spill_host: str | None = None,
) -> None:
    """The run's last line, on stderr: the outcome and exit status, the output's totals,
    where its full output is (``spill_host``: the exec host holding a remote run's spill
    file), how long it ran, and how to show the call again."""
    from ._view import call_totals

    state = watcher.state if isinstance(watcher.state, dict) else {}
    parts = [f"{message.get('outcome', 'ok')}, exit status {status}", call_totals(state)]
    spill = state.get("spill_path")
    if spill:
        parts.append(f"full output: {spill}" + (f" (on {spill_host})" if spill_host else ""))
    parts.append(f"{watcher.elapsed:.1f} s")
    if spec.kind == "memory":
        parts.append("memory: store, nothing kept")
    else:
        parts.append(f"`toolfold show {session} {call_id}{_store_flag(spec)}`")
    print(f"toolfold: {' · '.join(parts)}", file=sys.stderr, flush=True)


TEST_INTERVAL_VAR = "TOOLFOLD_TEST_CHECKPOINT_INTERVAL"
"""For tests only: the paced checkpoints' interval of both ``run`` drivers, in seconds,
so that a short command runs past several (the default is one second)."""


def checkpoint_interval() -> float:
    """The interval between two paced checkpoints of a ``run``: ``DEFAULT_CHECKPOINT_INTERVAL``
    unless :data:`TEST_INTERVAL_VAR` says otherwise."""
    from toolfold.durability import DEFAULT_CHECKPOINT_INTERVAL

    given = os.environ.get(TEST_INTERVAL_VAR)
    return float(given) if given else DEFAULT_CHECKPOINT_INTERVAL

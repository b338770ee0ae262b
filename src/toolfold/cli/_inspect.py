"""``toolfold sessions``, ``show`` and ``resume``: read and finish what a store holds."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from toolfold._units import plural
from toolfold.durability import pending_messages
from toolfold.execenv import LocalExecEnv, OrphanReport, stop_orphans
from toolfold.harness import (
    DurableHooks,
    Harness,
    RecoveryError,
    ToolContext,
    ToolResult,
    orphan_notes,
)
from toolfold.output import output_text
from toolfold.storage import CorruptStoreError, StorageError

from ._agent import agent_to_continue, continue_run, recorded_sandbox
from ._calls import CallView, call_count, find_call, list_calls, pending_output, process_alive
from ._errors import CliError, StoreOpenError
from ._images import image_summary, save_images
from ._run_result import model_text
from ._sandbox import store_paths
from ._store import (
    StoreSpec,
    open_existing_session,
    open_store,
    report_notes,
    storage_message,
)
from ._tools import cli_tools


async def sessions_command(spec: StoreSpec) -> int:
    """List the sessions of the store with their call counts."""
    async with open_store(spec, create=False, read_only=True) as repo:
        names = await repo.list_sessions()
        if not names:
            print(f"no sessions in store {spec.describe()}")
            return 0
        rows: list[list[str]] = []
        damaged: list[StorageError] = []
        for name in names:
            try:
                session = await repo.open_session(name)
                report_notes(session)
            except StorageError as exc:
                if isinstance(exc, CorruptStoreError):
                    damaged.append(exc)
                    why = "corrupt (see below)"
                else:
                    why = "cannot open: " + " ".join(str(exc).split())
                rows.append([name, "?", "?", why])
                continue
            try:
                total, unsettled = await call_count(session)
                last = await list_calls(session, last=1, messages=False)
            finally:
                await session.close()
            rows.append([name, str(total), str(unsettled), last[-1].summary if last else ""])
        print_table(["session", "calls", "unsettled", "last call"], rows)
        if damaged:
            # The healthy sessions are listed; a damaged one still fails the command.
            raise StoreOpenError(storage_message(damaged[0], spec))
    return 0


def print_table(header: list[str], rows: list[list[str]]) -> None:
    """Columns padded to their widest cell; the last one is cut to the terminal width
    with an ellipsis, so each row stays one line (ids are never shortened)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    room = max(20, shutil.get_terminal_size((120, 24)).columns - sum(w + 2 for w in widths))
    for row in [header, *rows]:
        last = " ".join(row[-1].split())
        if len(last) > room:
            last = last[: room - 1] + "…"
        cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)]
        print("  ".join([*cells, last]).rstrip())


def _call_rows(calls: list[CallView]) -> list[list[str]]:
    rows = []
    for call in calls:
        details = call.message.get("details", {}) if call.message else {}
        code = details.get("exit_code") if isinstance(details, dict) else None
        rows.append(
            [
                str(call.number),
                call.tool_call_id,
                call.tool_name,
                call.status,
                "" if code is None else str(code),
                call.summary,
            ]
        )
    return rows


async def show_command(
    spec: StoreSpec,
    session_name: str,
    wanted: str | None,
    as_json: bool,
    save_to: Path | None = None,
) -> int:
    """List a session's calls, or print one call's result (settled) or its recovered
    pending output (unsettled); ``save_to`` also writes the call's images there."""
    async with open_store(spec, create=False, read_only=True) as repo:
        session = await open_existing_session(repo, spec, session_name)
        if wanted is None:
            if save_to is not None:
                raise CliError(
                    "--save-images needs a CALL: `toolfold show SESSION CALL --save-images DIR`"
                )
            calls = await list_calls(session, messages=False)
            if as_json:
                print(json.dumps([_call_json(c) for c in calls], indent=2, ensure_ascii=False))
            elif not calls:
                print(f"session {session_name} has no calls")
            else:
                print_table(["#", "call", "tool", "status", "exit", "what"], _call_rows(calls))
            return 0
        call = await find_call(session, wanted)
        if call.message is not None:
            # Images are saved first: a refusal is then the only thing printed.
            _save(call.message.get("content"), save_to, call)
            if as_json:
                print(json.dumps(call.message, indent=2, ensure_ascii=False))
            else:
                _print_settled(call)
            return 0
        try:
            state = await pending_output(session, call)
        except RecoveryError as exc:
            raise StoreOpenError(
                f"cannot recover the pending output of call {call.tool_call_id} in session "
                f"{session_name!r} ({spec.describe()}): {exc}"
            ) from exc
        _save(state.get("content") if isinstance(state, dict) else None, save_to, call)
        if as_json:
            print(json.dumps({"settled": False, "state": state}, indent=2, ensure_ascii=False))
            return 0
        _print_pending(call, state, session_name)
        return 0


def _save(content: Any, save_to: Path | None, call: CallView) -> None:
    if save_to is None:
        return
    written = save_images(content, save_to, call.tool_call_id)
    listed = ", ".join(str(p) for p in written)
    _header(f"saved {plural(len(written), 'image')}" + (f": {listed}" if listed else ""))


def _call_json(call: CallView) -> dict[str, Any]:
    return {
        "number": call.number,
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "status": call.status,
        "what": call.summary,
    }


def _header(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _print_settled(call: CallView) -> None:
    message = call.message or {}
    details = message.get("details") or {}
    # What is unknown (a cancelled command has no exit code) is left out, not shown as None.
    extra = (
        ", ".join(f"{k}={v!r}" for k, v in details.items() if v is not None)
        if isinstance(details, dict)
        else ""
    )
    _header(
        f"call {call.tool_call_id} ({call.tool_name}): settled, {call.status}"
        + (f"; details: {extra}" if extra else "")
    )
    summary = image_summary(message.get("content"))
    if summary:
        _header(summary)
    text = model_text(message)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()


def _print_pending(call: CallView, state: Any, session_name: str) -> None:
    running = process_alive(call.record)
    why = (
        f"still running in process {call.record.get('pid')}"
        if running and isinstance(call.record, dict)
        else f"not settled; `toolfold resume {session_name}` settles it"
    )
    if state is None:
        _header(
            f"call {call.tool_call_id} ({call.tool_name}): {why}; no output was checkpointed yet"
        )
        return
    _header(
        f"call {call.tool_call_id} ({call.tool_name}): {why}; recovered pending output "
        "as of its last durable checkpoint:"
    )
    content = state.get("content") if isinstance(state, dict) else None
    summary = image_summary(content)
    if summary:
        _header(summary)
    text = output_text(state)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()


async def resume_command(spec: StoreSpec, session_name: str) -> int:
    """Finish every unsettled call of a session: replay-safe tools re-run seeded, the
    others settled from their last checkpoint with the interruption marker."""
    async with open_store(spec, create=False) as repo:
        session = await open_existing_session(repo, spec, session_name)
        calls = await list_calls(session)
        pending = [c for c in calls if not c.settled]
        messages = await pending_messages(session)
        agent_run = await agent_to_continue(session)
        # What a crashed process left running in the background is stopped first.
        orphans = stop_orphans(spec.spill_dir(session_name))
        for orphan in orphans:
            print(orphan_line(orphan))
        if not pending and not messages and agent_run is None:
            if not orphans:
                print(f"nothing to resume in session {session_name}: every call has settled")
            return 0
        live = [c for c in pending if process_alive(c.record)]
        if live:
            c = live[0]
            pid = c.record.get("pid") if isinstance(c.record, dict) else "?"
            raise CliError(
                f"call {c.tool_call_id} of session {session_name!r} is still running in "
                f"process {pid}; wait for it or stop it, then resume"
            )
        if agent_run is not None and process_alive(agent_run):
            raise CliError(
                f"the agent run of session {session_name!r} is still running in process "
                f"{agent_run.get('pid')}; wait for it or stop it, then resume"
            )
        # Tools re-run for an agent run are confined as its model's commands were; a
        # `run` session's command was the user's own.
        sandbox = (
            recorded_sandbox(agent_run).build(hidden=store_paths(spec))
            if agent_run is not None
            else None
        )
        harness = Harness(
            cli_tools(),
            context=ToolContext(
                env=LocalExecEnv(spec.spill_dir(session_name), sandbox=sandbox), cwd=Path.cwd()
            ),
            session=session,
        )
        try:
            results = await harness.resume(notes=orphan_notes(orphans))
        except RecoveryError as exc:
            raise StoreOpenError(
                f"cannot resume session {session_name!r} ({spec.describe()}): {exc}"
            ) from exc
        for result in results:
            print(_resumed_line(result, harness))
        hooks = harness.hooks
        for skipped in hooks.skipped if isinstance(hooks, DurableHooks) else ():
            # Leased by another host and live there: not ours (see docs/durability.md).
            print(f"skipped: {skipped}")
        for entry in hooks.resumed_messages if isinstance(hooks, DurableHooks) else ():
            text = "".join(
                p.get("text", "") for p in entry.get("content", []) if p.get("type") == "text"
            )
            print(
                f"assistant message {entry['message_id']}: settled from its last checkpoint "
                f"as interrupted ({len(text):,} characters of text kept)"
            )
        print(
            f"resumed {plural(len(results), 'call')} in session {session_name}; "
            f"see `toolfold show {session_name} CALL`"
        )
        if agent_run is not None:
            return await continue_run(session, spec, session_name, agent_run)
    return 0


def orphan_line(orphan: OrphanReport) -> str:
    """What ``stop_orphans`` did about one background command, for a person."""
    what = (
        f"stopped it (killed pid {', '.join(map(str, orphan.killed))})"
        if orphan.killed
        else "it had ended by itself"
    )
    return (
        f"background command {orphan.handle} ({orphan.command[:80]!r}) was left running by "
        f"process {orphan.owner_pid}, which ended without stopping it: {what}"
    )


def _resumed_line(result: ToolResult, harness: Harness) -> str:
    tool = harness.tools.get(result.tool_name)
    t = result.state.get("truncation") if result.state is not None else None
    size = f"{plural(t['total_lines'], 'line')} kept" if t else ""
    details = result.details if isinstance(result.details, dict) else {}
    if result.kind is not None:
        # The output of a background command (no model asked for it): say whose, and
        # what became of the command.
        how = (
            f"output of background command {details.get('handle')} of call "
            f"{details.get('started_by')}, settled from its last checkpoint as "
            f"{result.outcome} (partial output kept)"
        )
        if details.get("interrupted"):
            how += f"; {str(details['interrupted']).strip('[]').rstrip('.')}"
    elif tool is not None and tool.replay_safe:
        how = f"re-ran seeded from its last memo -> {result.outcome}"
    else:
        how = f"settled from its last checkpoint as {result.outcome} (partial output kept)"
    return f"{result.tool_call_id} ({result.tool_name}): {how}" + (f", {size}" if size else "")


__all__ = ["resume_command", "sessions_command", "show_command", "storage_message"]

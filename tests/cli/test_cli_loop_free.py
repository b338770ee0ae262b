"""The CLI's entry point and the pieces every command shares (its errors, how it ends its
process, store URLs) import no event loop: a command that needs none (a bare ``toolfold
run -- CMD`` on a synchronous path, ``--help``, an argument error) does not pay for it.
An assertion about behaviour (the modules a fresh process loads), not timing."""

from __future__ import annotations

import pytest

from fresh_modules import modules_after

LOOP_FREE = (
    "toolfold.cli._entry",
    "toolfold.cli._process",
    "toolfold.cli._errors",
    "toolfold.cli._store",
)


@pytest.mark.parametrize("module", LOOP_FREE)
def test_the_shared_cli_modules_import_no_loop(module: str) -> None:
    modules = modules_after(f"import {module}")
    assert module in modules
    assert sorted(m for m in modules if m.split(".")[0] == "asyncio") == []
    assert not [m for m in modules if m.startswith(("toolfold.harness", "toolfold.storage"))]
    assert "click" not in modules


def test_resolving_a_store_and_naming_a_session_import_no_loop() -> None:
    code = (
        "from toolfold.cli._store import resolve_store, prepare\n"
        "from toolfold.cli._process import _check_session_name\n"
        "spec = resolve_store('memory:')\n"
        "prepare(spec, create=False)\n"
        "_check_session_name('s1')\n"
    )
    assert "asyncio" not in modules_after(code)


def test_the_watcher_and_status_line_import_no_loop() -> None:
    """What ``run`` shows (the folded output, the status and summary lines) needs no
    loop: only its views' periodic redraw runs on one."""
    below = "from toolfold.output import output_text\nfrom toolfold.chord import apply"
    code = (
        "from toolfold.cli._view import CallWatcher, call_totals\n"
        "from toolfold.harness.events import ToolStart, ToolUpdate\n"
        "w = CallWatcher()\n"
        "w.handle(ToolStart('r', 't', 'c', 'bash'))\n"
        "w.handle(ToolUpdate('r', 't', 'c', [['r', {'content': [], 'details': {}}]]))\n"
        "assert w.updates == 1 and call_totals(w.state) == '0 lines / 0 B', w.status()\n"
    )
    added = modules_after(code) - modules_after(below)
    assert sorted(m for m in added if m.split(".")[0] == "asyncio") == []
    harness = {m for m in added if m.startswith("toolfold.harness")}
    assert harness <= {
        "toolfold.harness",
        "toolfold.harness.events",
        "toolfold.harness._tool_events",
    }
    assert not [m for m in added if m.startswith("toolfold.storage")]


def test_the_status_lines_import_nothing_of_the_harness() -> None:
    below = "from toolfold.output import output_text\nfrom toolfold.chord import apply"
    code = (
        "from toolfold.cli._view import PLAIN_STATUS_INTERVAL, CallWatcher, call_totals\n"
        "w = CallWatcher()\n"
        "w.fold([['r', {'content': [], 'details': {}}]])\n"
        "w.fold([['s', ['truncation'], {'total_lines': 2, 'total_bytes': 4}]])\n"
        "assert w.updates == 2 and w.fold_error is None, w.fold_error\n"
        "assert call_totals(w.state) == '2 lines / 4 B' and w.status()\n"
    )
    added = modules_after(code) - modules_after(below)
    assert sorted(m for m in added if m.startswith("toolfold.harness")) == []
    assert sorted(m for m in added if m.split(".")[0] == "asyncio") == []


def test_the_check_sees_the_loop() -> None:
    """The assertion above can fail: ``run``'s asyncio path does import it."""
    assert "asyncio" in modules_after("import toolfold.cli._run")

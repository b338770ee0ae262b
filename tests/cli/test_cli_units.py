"""In-process tests of the CLI's pure pieces: store URLs, limits, exit statuses, the
live view's window and status line, call lookup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.cli._calls import call_count, find_call, list_calls
from toolfold.cli._errors import InvalidLimitError, StoreURLError, UnknownCallError
from toolfold.cli._run import exit_status, output_policy
from toolfold.cli._store import DEFAULT_STORE, resolve_store
from toolfold.cli._view import CallWatcher, human_bytes, last_lines
from toolfold.durability import settle_writes
from toolfold.harness import Outcome, ToolResult, ToolSettled, ToolStart, ToolUpdate
from toolfold.storage import MemoryRepository, append_entry


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from(
            [
                "postgres",
                "postgresql",
                "sqlite",
                "://",
                ":",
                "@",
                "/",
                "?",
                "&",
                "password=",
                "pw",
                "x",
            ]
        ),
        max_size=12,
    ).map("".join)
)
def test_describe_masks_exactly_what_the_password_patterns_match(url: str) -> None:
    """A URL that can hold no password is shown as is without running the patterns: the
    same text as running them."""
    import re

    from toolfold.cli._store import _PASSWORD, _QUERY_PASSWORD, StoreSpec

    expected = re.sub(_QUERY_PASSWORD, r"\1***", re.sub(_PASSWORD, r"\1***\2", url))
    assert StoreSpec(url, "postgresql", Path(".")).describe() == expected


def test_resolve_store_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLFOLD_STORE", raising=False)
    default = resolve_store(None)
    assert DEFAULT_STORE == "sqlite:.toolfold/toolfold.db"
    assert default.url == f"sqlite:{tmp_path / '.toolfold' / 'toolfold.db'}"
    assert default.spill_dir("s") == tmp_path / ".toolfold" / "spill" / "s"
    monkeypatch.setenv("TOOLFOLD_STORE", "jsonl:j")
    from_env = resolve_store(None)
    assert (from_env.kind, from_env.home) == ("jsonl", tmp_path / "j")
    assert resolve_store("x/y.db").url == f"sqlite:{tmp_path / 'x' / 'y.db'}"
    assert resolve_store("sqlite:///abs/t.db").url == "sqlite:/abs/t.db"
    assert resolve_store("memory:").kind == "memory"
    assert resolve_store("postgresql://u@h/db").url == "postgresql://u@h/db"


def test_describe_masks_database_passwords() -> None:
    assert resolve_store("postgresql://bob:s3cret@db/x").describe() == "postgresql://bob:***@db/x"
    masked = resolve_store("postgres://db/x?user=bob&password=s3cret&sslmode=off").describe()
    assert masked == "postgres://db/x?user=bob&password=***&sslmode=off"
    assert resolve_store("postgresql://bob@db/x").describe() == "postgresql://bob@db/x"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:", "store URL 'sqlite:' names no file; use sqlite:PATH/TO/file.db"),
        ("jsonl:", "store URL 'jsonl:' names no directory; use jsonl:DIR"),
        ("mysql://x", "unknown store URL 'mysql://x' (scheme 'mysql:')"),
        ("plainname", "unknown store URL 'plainname' (no scheme)"),
    ],
)
def test_resolve_store_refuses(url: str, message: str) -> None:
    with pytest.raises(StoreURLError) as info:
        resolve_store(url)
    assert message in str(info.value)


def test_output_policy_bounds() -> None:
    policy = output_policy("head", 10, 3)
    assert (policy.retain, policy.max_bytes, policy.max_lines) == ("head", 10, 3)
    assert output_policy("tail", None, None).max_lines == 2000
    assert output_policy("tail", 16 * 1024 * 1024, 1_000_000).max_bytes == 16 * 1024 * 1024
    with pytest.raises(
        InvalidLimitError, match=r"--max-bytes must be between 1 and 16,777,216, got 16777217"
    ):
        output_policy("tail", 16 * 1024 * 1024 + 1, None)
    with pytest.raises(
        InvalidLimitError, match=r"--retain must be 'head', 'tail' or 'head_tail', got 'both'"
    ):
        output_policy("both", None, None)


def _result(outcome: str, exit_code: object) -> ToolResult:
    details = {} if exit_code is None else {"exit_code": exit_code}
    return ToolResult(
        "c",
        "bash",
        [{"type": "text", "text": ""}],
        details,
        is_error=outcome != "ok",
        outcome=cast("Outcome", outcome),
    )


@pytest.mark.parametrize(
    ("outcome", "code", "signalled", "status"),
    [
        ("ok", 0, None, 0),
        ("error", 7, None, 7),
        ("error", 300, None, 300 & 0xFF),
        ("error", None, None, 1),
        ("cancelled", None, None, 130),
        ("cancelled", 0, 2, 130),
        ("cancelled", None, 15, 143),
        ("interrupted", None, 2, 130),
    ],
)
def test_exit_status(outcome: str, code: object, signalled: int | None, status: int) -> None:
    assert exit_status(_result(outcome, code), signalled) == status


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\n", max_size=6), max_size=12).map("".join), st.integers(1, 8))
def test_last_lines_matches_split(text: str, count: int) -> None:
    # One trailing newline ends the last line; it does not start an empty one.
    body = text[:-1] if text.endswith("\n") else text
    assert last_lines(text, count) == "\n".join(body.split("\n")[-count:])
    assert last_lines(text, 0) == ""


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 10 * 1024 * 1024)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "10 MiB",
    ]


def test_watcher_folds_only_its_call_and_reports_status() -> None:
    now = [100.0]
    watcher = CallWatcher(clock=lambda: now[0])
    base = {
        "content": [{"type": "text", "text": "a\n"}],
        "details": {},
        "terminate": False,
        "truncation": {
            "truncated": True,
            "truncated_by": "lines",
            "total_lines": 5000,
            "total_bytes": 2_000_000,
            "output_lines": 2,
            "output_bytes": 4,
            "last_line_partial": False,
            "first_line_exceeds_limit": False,
            "max_lines": 2,
            "max_bytes": 100,
            "last_line_bytes": 0,
        },
        "spill_path": "/tmp/x.log",
    }
    watcher.handle(ToolStart("r", "t", "c1", "bash"))
    watcher.handle(ToolUpdate("r", "t", "other", [["r", {"content": []}]]))
    assert watcher.state is None
    watcher.handle(ToolUpdate("r", "t", "c1", [["r", base]]))
    watcher.handle(ToolUpdate("r", "t", "c1", [["a", ["content", 0, "text"], "b\n"]]))
    now[0] = 102.0
    assert watcher.text == "a\nb\n"
    assert watcher.status() == (
        "5,000 lines / 1.9 MiB so far · showing 2 lines / 4 B · 2.0 s · 1.0 updates/s · spill: /tmp/x.log"
    )
    watcher.handle(ToolSettled("r", "t", "c1", {"outcome": "ok"}))
    assert watcher.settled == {"outcome": "ok"}


@pytest.mark.parametrize("keyed", [True, False])
async def test_find_call_by_number_id_and_prefix(keyed: bool) -> None:
    # keyed: entries as the harness writes them (indexed by call id); unkeyed: a store
    # written before entries had keys, read by scanning the transcript.
    async with MemoryRepository() as repo:
        session = await repo.open_session("s", create=True)
        for cid in ["call-abc1", "call-abd2", "x"]:
            message = {"role": "tool_result", "tool_call_id": cid, "tool_name": "bash"}
            writes = settle_writes(message) if keyed else [append_entry(message)]
            await session.commit(writes)
        assert (await find_call(session, "2")).tool_call_id == "call-abd2"
        assert (await find_call(session, "2")).number == 2
        assert (await find_call(session, "call-abc1")).tool_call_id == "call-abc1"
        assert (await find_call(session, "call-abd")).tool_call_id == "call-abd2"
        assert (await find_call(session, "x")).message == {
            "role": "tool_result",
            "tool_call_id": "x",
            "tool_name": "bash",
        }
        with pytest.raises(
            UnknownCallError,
            match=r"call 'call-ab' is ambiguous in session 's' \(matches call-abc1, call-abd2\)",
        ):
            await find_call(session, "call-ab")
        with pytest.raises(UnknownCallError, match=r"no call '4' in session 's' \(3 calls\)"):
            await find_call(session, "4")
        listed = await list_calls(session, last=2, messages=False)
        assert [(c.number, c.tool_call_id) for c in listed] == [(2, "call-abd2"), (3, "x")]
        assert await call_count(session) == (3, 0)


def test_run_does_not_import_rich_until_a_terminal_needs_it() -> None:
    # Start-up: a `run` whose output goes to a pipe never draws the live view, so it must
    # not pay for importing rich (a fresh interpreter: this one may have it already).
    code = "import sys, toolfold.cli._run; print('rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_mcp_bash_retain_sets_the_builtin_bash_window_and_keeps_its_caps() -> None:
    from toolfold.cli._mcp import _with_retain
    from toolfold.tools import BASH

    tool = _with_retain(BASH, "head_tail")
    assert tool.output.retain == "head_tail" and BASH.output.retain == "tail"
    assert tool.output.max_bytes == BASH.output.max_bytes
    assert tool.output.max_lines == BASH.output.max_lines
    assert output_policy("head_tail", None, 10).retain == "head_tail"


def test_head_share_sizes_the_head_of_a_head_tail_window_and_nothing_else() -> None:
    from toolfold.cli._mcp import _with_retain
    from toolfold.tools import BASH

    assert output_policy("head_tail", None, 10, 0.5).head_share == 0.5
    assert output_policy("head_tail", None, 10).head_share == 0.2
    tool = _with_retain(BASH, "head_tail", 0.75)
    assert tool.output.head_share == 0.75 and BASH.output.head_share == 0.2
    assert _with_retain(BASH, "head_tail").output.head_share == BASH.output.head_share
    for retain in ("head", "tail"):
        with pytest.raises(InvalidLimitError, match="--head-share applies to --retain head_tail"):
            output_policy(retain, None, None, 0.5)
    for bad in (0.0, 1.0, -1.0, 2.5, float("nan"), float("inf")):
        with pytest.raises(InvalidLimitError, match="between 0 and 1 \\(exclusive\\)"):
            output_policy("head_tail", None, None, bad)
    # head_tail needs one line and one byte for each part; head and tail take 1.
    with pytest.raises(InvalidLimitError, match="--max-bytes must be between 2 and"):
        output_policy("head_tail", 1, None)
    assert output_policy("tail", 1, 1).max_lines == 1


def test_a_local_run_knows_the_remote_command_default_without_the_transports() -> None:
    """``run`` tells a changed ``--remote-command`` (which needs ``--ssh`` or
    ``--exec-host``) from its default without importing the transports: its copy of the
    default is the exec env's and the option's."""
    import click

    from toolfold.cli import _run
    from toolfold.cli._main import cli
    from toolfold.execenv import DEFAULT_REMOTE_COMMAND

    assert _run._DEFAULT_REMOTE_COMMAND == DEFAULT_REMOTE_COMMAND
    run = cli.get_command(click.Context(cli), "run")
    assert run is not None
    option = next(p for p in run.params if p.name == "remote_command")
    assert option.default == DEFAULT_REMOTE_COMMAND
    assert _run.remote_settings(None, (), None, DEFAULT_REMOTE_COMMAND, None) is None

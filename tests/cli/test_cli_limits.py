"""The CLI's value checks (``--max-bytes``, ``--max-lines``, ``--retain``, ``--head-share``,
``--max-spill``, ``--lease``), in process: each bound at its exact edge, and the one-line
error, word for word, that a bad value gets. They run in microseconds, so they are what a
mutation run of these checks uses (docs/TESTING.md)."""

from __future__ import annotations

import pytest

from toolfold.cli._errors import InvalidLimitError
from toolfold.cli._run import (
    MAX_LEASE,
    MAX_WINDOW_BYTES,
    MAX_WINDOW_LINES,
    MIN_LEASE,
    head_share_value,
    lease_seconds,
    output_policy,
    spill_cap,
)
from toolfold.durability import DEFAULT_LEASE_TTL
from toolfold.execenv import DEFAULT_HEAD_SHARE, DEFAULT_MAX_SPILL
from toolfold.output import OutputPolicy


def _refused(call: object, *args: object) -> str:
    with pytest.raises(InvalidLimitError) as info:
        call(*args)  # type: ignore[operator]
    return str(info.value)


def test_window_sizes_at_their_edges_for_every_retain_mode() -> None:
    default = OutputPolicy()
    for retain in ("head", "tail", "head_tail"):
        low = 2 if retain == "head_tail" else 1
        policy = output_policy(retain, low, low)
        assert (policy.retain, policy.max_bytes, policy.max_lines) == (retain, low, low)
        assert policy.head_share == DEFAULT_HEAD_SHARE
        top = output_policy(retain, MAX_WINDOW_BYTES, MAX_WINDOW_LINES)
        assert (top.max_bytes, top.max_lines) == (MAX_WINDOW_BYTES, MAX_WINDOW_LINES)
        fallback = output_policy(retain, None, None)
        assert (fallback.max_bytes, fallback.max_lines) == (default.max_bytes, default.max_lines)
    assert _refused(output_policy, "tail", 0, None) == (
        f"--max-bytes must be between 1 and {MAX_WINDOW_BYTES:,}, got 0; "
        f"the default is {default.max_bytes:,}"
    )
    assert _refused(output_policy, "head_tail", None, 1) == (
        f"--max-lines must be between 2 and {MAX_WINDOW_LINES:,} with --retain head_tail, "
        f"got 1; the default is {default.max_lines:,}"
    )
    assert _refused(output_policy, "head", None, MAX_WINDOW_LINES + 1) == (
        f"--max-lines must be between 1 and {MAX_WINDOW_LINES:,}, got {MAX_WINDOW_LINES + 1}; "
        f"the default is {default.max_lines:,}"
    )
    assert _refused(output_policy, "Tail", None, None) == (
        "--retain must be 'head', 'tail' or 'head_tail', got 'Tail'"
    )


def test_head_share_only_with_head_tail_and_strictly_inside_zero_and_one() -> None:
    assert head_share_value(None, "tail", "--retain") == DEFAULT_HEAD_SHARE
    assert head_share_value(0.5, "head_tail", "--retain") == 0.5
    assert output_policy("head_tail", 10, 10, 0.75).head_share == 0.75
    assert _refused(head_share_value, 0.5, "head", "--bash-retain") == (
        "--head-share applies to --bash-retain head_tail; add --bash-retain head_tail "
        "or drop --head-share"
    )
    for bad in (0.0, 1.0, -0.5, 1.5):
        assert _refused(head_share_value, bad, "head_tail", "--retain") == (
            f"--head-share must be a fraction between 0 and 1 (exclusive), got {bad:g}; "
            f"the default is {DEFAULT_HEAD_SHARE:g}"
        )


def test_max_spill_and_lease_at_their_edges() -> None:
    assert spill_cap(None) == DEFAULT_MAX_SPILL
    assert spill_cap(1) == 1
    for bad in (0, -5):
        assert _refused(spill_cap, bad) == (
            f"--max-spill must be a positive size such as 1048576, 512M or 2G, got {bad}; "
            "the default is 1G"
        )
    assert lease_seconds(None) == DEFAULT_LEASE_TTL
    assert lease_seconds(MIN_LEASE) == MIN_LEASE and lease_seconds(MAX_LEASE) == MAX_LEASE
    for bad in (MIN_LEASE / 2, MAX_LEASE + 1):
        assert _refused(lease_seconds, bad) == (
            f"--lease must be between {MIN_LEASE:g} and {MAX_LEASE:g} seconds, got {bad:g}; "
            f"the default is {DEFAULT_LEASE_TTL:g}"
        )


def test_exit_status_of_a_negative_or_missing_exit_code() -> None:
    from toolfold.cli._run import exit_status
    from toolfold.harness import ToolResult

    def result(outcome: str, details: dict[str, object]) -> ToolResult:
        text = [{"type": "text", "text": ""}]
        return ToolResult("c", "bash", text, details, is_error=outcome != "ok", outcome=outcome)  # type: ignore[arg-type]

    # A negative code (a signal, as Python reports it) is not a status: 1, never 256 - n.
    assert exit_status(result("error", {"exit_code": -9}), None) == 1
    assert exit_status(result("ok", {}), None) == 0
    assert exit_status(result("ok", {"exit_code": True}), None) == 0  # a bool is no code
    assert exit_status(result("error", {"exit_code": 0}), None) == 0

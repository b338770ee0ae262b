"""``resume_orphans``, the janitor's loop, with ``resume`` replaced by a script of rounds:
a bad interval is refused, a failed round is reported and retried, results reach the
callback, and the loop runs until cancelled. (The takeover itself, by many janitors on a
real store, is tested in tests/durability and tests/cli/test_cli_serve_orphans.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolfold.durability import DurabilityError
from toolfold.harness import _janitor
from toolfold.harness._janitor import resume_orphans
from toolfold.storage import StorageError


@pytest.mark.parametrize("interval", [0, -1.0, float("nan")])
async def test_an_interval_that_is_not_positive_is_refused(interval: float) -> None:
    with pytest.raises(
        DurabilityError, match=r"^resume_orphans needs an interval > 0 seconds, got "
    ):
        await resume_orphans(object(), interval=interval)  # type: ignore[arg-type]


async def test_failed_rounds_are_reported_and_retried_and_results_reach_the_callback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = object()
    rounds: list[Any] = [
        StorageError("store away"),
        ["first"],
        [],
        DurabilityError("lease table gone"),
        ["second", "third"],
    ]
    calls: list[tuple[object, bool]] = []

    async def resume(host: object, *, orphans_only: bool) -> list[str]:
        calls.append((host, orphans_only))
        if not rounds:
            raise asyncio.CancelledError  # the owner cancels the janitor
        step = rounds.pop(0)
        if isinstance(step, Exception):
            raise step
        return step  # type: ignore[no-any-return]

    monkeypatch.setattr(_janitor, "resume", resume)
    seen: list[list[str]] = []
    with pytest.raises(asyncio.CancelledError):
        await resume_orphans(harness, interval=1e-6, on_results=seen.append)  # type: ignore[arg-type]
    assert calls == [(harness, True)] * 6
    assert seen == [["first"], ["second", "third"]]  # an empty round calls nothing
    assert capsys.readouterr().err.splitlines() == [
        "toolfold: resuming orphaned calls failed, retrying: store away",
        "toolfold: resuming orphaned calls failed, retrying: lease table gone",
    ]
    # Without a callback the results are settled all the same, and nothing is printed.
    rounds[:] = [["fourth"]]
    with pytest.raises(asyncio.CancelledError):
        await resume_orphans(harness, interval=1e-6)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""

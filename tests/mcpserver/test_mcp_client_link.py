"""The proxy's outbox toward its client: bounded, coalescing, counting what it drops,
and pausing the upstream when the client stops reading (a client whose writes block
is played by a session object whose ``send_notification`` waits on an event)."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types

from toolfold.mcp._client_link import MAX_QUEUED, STALL_DROPS, ClientLink


class StalledClient:
    """A client session whose writes block until ``reading`` is set."""

    def __init__(self) -> None:
        self.reading = asyncio.Event()
        self.got: list[Any] = []

    async def send_notification(self, message: Any) -> None:
        await self.reading.wait()
        self.got.append(message)


def log(n: int) -> types.LoggingMessageNotification:
    params = types.LoggingMessageNotificationParams(level="info", logger="up", data=f"line {n}")
    return types.LoggingMessageNotification(params=params)


async def test_a_stalled_client_bounds_the_outbox_then_pauses_the_upstream() -> None:
    link = ClientLink()
    client = StalledClient()
    link.session = client  # type: ignore[assignment]
    sent = 1 + MAX_QUEUED + STALL_DROPS
    for n in range(sent):
        # Returns at once, whatever the client does (each is a task of the SDK's).
        await link.notified(log(n))
        await asyncio.sleep(0)  # let the sender take the first one into its write
    for _ in range(3):
        await link.notified(types.ToolListChangedNotification())  # the outbox is full
    gate = asyncio.create_task(link.gate())
    await asyncio.sleep(0)
    assert not gate.done()  # the upstream's reader waits: the upstream is paused
    client.reading.set()
    await gate
    while link.dropped or len(client.got) < 1 + MAX_QUEUED + 1:
        await asyncio.sleep(0)
    await link.aclose()
    data = [m.params.data for m in client.got]
    assert data[:-1] == [f"line {n}" for n in range(1 + MAX_QUEUED)]
    assert data[-1] == (
        f"{STALL_DROPS + 3:,} notifications from the upstream were dropped: the "
        "client read them slower than the upstream sent them"
    )


async def test_a_long_log_message_is_cut() -> None:
    link = ClientLink()
    client = StalledClient()
    client.reading.set()
    link.session = client  # type: ignore[assignment]
    params = types.LoggingMessageNotificationParams(level="info", data={"blob": "x" * 10**6})
    await link.notified(types.LoggingMessageNotification(params=params))
    while not client.got:
        await asyncio.sleep(0)
    await link.aclose()
    data = client.got[0].params.data
    assert data.startswith('{"blob": "xxx') and data.endswith(
        "[toolfold: cut to 16,384 characters]"
    )
    assert len(data) < 17_000

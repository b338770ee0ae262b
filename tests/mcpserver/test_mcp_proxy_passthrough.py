"""What ``toolfold mcp proxy`` passes through between client and upstream unchanged:
resource subscriptions and their updates, list-change notifications, log messages."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp_helpers import proxy, session_on, text_of

NOTIFYING = str(Path(__file__).with_name("notifying_upstream.py"))


async def _until(found: Any, what: str) -> None:
    for _ in range(600):  # bounded: server-everything sends updates every 5 s
        if found():
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


async def resources_request(client: ClientSession, kind: Any, uri: str) -> None:
    """Send ``resources/subscribe`` or ``resources/unsubscribe`` for ``uri``: the
    2025-11-25 wire requests these tests pass through (the session negotiated that
    revision). The SDK's helpers for them are deprecated for 2026-07-28 sessions,
    where ``subscriptions/listen`` replaces them."""
    params_type = (
        types.SubscribeRequestParams
        if kind is types.SubscribeRequest
        else types.UnsubscribeRequestParams
    )
    await client.send_request(kind(params=params_type(uri=uri)), types.EmptyResult)


async def test_resource_subscriptions_and_updates_pass_through(
    tmp_path: Path, everything_server: Path
) -> None:
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    def logged(text: str) -> bool:
        return any(
            isinstance(n, types.LoggingMessageNotification) and text in str(n.params.data)
            for n in notes
        )

    def updated(uri: str) -> bool:
        return any(
            isinstance(n, types.ResourceUpdatedNotification) and n.params.uri == uri for n in notes
        )

    params = proxy(tmp_path, str(everything_server), "stdio")
    with anyio.fail_after(120):
        async with session_on(params, tmp_path / "proxy.err", message_handler=on_message) as client:
            resources = (await client.list_resources()).resources
            uri = str(resources[0].uri)
            await resources_request(client, types.SubscribeRequest, uri)
            await _until(
                lambda: logged(f"Received Subscribe Resource request for URI: {uri}"),
                "the subscribe to reach the upstream",
            )
            started = await client.call_tool("toggle-subscriber-updates", {})
            await _until(lambda: updated(uri), "notifications/resources/updated")
            await resources_request(client, types.UnsubscribeRequest, uri)
            await _until(
                lambda: logged(f"Received Unsubscribe Resource request: {uri}"),
                "the unsubscribe to reach the upstream",
            )
            await client.call_tool("toggle-subscriber-updates", {})
            made = await client.call_tool(
                "gzip-file-as-resource",
                {
                    "name": "hello.gz",
                    "data": "data:text/plain;base64,aGVsbG8=",
                    "outputType": "resourceLink",
                },
            )
            await _until(
                lambda: any(isinstance(n, types.ResourceListChangedNotification) for n in notes),
                "notifications/resources/list_changed",
            )
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
    assert "Started simulated resource updated" in text_of(started)
    assert not made.is_error, made
    assert any(u.endswith("hello.gz") for u in listed)


async def test_list_changes_and_updates_pass_through_and_are_announced(tmp_path: Path) -> None:
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    kinds = (
        types.ToolListChangedNotification,
        types.ResourceListChangedNotification,
        types.PromptListChangedNotification,
        types.ResourceUpdatedNotification,
    )
    params = proxy(tmp_path, sys.executable, NOTIFYING)
    with anyio.fail_after(120):
        async with session_on(params, tmp_path / "proxy.err", message_handler=on_message) as client:
            result = client.initialize_result
            # A tools/list_changed is news to a client that holds a tool list.
            await client.list_tools()
            changed = await client.call_tool("change", {"uri": "memo://one"})
            await _until(
                lambda: all(any(isinstance(n, k) for n in notes) for k in kinds),
                "the three list changes and the update",
            )
    assert text_of(changed).startswith("changed")
    assert result is not None
    caps = result.capabilities
    assert caps.tools and caps.tools.list_changed
    assert caps.prompts and caps.prompts.list_changed
    assert caps.resources and caps.resources.list_changed and caps.resources.subscribe
    [update] = [n for n in notes if isinstance(n, types.ResourceUpdatedNotification)]
    assert update.params.uri == "memo://one"


async def test_a_restarted_upstream_gets_the_subscriptions_back(
    tmp_path: Path, everything_server: Path
) -> None:
    # The upstream dies while no call waits on it: the next call starts a new one (no
    # error result), which is subscribed again before the call reaches it.
    pids = tmp_path / "upstream.pids"
    wrapper = f"echo $$ >> {pids}; exec {everything_server} stdio"
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    def subscribes(uri: str) -> int:
        said = f"Received Subscribe Resource request for URI: {uri}"
        return sum(
            isinstance(n, types.LoggingMessageNotification) and said in str(n.params.data)
            for n in notes
        )

    def reaped(pid: int) -> bool:
        try:
            os.kill(pid, 0)  # a zombie still answers: the proxy has not seen the exit
        except ProcessLookupError:
            return True
        return False

    params = proxy(tmp_path, "sh", "-c", wrapper)
    try:
        with anyio.fail_after(120):
            async with session_on(
                params, tmp_path / "proxy.err", message_handler=on_message
            ) as client:
                uri = str((await client.list_resources()).resources[0].uri)
                await resources_request(client, types.SubscribeRequest, uri)
                await _until(lambda: subscribes(uri) == 1, "the subscribe to reach the upstream")
                first = int(pids.read_text().split()[0])
                os.kill(first, signal.SIGKILL)
                await _until(lambda: reaped(first), "the proxy to reap the killed upstream")
                echoed = await client.call_tool("echo", {"message": "after the crash"})
                await _until(lambda: subscribes(uri) == 2, "the subscription to be made again")
                started = await client.call_tool("toggle-subscriber-updates", {})
                await _until(
                    lambda: any(isinstance(n, types.ResourceUpdatedNotification) for n in notes),
                    "an update from the restarted upstream",
                )
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert not echoed.is_error and "after the crash" in text_of(echoed)
    assert not started.is_error
    assert len(pids.read_text().split()) == 2

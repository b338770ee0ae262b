"""``subscriptions/listen`` (2026-07-28) through ``toolfold mcp proxy``: a client on the
2026-07-28 wire listens to the proxy and gets the upstream's list changes and resource
updates, of a 2025-era upstream (its notifications) and of a 2026-07-28 upstream (the
proxy listens to it), only the kinds it asked for."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
    listen,
)
from mcp_helpers import proxy, text_of

HERE = Path(__file__).parent
URI = "test://watched"


async def _changes(params: Any, errlog: Any) -> tuple[list[Any], list[Any], str]:
    """Two listen streams on the proxy (one for the tool list and a resource, one for
    the prompt list); the ``change`` tool; the events each stream got."""
    async with (
        stdio_client(params, errlog=errlog) as (r, w),
        ClientSession(r, w) as client,
    ):
        await client.discover()
        caps = client.server_capabilities
        assert caps is not None and caps.tools is not None and caps.tools.list_changed
        async with (
            listen(client, tools_list_changed=True, resource_subscriptions=[URI]) as first,
            listen(client, prompts_list_changed=True) as second,
        ):
            result = await client.call_tool("change", {"uri": URI})
            got = [await first.__anext__(), await first.__anext__()]
            other = [await second.__anext__()]
    return got, other, text_of(result)


async def test_a_2025_upstream_s_notifications_reach_a_listening_client(tmp_path: Path) -> None:
    params = proxy(tmp_path, sys.executable, str(HERE / "notifying_upstream.py"))
    with anyio.fail_after(60), open(tmp_path / "proxy.err", "w") as errlog:
        got, other, _ = await _changes(params, errlog)
    # The resources list change was not asked for: it is not among them.
    assert got == [ToolsListChanged(), ResourceUpdated(uri=URI)]
    assert other == [PromptsListChanged()]


async def test_the_proxy_listens_to_a_2026_upstream_for_its_clients(tmp_path: Path) -> None:
    params = proxy(
        tmp_path,
        sys.executable,
        str(HERE / "listening_upstream.py"),
        options=("--tasks", "upstream"),
    )
    with anyio.fail_after(60), open(tmp_path / "proxy.err", "w") as errlog:
        got, other, said = await _changes(params, errlog)
    assert got == [ToolsListChanged(), ResourceUpdated(uri=URI)]
    assert other == [PromptsListChanged()]
    assert ResourcesListChanged() not in got + other
    # One stream of the proxy's to the upstream, for the resource a client asked for.
    assert said.startswith(f"changed; listens: [['{URI}']]")

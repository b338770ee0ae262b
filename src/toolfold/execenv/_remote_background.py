"""``RemoteExecEnv.background``: the background commands of an exec host, from here.

The same operations as ``BackgroundCommands`` (read, write, signal, stop, list, resize),
each one ``bg`` request to the exec host, which runs them on its own registry: the
capture, the windows and the spill stay there, and only a read's bounded window
crosses. Every method is a coroutine here (``commands`` and ``resize`` too: they ask
the host). ``follow`` is one long ``bg`` request: the host sends the command's paced updates as
``update`` messages of that request until it ends, then its end as the result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ._background import BackgroundInfo, BackgroundRead
from ._errors import ExecConfigError, ProtocolError
from ._protocol import bg_info_from_dict, bg_read_from_dict
from ._session import UpdateConsumer


class Request(Protocol):
    """``RemoteExecEnv._bg_request``: one ``bg`` request (updates to ``on_update``)."""

    def __call__(
        self, fn: str, args: dict[str, Any], on_update: UpdateConsumer | None = None
    ) -> Awaitable[Any]:
        """Send it; its result."""
        ...


class RemoteBackground:
    """The exec host's background commands (see the module doc)."""

    def __init__(self, request: Request) -> None:
        self._request = request

    async def read(
        self, handle: str, *, wait: float = 0.0, until: str | None = None
    ) -> BackgroundRead:
        """See ``BackgroundCommands.read``."""
        return bg_read_from_dict(
            await self._request("read", {"handle": handle, "wait": wait, "until": until})
        )

    async def write(
        self,
        handle: str,
        data: str | bytes,
        *,
        eof: bool = False,
        wait: float = 1.0,
        until: str | None = None,
    ) -> BackgroundRead:
        """See ``BackgroundCommands.write`` (bytes must be UTF-8 to cross)."""
        text = data.decode() if isinstance(data, bytes) else data
        args = {"handle": handle, "data": text, "eof": eof, "wait": wait, "until": until}
        return bg_read_from_dict(await self._request("write", args))

    async def signal(
        self, handle: str, name: str, *, wait: float = 1.0, until: str | None = None
    ) -> BackgroundRead:
        """See ``BackgroundCommands.signal``."""
        args = {"handle": handle, "signal": name, "wait": wait, "until": until}
        return bg_read_from_dict(await self._request("signal", args))

    async def stop(self, handle: str) -> BackgroundRead:
        """See ``BackgroundCommands.stop``."""
        return bg_read_from_dict(await self._request("stop", {"handle": handle}))

    def follow(
        self, handle: str, *, tag: str | None = None
    ) -> Callable[[UpdateConsumer], Awaitable[BackgroundInfo]]:
        """See ``BackgroundCommands.follow``. The host takes hold of the command when the
        request arrives (when the returned function is awaited), not at this call; the
        host keeps no ledger, so ``tag`` is only passed on."""
        if tag is not None and (not isinstance(tag, str) or not 0 < len(tag) <= 200):
            raise ExecConfigError(f"tag must be a str of 1 to 200 characters, got {tag!r:.80}")

        async def run(on_update: UpdateConsumer) -> BackgroundInfo:
            end = await self._request("follow", {"handle": handle, "tag": tag}, on_update)
            if not isinstance(end, dict):
                raise ProtocolError(f"malformed follow result from the exec host: {end!r:.200}")
            return bg_info_from_dict(end)

        return run

    async def commands(self) -> list[BackgroundInfo]:
        """See ``BackgroundCommands.commands``."""
        infos = await self._request("list", {})
        if not isinstance(infos, list):
            raise ProtocolError(f"malformed background list from the exec host: {infos!r:.200}")
        return [bg_info_from_dict(d) for d in infos]

    async def resize(self, handle: str, columns: int, rows: int) -> None:
        """See ``BackgroundCommands.resize``."""
        await self._request("resize", {"handle": handle, "columns": columns, "rows": rows})

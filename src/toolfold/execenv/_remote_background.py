"""``RemoteExecEnv.background``: the background commands of an exec host, from here.

The same operations as ``BackgroundCommands`` (read, write, signal, stop, list, resize),
each one ``bg`` request to the exec host, which runs them on its own registry: the
capture, the windows and the spill stay there, and only a read's bounded window
crosses. Every method is a coroutine here (``commands`` and ``resize`` too: they ask
the host). The paced updates of a background command are not shipped (there is no ``follow``,
so the harness records no live call of its output): a read is how its later output
comes back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ._background import BackgroundInfo, BackgroundRead
from ._errors import ProtocolError
from ._protocol import bg_info_from_dict, bg_read_from_dict

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]


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

    async def commands(self) -> list[BackgroundInfo]:
        """See ``BackgroundCommands.commands``."""
        infos = await self._request("list", {})
        if not isinstance(infos, list):
            raise ProtocolError(f"malformed background list from the exec host: {infos!r:.200}")
        return [bg_info_from_dict(d) for d in infos]

    async def resize(self, handle: str, columns: int, rows: int) -> None:
        """See ``BackgroundCommands.resize``."""
        await self._request("resize", {"handle": handle, "columns": columns, "rows": rows})

"""The asyncio protocol that learns a local child exited and its output pipes closed
(``LocalExecEnv`` waits on both)."""

from __future__ import annotations

import asyncio


class ExecProtocol(asyncio.SubprocessProtocol):
    # stdout and stderr are our own pipes (read by a PipeReader, see _pipes): asyncio's
    # transport only watches the process.
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()

    def output_closed(self) -> None:
        if not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

"""The server's one exception hierarchy: what a request can get wrong, with its HTTP status."""

from __future__ import annotations


class ServerError(Exception):
    """Root of the errors the server reports to a client as JSON ``{"error": message}``.

    The message names the bad value and what to do next; :attr:`status` is the HTTP
    status the API answers with.
    """

    status = 500

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class CommandRejectedError(ServerError):
    """A command runner refused a command before starting it (a lane that cannot name a
    session, a store that cannot record it). Nothing was run or written."""

    status = 400

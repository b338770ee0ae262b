"""Asking the client for input from inside a tool: ``ask_client``.

On the tasks extension (2026-07-28, SEP-2663 with SEP-2322's input requests), a task
waiting on its client is ``input_required``: ``tasks/get`` shows the requests
(``inputRequests``, each an ``elicitation/create``, ``sampling/createMessage`` or
``roots/list`` request keyed by an id the server chose), and the client answers
with ``tasks/update`` (``inputResponses``, by the same keys), in one go or one at a
time. A tool served by ``toolfold mcp`` asks with ``await ask_client({...})``: the
call becomes a task at once (its client must have negotiated the extension, and the
tool must not be ``--task-after TOOL=never``), and the tool resumes with the answers.

A call that cannot be a task has no way to ask: ``ask_client`` raises
``InputUnavailable``, whose message the tool may let through as its error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

MAX_PENDING = 16
"""Requests one call may have waiting for the client at once."""

METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""What a task may ask its client for (SEP-2322's input requests)."""


class InputUnavailable(RuntimeError):
    """The call cannot ask its client for input (see the module docstring)."""


class CallInputs:
    """The input requests of one call, waiting for the client's answers."""

    def __init__(
        self,
        *,
        allowed: bool,
        on_ask: Callable[[], None] | None = None,
        cancel: asyncio.Event | None = None,
    ) -> None:
        self.allowed = allowed
        self.cancel = cancel
        """The call's cancel event: a cancelled call stops waiting for answers."""
        self.on_ask = on_ask
        """Called when the tool asks (the call becomes a task now)."""
        self._pending: dict[str, tuple[dict[str, Any], asyncio.Future[Any]]] = {}

    @property
    def pending(self) -> dict[str, Any]:
        """The requests still unanswered, by key (``inputRequests``)."""
        return {key: request for key, (request, _) in self._pending.items()}

    async def ask(self, requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        if not self.allowed:
            raise InputUnavailable(
                "this call cannot ask its client for input: only a call answered as a task "
                "can (a client that negotiated the io.modelcontextprotocol/tasks extension)"
            )
        if not requests:
            return {}
        for key, request in requests.items():
            if key in self._pending:
                raise InputUnavailable(f"an input request {key!r} is already waiting")
            if request.get("method") not in METHODS:
                raise InputUnavailable(
                    f"input request {key!r} asks for {request.get('method')!r}; "
                    f"ask for one of {', '.join(sorted(METHODS))}"
                )
        if len(self._pending) + len(requests) > MAX_PENDING:
            raise InputUnavailable(
                f"at most {MAX_PENDING} input requests may wait for the client at once"
            )
        loop = asyncio.get_running_loop()
        futures = {key: loop.create_future() for key in requests}
        for key, request in requests.items():
            self._pending[key] = (dict(request), futures[key])
        if self.on_ask is not None:
            self.on_ask()
        gathered: asyncio.Future[list[Any]] = asyncio.gather(*futures.values())
        stop: asyncio.Future[Any] = (
            asyncio.ensure_future(self.cancel.wait()) if self.cancel else loop.create_future()
        )
        try:
            waits: set[asyncio.Future[Any]] = {gathered, stop}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if not gathered.done():
                gathered.cancel()
                raise InputUnavailable("the call was cancelled while it waited for input")
            answers = gathered.result()
        finally:
            stop.cancel()
            for key in requests:
                self._pending.pop(key, None)
        return dict(zip(futures, answers, strict=True))

    def answer(self, responses: Mapping[str, Any]) -> None:
        """The client's ``inputResponses``: each answers the request of its key (a key
        nothing waits for is ignored, as the SEP has a late or stray answer ignored)."""
        for key, response in responses.items():
            waiting = self._pending.pop(key, None)
            if waiting is not None and not waiting[1].done():
                waiting[1].set_result(response)


_current: ContextVar[CallInputs | None] = ContextVar("toolfold_mcp_inputs", default=None)


def bind(inputs: CallInputs) -> None:
    """Make ``inputs`` the ones ``ask_client`` uses in this task (and those it starts)."""
    _current.set(inputs)


async def ask_client(requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Ask the MCP client for input from inside a tool, and wait for its answers.

    ``requests`` maps keys of the tool's choosing to requests, e.g.
    ``{"confirm": {"method": "elicitation/create", "params": {"message": "Delete?",
    "requestedSchema": {...}}}}``; the answers come back by the same keys (for an
    elicitation ``{"action": "accept", "content": {...}}``). Raises
    ``InputUnavailable`` when the call cannot ask (see the module docstring)."""
    inputs = _current.get()
    if inputs is None:
        raise InputUnavailable("ask_client works only in a tool called through toolfold mcp")
    return await inputs.ask(requests)


__all__ = ["MAX_PENDING", "CallInputs", "InputUnavailable", "ask_client", "bind"]

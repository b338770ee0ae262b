"""A scripted OpenAI-compatible Chat Completions server on loopback (real HTTP, real SSE).

Each request to ``POST /v1/chat/completions`` is recorded and answered with the next
scripted response: a list of chunk dicts sent as ``data:`` events, then ``[DONE]``.
A response may instead end with ``"DROP"`` (the server closes the connection mid
stream) or ``"HOLD"`` (the stream stays open until the server stops), or contain a
raw string (sent as is: a malformed chunk)."""

from __future__ import annotations

import asyncio
import json
from typing import Any


def text_chunks(text: str, size: int = 3) -> list[Any]:
    """A streamed answer: ``text`` in deltas of ``size`` characters, then usage."""
    chunks: list[Any] = [
        {"choices": [{"index": 0, "delta": {"content": text[i : i + size]}}]}
        for i in range(0, len(text), size)
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append(
        {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}
    )
    return chunks


def tool_chunks(calls: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    """Tool calls whose argument text streams in two deltas each."""
    chunks: list[Any] = []
    for index, (call_id, name, args) in enumerate(calls):
        text = json.dumps(args)
        half = len(text) // 2
        chunks.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": text[:half]},
                                }
                            ]
                        },
                    }
                ]
            }
        )
        chunks.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": index, "function": {"arguments": text[half:]}}]
                        },
                    }
                ]
            }
        )
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append(
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
    )
    return chunks


class ScriptedServer:
    """``async with ScriptedServer(script) as server:`` → ``server.base_url``."""

    def __init__(self, script: list[list[Any]], *, repeat_last: bool = False) -> None:
        self.script = list(script)
        self.repeat_last = repeat_last
        self.requests: list[dict[str, Any]] = []
        self._server: asyncio.Server | None = None
        self._stop = asyncio.Event()
        self.base_url = ""

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._stop.set()
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            self.requests.append(body)
            if self.script:
                response = (
                    self.script.pop(0)
                    if len(self.script) > 1 or not self.repeat_last
                    else self.script[0]
                )
            else:
                response = text_chunks("(script exhausted)")
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
            )
            for chunk in response:
                if chunk == "HOLD":
                    await self._stop.wait()
                    return
                if chunk == "DROP":
                    writer.transport.abort()
                    return
                base = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "scripted",
                }
                data = chunk if isinstance(chunk, str) else json.dumps({**base, **chunk})
                writer.write(f"data: {data}\n\n".encode())
                await writer.drain()
            writer.write(b"data: [DONE]\n\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

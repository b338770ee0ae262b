"""A hostile MCP upstream (stdio) for the proxy's bounds tests and benchmark.

It speaks JSON-RPC by hand, line by line, so it can send what no SDK server would:
bytes that are not UTF-8, JSON nested deeper than any parser takes, an error whose
code is the one the SDK uses for a closed connection, floods of notifications and of
requests to the client, and results of any size written without holding them.
Each ``tools/call`` names one behaviour (see ``TOOLS``); arguments tune it.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Callable
from typing import Any

OUT = sys.stdout.buffer
_lock = threading.Lock()
_answers: dict[int, threading.Event] = {}
_answered: dict[int, Any] = {}
_next_id = [1_000_000]
_refused: list[Any] = []


def send(data: bytes | dict[str, Any]) -> None:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with _lock:
        OUT.write(raw + b"\n")
        OUT.flush()


def result(request_id: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text_result(request_id: Any, *texts: str) -> None:
    result(request_id, {"content": [{"type": "text", "text": t} for t in texts]})


def stream_result(request_id: Any, blocks: list[tuple[str, Callable[[], Any]]]) -> None:
    """A result whose blocks are written piece by piece: ``(kind, pieces)`` with kind
    ``text`` (pieces: str chunks) or ``image`` (pieces: base64 chunks)."""
    with _lock:
        OUT.write(b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode())
        OUT.write(b',"result":{"content":[')
        for n, (kind, pieces) in enumerate(blocks):
            OUT.write(b"," if n else b"")
            field = b'"text"' if kind == "text" else b'"data"'
            OUT.write(b'{"type":"' + kind.encode() + b'",' + field + b':"')
            for piece in pieces():
                OUT.write(json.dumps(piece)[1:-1].encode())
            tail = b'"}' if kind == "text" else b'","mimeType":"image/png"}'
            OUT.write(tail)
        OUT.write(b"]}}\n")
        OUT.flush()


def chunks(total: int, unit: str) -> Callable[[], Any]:
    def gen() -> Any:
        step = 1 << 20
        done = 0
        while done < total:
            n = min(step, total - done)
            yield (unit * (n // len(unit) + 1))[:n]
            done += n

    return gen


def ask(method: str, params: dict[str, Any]) -> int:
    _next_id[0] += 1
    request_id = _next_id[0]
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    return request_id


TOOLS = [
    "echo",  # {"text": ...}: the text back
    "bad_utf8",  # a result line with bytes that are not UTF-8
    "deep_structured",  # structuredContent nested 5,000 deep
    "deep_meta",  # _meta nested 100,000 deep
    "garbage",  # a line that is not JSON and has no id
    "error_32000",  # a JSON-RPC error with code -32000
    "escapes",  # text holding terminal escapes and a bidi override
    "blob",  # {"size": N, "unit": "x", "kind": "text"|"image"|"mixed"}
    "blocks",  # [text, image, text]
    "big_resource",  # an embedded resource of 200 KB of text
    "flood",  # {"logs": N, "progress": N}: notifications, then a result
    "ask_client",  # {"sampling": N, "elicitation": N}: requests, then a result
]

ESCAPES = (
    "before \x1b]52;c;cm0gLXJmIH4=\x07 clipboard\n"
    "\x1b[2J\x1b[H cleared\n"
    "\x1b]0;owned title\x07 titled\n"
    "\x1b]8;;https://evil.example/\x1b\\a link\x1b]8;;\x1b\\ here\n"
    "bidi \u202eexe.txt\u202c done\n"
)

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


def call(request_id: Any, name: str, args: dict[str, Any], meta: dict[str, Any]) -> None:
    if name == "echo":
        text_result(request_id, str(args.get("text", "")))
    elif name == "bad_utf8":
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
        send(head + b',"result":{"content":[{"type":"text","text":"caf\xe9 \xff\xfe"}]}}')
    elif name == "deep_structured":
        depth = 5000
        nested = '{"a":' * depth + "1" + "}" * depth
        head = '{"jsonrpc":"2.0","id":' + json.dumps(request_id)
        send(f'{head},"result":{{"content":[],"structuredContent":{nested}}}}}'.encode())
    elif name == "deep_meta":
        depth = 100_000
        nested = "[" * depth + "]" * depth
        # The id last, as JavaScript writers put it.
        tail = ',"jsonrpc":"2.0","id":' + json.dumps(request_id) + "}"
        send(f'{{"result":{{"content":[],"_meta":{{"x":{nested}}}}}{tail}'.encode())
    elif name == "garbage":
        send(b"this is not JSON \xff at all")
    elif name == "error_32000":
        error = {"code": -32000, "message": "the database is locked"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
    elif name == "escapes":
        text_result(request_id, ESCAPES)
    elif name == "blob":
        size = int(args["size"])
        kind = args.get("kind", "text")
        if kind == "image":
            stream_result(request_id, [("image", chunks(size, "QUJD"))])
        else:
            stream_result(request_id, [("text", chunks(size, str(args.get("unit", "x"))))])
    elif name == "blocks":
        result(
            request_id,
            {
                "content": [
                    {"type": "text", "text": "The image below is a red dot."},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "text", "text": "The image above is a red dot."},
                ]
            },
        )
    elif name == "big_resource":
        resource = {"uri": "file:///big.txt", "mimeType": "text/plain", "text": "r" * 200_000}
        result(request_id, {"content": [{"type": "resource", "resource": resource}]})
    elif name == "flood":
        token = meta.get("progressToken")
        for i in range(int(args.get("logs", 0))):
            params = {"level": "info", "logger": "flood", "data": f"log line {i} " + "." * 200}
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        for i in range(int(args.get("progress", 0)) if token is not None else 0):
            params = {"progressToken": token, "progress": i + 1, "message": f"step {i}"}
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        text_result(request_id, "flooded")
    elif name == "ask_client":
        asked = []
        message = {"role": "user", "content": {"type": "text", "text": "x" * 1000}}
        for _ in range(int(args.get("sampling", 0))):
            asked.append(ask("sampling/createMessage", {"messages": [message], "maxTokens": 5}))
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        for _ in range(int(args.get("elicitation", 0))):
            params = {"message": "y" * 1000, "requestedSchema": schema}
            asked.append(ask("elicitation/create", params))
        errors = 0
        for request_id_asked in asked:
            _answers.setdefault(request_id_asked, threading.Event()).wait()
            errors += "error" in _answered.pop(request_id_asked)
        text_result(request_id, f"asked {len(asked)}, {errors} errors")
    else:
        error = {"code": -32602, "message": f"unknown tool {name}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    request_id = message.get("id")
    if method is None:  # an answer to one of our requests
        if "error" in message and not _refused:
            # Said once, so a client holding its answers knows one was refused.
            _refused.append(request_id)
            params = {"level": "info", "logger": "hostile", "data": message["error"]["message"]}
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        _answered[request_id] = message
        _answers.setdefault(request_id, threading.Event()).set()
        return
    if method == "initialize":
        caps = {"tools": {"listChanged": True}, "logging": {}, "completions": {}}
        info = {"name": "hostile", "version": "1"}
        version = message["params"]["protocolVersion"]
        result(request_id, {"protocolVersion": version, "capabilities": caps, "serverInfo": info})
    elif method == "tools/list":
        schema = {"type": "object"}
        tools = [{"name": n, "inputSchema": schema} for n in TOOLS]
        result(request_id, {"tools": tools})
    elif method == "tools/call":
        params = message["params"]
        args = params.get("arguments") or {}
        meta = params.get("_meta") or {}
        threading.Thread(
            target=call, args=(request_id, params["name"], args, meta), daemon=True
        ).start()
    elif method == "logging/setLevel":
        text = f"level set to {message['params']['level']}"
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "logger": "hostile", "data": text},
            }
        )
        result(request_id, {})
    elif method == "completion/complete":
        value = message["params"]["argument"]["value"]
        result(request_id, {"completion": {"values": [value + "-done"], "hasMore": False}})
    elif method == "ping":
        result(request_id, {})
    elif request_id is not None:
        error = {"code": -32601, "message": f"no method {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def main() -> None:
    for line in sys.stdin.buffer:
        if line.strip():
            handle(json.loads(line))


if __name__ == "__main__":
    main()

"""A pure ASGI guard for a local server that runs commands: token, Host, Origin, body limits.

``Guard(app, GuardConfig(token=...))`` wraps any ASGI app (it knows nothing of the
routes behind it), so every HTTP server of toolfold puts the same checks in front of
its routes. Each request, in this order:

1. **Host** must be one of ``config.allowed_hosts`` (port ignored), else 403. A web
   page that rebinds its own DNS name to 127.0.0.1 still sends its own name as Host.
2. **Origin**, when a browser sends one, must be this server's own
   (``http(s)://`` + the Host header), else 403: another page — even one on another
   port of the same host, which counts as the same *site* for cookies — cannot make
   a request here count.
3. **Token**: ``Authorization: Bearer <token>``, or the cookie ``config.cookie_name``,
   or ``?token=<token>`` on a GET/HEAD — which also sets that cookie (``HttpOnly``,
   ``SameSite=Strict``), so a page opened once with ``?token=`` can drop the token from
   its address bar and keep working (``EventSource`` cannot send headers; it sends the
   cookie). Missing or wrong: 401 with a one-line JSON error naming how to get it.
4. **Content-Type**: a POST, PUT or PATCH must send ``application/json``, else 415.
   Anything else (``text/plain``, a form) is a CORS "simple request" a browser sends
   cross-site without asking first.
5. **Body size**: more than ``config.max_body_bytes`` is refused with 413 — from
   ``Content-Length`` before reading anything, or as soon as a streamed (chunked) body
   passes the limit — and the connection is closed, so the rest is never read.
6. **JSON nesting** deeper than ``config.max_json_depth`` gets 400, so no app behind
   the guard ever meets a ``RecursionError`` from its JSON parser.

The body (at most ``max_body_bytes``) is read here and replayed to the app. Refusals
are ``{"error": "..."}`` with one line of text; WebSocket connections get the first
three checks and are closed with code 1008 when one fails. Use it directly::

    app = Guard(app, GuardConfig(token=token, allowed_hosts=allowed_hosts("0.0.0.0", ["box.lan"])))

or as Starlette middleware: ``Starlette(..., middleware=[Middleware(Guard, config=config)])``.
"""

from __future__ import annotations

import hmac
import itertools
import json
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "LOOPBACK_HOSTS",
    "Guard",
    "GuardConfig",
    "allowed_hosts",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names every guard accepts (``[::1]`` is written without its brackets here)."""

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""Largest request body a guard accepts unless its config says otherwise."""

DEFAULT_MAX_JSON_DEPTH = 64
"""Deepest JSON nesting (arrays and objects) a guard accepts unless told otherwise."""

_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
_IPV6 = re.compile(r"[0-9a-f:.]+")
_JSON_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Everything but the four bracket bytes: deleting these leaves only the nesting.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Opening brackets become 1 and closing ones -1 (0xff read as a signed byte).
_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
# A backslash and the byte after it: an escape inside a string (outside one, JSON has
# no backslash, and a parser stops there before it can nest any deeper).
_ESCAPE_PAIR = re.compile(rb"\\.", re.S)
# A string once its escapes are gone: an unterminated one runs to the end of the body.
# Every match succeeds from its quote, so nothing is ever rescanned (the old
# `"[^"\\]*(?:\\.[^"\\]*)*"` failed on an unterminated string and was tried again
# from every later quote: quadratic).
_STRING = re.compile(rb'"[^"]*"?')


def _name(value: str) -> str | None:
    """A host name as the guard compares it (lower case, IPv6 without brackets), or
    ``None`` when ``value`` is not a bare host name."""
    name = value.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        inner = name[1:-1]
        return inner if ":" in inner and _IPV6.fullmatch(inner) else None
    if ":" in name:
        # Two or more colons: a bare IPv6 address; one: a name with a port.
        return name if name.count(":") >= 2 and _IPV6.fullmatch(name) else None
    return name if _HOST_NAME.fullmatch(name) else None


def allowed_hosts(*names: str | Iterable[str] | None) -> frozenset[str]:
    """``LOOPBACK_HOSTS`` plus ``names`` (each a host name, an IP address, ``[::1]``-style
    IPv6, or an iterable of those; ``None`` skipped) — the ``allowed_hosts`` of a config.

    Raises ``ValueError`` naming a value that is not a bare host name (a port, a
    scheme or a path is not part of one).
    """
    out = set(LOOPBACK_HOSTS)
    for item in names:
        if item is None:
            continue
        for value in [item] if isinstance(item, str) else item:
            name = _name(value)
            if name is None:
                raise ValueError(
                    f"{value!r} is not a host name: give a bare name or address such as "
                    "'box.lan', '192.168.1.5' or '[fe80::1]' (no scheme, port or path)"
                )
            out.add(name)
    return frozenset(out)


def _show(name: str) -> str:
    return f"[{name}]" if ":" in name else name


@dataclass(frozen=True)
class GuardConfig:
    """What a ``Guard`` checks against.

    - ``token``: the secret every request must carry (16-512 characters of
      ``A-Z a-z 0-9 . _ ~ + / = -``; ``secrets.token_urlsafe()`` makes one).
    - ``allowed_hosts``: accepted ``Host`` names, ports ignored (``allowed_hosts()``
      builds one; the default is loopback only).
    - ``max_body_bytes``, ``max_json_depth``: the body limits.
    - ``token_hint``: appended to a 401's error, to say where the token comes from.
    - ``cookie_name``: the cookie holding the token; by default
      ``toolfold-token-<port>`` (cookies ignore ports, so two servers on one host keep
      theirs apart).
    """

    token: str
    allowed_hosts: frozenset[str] = LOOPBACK_HOSTS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    token_hint: str = "send it as 'Authorization: Bearer <token>'"
    cookie_name: str | None = None

    def __post_init__(self) -> None:
        if not _TOKEN.fullmatch(self.token):
            raise ValueError(
                f"the server token must be 16-512 characters of A-Z a-z 0-9 . _ ~ + / = -, "
                f"got {len(self.token)} characters{' with others' if self.token else ''}; "
                "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe())'"
            )
        if self.max_body_bytes < 1 or self.max_json_depth < 1:
            raise ValueError(
                f"max_body_bytes and max_json_depth must be positive, got "
                f"{self.max_body_bytes} and {self.max_json_depth}"
            )


class _Refused(Exception):
    """A check failed: the status and one line saying why and what to do."""

    def __init__(self, status: int, message: str, headers: Iterable[tuple[bytes, bytes]] = ()):
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


def _json_too_deep(body: bytes, limit: int) -> bool:
    """Whether the JSON text ``body`` nests arrays/objects more than ``limit`` deep: how
    deep a parser reading it would recurse, unclosed brackets included.

    Brackets inside strings do not count. Three linear passes in C (escape pairs out,
    strings out, brackets to +1/-1) and a running sum: every byte is looked at a fixed
    number of times whatever the body holds, so a hostile body costs what a benign one
    of its size does.
    """
    outside = _STRING.sub(b"", _ESCAPE_PAIR.sub(b"", body))
    steps = outside.translate(_DEPTH_STEPS, _NOT_BRACKETS)
    if steps.count(1) <= limit:
        return False
    return max(itertools.accumulate(memoryview(steps).cast("b"))) > limit


class Guard:
    """ASGI middleware refusing what a local command server must not serve (see the
    module docstring for the checks, in order). ``Guard(app, config)``."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        try:
            self._check_host(headers)
            self._check_origin(headers)
            set_cookie = self._check_token(scope, headers)
            if kind == "websocket":
                await self.app(scope, receive, send)
                return
            replay = await self._check_body(scope, headers, receive)
        except _Refused as refused:
            if kind == "websocket":
                # A close reason holds at most 123 bytes.
                reason = str(refused).encode()[:123].decode(errors="ignore")
                await send({"type": "websocket.close", "code": 1008, "reason": reason})
            else:
                await _refuse(send, refused)
            return
        await self.app(scope, replay or receive, _uncached(send, set_cookie))

    def _check_host(self, headers: dict[str, list[str]]) -> None:
        given = headers.get("host", [])
        host = given[0] if len(given) == 1 else ""
        name = _name(_without_port(host)) if host else None
        if name is None or name not in self.config.allowed_hosts:
            allowed = ", ".join(_show(n) for n in sorted(self.config.allowed_hosts))
            raise _Refused(
                403,
                f"Host {host!r} is not allowed (a guard against DNS rebinding); "
                f"allowed: {allowed}; start the server with --allow-host NAME to add a name",
            )

    def _check_origin(self, headers: dict[str, list[str]]) -> None:
        for origin in headers.get("origin", []):
            host = headers["host"][0].lower()
            if origin.lower() not in (f"http://{host}", f"https://{host}"):
                raise _Refused(
                    403,
                    f"Origin {origin!r} is not this server's (http://{host}): "
                    "requests from other web pages are refused",
                )

    def _check_token(self, scope: Scope, headers: dict[str, list[str]]) -> str | None:
        """Accept the request or raise 401; returns the cookie to set when ``?token=``
        was traded for one."""
        config = self.config
        cookie_name = config.cookie_name or f"toolfold-token-{_port(scope)}"
        offered: list[str] = []
        for value in headers.get("authorization", []):
            scheme, _, credential = value.partition(" ")
            if scheme.lower() == "bearer":
                offered.append(credential.strip())
        for value in headers.get("cookie", []):
            for part in value.split(";"):
                name, _, credential = part.strip().partition("=")
                if name == cookie_name:
                    offered.append(credential)
        from_query = [
            v
            for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            if k == "token"
        ]
        if scope.get("method", "GET") in ("GET", "HEAD"):
            offered.extend(from_query)
        expected = config.token.encode()
        if any(hmac.compare_digest(t.encode("utf-8", "replace"), expected) for t in offered):
            if any(hmac.compare_digest(t.encode("utf-8", "replace"), expected) for t in from_query):
                return f"{cookie_name}={config.token}; Path=/; HttpOnly; SameSite=Strict"
            return None
        what = "a wrong token" if offered else "no token"
        raise _Refused(
            401,
            f"this server needs its token and the request carried {what}: {config.token_hint}",
            [(b"www-authenticate", b'Bearer realm="toolfold"')],
        )

    async def _check_body(
        self, scope: Scope, headers: dict[str, list[str]], receive: Receive
    ) -> Receive | None:
        """Refuse a body that is not JSON, too large or too deep; return a ``receive``
        replaying the body read (``None`` when the request has none)."""
        config = self.config
        content_type = (headers.get("content-type") or [""])[0]
        is_json = content_type.split(";", 1)[0].strip().lower() == "application/json"
        if scope["method"] in _JSON_METHODS and not is_json:
            raise _Refused(
                415,
                f"Content-Type {content_type or '(none)'!r} is not accepted: "
                "send a JSON body with 'Content-Type: application/json'",
            )
        lengths = headers.get("content-length", [])
        if lengths:
            if len(set(lengths)) != 1 or not lengths[0].strip().isdigit():
                raise _Refused(400, f"Content-Length {lengths!r} is not one whole number")
            if int(lengths[0]) > config.max_body_bytes:
                raise _Refused(
                    413,
                    f"the request body is {int(lengths[0])} bytes; "
                    f"this server accepts at most {config.max_body_bytes}",
                )
        if not (lengths and int(lengths[0]) > 0) and "transfer-encoding" not in headers:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away: nothing to answer; the app sees the disconnect.
                messages = [message]
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > config.max_body_bytes:
                raise _Refused(
                    413,
                    f"the request body passed {config.max_body_bytes} bytes, "
                    f"the most this server accepts; refused without reading the rest",
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                body = b"".join(chunks)
                if is_json and _json_too_deep(body, config.max_json_depth):
                    raise _Refused(
                        400,
                        f"the JSON body nests arrays/objects more than "
                        f"{config.max_json_depth} deep; flatten it",
                    )
                messages = [{"type": "http.request", "body": body, "more_body": False}]
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return replay


def _headers(scope: Scope) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


def _without_port(host: str) -> str:
    """``name:port`` -> ``name``; ``[v6]:port`` -> ``[v6]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.split(":", 1)[0]


def _port(scope: Scope) -> str:
    server = scope.get("server")
    return str(server[1]) if server and len(server) > 1 and server[1] is not None else "0"


# No page may frame ours (clickjacking: a page on another port of 127.0.0.1 is "same
# site" and could overlay the viewer's buttons). CSP for current browsers, the older
# header for the rest.
_NO_FRAMING = [
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
]


def _uncached(send: Send, cookie: str | None) -> Send:
    """``send`` adding ``Cache-Control: no-store`` unless the app chose a policy: a
    response behind the token must not be served from a cache to someone without it
    (or outlive the token). With the cookie traded for ``?token=``: ``Set-Cookie``,
    and ``no-store`` and ``no-referrer`` whatever the app said, since the address
    still holds the token until the page drops it."""

    async def uncached_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            if cookie is not None:
                headers = [h for h in headers if h[0].lower() != b"cache-control"]
                headers.append((b"set-cookie", cookie.encode("latin-1")))
                headers.append((b"referrer-policy", b"no-referrer"))
            if not any(name.lower() == b"cache-control" for name, _ in headers):
                headers.append((b"cache-control", b"no-store"))
            headers.extend(_NO_FRAMING)
            message = {**message, "headers": headers}
        await send(message)

    return uncached_send


async def _refuse(send: Send, refused: _Refused) -> None:
    body = json.dumps({"error": " ".join(str(refused).split())}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": refused.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # Whatever the client still sends of its body is never read.
                (b"connection", b"close"),
                *_NO_FRAMING,
                *refused.headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})

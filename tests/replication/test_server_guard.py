"""The request guard (``toolfold.server.Guard``) in front of a bare ASGI app, over real uvicorn.

Each check is exercised alone — every other part of the request valid — so a test
fails if that one check goes: Host, Origin, token (header, cookie, ``?token=``),
Content-Type, body size (declared and streamed) and JSON nesting, at their exact
limits. The app behind the guard is an echo that knows nothing of toolfold.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolfold.server import LOOPBACK_HOSTS, Guard, GuardConfig, allowed_hosts
from toolfold.server._guard import _json_too_deep

TOKEN = secrets.token_urlsafe(24)
LIMIT = 1000
DEPTH = 5


async def echo(scope: Any, receive: Any, send: Any) -> None:
    """Answers with what it was asked: method, path and the body it read."""
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].removeprefix("lifespan.")
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    out = json.dumps(
        {"method": scope["method"], "path": scope["path"], "body": body.decode()}
    ).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"json")]}
    )
    await send({"type": "http.response.body", "body": out})


@pytest.fixture
def guarded(serve: Callable[..., Any]) -> Iterator[tuple[Any, httpx.Client]]:
    config = GuardConfig(
        token=TOKEN,
        allowed_hosts=allowed_hosts("box.lan"),
        max_body_bytes=LIMIT,
        max_json_depth=DEPTH,
        token_hint="ask the operator",
    )
    server = serve(Guard(echo, config), token=TOKEN)
    with httpx.Client(base_url=server.url, headers=server.auth) as client:
        yield server, client


JSON = {"Content-Type": "application/json"}


def _error(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/json"
    assert r.headers["connection"] == "close"
    assert "\n" not in r.text
    message: str = r.json()["error"]
    return message


def test_a_good_request_reaches_the_app_with_its_body(guarded: Any) -> None:
    _server, client = guarded
    r = client.post("/any/path", content=b'{"a": [1, 2]}', headers=JSON)
    assert r.status_code == 200
    assert r.json() == {"method": "POST", "path": "/any/path", "body": '{"a": [1, 2]}'}
    # Behind the token, nothing is for a cache (it would answer someone without it).
    assert r.headers["cache-control"] == "no-store"
    # No page may frame it (a page on another port of 127.0.0.1 is the same site).
    assert r.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert r.headers["x-frame-options"] == "DENY"
    # A chunked body under the limit is read, then replayed whole.
    parts = [b'{"x": "', b"y" * 300, b'"}']
    r = client.post("/chunked", content=iter(parts), headers=JSON)
    assert r.status_code == 200 and r.json()["body"] == b"".join(parts).decode()
    assert client.get("/").json()["method"] == "GET"


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.2:{port}",
        "localhost.evil:{port}",
        "",
        # A name is allowed whole, never by its suffix (box.lan is --allow-host here).
        "evil-localhost:{port}",
        "x.localhost:{port}",
        "evilbox.lan:{port}",
        "x.box.lan:{port}",
        "evil127.0.0.1:{port}",
    ],
)
def test_a_foreign_host_gets_403(guarded: Any, host: str) -> None:
    server, client = guarded
    r = client.get("/stored/history", headers={"Host": host.format(port=server.port)})
    message = _error(r, 403)
    assert message.startswith(f"Host {host.format(port=server.port)!r} is not allowed")
    assert r.headers["x-frame-options"] == "DENY"
    assert "allowed: 127.0.0.1, [::1], box.lan, localhost" in message
    assert "--allow-host NAME" in message


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:{port}", "[::1]:{port}", "BOX.lan:99"])
def test_allowed_hosts_pass_with_any_port(guarded: Any, host: str) -> None:
    server, client = guarded
    assert client.get("/", headers={"Host": host.format(port=server.port)}).status_code == 200


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "http://127.0.0.1:1", "https://localhost:{port}", "null"],
)
def test_a_foreign_origin_gets_403(guarded: Any, method: str, origin: str) -> None:
    server, client = guarded
    origin = origin.format(port=server.port)
    r = client.request(method, "/x", content=b"{}", headers={**JSON, "Origin": origin})
    message = _error(r, 403)
    assert message == (
        f"Origin {origin!r} is not this server's (http://127.0.0.1:{server.port}): "
        "requests from other web pages are refused"
    )


def test_the_servers_own_origin_passes(guarded: Any) -> None:
    server, client = guarded
    for origin in (f"http://127.0.0.1:{server.port}", f"https://127.0.0.1:{server.port}"):
        r = client.post("/x", content=b"{}", headers={**JSON, "Origin": origin})
        assert r.status_code == 200, r.text


def test_missing_and_wrong_tokens_get_401_saying_how_to_get_one(guarded: Any) -> None:
    server, _client = guarded
    with httpx.Client(base_url=server.url) as anonymous:
        r = anonymous.get("/")
        assert _error(r, 401) == (
            "this server needs its token and the request carried no token: ask the operator"
        )
        assert r.headers["www-authenticate"] == 'Bearer realm="toolfold"'
        for headers in (
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": f"Bearer {TOKEN[:-1]}"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Cookie": f"toolfold-token-{server.port}=wrong"},
            {"Cookie": f"toolfold-token-1={TOKEN}"},  # another port's cookie
        ):
            message = _error(anonymous.post("/x", content=b"{}", headers={**JSON, **headers}), 401)
            assert "carried a wrong token" in message or "carried no token" in message, headers
        # The token in the query is accepted on a GET only (a POST's address is a
        # form's action, which a page chooses).
        r = anonymous.post(f"/x?token={TOKEN}", content=b"{}", headers=JSON)
        assert _error(r, 401).startswith("this server needs its token")
        assert anonymous.get(f"/x?token={TOKEN}&token=").status_code == 200


def test_query_token_is_traded_for_a_strict_httponly_cookie(guarded: Any) -> None:
    server, _client = guarded
    with httpx.Client(base_url=server.url) as browser:
        r = browser.get(f"/?token={TOKEN}&lane=main")
        assert r.status_code == 200
        cookie = r.headers["set-cookie"]
        assert cookie == (
            f"toolfold-token-{server.port}={TOKEN}; Path=/; HttpOnly; SameSite=Strict"
        )
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["cache-control"] == "no-store"
        # Later requests carry only the cookie (httpx keeps it, like a browser).
        r = browser.post("/v1/x", content=b"{}", headers=JSON)
        assert r.status_code == 200 and "set-cookie" not in r.headers
        # A bearer request is not given a cookie it did not ask for.
    with httpx.Client(base_url=server.url, headers=server.auth) as api:
        assert "set-cookie" not in api.get("/").headers


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
    ],
)
def test_a_post_that_is_not_json_gets_415(guarded: Any, content_type: str | None) -> None:
    _server, client = guarded
    headers = {"Content-Type": content_type} if content_type else {}
    r = client.post("/x", content=b'{"command": "id"}', headers=headers)
    message = _error(r, 415)
    assert message == (
        f"Content-Type {content_type or '(none)'!r} is not accepted: "
        "send a JSON body with 'Content-Type: application/json'"
    )


def test_json_with_a_charset_passes(guarded: Any) -> None:
    _server, client = guarded
    r = client.post(
        "/x", content=b"{}", headers={"Content-Type": "Application/JSON; charset=utf-8"}
    )
    assert r.status_code == 200


def test_body_limit_from_content_length_at_its_exact_value(guarded: Any) -> None:
    _server, client = guarded
    at_limit = b'"' + b"x" * (LIMIT - 2) + b'"'
    assert client.post("/x", content=at_limit, headers=JSON).json()["body"] == at_limit.decode()
    over = at_limit + b" "
    assert _error(client.post("/x", content=over, headers=JSON), 413) == (
        f"the request body is {LIMIT + 1} bytes; this server accepts at most {LIMIT}"
    )


def test_a_streamed_body_is_refused_once_it_passes_the_limit(guarded: Any) -> None:
    _server, client = guarded
    sent: list[int] = []

    def body() -> Iterator[bytes]:
        for _ in range(100_000):  # 100 MB if the server read it all
            sent.append(1)
            yield b"x" * 1000

    # The server answers 413 and closes the connection while the client still sends:
    # httpx either reads that early answer or sees the connection go away.
    try:
        r: httpx.Response | None = client.post("/x", content=body(), headers=JSON)
    except httpx.TransportError:
        r = None
    if r is not None:
        assert _error(r, 413).startswith(f"the request body passed {LIMIT} bytes")
    # Far less than the whole body went out before the server hung up.
    assert len(sent) < 20_000, len(sent)


def test_json_nesting_at_its_exact_limit(guarded: Any) -> None:
    _server, client = guarded
    ok = b"[" * DEPTH + b"]" * DEPTH
    assert client.post("/x", content=ok, headers=JSON).status_code == 200
    deep = b'{"a":' * (DEPTH + 1) + b"1" + b"}" * (DEPTH + 1)
    assert _error(client.post("/x", content=deep, headers=JSON), 400) == (
        f"the JSON body nests arrays/objects more than {DEPTH} deep; flatten it"
    )
    # Brackets inside strings are text, not nesting.
    text = json.dumps({"s": '[[[[[[[[[[{{{{{{{{\\"[[[['}).encode()
    assert client.post("/x", content=text, headers=JSON).status_code == 200


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ax\u00e9\U0001f600'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=3), children, max_size=3)
    ),
    max_leaves=30,
)


@given(JSON_VALUES, st.integers(min_value=0, max_value=8), st.booleans())
def test_nesting_check_agrees_with_the_parsed_depth(value: Any, limit: int, ascii: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii).encode()
    assert _json_too_deep(body, max(limit, 1)) == (_depth(value) > max(limit, 1))


def test_websockets_get_the_same_checks() -> None:
    config = GuardConfig(token=TOKEN)
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    async def attempt(headers: list[tuple[bytes, bytes]]) -> list[Any]:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "websocket.connect"}

        scope = {"type": "websocket", "path": "/", "headers": headers, "query_string": b""}
        await Guard(app, config)(scope, receive, send)
        return sent

    host = (b"host", b"127.0.0.1:1")
    auth = (b"authorization", f"Bearer {TOKEN}".encode())
    refused = asyncio.run(attempt([host]))
    assert refused[0]["type"] == "websocket.close" and refused[0]["code"] == 1008
    assert "no token" in refused[0]["reason"] and seen == []
    assert len(refused[0]["reason"].encode()) <= 123  # what a close frame can carry
    refused = asyncio.run(attempt([(b"host", b"evil.example"), auth]))
    assert "is not allowed" in refused[0]["reason"] and seen == []
    assert asyncio.run(attempt([host, auth])) == [] and seen == ["websocket"]


def test_allowed_hosts_normalises_names_and_refuses_what_is_not_one() -> None:
    assert allowed_hosts() == LOOPBACK_HOSTS == {"localhost", "127.0.0.1", "::1"}
    assert allowed_hosts("0.0.0.0", ["Box.LAN", "[fe80::1]", "::"], None) == LOOPBACK_HOSTS | {
        "0.0.0.0",
        "box.lan",
        "fe80::1",
        "::",
    }
    for bad in ("box.lan:8765", "http://box.lan", "box.lan/x", "", "a b", "[nope]"):
        with pytest.raises(ValueError, match="is not a host name: give a bare name"):
            allowed_hosts(bad)


@pytest.mark.parametrize("token", ["", "short", "x" * 15, "has space" * 4, "a;b" * 8, "é" * 20])
def test_a_token_that_cannot_be_used_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match=r"must be 16-512 characters of A-Z a-z 0-9"):
        GuardConfig(token=token)
    GuardConfig(token="x" * 16)


def _reference_depth(body: bytes) -> int:
    """How deep a parser reading ``body`` recurses, byte by byte: brackets in strings do
    not count, a backslash takes the next byte with it, an unterminated string runs to
    the end (a parser fails there without nesting deeper)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if escaped:
            escaped = False
        elif byte == 0x5C:  # backslash
            escaped = True
        elif byte == 0x22:  # quote
            in_string = not in_string
        elif not in_string and byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not in_string and byte in b"]}":
            depth -= 1
    return deepest


@example(b'"[[', 1)  # an unterminated string: nothing after it nests
@example(b'"\\\\"[[', 1)  # an escaped backslash, then the string ends
@example(b'"\\"[[', 1)  # an escaped quote: the string goes on
@given(
    st.binary(max_size=200).map(lambda b: bytes(b'[]{}"\\ a'[x % 8] for x in b)), st.integers(1, 8)
)
def test_nesting_check_agrees_with_a_byte_by_byte_scan_on_any_text(body: bytes, limit: int) -> None:
    # Not only valid JSON: a hostile body is whatever bytes the attacker chose.
    assert _json_too_deep(body, limit) == (_reference_depth(body) > limit)


@pytest.mark.parametrize(
    ("body", "too_deep"),
    [
        (b'"' + b'\\"' * 500_000, False),  # the body that froze `serve` at 48 KB
        (b'"' * 1_000_000, False),
        (b'\\"' * 500_000 + b"[" * 65, True),
        (b"[" * 1_000_000, True),  # unclosed: a parser still recurses through them
        (b"[]" * 500_000, False),
        (b'["' + b"\\\\" * 500_000 + b'"]', False),
        (b'["' + b"[" * 1_000_000 + b'"]', False),
    ],
)
def test_nesting_check_of_a_hostile_megabyte_answers(body: bytes, too_deep: bool) -> None:
    # The structural bound: each of these makes a scan that retries from every quote
    # (the old regex) take hours, so a quadratic check never gets to the assertion
    # (pytest's 300 s timeout fails it); the linear one reads each byte a fixed number
    # of times.
    assert len(body) >= 1_000_000
    assert _json_too_deep(body, 64) is too_deep


# The guard at the ASGI level, without a server in between: what it hands the server to
# send. ASGI requires lower-case header names in a response; a real server may send them
# as given. uvicorn (h11) also refuses some requests before any app sees them (two
# Content-Length values), but the guard promises its checks to any ASGI server.
HOST = (b"host", b"127.0.0.1:8000")
BEARER = (b"authorization", f"Bearer {TOKEN}".encode())
FRAMING = [
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
]


def _through_guard(
    headers: list[tuple[bytes, bytes]],
    *,
    app_headers: list[tuple[bytes, bytes]] | None = None,
    method: str = "GET",
    query: bytes = b"",
    body: list[dict[str, Any]] | None = None,
    scope: dict[str, Any] | None = None,
    received: list[dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """(what the guard sent, the bodies the app read) for one request; the app answers
    200 with ``app_headers`` (no ``headers`` key at all when ``None``)."""
    sent: list[dict[str, Any]] = []
    read: list[bytes] = []
    incoming = list(body or [])

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        read.append(message.get("body", b""))
        if received is not None:
            received.extend([message, await receive()])
        start: dict[str, Any] = {"type": "http.response.start", "status": 200}
        if app_headers is not None:
            start["headers"] = app_headers
        await send(start)
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    full_scope = {
        "type": "http",
        "method": method,
        "path": "/",
        "query_string": query,
        "headers": headers,
        "server": ("127.0.0.1", 8000),
        **(scope or {}),
    }
    guard = Guard(app, GuardConfig(token=TOKEN, max_body_bytes=LIMIT, max_json_depth=DEPTH))
    asyncio.run(guard(full_scope, receive, send))
    return sent, read


def test_the_apps_own_headers_pass_with_no_store_and_no_framing_added() -> None:
    mine = [(b"content-type", b"text/plain"), (b"x-app", b"1")]
    sent, _ = _through_guard([HOST, BEARER], app_headers=mine)
    assert sent[0]["headers"] == [*mine, (b"cache-control", b"no-store"), *FRAMING]
    assert sent[1] == {"type": "http.response.body", "body": b"ok"}
    # An app that sends no header list at all still gets the guard's.
    sent, _ = _through_guard([HOST, BEARER])
    assert sent[0]["headers"] == [(b"cache-control", b"no-store"), *FRAMING]


def test_an_apps_own_cache_policy_stands_unless_the_token_came_in_the_address() -> None:
    mine = [(b"content-type", b"text/plain"), (b"Cache-Control", b"max-age=60")]
    sent, _ = _through_guard([HOST, BEARER], app_headers=mine)
    assert sent[0]["headers"] == [*mine, *FRAMING]
    # ?token=: the cookie is set and nothing may keep the page (its address holds the token).
    sent, _ = _through_guard([HOST], app_headers=mine, query=f"token={TOKEN}".encode())
    cookie = f"toolfold-token-8000={TOKEN}; Path=/; HttpOnly; SameSite=Strict".encode()
    assert sent[0]["headers"] == [
        (b"content-type", b"text/plain"),
        (b"set-cookie", cookie),
        (b"referrer-policy", b"no-referrer"),
        (b"cache-control", b"no-store"),
        *FRAMING,
    ]


def test_a_refusal_is_one_complete_json_response_that_closes_the_connection() -> None:
    sent, read = _through_guard([HOST])
    body = sent[1]["body"]
    assert sent[0] == {
        "type": "http.response.start",
        "status": 401,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *FRAMING,
            (b"www-authenticate", b'Bearer realm="toolfold"'),
        ],
    }
    assert sent[1] == {"type": "http.response.body", "body": body, "more_body": False}
    assert json.loads(body)["error"].startswith("this server needs its token") and read == []


def test_two_different_content_lengths_are_refused_before_any_body_is_read() -> None:
    json_post = [HOST, BEARER, (b"content-type", b"application/json")]
    for lengths in ([b"2", b"3"], [b"2", b"x"], [b"x"]):
        body = [{"type": "http.request", "body": b"[]", "more_body": False}]
        sent, read = _through_guard(
            [*json_post, *((b"content-length", n) for n in lengths)], method="POST", body=body
        )
        assert sent[0]["status"] == 400, lengths
        assert b"is not one whole number" in sent[1]["body"] and read == []
    body = [{"type": "http.request", "body": b"[]", "more_body": False}]
    sent, read = _through_guard(
        [*json_post, (b"content-length", b"2"), (b"content-length", b"2")], method="POST", body=body
    )
    assert sent[0]["status"] == 200 and read == [b"[]"]


def test_a_json_content_type_with_several_parameters_is_json() -> None:
    body = [{"type": "http.request", "body": b"[]", "more_body": False}]
    kind = b"Application/JSON ; charset=utf-8; profile=x"
    sent, read = _through_guard(
        [HOST, BEARER, (b"content-type", kind), (b"content-length", b"2")], method="POST", body=body
    )
    assert sent[0]["status"] == 200 and read == [b"[]"]


def _status(sent: list[dict[str, Any]]) -> tuple[int, str]:
    body = json.loads(sent[1]["body"]) if sent[0]["status"] != 200 else {}
    return sent[0]["status"], body.get("error", "")


def test_a_streamed_body_is_joined_checked_and_replayed_as_one_message() -> None:
    chunked = [
        HOST,
        BEARER,
        (b"content-type", b"application/json"),
        (b"transfer-encoding", b"chunked"),
    ]
    parts = [
        {"type": "http.request", "body": b"[1,", "more_body": True},
        {"type": "http.request", "more_body": True},  # ASGI: body may be left out
        {"type": "http.request", "body": b"2]"},  # and more_body too
    ]
    received: list[dict[str, Any]] = []
    sent, _ = _through_guard(chunked, method="POST", body=parts, received=received)
    assert sent[0]["status"] == 200
    # The app reads the body once, whole, then the live channel (the client left).
    assert received == [
        {"type": "http.request", "body": b"[1,2]", "more_body": False},
        {"type": "http.disconnect"},
    ]
    half = {"type": "http.request", "body": b"[" + b"0," * 299, "more_body": True}
    sent, read = _through_guard(chunked, method="POST", body=[half, half, half])
    assert _status(sent) == (
        413,
        f"the request body passed {LIMIT} bytes, the most this server accepts; "
        "refused without reading the rest",
    )
    assert read == []
    deep = [{"type": "http.request", "body": b"[" * (DEPTH + 1) + b"]" * (DEPTH + 1)}]
    sent, read = _through_guard(chunked, method="POST", body=deep)
    assert _status(sent) == (
        400,
        f"the JSON body nests arrays/objects more than {DEPTH} deep; flatten it",
    )


def test_other_scopes_reach_the_app_untouched() -> None:
    seen: list[tuple[Any, Any, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope, receive, send))

    async def receive() -> dict[str, Any]:
        return {"type": "lifespan.startup"}

    async def send(message: dict[str, Any]) -> None:
        pass

    scope = {"type": "lifespan"}
    asyncio.run(Guard(app, GuardConfig(token=TOKEN))(scope, receive, send))
    assert seen == [(scope, receive, send)]


def test_tokens_are_found_in_every_form_a_client_sends() -> None:
    padded = "A" * 20 + "=="  # base64 padding is part of a token
    guard_config = GuardConfig(token=padded)
    cases = [
        ([HOST, (b"authorization", f"Bearer  {padded}".encode())], b"", True),
        ([HOST, (b"authorization", f"bearer {padded}".encode())], b"", True),
        ([HOST, (b"cookie", f"a=b;toolfold-token-8000={padded}".encode())], b"", True),
        ([HOST, (b"cookie", f"toolfold-token-9000={padded}".encode())], b"", False),
        ([HOST], f"x=1&token={padded}".encode(), True),
    ]
    for headers, query, ok in cases:
        sent: list[dict[str, Any]] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})

        async def send(message: dict[str, Any], sent: list[Any] = sent) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        scope = {
            "type": "http",
            "method": "GET",
            "path": "/",
            "query_string": query,
            "headers": headers,
            "server": ("127.0.0.1", 8000),
        }
        asyncio.run(Guard(app, guard_config)(scope, receive, send))
        assert (sent[0]["status"] == 200) is ok, (headers, query)
    sent, _ = _through_guard([HOST, (b"authorization", b"Bearer wrong")])
    assert _status(sent)[
        1
    ] == "this server needs its token and the request carried a wrong token: " + (
        "send it as 'Authorization: Bearer <token>'"
    )
    # ?token= counts on GET and HEAD only, and sets the cookie named for the port (0: none).
    for method, status in (("HEAD", 200), ("DELETE", 401)):
        sent, _ = _through_guard([HOST], method=method, query=f"token={TOKEN}".encode())
        assert sent[0]["status"] == status, method
    sent, _ = _through_guard([HOST], query=f"token={TOKEN}".encode(), scope={"server": None})
    assert (
        b"set-cookie",
        f"toolfold-token-0={TOKEN}; Path=/; HttpOnly; SameSite=Strict".encode(),
    ) in sent[0]["headers"]


def test_a_websocket_may_carry_its_token_in_the_address_and_long_reasons_are_cut_whole() -> None:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope["type"], receive, send))

    async def attempt(headers: list[tuple[bytes, bytes]], query: bytes) -> list[Any]:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "websocket.connect"}

        scope = {"type": "websocket", "path": "/", "headers": headers, "query_string": query}
        before = len(seen)
        await Guard(app, GuardConfig(token=TOKEN))(scope, receive, send)
        if len(seen) > before:  # let through: the app talks to the client directly
            assert seen[-1][1:] == (receive, send)
        return sent

    assert asyncio.run(attempt([HOST], f"token={TOKEN}".encode())) == []
    assert [kind for kind, *_ in seen] == ["websocket"]
    # A refusal's reason is cut to the 123 bytes a close frame holds, never inside a character.
    host = ("é" * 80).encode("latin-1")
    sent = asyncio.run(attempt([(b"host", host)], b""))
    reason = sent[0]["reason"]
    assert reason == f"Host {'é' * 80!r}".encode()[:122].decode() and len(reason.encode()) == 122


def test_host_and_origin_checks_at_their_edges() -> None:
    # No Host at all: refused as not allowed, not a crash.
    sent, _ = _through_guard([BEARER])
    assert _status(sent)[0] == 403 and _status(sent)[1].startswith("Host '' is not allowed")
    # A page's own origin passes whatever the case of the name.
    own = [(b"host", b"LocalHost:8000"), (b"origin", b"http://localhost:8000"), BEARER]
    assert _through_guard(own)[0][0]["status"] == 200
    assert allowed_hosts(None, "box.lan") == LOOPBACK_HOSTS | {"box.lan"}
    with pytest.raises(ValueError) as refused:
        allowed_hosts("box.lan:80")
    assert str(refused.value) == (
        "'box.lan:80' is not a host name: give a bare name or address such as "
        "'box.lan', '192.168.1.5' or '[fe80::1]' (no scheme, port or path)"
    )


def test_two_host_headers_are_refused_and_malformed_names_are_not_hosts() -> None:
    sent, _ = _through_guard([HOST, (b"host", b"localhost"), BEARER])
    assert _status(sent)[0] == 403 and _status(sent)[1].startswith("Host '' is not allowed")
    for bad in ("[::1", "[10.0.0.1]", "zz::1", "1:2", "box.lan]"):
        with pytest.raises(ValueError, match="is not a host name"):
            allowed_hosts(bad)


def test_a_config_refuses_what_it_cannot_enforce_in_one_line() -> None:
    make = "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe())'"
    for token, said in (("", "got 0 characters; "), ("short", "got 5 characters with others; ")):
        with pytest.raises(ValueError) as info:
            GuardConfig(token=token)
        assert str(info.value) == (
            f"the server token must be 16-512 characters of A-Z a-z 0-9 . _ ~ + / = -, {said}{make}"
        )
    assert GuardConfig(token=TOKEN, max_body_bytes=1, max_json_depth=1).max_body_bytes == 1
    for body, depth in ((0, 5), (5, 0)):
        with pytest.raises(ValueError) as info:
            GuardConfig(token=TOKEN, max_body_bytes=body, max_json_depth=depth)
        assert str(info.value) == (
            f"max_body_bytes and max_json_depth must be positive, got {body} and {depth}"
        )

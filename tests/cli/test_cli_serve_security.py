"""``toolfold serve`` is not a remote shell for a web page: each attack, performed against
a real server (uvicorn in a ``toolfold serve`` process), is refused and runs nothing.

The attack is the one a page in the user's browser could make:
``POST /v1/lanes/main/commands`` with ``{"command": "id > .../pwned"}``, sent as a
"simple" cross-site request (text/plain, a form), from a foreign Origin, through a
rebound DNS name (foreign Host), without or with a wrong token, or as a body too
large or too deep to handle. Each test also makes the same request the right way
and sees it work, so a refusal is the check's doing, not a broken server.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import (
    AUTH,
    TOKEN,
    LineReader,
    clean_env,
    free_port,
    one_error_line,
    serve,
    toolfold,
    wait_for,
)
from cli_helpers import start as start_toolfold

JSON = {"Content-Type": "application/json"}


class Server:
    """A running ``toolfold serve``: its process, base URL and port."""

    def __init__(self, proc: subprocess.Popen[bytes], base: str) -> None:
        self.proc = proc
        self.base = base
        self.port = int(base.rsplit(":", 1)[1])

    def post(self, lane: str, command: str, **kw: Any) -> httpx.Response:
        headers = {**AUTH, **JSON, **kw.pop("headers", {})}
        return httpx.post(
            f"{self.base}/v1/lanes/{lane}/commands",
            json={"command": command},
            headers=headers,
            timeout=10,
            **kw,
        )

    def calls(self, session: str) -> list[Any]:
        r = httpx.get(f"{self.base}/v1/sessions/{session}/calls", headers=AUTH, timeout=10)
        if r.status_code == 404:
            return []
        assert r.status_code == 200, r.text
        calls: list[Any] = r.json()["calls"]
        return calls

    def settled(self, session: str, n: int) -> list[Any]:
        """Wait until session holds ``n`` settled calls; returns them."""

        def probe() -> list[Any] | None:
            calls = self.calls(session)
            return calls if len(calls) == n and all(c["settled"] for c in calls) else None

        return wait_for(probe, f"{n} settled calls in session {session!r}", proc=self.proc)

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        assert match, status
        return int(match.group(1))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server as Ctrl-C does (killing it if it does not stop)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    started: list[subprocess.Popen[bytes]] = []

    def _launch(*args: str) -> Server:
        proc, base = serve(f"sqlite:{tmp_path / 'toolfold.db'}", tmp_path, *args)
        started.append(proc)
        return Server(proc, base)

    yield _launch
    for proc in started:
        _stop(proc)


def test_every_attack_is_refused_and_the_attack_file_is_never_created(
    tmp_path: Path, launch: Callable[..., Server]
) -> None:
    server = launch()
    pwned = tmp_path / "pwned"
    attack = json.dumps({"command": f"id > {pwned}"})
    url = f"{server.base}/v1/lanes/main/commands"
    evil_host = {"Host": f"evil.example:{server.port}"}
    attempts: list[tuple[str, dict[str, str], str | bytes, int, str]] = [
        # what, headers, body, status, start of the error
        (
            "the issue's curl: text/plain, no token",
            {"Content-Type": "text/plain", "Origin": "http://evil.example"},
            attack,
            403,
            "Origin 'http://evil.example'",
        ),
        (
            "text/plain, no Origin, no token",
            {"Content-Type": "text/plain"},
            attack,
            401,
            "this server needs its token and the request carried no token",
        ),
        (
            "text/plain with the token",
            {**AUTH, "Content-Type": "text/plain"},
            attack,
            415,
            "Content-Type 'text/plain' is not accepted",
        ),
        (
            "a form post with the token",
            {**AUTH, "Content-Type": "application/x-www-form-urlencoded"},
            f"{attack}=",
            415,
            "Content-Type 'application/x-www-form-urlencoded'",
        ),
        (
            "a text/plain form (the JSON-in-a-form trick)",
            {**AUTH, "Content-Type": "text/plain"},
            attack[:-2] + '", "x": "="}',
            415,
            "Content-Type",
        ),
        (
            "a foreign Origin with the token",
            {**AUTH, **JSON, "Origin": "http://evil.example"},
            attack,
            403,
            "Origin 'http://evil.example' is not this server's",
        ),
        (
            "another port of this host",
            {**AUTH, **JSON, "Origin": "http://127.0.0.1:1"},
            attack,
            403,
            "Origin 'http://127.0.0.1:1' is not this server's",
        ),
        (
            "DNS rebinding: a foreign Host with the token",
            {**AUTH, **JSON, **evil_host},
            attack,
            403,
            f"Host 'evil.example:{server.port}' is not allowed",
        ),
        ("JSON, no token", JSON, attack, 401, "this server needs its token"),
        (
            "JSON, a wrong token",
            {**JSON, "Authorization": "Bearer " + "x" * 43},
            attack,
            401,
            "this server needs its token and the request carried a wrong token",
        ),
        (
            "another port's cookie",
            {**JSON, "Cookie": f"toolfold-token-1={TOKEN}"},
            attack,
            401,
            "this server needs its token",
        ),
    ]
    for what, headers, body, status, error in attempts:
        r = httpx.post(url, content=body, headers=headers, timeout=10)
        assert r.status_code == status, (what, r.status_code, r.text)
        assert r.json()["error"].startswith(error), (what, r.json())
        if status == 401:
            assert "printed at start (it carries ?token=)" in r.json()["error"]
    # The token in the address of a POST (a form's action) is not accepted either.
    r = httpx.post(f"{url}?token={TOKEN}", content=attack, headers=JSON, timeout=10)
    assert r.status_code == 401

    # The control: the same request, made right, runs; the attacks never did.
    control = tmp_path / "control"
    assert server.post("control", f"id > {control}").status_code == 202
    [call] = server.settled("control", 1)
    assert call["status"] == "ok" and control.read_text().startswith("uid=")
    assert not pwned.exists()
    r = httpx.get(f"{server.base}/v1/sessions", headers=AUTH, timeout=10)
    assert r.json() == {"sessions": ["control"]}  # no attack reached the store


def test_a_rebound_dns_name_cannot_read_the_stored_history(
    tmp_path: Path, launch: Callable[..., Server]
) -> None:
    server = launch()
    assert server.post("build", "echo secret-build-output").status_code == 202
    server.settled("build", 1)
    path = f"{server.base}/v1/sessions/build/calls"
    for host in (f"evil.example:{server.port}", "evil.example", f"127.0.0.1.evil:{server.port}"):
        r = httpx.get(path, headers={**AUTH, "Host": host}, timeout=10)
        assert r.status_code == 403 and "secret-build-output" not in r.text
        assert r.json()["error"].startswith(f"Host {host!r} is not allowed")
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}"):
        r = httpx.get(path, headers={**AUTH, "Host": host}, timeout=10)
        assert r.status_code == 200 and "secret-build-output" in r.text
    # The viewer page and its script are behind the token too.
    assert httpx.get(f"{server.base}/", timeout=10).status_code == 401
    assert httpx.get(f"{server.base}/static/viewer.js", timeout=10).status_code == 401


def test_an_oversized_declared_body_is_refused_before_it_is_sent(
    launch: Callable[..., Server],
) -> None:
    server = launch()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        # Headers only: the server answers without waiting for a gigabyte of body.
        sock.sendall(
            (
                f"POST /v1/lanes/main/commands HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {10**9}\r\n\r\n"
            ).encode()
        )
        answer = _read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body == {
        "error": "the request body is 1000000000 bytes; this server accepts at most 394240"
    }


def test_a_chunked_body_is_refused_once_it_passes_the_limit_without_reading_the_rest(
    launch: Callable[..., Server],
) -> None:
    server = launch()
    rss_before = server.rss_kib()
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"  # 64 KiB per chunk
    total_chunks = 16 * 1024  # 1 GiB if the server read it all
    sent = 0
    answer = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST /v1/lanes/main/commands HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            ).encode()
        )
        try:
            for _ in range(total_chunks):
                if select.select([sock], [], [], 0)[0]:
                    break  # the server has answered (or hung up)
                sock.sendall(chunk)
                sent += len(chunk)
            answer = _read_answer(sock)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it closed the connection on us: the rest was refused
    # The server stopped taking the body long before its end: the kernel buffers on
    # both sides hold a few MiB at most.
    assert sent < 64 * 1024 * 1024, sent
    if answer:
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"the request body passed 394240 bytes" in answer
    # And it did not hold what it read: no growth near the size of the body.
    assert server.rss_kib() - rss_before < 64 * 1024
    # It still serves.
    assert server.post("main", "true").status_code == 202


def test_nesting_too_deep_is_a_400_not_a_recursion_error(launch: Callable[..., Server]) -> None:
    server = launch()
    deep = b'{"command": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = httpx.post(
        f"{server.base}/v1/lanes/main/commands",
        content=deep,
        headers={**AUTH, **JSON},
        timeout=10,
    )
    assert r.status_code == 400
    assert r.json() == {"error": "the JSON body nests arrays/objects more than 64 deep; flatten it"}
    # One level inside the limit is parsed (and refused for what it is: not a string).
    shallow = b'{"command": ' + b"[" * 63 + b"]" * 63 + b"}"
    r = httpx.post(
        f"{server.base}/v1/lanes/main/commands",
        content=shallow,
        headers={**AUTH, **JSON},
        timeout=10,
    )
    assert r.status_code == 400 and r.json()["error"].startswith('field "command" must be')


def _read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (bounded)."""
    data = b""
    for _ in range(1000):
        try:
            part = sock.recv(65536)
        except ConnectionResetError:
            break
        if not part:
            break
        data += part
    return data


def _started(proc: subprocess.Popen[bytes]) -> tuple[LineReader, str]:
    err = LineReader(proc.stderr)
    line = wait_for(
        lambda: next((x for x in err.lines() if "serving http" in x), None),
        "the serving line",
        proc=proc,
    )
    return err, line


def test_serve_prints_a_random_token_in_the_viewer_url(tmp_path: Path) -> None:
    port = free_port()
    proc = start_toolfold(
        "serve", "--port", str(port), "--store", f"sqlite:{tmp_path / 't.db'}", cwd=tmp_path
    )
    try:
        _err, line = _started(proc)
        match = re.search(rf"serving (http://127\.0\.0\.1:{port}/\?token=([A-Za-z0-9_-]+)) ", line)
        assert match, line
        url, token = match.groups()
        assert len(token) >= 43  # secrets.token_urlsafe(32)
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{url.split('?')[0]}v1/sessions", headers=auth, timeout=10).json() == {
            "sessions": []
        }
        assert httpx.get(url, timeout=10).status_code == 200  # the printed URL opens the viewer
        assert httpx.get(f"http://127.0.0.1:{port}/v1/sessions", timeout=10).status_code == 401
    finally:
        _stop(proc)


def test_token_comes_from_the_environment_and_the_flag_wins(tmp_path: Path) -> None:
    env_token, flag_token = "e" * 24, "f" * 24
    port = free_port()
    env = {**clean_env(), "TOOLFOLD_TOKEN": env_token}
    url = f"sqlite:{tmp_path / 't.db'}"
    for args, works, refused in (
        ((), env_token, flag_token),
        (("--token", flag_token), flag_token, env_token),
    ):
        proc = start_toolfold(
            "serve", "--port", str(port), "--store", url, *args, cwd=tmp_path, env=env
        )
        try:
            _err, line = _started(proc)
            assert f"?token={works} " in line
            base = f"http://127.0.0.1:{port}/v1/sessions"
            ok = httpx.get(base, headers={"Authorization": f"Bearer {works}"}, timeout=10)
            assert ok.status_code == 200
            no = httpx.get(base, headers={"Authorization": f"Bearer {refused}"}, timeout=10)
            assert no.status_code == 401
        finally:
            _stop(proc)


def test_allow_host_adds_a_name(launch: Callable[..., Server]) -> None:
    server = launch("--allow-host", "box.lan", "--allow-host", "Other.Example")
    path = f"{server.base}/v1/sessions"
    for host, status in (
        (f"box.lan:{server.port}", 200),
        ("other.example", 200),
        (f"[::1]:{server.port}", 200),
        (f"box.lan.evil:{server.port}", 403),
        (f"evil.example:{server.port}", 403),
    ):
        r = httpx.get(path, headers={**AUTH, "Host": host}, timeout=10)
        assert r.status_code == status, (host, r.text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--token", "short"), "--token (or TOOLFOLD_TOKEN): the server token must be 16-512"),
        (("--token", "has spaces in it, quite long"), "the server token must be 16-512"),
        (("--allow-host", "box.lan:8765"), "--host / --allow-host: 'box.lan:8765' is not a host"),
        (("--allow-host", "http://box.lan"), "'http://box.lan' is not a host name"),
    ],
)
def test_bad_token_or_host_is_one_error_line(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    proc = toolfold("serve", "--store", f"sqlite:{tmp_path / 't.db'}", *args, cwd=tmp_path)
    assert message in one_error_line(proc)
    assert not (tmp_path / "t.db").exists()  # refused before anything was opened


def test_a_non_loopback_host_warns_and_keeps_commands_off(
    tmp_path: Path, launch: Callable[..., Server]
) -> None:
    # Bound to every interface for the length of this test only; the server needs the
    # token, refuses foreign Host names, and (the point of the test) runs no command.
    server = launch("--host", "0.0.0.0")
    err = LineReader(server.proc.stderr)
    ran = tmp_path / "ran"
    r = server.post("main", f"touch {ran}")
    assert r.status_code == 403
    assert r.json()["error"] == (
        "commands are off: this server listens on 0.0.0.0, beyond this machine; "
        "restart toolfold serve with --allow-commands to run them"
    )
    # Reading works as usual (with the token).
    assert httpx.get(f"{server.base}/v1/sessions", headers=AUTH, timeout=10).status_code == 200
    _stop(server.proc)
    assert (
        "toolfold: warning: listening on 0.0.0.0, not only on this machine: anyone on the "
        "network who has the token can read the stored sessions; posted commands are off "
        "(--allow-commands turns them on); the traffic, token included, is plain HTTP"
    ) in err.text()
    assert not ran.exists()

    allowed = launch("--host", "0.0.0.0", "--allow-commands")
    assert allowed.post("main", f"touch {ran}").status_code == 202
    allowed.settled("main", 1)
    assert ran.exists()


def test_a_connection_that_never_finishes_its_headers_is_closed(
    launch: Callable[..., Server],
) -> None:
    # Slowloris: headers begun and never ended, before any check can run. uvicorn alone
    # holds such a connection forever; toolfold's protocol closes it after 10 s.
    server = launch()
    slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
    try:
        slow[0].sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        slow[1].sendall(b"G")
        # slow[2] sends nothing at all.
        # Meanwhile the server answers everyone else.
        r = httpx.get(f"{server.base}/v1/sessions", headers=AUTH, timeout=10)
        assert r.status_code == 200
        for sock in slow:
            sock.settimeout(60)  # a bound on the wait, far above the 10 s deadline
            assert sock.recv(1024) == b"", "the server answered instead of closing"
    finally:
        for sock in slow:
            sock.close()
    # A kept-alive connection gets the same deadline for its next request's headers.
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(
            f"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        sock.settimeout(60)
        answer = b""
        while not answer.endswith(b'{"sessions":[]}'):
            part = sock.recv(65536)
            assert part, answer
            answer += part
        assert answer.startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert sock.recv(1024) == b""

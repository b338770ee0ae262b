"""Fixtures for the replication tests: a uvicorn server in a thread, headless Chromium."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class ServerThread:
    """Serve an ASGI app with uvicorn on <host, 127.0.0.1>:<free port> in a background thread.

    The socket is bound before the thread starts, so a client may connect at once
    (the kernel queues it until uvicorn accepts): no readiness polling needed.
    ``token`` is the app's token (``create_app`` makes a random one); ``client()``
    sends it.
    """

    def __init__(self, app: Any, token: str | None = None, host: str = "127.0.0.1") -> None:
        import uvicorn

        self.app = app
        self.token: str = token if token is not None else app.state.toolfold.guard.token
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(128)
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"

        async def asgi(scope: Any, receive: Any, send: Any) -> None:
            await app(scope, receive, send)

        # uvicorn calls the app with no arguments to tell it from an app factory: a plain
        # function refuses at once, as the app's own __call__ does, but not the argument-
        # forwarding wrapper a mutation run (docs/TESTING.md) puts around it.
        self.server = uvicorn.Server(
            uvicorn.Config(asgi, log_level="warning", lifespan="on", timeout_graceful_shutdown=10)
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve(sockets=[self.sock]))

    def client(self, **options: Any) -> httpx.Client:
        """An HTTP client of this server that sends its token."""
        return httpx.Client(base_url=self.url, headers=self.auth, **options)

    def viewer_url(self, query: str = "") -> str:
        """The viewer's address with ``?token=`` (and ``query``), as ``toolfold serve`` prints it."""
        return f"{self.url}/?token={self.token}" + (f"&{query}" if query else "")

    def start(self) -> ServerThread:
        self.thread.start()
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 60) -> T:
        """Call ``fn`` on the server's loop (lane hosts are single-threaded)."""

        async def wrapper() -> T:
            return fn()

        return self.run(wrapper(), timeout)

    def stop(self) -> None:
        from toolfold.server import stop_streams

        # Uvicorn waits for open responses before shutting down: end the SSE
        # streams first, then ask it to exit.
        if hasattr(self.app, "state"):  # a toolfold app (not a bare ASGI app)
            self.call(lambda: stop_streams(self.app))
        self.server.should_exit = True
        self.thread.join(timeout=30)
        if self.thread.is_alive():
            raise RuntimeError("uvicorn did not stop within 30 s after the streams were closed")
        self.loop.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., ServerThread]]:
    started: list[ServerThread] = []

    def _serve(app: Any, token: str | None = None, host: str = "127.0.0.1") -> ServerThread:
        server = ServerThread(app, token, host).start()
        started.append(server)
        return server

    yield _serve
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh headless Debian Chromium profile driven by Playwright."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM}; the browser tests need it. "
            "Install it with `sudo apt-get install chromium` (or run `python3 dev.py test` "
            "as root, which installs it)"
        )
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()

"""``toolfold serve``: the web viewer and its API on uvicorn, over the chosen store."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from pathlib import Path

from ._errors import CliError
from ._store import StoreSpec, open_store


async def serve_command(spec: StoreSpec, host: str, port: int) -> int:
    """Serve until SIGINT/SIGTERM; commands posted to the API run as durable bash calls
    (lane ``L`` is session ``L`` of the store, spill files under ``spill/L/``)."""
    try:
        import uvicorn

        from toolfold.harness import Lanes
        from toolfold.server import HarnessCommands, create_app, stop_streams
    except ImportError as exc:
        raise CliError(
            f"serve needs the server extra ({exc.name} is not installed); "
            "install it with: pip install 'toolfold[server]'"
        ) from exc
    async with open_store(spec, create=True) as repo:
        lanes = Lanes()
        # The same layout as `toolfold run`: StoreSpec.spill_dir(session) is
        # <home>/spill/<session>, and the runner adds the session (= lane) name.
        runner = HarnessCommands(
            lanes, repository=repo, spill_dir=spec.home / "spill", cwd=Path.cwd()
        )
        app = create_app(lanes=lanes, run_command=runner, repository=repo)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        # uvicorn's signal capture re-raises the signal after shutdown and leaves open
        # SSE responses holding it; our handlers end the streams first, then stop.
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        loop = asyncio.get_running_loop()

        def stop() -> None:
            stop_streams(app)
            server.should_exit = True

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop)
        # Bind here rather than in uvicorn: a port in use is then our one-line error
        # (uvicorn would log and exit 3), and "serving" is printed only once it is true.
        try:
            sock = socket.create_server((host, port), reuse_port=False)
        except OSError as exc:
            raise CliError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                "pick another --port (or --host)"
            ) from exc
        print(
            f"toolfold: serving http://{host}:{port}/ (store {spec.describe()}); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(signum)
    return 0

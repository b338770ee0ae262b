"""``toolfold serve``: the web viewer and its API on uvicorn, over the chosen store."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolfold._extras import missing_extra

from ._errors import CliError
from ._store import StoreSpec, open_store

if TYPE_CHECKING:
    from toolfold.harness import Harness, ToolResult
    from toolfold.server import OrphanJanitor
    from toolfold.storage import Repository, Session


def _import_server() -> None:
    try:
        import uvicorn  # noqa: F401

        import toolfold.server  # noqa: F401
    except ImportError as exc:
        raise CliError(missing_extra("toolfold serve", "server", exc.name)) from exc


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


@dataclass(frozen=True)
class ServeOptions:
    """How ``toolfold serve`` listens and what it lets through (checked up front)."""

    host: str
    port: int
    token: str
    allow_hosts: tuple[str, ...]
    commands: bool
    """Whether posted commands run (off on a non-loopback --host without --allow-commands)."""
    orphans_lease: float | None = None
    """With ``--resume-orphans``: the lease (seconds) of the janitor, which looks for
    dead hosts' calls every half of it; ``None``: no janitor."""

    @classmethod
    def checked(
        cls,
        host: str,
        port: int,
        token: str | None,
        allow_hosts: tuple[str, ...],
        allow_commands: bool,
        orphans_lease: float | None = None,
    ) -> ServeOptions:
        """Options from the flags, or a ``CliError`` naming the bad token or host name."""
        _import_server()
        from toolfold.server import GuardConfig, allowed_hosts

        host = host.strip("[]")  # an IPv6 address, given as in a URL
        source = "--token (or TOOLFOLD_TOKEN)"
        try:
            if token is not None:
                GuardConfig(token=token)
        except ValueError as exc:
            raise CliError(f"{source}: {exc}") from exc
        try:
            allowed_hosts(host, allow_hosts)
        except ValueError as exc:
            raise CliError(f"--host / --allow-host: {exc}") from exc
        return cls(
            host=host,
            port=port,
            token=token if token is not None else secrets.token_urlsafe(32),
            allow_hosts=(host, *allow_hosts),
            commands=_is_loopback(host) or allow_commands,
            orphans_lease=orphans_lease,
        )

    @property
    def url(self) -> str:
        """The viewer's address, with the token, as a browser can open it: a wildcard
        bind (``0.0.0.0``, ``::``) is not an address to connect to, so the URL names the
        first ``--allow-host`` name, else this machine's loopback address."""
        host = self.host
        if host in _WILDCARD_BINDS:
            host = self.allow_hosts[1] if len(self.allow_hosts) > 1 else "127.0.0.1"
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/?token={self.token}"


_WILDCARD_BINDS = frozenset({"0.0.0.0", "::", "[::]"})
"""Bind addresses meaning "every interface"."""


def _janitor(spec: StoreSpec, repo: Repository, lease: float | None) -> OrphanJanitor | None:
    """``--resume-orphans``: settles dead hosts' calls as ``toolfold resume`` would (the
    same tools, spill files under ``spill/SESSION/``), as host ``hostname:pid``."""
    if lease is None:
        return None
    from toolfold.durability import default_host_id
    from toolfold.execenv import LocalExecEnv
    from toolfold.harness import Durability, DurableHooks, Harness, ToolContext
    from toolfold.server import OrphanJanitor

    from ._tools import cli_tools

    host = default_host_id()

    def harness_for(name: str, session: Session) -> Harness:
        env = LocalExecEnv(spec.spill_dir(name))
        return Harness(
            cli_tools(),
            context=ToolContext(env=env, cwd=Path.cwd()),
            hooks=DurableHooks(Durability(session, host=host, lease_ttl=lease)),
        )

    def report(name: str, results: list[ToolResult]) -> None:
        for r in results:
            print(
                f"toolfold: settled call {r.tool_call_id} of session {name} left by a dead "
                f"process ({r.outcome})",
                file=sys.stderr,
                flush=True,
            )

    return OrphanJanitor(repo, harness_for, interval=lease / 2, on_results=report)


async def serve_command(spec: StoreSpec, options: ServeOptions) -> int:
    """Serve until SIGINT/SIGTERM; commands posted to the API run as durable bash calls
    (lane ``L`` is session ``L`` of the store, spill files under ``spill/L/``)."""
    _import_server()
    import uvicorn

    from toolfold.harness import Lanes
    from toolfold.server import (
        CommandRejectedError,
        CommandRunner,
        HarnessCommands,
        create_app,
        http_protocol,
        stop_streams,
    )

    host, port = options.host, options.port
    if not _is_loopback(host):
        print(
            f"toolfold: warning: listening on {host}, not only on this machine: anyone on "
            "the network who has the token can read the stored sessions"
            + (
                " and run commands"
                if options.commands
                else "; posted commands are off (--allow-commands turns them on)"
            )
            + "; the traffic, token included, is plain HTTP",
            file=sys.stderr,
            flush=True,
        )
    async with open_store(spec, create=True) as repo:
        lanes = Lanes()
        run_command: CommandRunner
        if options.commands:
            # The same layout as `toolfold run`: StoreSpec.spill_dir(session) is
            # <home>/spill/<session>, and the runner adds the session (= lane) name.
            from toolfold.durability import default_host_id

            run_command = HarnessCommands(
                lanes,
                repository=repo,
                spill_dir=spec.home / "spill",
                cwd=Path.cwd(),
                host=default_host_id(),  # leased, like `toolfold run`'s calls
            )
        else:

            async def run_command(lane: str, command: str) -> str:
                raise CommandRejectedError(
                    f"commands are off: this server listens on {host}, beyond this machine; "
                    "restart toolfold serve with --allow-commands to run them",
                    status=403,
                )

        app = create_app(
            lanes=lanes,
            run_command=run_command,
            repository=repo,
            token=options.token,
            allow_hosts=options.allow_hosts,
            janitor=_janitor(spec, repo, options.orphans_lease),
            spill_dirs=spec.spill_dir,
        )
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            interface="asgi3",  # said, not guessed by inspecting the app
            http=http_protocol(),  # a deadline for request headers (docs/security.md)
        )
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
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.create_server((host, port), family=family, reuse_port=False)
        except OSError as exc:
            raise CliError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                "pick another --port (or --host)"
            ) from exc
        print(
            f"toolfold: serving {options.url} (store {spec.describe()}); Ctrl-C stops",
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

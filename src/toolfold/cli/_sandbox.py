"""``--sandbox PROFILE``, ``--sandbox-write PATH`` and ``--sandbox-network``: the options
that confine the commands a CLI command runs (``run``, ``mcp``, ``agent``, ``resume``,
``exec-host``), and turning them into a checked ``Sandbox``.

Defaults: commands a model chooses (``mcp``, ``agent``, ``resume``) run in
``workspace-write``; the command a user typed (``run``) and an exec host (whose client
decides, and passes ``--sandbox`` on) run unconfined unless asked. A host that cannot
confine refuses to start rather than run a model's commands unconfined; ``--sandbox
off`` is the explicit way to run them so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._errors import CliError
from ._store import StoreSpec

if TYPE_CHECKING:
    from toolfold.execenv import Sandbox

F = TypeVar("F", bound=Callable[..., Any])

CHOICES = ("read-only", "workspace-write", "off")


class SandboxOptionError(CliError):
    """Sandbox options that do not fit together, or a host that cannot confine."""


@dataclass(frozen=True)
class SandboxChoice:
    """What the sandbox options asked for (``profile`` ``"off"``: unconfined)."""

    profile: str
    writable: tuple[str, ...] = ()
    network: bool = False

    def args(self) -> list[str]:
        """The same options for another toolfold (an exec host started by this one)."""
        out = ["--sandbox", self.profile]
        for path in self.writable:
            out += ["--sandbox-write", path]
        if self.network:
            out.append("--sandbox-network")
        return out

    def build(self, hidden: Iterable[Path | str] = ()) -> Sandbox | None:
        """The checked ``Sandbox`` (``None`` for ``off``), hiding ``hidden`` too (the
        store's files, ``store_paths``). Raises ``SandboxOptionError`` (one line) when the host
        cannot confine: naming the package or the sysctl, and ``--sandbox off``."""
        if self.profile == "off":
            return None
        from toolfold.execenv import ExecConfigError, Sandbox

        try:
            sandbox = Sandbox(
                self.profile,  # type: ignore[arg-type]
                writable=self.writable,
                network=self.network,
                hidden=tuple(str(p) for p in hidden),
            )
            sandbox.check()
        except ExecConfigError as exc:
            raise SandboxOptionError(" ".join(str(exc).split())) from exc
        return sandbox


MODEL_SANDBOX = SandboxChoice("workspace-write")
"""The default for commands a model chooses (``mcp``, ``agent``)."""


def store_paths(spec: StoreSpec) -> list[Path]:
    """What of the store a confined command must not reach: the SQLite file and its
    journal files, a JSONL directory, the spill directories, and the control files of
    detached runs. Not the store's whole directory: for ``--store sqlite:toolfold.db``
    that is the workspace itself."""
    paths = [spec.home / "spill", spec.home / "detached"]
    if spec.kind == "sqlite":
        db = Path(spec.url.removeprefix("sqlite:"))
        paths += [db, *(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal"))]
    elif spec.kind == "jsonl":
        paths.append(spec.home)
    return paths


def sandbox_options(default: str, whose: str) -> Callable[[F], F]:
    """``--sandbox`` (default ``default``), ``--sandbox-write`` and ``--sandbox-network``
    (the arguments ``sandbox_profile``, ``sandbox_write``, ``sandbox_network``; see
    ``sandbox_choice``); ``whose`` names the commands confined."""
    import click  # here: a bare ``run`` builds its sandbox choice without click

    def apply(f: F) -> F:
        f = click.option(
            "--sandbox-network",
            "sandbox_network",
            is_flag=True,
            help="Let sandboxed commands use the network (default: loopback of their own only).",
        )(f)
        f = click.option(
            "--sandbox-write",
            "sandbox_write",
            multiple=True,
            metavar="PATH",
            help="Another directory sandboxed commands may write (repeatable; needs "
            "--sandbox workspace-write).",
        )(f)
        f = click.option(
            "--sandbox",
            "sandbox_profile",
            type=click.Choice(CHOICES),
            default=default,
            show_default=True,
            help=f"Confine {whose} with bubblewrap: read-only (nothing writable but a "
            "private /tmp), workspace-write (the working directory and --sandbox-write "
            "paths too), or off (unconfined). Confined commands get no network unless "
            "--sandbox-network, and do not see ~/.ssh, ~/.aws and other credentials.",
        )(f)
        return f

    return apply


def sandbox_choice(profile: str, writes: tuple[str, ...], network: bool) -> SandboxChoice:
    """The options, checked: paths made absolute and existing, combinations that fit."""
    if writes and profile != "workspace-write":
        raise SandboxOptionError(
            f"--sandbox-write needs --sandbox workspace-write, not --sandbox {profile}"
        )
    if network and profile == "off":
        raise SandboxOptionError(
            "--sandbox-network needs a sandbox; without one commands have the network"
        )
    absolute = []
    for path in writes:
        full = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(full):
            raise SandboxOptionError(
                f"--sandbox-write {path!r} is not a directory; create it first"
            )
        absolute.append(full)
    return SandboxChoice(profile, tuple(absolute), network)

"""Confined execution: a command runs inside bubblewrap (``bwrap``) with a profile.

A ``Sandbox`` turns the argv toolfold would spawn into ``bwrap <rules> -- argv`` and
filters the environment the command gets. Both profiles share these rules:

- the file system is read-only (``read-only``), or read-only except the working
  directory and the ``writable`` paths (``workspace-write``);
- a private ``/tmp``, a minimal ``/dev``, a ``/proc`` of its own;
- fresh PID, IPC, UTS, cgroup and user namespaces: the command sees, signals and traces
  only what it started, and cannot create user namespaces of its own (``--disable-userns``)
  nor keep any capability (``--cap-drop ALL``);
- no network (a network namespace holding only loopback) unless ``network=True``;
- the user's secrets hidden: ``~/.ssh``, ``~/.aws``, ``~/.config/gcloud``, ``~/.netrc``,
  ``~/.docker`` and a few more (``SECRET_PATHS``) become an empty read-only directory
  (files: an empty file), the ssh agent and container sockets are hidden, and environment
  variables holding tokens (``TOOLFOLD_TOKEN``, ``*_API_KEY``, ``*_TOKEN``, ...) are removed
  unless named in ``keep_env``;
- ``hidden`` paths (the CLI passes the store directory; ``LocalExecEnv`` adds its spill
  directory) are hidden the same way: what captures the command is out of its reach.

A rule that is broken gets the ordinary error of the OS ("Read-only file system",
"Network is unreachable", "No such file or directory").
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._errors import ExecConfigError

Profile = Literal["read-only", "workspace-write"]
PROFILES: tuple[Profile, ...] = ("read-only", "workspace-write")

SECRET_PATHS: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.config/gcloud",
    "~/.netrc",
    "~/.docker",
    "~/.gnupg",
    "~/.kube",
    "~/.git-credentials",
    "~/.config/gh",
    "~/.pypirc",
    "~/.toolfold",
)
"""Paths (``~`` is ``$HOME`` when the command starts) hidden from a confined command."""

_SOCKETS: tuple[str, ...] = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman",
    "/run/containerd",
)
"""Sockets that give whoever reaches them the host (a container daemon as root)."""

SECRET_ENV: tuple[str, ...] = (
    "TOOLFOLD_TOKEN",
    "*_API_KEY",
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_KEY",
    "*_SECRET_ACCESS_KEY",
    "*_PASSWORD",
    "SSH_AUTH_SOCK",
)
"""Environment variables (shell patterns, matched case-insensitively) removed."""

_SECRET_ENV_RE = re.compile("|".join(fnmatch.translate(p) for p in SECRET_ENV))
"""``SECRET_ENV`` as one pattern, compiled once (an environment is filtered per command)."""

_PROBE_TIMEOUT = 20.0


def _expand(path: str) -> str:
    return os.path.expanduser(path) if path.startswith("~") else path


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(_expand(os.fspath(path)))


_PLAIN: dict[tuple[str, str | None], tuple[str, bool]] = {}


def _plain(path: str, home: str | None) -> tuple[str, bool]:
    """``path`` with ``~`` expanded (``home``: the $HOME expanduser reads) and made
    absolute, and whether it has a ".." part. Kept for an absolute result: the same
    candidates are asked about for every command (whether each exists is asked anew
    each time); a relative one depends on the working directory and is not kept."""
    found = _PLAIN.get((path, home))
    if found is not None:
        return found
    expanded = _expand(path)
    found = (os.path.abspath(expanded), ".." in expanded.split("/"))
    if os.path.isabs(expanded) and len(_PLAIN) < 1024:
        _PLAIN[(path, home)] = found
    return found


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A bubblewrap confinement profile for ``LocalExecEnv(spill_dir, sandbox=...)``.

    ``profile``: ``"read-only"`` (nothing writable but the private ``/tmp``) or
    ``"workspace-write"`` (the command's working directory and ``writable`` too).
    ``network``: keep the host's network (default: loopback of its own only).
    ``hidden``: more paths to hide (a store directory). ``keep_env``: environment
    variables to pass although they look like secrets. ``bwrap``: the program.
    """

    profile: Profile = "read-only"
    writable: tuple[str, ...] = ()
    network: bool = False
    hidden: tuple[str, ...] = ()
    keep_env: tuple[str, ...] = ()
    bwrap: str = "bwrap"

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ExecConfigError(
                f"sandbox profile must be one of {', '.join(PROFILES)}, got {self.profile!r}"
            )
        for name in ("writable", "hidden", "keep_env"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise ExecConfigError(f"Sandbox {name} must be a sequence of str, got {value!r}")
            object.__setattr__(self, name, tuple(os.fspath(v) for v in value))
        if self.writable and self.profile != "workspace-write":
            raise ExecConfigError(
                f"writable paths need the workspace-write profile, not {self.profile!r} "
                f"(got writable={list(self.writable)!r})"
            )

    # -- what the command sees -----------------------------------------------------

    def hidden_paths(self, extra: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
        """Real paths hidden from the command that exist now (secrets first)."""
        out: list[str] = []
        candidates = [*SECRET_PATHS, *_SOCKETS, *self.hidden, *(os.fspath(p) for p in extra)]
        agent = os.environ.get("SSH_AUTH_SOCK")
        if agent:
            candidates.append(os.path.dirname(agent) or agent)
        runtime = f"/run/user/{os.getuid()}"
        candidates.append(runtime)
        home = os.environ.get("HOME")
        for path in candidates:
            plain, dotdot = _plain(path, home)
            if not os.path.lexists(plain) and not dotdot:
                # Nothing there: resolving its links cannot find anything either (the
                # real path names the same file; only a ".." could lead elsewhere).
                # Most candidates are absent, and realpath costs an lstat per component.
                continue
            for form in {plain, _real(path)}:
                if os.path.lexists(form) and form not in out:
                    out.append(form)
        return out

    def writable_paths(self, cwd: str) -> list[str]:
        """Real paths the command may write (none in ``read-only``)."""
        return self._writable(_real(cwd))

    def _writable(self, real_cwd: str) -> list[str]:
        if self.profile != "workspace-write":
            return []
        return [real_cwd, *(_real(p) for p in self.writable)]

    def describe(self) -> str:
        """One line for tool descriptions: what a confined command may do."""
        where = "only a private /tmp"
        if self.profile == "workspace-write":
            extra = "".join(f", {p}" for p in self.writable)
            where = f"only the working directory{extra} and a private /tmp"
        net = "have the network" if self.network else "have no network"
        return (
            f"commands may write {where}, {net}, and do not see ~/.ssh, ~/.aws or other credentials"
        )

    # -- the spawn --------------------------------------------------------------------

    def argv(
        self, inner: Sequence[str], *, cwd: str, hide: Iterable[str | os.PathLike[str]] = ()
    ) -> list[str]:
        """``bwrap <rules> -- inner`` for a command started in ``cwd``.

        Order matters: later mounts cover earlier ones, so the hidden paths come last
        (a store inside the workspace stays hidden). Raises ``ExecConfigError`` for a
        writable path that does not exist.
        """
        real_cwd = _real(cwd)
        if self.profile == "workspace-write" and real_cwd == "/":
            raise ExecConfigError(
                "a workspace-write sandbox started in / would leave the whole file system "
                "writable; run the command in a project directory, or use read-only"
            )
        args = [self.bwrap, "--unshare-all"]
        if _supports(self.bwrap, "--disable-userns"):
            args += ["--unshare-user", "--disable-userns"]
        if self.network:
            args.append("--share-net")
        args += ["--cap-drop", "ALL", "--die-with-parent"]
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        if self.profile == "read-only":
            args += ["--ro-bind", real_cwd, real_cwd]  # back after the private /tmp
        writable = self._writable(real_cwd)
        for i, path in enumerate(writable):
            # A missing cwd fails the spawn itself (ExecStartError), before bwrap runs.
            if i > 0 and not os.path.isdir(path) and not os.path.isfile(path):
                raise ExecConfigError(
                    f"sandbox writable path {path!r} does not exist; create it first "
                    "or drop it from the writable paths"
                )
            args += ["--bind", path, path]
        covered: list[str] = []  # hidden directories: nothing below them needs a mount
        visible = [real_cwd, *writable]
        for path in sorted(self.hidden_paths(hide), key=len):  # parents first
            if _within(real_cwd, path):
                raise ExecConfigError(
                    f"the working directory {real_cwd} is inside {path}, which the sandbox "
                    "hides; run the command in another directory"
                )
            if any(_within(path, d) for d in covered) or (
                # already invisible behind the private /tmp
                any(_within(path, t) for t in ("/tmp", "/var/tmp"))
                and not any(_within(path, v) or _within(v, path) for v in visible)
            ):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                covered.append(path)
                args += ["--tmpfs", path, "--remount-ro", path]
            elif not os.path.islink(path):
                args += ["--ro-bind", "/dev/null", path]
        args += ["--chdir", real_cwd, "--", *inner]
        return args

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` without the variables that look like secrets (but ``keep_env``)."""
        keep = set(self.keep_env)
        secret = _SECRET_ENV_RE.match
        return {
            name: value
            for name, value in env.items()
            if name in keep or secret(name.upper()) is None
        }

    def check(self) -> None:
        """Raise ``ExecConfigError`` (one line, naming the package or the sysctl) when
        this host cannot confine commands with bubblewrap."""
        problem = unavailable(self.bwrap, self.network)
        if problem is not None:
            raise ExecConfigError(
                f"cannot confine commands: {problem}; or run them unconfined explicitly "
                "(--sandbox off, or sandbox=None)"
            )

    # -- the path policy of the built-in file tools -------------------------------------

    def read_check(
        self, *, cwd: str | os.PathLike[str], allow: Iterable[str | os.PathLike[str]] = ()
    ) -> Callable[[str | os.PathLike[str]], str | None]:
        """For the file tools: a function telling why a path may not be read in this
        sandbox (``None`` when it may), computed once for a whole walk.

        The command's view: hidden paths (secrets, the store) and the host's ``/tmp``
        and ``/var/tmp`` (the command has private ones) are refused, except below the
        working directory, the ``writable`` paths and ``allow`` (a spill directory:
        the tools page through the command's own output). Links are resolved first.
        """
        hidden = self.hidden_paths()
        visible = [_real(cwd), *(_real(p) for p in self.writable)]
        allowed = [_real(p) for p in allow]

        def check(path: str | os.PathLike[str]) -> str | None:
            real = _real(path)
            if any(_within(real, a) for a in allowed):
                return None
            for secret in hidden:
                if _within(real, secret):
                    return f"{os.fspath(path)} is hidden by the {self.profile} sandbox"
            for private in ("/tmp", "/var/tmp"):
                if _within(real, private) and not any(_within(real, v) for v in visible):
                    return (
                        f"{os.fspath(path)} is outside what the {self.profile} sandbox shows "
                        f"(commands have a private {private})"
                    )
            return None

        return check


@functools.cache
def _supports(bwrap: str, option: str) -> bool:
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in done.stdout


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


@functools.cache
def unavailable(
    bwrap: str = "bwrap", network: bool = False, proc_sys: str = "/proc/sys"
) -> str | None:
    """Why ``bwrap`` cannot confine a command here (cached per process), or ``None``."""
    import shutil  # only when confining: a run without a sandbox does not import it

    found = shutil.which(bwrap)
    if found is None:
        return (
            f"{bwrap!r} (bubblewrap) is not installed; install the package bubblewrap "
            "(apt-get install bubblewrap)"
        )
    sysctl = Path(proc_sys)
    if _read_int(sysctl / "user" / "max_user_namespaces") == 0:
        return (
            "user namespaces are disabled (sysctl user.max_user_namespaces=0); "
            "enable them with sysctl -w user.max_user_namespaces=15000"
        )
    if os.geteuid() != 0:
        if _read_int(sysctl / "kernel" / "unprivileged_userns_clone") == 0:
            return (
                "unprivileged user namespaces are disabled (sysctl "
                "kernel.unprivileged_userns_clone=0); enable them with "
                "sysctl -w kernel.unprivileged_userns_clone=1"
            )
        if _read_int(sysctl / "kernel" / "apparmor_restrict_unprivileged_userns") == 1:
            return (
                "AppArmor restricts unprivileged user namespaces (sysctl "
                "kernel.apparmor_restrict_unprivileged_userns=1); set it to 0 or give "
                "bwrap an AppArmor profile allowing userns"
            )
    probe = Sandbox(network=network, bwrap=found).argv(["true"], cwd="/")
    try:
        done = subprocess.run(
            probe,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{found} could not be run ({exc})"
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        said = lines[-1].strip() if lines else f"exit status {done.returncode}"
        if "namespace" in said.lower():
            return (
                f"{found} cannot create namespaces ({said}); check the sysctls "
                "user.max_user_namespaces and kernel.unprivileged_userns_clone"
            )
        return f"{found} fails here ({said})"
    return None

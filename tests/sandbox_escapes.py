"""The escape attempts a confined command makes, shared by the exec env tests and the
``toolfold mcp`` tests: each is a bash command and a check of its output and of the host.

A ``Scene`` is the host the attempts work against: a fake home with planted secrets, a
workspace (the command's cwd) holding a symlink to a secret, a directory outside it, a
store and spill directory, a TCP server on 127.0.0.1 and a victim process whose
environment holds a token. Every check asserts the ordinary OS error the command got,
that no secret reached its output, and that the host shows nothing of the attempt.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_fixture import SECRET

ESCAPED = "ESCAPED-7f3a"
"""Written by every write attempt: finding it on the host is an escape."""


@dataclass
class Scene:
    home: Path
    ws: Path
    outside: Path
    store: Path
    spill: Path
    port: int
    victim: int
    profile: str
    accepted: list[int] = field(default_factory=list)
    records: str | None = None
    """Files in the store that record the commands themselves (a server's database)."""

    @property
    def store_file(self) -> Path:
        return self.store / "toolfold.db"


def snapshot(root: Path) -> dict[str, object]:
    """Every path below ``root`` with its content (files), target (links) or mode."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_file():
                out[rel] = ("file", path.read_bytes(), path.stat().st_mode)
            else:
                out[rel] = ("dir", path.stat().st_mode)
    return out


def no_escape_marker(root: Path, *, records: str | None = None) -> None:
    """No file below ``root`` is named after or holds ``ESCAPED``, except files whose
    name starts with ``records`` (a store that records the commands themselves)."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            assert ESCAPED not in name, f"{dirpath}/{name}"
            path = Path(dirpath) / name
            if records is not None and name.startswith(records):
                continue
            if path.is_file() and not path.is_symlink():
                assert ESCAPED.encode() not in path.read_bytes(), str(path)


@contextlib.contextmanager
def scene(host_dir: Path, home: Path, profile: str) -> Iterator[Scene]:
    """The host of the attempts, under ``host_dir`` (not /tmp) with ``home`` planted."""
    ws = host_dir / "ws"
    ws.mkdir()
    (ws / "key").symlink_to(home / ".ssh" / "id_ed25519")  # a repository may hold one
    (ws / "README").write_text("workspace\n")
    outside = host_dir / "outside"
    outside.mkdir()
    (outside / "data").write_text("outside\n")
    store = host_dir / "store"
    spill = store / "spill" / "s1"
    spill.mkdir(parents=True, mode=0o700)
    (spill / "exec-old.log").write_text("spilled\n")
    (store / "toolfold.db").write_text("store\n")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    victim = subprocess.Popen(
        ["sleep", "1000"], env={**os.environ, "TOOLFOLD_TOKEN": SECRET}, start_new_session=True
    )
    the = Scene(home, ws, outside, store, spill, server.getsockname()[1], victim.pid, profile)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                the.accepted.append(1)
                conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield the
    finally:
        victim.kill()
        victim.wait()
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept loop
        server.close()
        thread.join(10)


@dataclass(frozen=True)
class Attempt:
    name: str
    command: Callable[[Scene], str]
    check: Callable[[Scene, str], None]


def _write_outside(s: Scene) -> str:
    ws_write = f"echo {ESCAPED} > {s.ws}/escaped; " if s.profile == "read-only" else ""
    return (
        f"{ws_write}echo {ESCAPED} > {s.outside}/escaped; echo {ESCAPED} >> {s.outside}/data; "
        f"echo {ESCAPED} > {s.home}/escaped; touch /etc/{ESCAPED}; echo done"
    )


def _check_write_outside(s: Scene, text: str) -> None:
    assert f"{s.outside}/escaped: Read-only file system" in text
    assert f"{s.outside}/data: Read-only file system" in text
    assert f"{s.home}/escaped: Read-only file system" in text
    assert f"cannot touch '/etc/{ESCAPED}': Read-only file system" in text
    if s.profile == "read-only":
        assert f"{s.ws}/escaped: Read-only file system" in text
    assert "\ndone\n" in text  # ran to its end (stderr may arrive after it)
    assert not Path("/etc", ESCAPED).exists()
    assert (s.outside / "data").read_text() == "outside\n"


def _read_secrets(s: Scene) -> str:
    return (
        f"cat {s.home}/.ssh/id_ed25519; cat {s.home}/.aws/credentials; "
        f"cat {s.home}/.config/gcloud/credentials.db; cat {s.home}/.docker/config.json; "
        f"cat {s.home}/.netrc; ls -A {s.home}/.ssh; echo listed"
    )


def _check_read_secrets(s: Scene, text: str) -> None:
    assert SECRET not in text
    for rel in (".ssh/id_ed25519", ".aws/credentials", ".config/gcloud/credentials.db"):
        assert f"cat: {s.home}/{rel}: No such file or directory" in text
    assert text.endswith("listed\n")  # ~/.ssh lists as empty, ~/.netrc reads as empty


def _connect(s: Scene) -> str:
    return f"exec 3<>/dev/tcp/127.0.0.1/{s.port} && echo CONNECTED; echo tried"


def _check_connect(s: Scene, text: str) -> None:
    assert "CONNECTED" not in text
    assert "Connection refused" in text and text.endswith("tried\n")
    assert s.accepted == []


def _signal(s: Scene) -> str:
    ptrace = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        f"r = libc.ptrace(16, {s.victim}, 0, 0); "  # PTRACE_ATTACH
        "print('ptrace', r, os.strerror(ctypes.get_errno()))"
    )
    return f"kill -9 {s.victim}; kill -STOP {s.victim}; {sys.executable} -c {_quote(ptrace)}"


def _check_signal(s: Scene, text: str) -> None:
    assert f"kill: ({s.victim}) - No such process" in text
    assert "ptrace -1 No such process" in text
    state = Path(f"/proc/{s.victim}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state == "S"  # alive, not stopped, not traced


def _environ(s: Scene) -> str:
    return (
        f"cat /proc/{s.victim}/environ; echo token=$TOOLFOLD_TOKEN; "
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c TOOLFOLD_TOKEN"
    )


def _check_environ(s: Scene, text: str) -> None:
    assert SECRET not in text
    assert f"cat: /proc/{s.victim}/environ: No such file or directory" in text
    assert "token=\n" in text and text.endswith("0\n")


def _spill_and_store(s: Scene) -> str:
    return (
        f"ls -A {s.spill}; echo {ESCAPED} >> {s.spill}/exec-old.log; "
        f"echo {ESCAPED} > {s.spill}/{ESCAPED}.log; echo {ESCAPED} >> {s.store_file}; "
        f"rm -f {s.store_file}; echo done"
    )


def _check_spill_and_store(s: Scene, text: str) -> None:
    # The spill directory is hidden by itself (empty, read-only) or with the store.
    refused = "(Read-only file system|No such file or directory)"
    assert re.search(rf"{re.escape(str(s.spill))}/exec-old.log: {refused}", text)
    # Hidden with the store's directory (read-only), or as a file that cannot be opened.
    assert re.search(
        rf"{re.escape(str(s.store_file))}: (Read-only file system|Permission denied)", text
    )
    assert "exec-old.log\n" not in text  # nothing of the spill directory is listed
    # It ran to its end. (Not necessarily the last line: stderr and stdout are two pipes,
    # so rm's complaint may arrive after the echo.)
    assert "\ndone\n" in text
    assert s.store_file.exists()
    no_escape_marker(s.store, records=s.records)


def _outlive(s: Scene) -> str:
    return (
        f"{{ setsid sh -c 'echo REC $$ {PID_RECORD}; "
        "exec sleep 1000 >/dev/null 2>&1 </dev/null' & } | head -n 1"
    )


def _check_outlive(s: Scene, text: str) -> None:
    [line] = [x for x in text.splitlines() if x.startswith("REC ")]
    assert record_dead(line.removeprefix("REC "))


def _symlink(s: Scene) -> str:
    return f"cat key; ln -s {s.home}/.aws/credentials aws && cat aws; echo done"


def _check_symlink(s: Scene, text: str) -> None:
    assert SECRET not in text
    assert "cat: key: No such file or directory" in text
    if s.profile == "read-only":
        assert "Read-only file system" in text
    else:
        assert "cat: aws: No such file or directory" in text
    assert "\ndone\n" in text  # ran to its end (stderr may arrive after it)


ATTEMPTS = [
    Attempt("write-outside", _write_outside, _check_write_outside),
    Attempt("read-secrets", _read_secrets, _check_read_secrets),
    Attempt("connect-loopback", _connect, _check_connect),
    Attempt("kill-ptrace", _signal, _check_signal),
    Attempt("host-environ", _environ, _check_environ),
    Attempt("spill-and-store", _spill_and_store, _check_spill_and_store),
    Attempt("setsid-outlives", _outlive, _check_outlive),
    Attempt("symlink-to-secret", _symlink, _check_symlink),
]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


PID_RECORD = "$(readlink /proc/self/ns/pid)"
"""Shell words to write after a pid (``echo $! PID_RECORD > file``): the pid namespace it
is counted in, so ``record_dead`` finds the process from outside a sandbox too (inside,
``$!`` and ``$$`` are pids of the sandbox's own namespace)."""


def _record_status(record: str) -> tuple[int, str] | None:
    """The host pid and ``State`` of the process a ``PID NS`` record names (its pid in pid
    namespace NS, the last ``NSpid`` of a process), or None when it has no /proc entry."""
    pid_text, ns = record.split()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != ns:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("NSpid", "").split()[-1:] == [pid_text]:
            return int(entry.name), fields.get("State", "")
    return None


def record_dead(record: str) -> bool:
    """True when the process a ``PID NS`` record names is dead: gone or a zombie. The
    same check serves a command on the host and one in a sandbox."""
    found = _record_status(record)
    return found is None or found[1].split()[:1] in (["Z"], ["X"])


def record_pid(record: str) -> int | None:
    """The host pid of the process a ``PID NS`` record names, or None when it is gone
    (reaped: no /proc entry, not even a zombie's)."""
    found = _record_status(record)
    return None if found is None else found[0]

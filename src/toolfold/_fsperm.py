"""Private files and directories: whatever holds commands and their output is 0600 / 0700,
and nothing another user planted is ever adopted.

Used by storage (store files), execenv (spill files), the MCP proxy (its stderr log and
spill directory) and the CLI (store directories); it imports nothing else from toolfold,
so every layer may use it. Modes are set with ``chmod`` after creation, so the result
does not depend on the process umask.

The one rule, for every file and directory toolfold creates or opens for writing (the
way OpenSSH's ``StrictModes`` judges ``~/.ssh``; docs/security.md "Files in shared
directories"):

- the file or directory itself is never reached through a symbolic link (``O_NOFOLLOW``;
  creation uses ``O_EXCL``), and after opening it ``fstat`` must show it owned by you or
  root and writable by nobody else;
- the directories above it (resolved: links the user made on the way are theirs) must be
  owned by you or root and writable by nobody else, unless sticky (``/tmp``: others may
  add names there but cannot rename or remove ours). The walk stops after the first
  directory that is sticky or yours, as StrictModes stops at the home directory: above it
  is the system's layout, not a place another user could plant things for this path.
- Group-writable counts as "writable by nobody else" when the group is the owner's
  private group (named like the owner, no other member), as Debian's OpenSSH allows:
  with a umask of 002 every directory a user makes is group-writable.

A breach raises :class:`UnsafePathError`, whose text is one line naming the path, what
is wrong and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "UnsafePathError",
    "check_directory",
    "create_private_file",
    "make_private_dirs",
    "open_owned_dir",
    "open_private_dir",
    "open_private_file",
]

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class UnsafePathError(PermissionError):
    """A file or directory toolfold would write is not safe to use: a symbolic link, or
    owned or writable by another user (itself or a directory above it). ``str()`` is the
    whole one-line message; ``path`` is the file or directory that was refused."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        return str(self.args[0])


def _refuse(target: object, what: str, fix: str) -> UnsafePathError:
    return UnsafePathError(f"refusing {target}: {what}; {fix}", str(target))


def _private_group(st: os.stat_result) -> bool:
    """Whether the file's group is its owner's private group (the user-private-group
    scheme: a group named like the user, with no other member)."""
    try:
        import grp
        import pwd

        owner = pwd.getpwuid(st.st_uid)
        group = grp.getgrgid(st.st_gid)
    except (ImportError, KeyError):
        return False
    return (
        group.gr_name == owner.pw_name
        and owner.pw_gid == st.st_gid
        and set(group.gr_mem) <= {owner.pw_name}
    )


def _judge(target: object, subject: object, st: os.stat_result) -> None:
    """Owner and write bits of ``st``, the status of ``subject`` (``target`` itself or a
    directory above it)."""
    me = os.geteuid()
    where = "it" if subject is target else f"its directory {subject}"
    if st.st_uid not in (me, 0):
        fix = (
            "remove it or choose another path"
            if subject is target
            else "choose a path in a directory only you (or root) can change"
        )
        raise _refuse(target, f"{where} is owned by uid {st.st_uid}, not you (uid {me})", fix)
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
        return  # sticky: others may add names but cannot touch ours
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o002 or (mode & 0o020 and not _private_group(st)):
        who = "others" if mode & 0o002 else f"group {st.st_gid}"
        fix = f"run chmod go-w {subject}, or choose another path"
        raise _refuse(target, f"{where} is writable by {who} (mode {mode:04o})", fix)


def check_directory(directory: str | os.PathLike[str], target: object = None) -> None:
    """Judge existing ``directory`` and the directories above it (module doc). ``target``
    (default: the directory) is what the message says is refused. Raises
    ``UnsafePathError``, or ``OSError`` if it cannot be examined."""
    d = os.path.realpath(directory)
    target = d if target is None else target
    me = os.geteuid()
    while True:
        st = os.stat(d)
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(target, f"{d} is not a directory", "choose another path")
        _judge(target, d, st)
        if st.st_mode & stat.S_ISVTX or st.st_uid == me:
            return
        parent = os.path.dirname(d)
        if parent == d:
            return
        d = parent


def _check_fd(fd: int, path: object, *, directory: bool) -> None:
    st = os.fstat(fd)
    kind = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not kind:
        want = "a directory" if directory else "a regular file"
        raise _refuse(path, f"it is not {want}", "remove it or choose another path")
    _judge(path, path, st)


def _link_refusal(path: str | os.PathLike[str], exc: OSError) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and os.path.islink(path):
        return _refuse(
            path,
            f"it is a symbolic link (to {os.readlink(path)!r}); toolfold follows no link it "
            "did not create",
            "remove it or choose another path",
        )
    return exc


def open_private_file(path: str | os.PathLike[str], flags: int, *, create: bool = True) -> int:
    """Open ``path`` (``flags``: the access mode and e.g. ``O_APPEND``) under the rule:
    created 0600 with ``O_EXCL`` if missing (when ``create``), never through a symbolic
    link, and ``fstat``-checked once open. Returns the descriptor. Raises
    ``UnsafePathError`` or ``OSError`` (``FileNotFoundError`` when its directory is
    missing, or it is and not ``create``)."""
    check_directory(os.path.dirname(os.path.abspath(path)), path)
    flags |= _NOFOLLOW | _CLOEXEC
    created = False
    fd = -1
    if create:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
            created = True
        except FileExistsError:
            pass
    if fd < 0:
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            raise _link_refusal(path, exc) from exc
    try:
        if created:
            os.fchmod(fd, PRIVATE_FILE)  # whatever the umask
        else:
            _check_fd(fd, path, directory=False)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private_file(path: str | os.PathLike[str]) -> bool:
    """Make sure ``path`` is a file the rule accepts, creating it empty (0600) if missing.
    Returns whether it was created. Raises ``UnsafePathError`` or ``OSError``."""
    existed = os.path.lexists(path)
    os.close(open_private_file(path, os.O_RDONLY))
    return not existed


def open_private_dir(
    base: str | os.PathLike[str],
    *names: str,
    dir_fd: int | None = None,
    create: bool = True,
    target: object = None,
) -> int:
    """A descriptor of directory ``base/names[0]/names[1]/...``: ``base`` is judged by
    :func:`check_directory` (skipped when ``dir_fd``, a descriptor of it, is given);
    each of ``names`` is toolfold's own, so it is opened without following a link,
    created 0700 if missing (``create``), and ``fstat``-checked. ``target``: what a
    refusal of ``base`` names (default: ``base``). Raises ``UnsafePathError`` or
    ``OSError``."""
    here = Path(base)
    if dir_fd is None:
        check_directory(base, target)
        fd = os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    else:
        fd = os.dup(dir_fd)
    try:
        for name in names:
            here = here / name
            created = False
            if create:
                try:
                    os.mkdir(name, PRIVATE_DIR, dir_fd=fd)
                    created = True
                except FileExistsError:
                    pass
            try:
                child = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                raise _link_refusal(here, exc) from exc
            os.close(fd)
            fd = child
            if created:
                os.fchmod(fd, PRIVATE_DIR)  # mkdir applied the umask
            else:
                _check_fd(fd, here, directory=True)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and its missing parents, each 0700, and judge the result by the
    rule: the directories created are toolfold's (never a link), those that existed are
    the user's path. Raises ``UnsafePathError`` or ``OSError``."""
    missing: list[str] = []
    p = Path(os.path.abspath(path))
    while not os.path.lexists(p):
        missing.append(p.name)
        if p.parent == p:
            break
        p = p.parent
    os.close(open_private_dir(p, *reversed(missing), target=path if missing else None))


def open_owned_dir(directory: str | os.PathLike[str]) -> int:
    """A descriptor of ``directory``, created (0700) with its parent if missing, where the
    directory and its parent are toolfold's own (a spill directory ``spill/<session>/``
    and ``spill/``): neither may be a symbolic link, owned by another user or writable by
    one. The directories above the parent are the user's path: created if missing, links
    on it followed, and judged by the rule. Raises ``UnsafePathError`` or ``OSError``."""
    directory = Path(os.path.abspath(directory))
    parent = directory.parent
    if parent == parent.parent:  # the parent is the root directory
        return open_private_dir(parent, directory.name, target=directory)
    make_private_dirs(parent.parent)
    return open_private_dir(parent.parent, parent.name, directory.name, target=directory)

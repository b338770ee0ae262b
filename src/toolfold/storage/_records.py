"""What a commit hands back and how a store keeps values: commit results, the fsync
policy, session names, and the JSON codec of stored values. What a read hands back
(list elements, transcript entries) is in ``_entries``, imported with the first read."""

from __future__ import annotations

from typing import Literal

from toolfold import _json
from toolfold._record import record

from ._errors import CorruptStoreError, StorageError
from ._writes import JSON

__all__ = [
    "CommitResult",
    "FsyncPolicy",
    "Order",
    "StoredElement",
    "check_session_name",
    "decode_json",
    "encode_json",
    "load_stored",
]

Order = Literal["asc", "desc"]

#: What a session name is made of (checked as a set: no pattern to compile at import).
_SESSION_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


@record(frozen=True, slots=True)
class CommitResult:
    """The seqs a commit assigned, one per write, in write order (empty: nothing written)."""

    seqs: tuple[int, ...]

    @property
    def last_seq(self) -> int | None:
        """The seq of the last write, or ``None`` if the commit wrote nothing."""
        return self.seqs[-1] if self.seqs else None


@record(frozen=True, slots=True)
class FsyncPolicy:
    """When a backend forces data to stable storage.

    ``main`` governs the session scope (main log / main tables), ``side`` the ephemeral
    scopes (JSONL side files). ``"commit"``: every commit is durable when ``commit()``
    returns (survives power loss). ``"none"``: data is handed to the OS at commit
    (survives a process crash, not necessarily a power loss). SQL backends have one
    database, so they use ``main`` for everything (see docs/storage.md).
    """

    main: Literal["commit", "none"] = "commit"
    side: Literal["commit", "none"] = "commit"

    def __post_init__(self) -> None:
        for field in ("main", "side"):
            v = getattr(self, field)
            if v not in ("commit", "none"):
                raise StorageError(f"FsyncPolicy.{field} must be 'commit' or 'none', got {v!r}")


def check_session_name(name: object) -> str:
    """Return ``name`` if it is a valid session name, else raise :class:`StorageError`.

    Valid: 1–128 characters of ``A-Z a-z 0-9 . _ -``, not starting with ``.`` — safe as a
    file name on every platform and never a hidden or temp file.
    """
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= 128
        or not _SESSION_NAME_CHARS.issuperset(name)
        or name.startswith(".")
    ):
        raise StorageError(
            f"invalid session name {name!r}: use 1-128 characters of A-Z a-z 0-9 . _ - "
            "not starting with '.'"
        )
    return name


def encode_json(value: object) -> bytes:
    """Encode an already-checked JSON value (see ``check_json``) as compact UTF-8 bytes."""
    return _json.dumps(value)


def decode_json(data: bytes | str, *, path: str, record: int | str | None = None) -> JSON:
    """Decode stored JSON; malformed data is a :class:`CorruptStoreError` naming where."""
    try:
        result: JSON = _json.loads(data)
    except _json.DecodeError as exc:
        raise CorruptStoreError(
            f"{path}: record {record} is not valid JSON ({exc}); the store is damaged",
            path=path,
            record=record,
        ) from exc
    return result


class StoredElement:
    """A list element or entry as the in-process backends (memory, JSONL) index it: the
    encoded JSON its commit wrote, so a read decodes a fresh value and a caller can never
    mutate the store through what it read."""

    __slots__ = ("data", "seq", "tag")

    def __init__(self, seq: int, data: bytes, tag: str | None) -> None:
        self.seq = seq
        self.data = data
        self.tag = tag


def load_stored(data: bytes) -> JSON:
    """Decode JSON this process encoded itself (a :class:`StoredElement`'s, or an indexed
    value's), so there is no damage to report."""
    result: JSON = _json.loads(data)
    return result

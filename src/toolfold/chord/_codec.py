"""The wire codec: per-stream path compression (short forms within a batch, interned ids across)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._errors import PathError, ShapeError
from ._ops import Op, Path, WireOp, check_op, check_wire_op, describe

__all__ = ["Decoder", "Encoder"]

_PathKey = tuple[str | int, ...]
_MISSING: Any = object()


def _ops_list(ops: Any, what: str) -> list[Any] | tuple[Any, ...]:
    if type(ops) is list or type(ops) is tuple:
        return ops
    if isinstance(ops, str | bytes | dict) or not isinstance(ops, Iterable):
        raise ShapeError(
            f"{what} is not iterable: a batch must be a list of ops, got {describe(ops)}"
        )
    return list(ops)


class Encoder:
    """Encodes decoded batches of one stream into wire batches.

    Two compressions and nothing else: an op on the same path as the previous op *of the same
    batch* drops its path (short form); a path used a second time, not adjacently, is defined as
    ``["#", id, path]`` right before the op, and later ops write the ``id``. ``r`` resets
    everything, so the wire after a base batch depends on nothing before it.

    Use one encoder per stream, paired with one :class:`Decoder` on each reader. The wire ops
    share payload objects with the input ops (serialise them; do not mutate them).
    """

    __slots__ = ("_ids", "_seen")

    def __init__(self) -> None:
        # Path identity is the path's JSON text; a tuple of normalised segments is the same
        # identity (str "0" and int 0 stay distinct; whole floats were normalised to int).
        self._ids: dict[_PathKey, int] = {}
        self._seen: set[_PathKey] = set()

    def reset(self) -> None:
        """Forget every path and id (what an ``r`` does; for a reader that restarts)."""
        self._ids = {}
        self._seen = set()

    def encode(self, ops: Iterable[Any]) -> list[WireOp]:
        """Encode one batch. Ops are validated first: on error nothing is emitted and the
        encoder's tables are unchanged."""
        batch = [check_op(op, f"op {i}") for i, op in enumerate(_ops_list(ops, "batch"))]
        ids = self._ids
        seen = self._seen
        out: list[WireOp] = []
        prev: _PathKey | None = None  # resets per batch: a skipped batch cannot misattach ops
        for op in batch:
            verb = op[0]
            if verb == "r":
                ids = self._ids = {}
                seen = self._seen = set()
                prev = None
                out.append(op)
                continue
            path: Path = op[1]
            key = tuple(path)
            if key == prev:
                out.append([verb, *op[2:]])
                continue
            ident = ids.get(key)
            if ident is None:
                if key in seen:
                    # Second use: a definition now is cheaper than repeating the path later;
                    # interning on first use would lose when the path is never used again.
                    ident = len(ids)
                    ids[key] = ident
                    out.append(["#", ident, path])
                    out.append([verb, ident, *op[2:]])
                else:
                    seen.add(key)
                    out.append(op)
            else:
                out.append([verb, ident, *op[2:]])
            prev = key
        return out


class Decoder:
    """Decodes the wire batches of one stream back into long-form ops with inline paths.

    Every wire op is checked with the wire grammar, resolved (short form → previous path of
    the batch, id → its definition) and the result checked again with the strict op grammar,
    so a reserved segment is refused even when it arrives through an id.

    ``decode`` is all-or-nothing: if it raises, the id table is exactly as before the call, so
    a forged or truncated batch cannot poison later ones. A batch that decodes but then fails
    to apply has advanced the table; the host answers that with a base batch, which resets it.
    """

    __slots__ = ("_paths",)

    def __init__(self) -> None:
        self._paths: dict[int, Path] = {}

    def reset(self) -> None:
        """Forget every id (what an ``r`` does)."""
        self._paths = {}

    def decode(self, wire: Iterable[Any]) -> list[Op]:
        """Decode one wire batch into ops (validated with :func:`validate_op`).

        Raises :class:`ShapeError` for a malformed op, :class:`UnsafePathError` for a bad
        segment, :class:`PathError` for a short form without a previous path, an unknown id,
        or an empty path on ``s``/``d``/``a``/``t``.
        """
        batch = _ops_list(wire, "wire")
        table = self._paths
        undo: list[tuple[dict[int, Path], int, Any]] = []
        prev: Path | None = None
        out: list[Op] = []
        try:
            for i, raw in enumerate(batch):
                where = f"op {i}"
                verb, target, args = check_wire_op(raw, where)
                if verb == "#":
                    undo.append((table, target, table.get(target, _MISSING)))
                    table[target] = args[0]  # may redefine an id; never becomes `prev`
                    continue
                if verb == "r":
                    table = {}
                    prev = None
                    out.append(["r", args[0]])
                    continue
                if target is None:
                    if prev is None:
                        raise PathError(
                            f"unresolvable path: [] at {where}: short form {describe(raw)} has no "
                            f"previous op in this batch to take its path from",
                            path=[],
                        )
                    path = prev
                elif type(target) is int:
                    found = table.get(target)
                    if found is None:
                        raise PathError(
                            f"unresolvable path: {target} at {where}: id {target} is not defined "
                            f"in this stream (ids reset at every r; resume from a base batch "
                            f"with a fresh decoder)",
                            path=target,
                        )
                    path = found
                else:
                    path = target
                if not path and verb != "p" and verb != "m":
                    raise PathError(
                        f"unresolvable path: [] at {where}: {verb} needs a non-empty path "
                        f"(only p and m may target the root; r replaces it)",
                        path=[],
                    )
                # Strict grammar on the decoded op (never the laxer wire grammar alone).
                op = check_op([verb, path, *args], where)
                out.append(op)
                prev = path
        except BaseException:
            for owner, ident, old in reversed(undo):
                if old is _MISSING:
                    owner.pop(ident, None)
                else:
                    owner[ident] = old
            raise
        self._paths = table
        return out

"""The compact record encoding of JSONL lines: record verbs and per-file address ids.

One line of a JSONL file is one transaction: a JSON array of records.

::

    ["@", id, namespace, key]        define address id for (namespace, key)  (on its SECOND use)
    ["@", id, scope_id]              define address id for a scope id        (for "!")
    ["v", ref, seq, value]           set value
    ["l", ref, seq, element]         list append            (tag absent)
    ["l", ref, seq, element, tag]    list append with a tag
    ["x", ref, seq]                  delete value
    ["x", ref, seq, "l"]             delete list
    ["e", seq, entry]                append a settled transcript entry   (main log only)
    ["e", seq, entry, key]           ... indexed under key (a string)
    ["e", seq, entry, key, summary]  ... with a summary (key may be null)
    ["!", ref, seq]                  retire a scope                      (main log only)

``ref`` is an address id (int) or, before the address has an id, the address inline:
``[namespace, key]`` for values and lists, the scope id string for ``!``. Like Chord's
path interning, an id is defined on an address's *second* use: a definition costs more
than an address written once. Each file (main log, each side file) has its own table;
a reference to an undefined id is corruption, never a recoverable state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolfold import _json

from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress
from ._errors import CorruptStoreError, StorageError
from ._writes import (
    JSON,
    AppendEntry,
    AppendList,
    DeleteList,
    DeleteValue,
    RetireScope,
    SetValue,
    Write,
)

__all__ = ["AddressTable", "Undo", "decode_line", "encode_line", "undo"]

#: A value/list address within one file is ``(namespace, key)``; a scope address is its id.
AddrKey = tuple[str, str] | str


@dataclass
class AddressTable:
    """One file's address dictionary, shared by its writer and its reader.

    Reading a file rebuilds exactly the table its writer had, so appending after a
    reopen continues the same numbering.
    """

    ids: dict[AddrKey, int] = field(default_factory=dict)
    by_id: list[AddrKey] = field(default_factory=list)
    seen: set[AddrKey] = field(default_factory=set)


@dataclass
class Undo:
    """What one :func:`encode_line` added to a table, so a failed write can take it back
    (the table must describe the file, and the file never got the line)."""

    n_ids: int
    seen_added: list[AddrKey]


def undo(table: AddressTable, token: Undo) -> None:
    """Take back what the :func:`encode_line` that returned ``token`` added to ``table``."""
    for key in table.by_id[token.n_ids :]:
        del table.ids[key]
    del table.by_id[token.n_ids :]
    for key in token.seen_added:
        table.seen.discard(key)


def _ref(table: AddressTable, key: AddrKey, out: list[bytes], token: Undo) -> bytes:
    known = table.ids.get(key)
    if known is not None:
        return str(known).encode()
    if key in table.seen:
        new_id = len(table.by_id)
        table.ids[key] = new_id
        table.by_id.append(key)
        if isinstance(key, tuple):
            out.append(b'["@",%d,%s,%s]' % (new_id, _json.dumps(key[0]), _json.dumps(key[1])))
        else:
            out.append(b'["@",%d,%s]' % (new_id, _json.dumps(key)))
        return str(new_id).encode()
    table.seen.add(key)
    token.seen_added.append(key)
    return _json.dumps(list(key) if isinstance(key, tuple) else key)


def encode_line(
    table: AddressTable, writes: tuple[Write, ...], seqs: tuple[int, ...]
) -> tuple[bytes, list[bytes | None], Undo]:
    """Encode one transaction as one line (with its trailing newline).

    Returns the line, the encoded JSON of each write's payload (``None`` for writes
    without one; backends keep these bytes as their in-memory copy, so every value is
    encoded once), and the :class:`Undo` token to call :func:`undo` with if the line
    never reaches the file. ``table`` is updated as if the line were written.
    """
    token = Undo(len(table.by_id), [])
    try:
        line, payloads = _encode(table, writes, seqs, token)
    except BaseException:
        undo(table, token)  # nothing half-encoded may stay in the table
        raise
    return line, payloads, token


def _encode(
    table: AddressTable, writes: tuple[Write, ...], seqs: tuple[int, ...], token: Undo
) -> tuple[bytes, list[bytes | None]]:
    records: list[bytes] = []
    payloads: list[bytes | None] = []
    for w, seq in zip(writes, seqs, strict=True):
        if isinstance(w, AppendList):
            data = _json.dumps(w.element)
            ref = _ref(table, (w.address.namespace, w.address.key), records, token)
            if w.tag is None:
                records.append(b'["l",%s,%d,%s]' % (ref, seq, data))
            else:
                records.append(b'["l",%s,%d,%s,%s]' % (ref, seq, data, _json.dumps(w.tag)))
            payloads.append(data)
        elif isinstance(w, SetValue):
            data = _json.dumps(w.value)
            ref = _ref(table, (w.address.namespace, w.address.key), records, token)
            records.append(b'["v",%s,%d,%s]' % (ref, seq, data))
            payloads.append(data)
        elif isinstance(w, AppendEntry):
            data = _json.dumps(w.entry)
            if w.summary is not None:
                extra = b",%s,%s" % (_json.dumps(w.key), _json.dumps(w.summary))
            elif w.key is not None:
                extra = b",%s" % _json.dumps(w.key)
            else:
                extra = b""
            records.append(b'["e",%d,%s%s]' % (seq, data, extra))
            payloads.append(data)
        elif isinstance(w, DeleteValue):
            ref = _ref(table, (w.address.namespace, w.address.key), records, token)
            records.append(b'["x",%s,%d]' % (ref, seq))
            payloads.append(None)
        elif isinstance(w, DeleteList):
            ref = _ref(table, (w.address.namespace, w.address.key), records, token)
            records.append(b'["x",%s,%d,"l"]' % (ref, seq))
            payloads.append(None)
        else:
            ref = _ref(table, w.scope.id, records, token)
            records.append(b'["!",%s,%d]' % (ref, seq))
            payloads.append(None)
    return b"[" + b",".join(records) + b"]\n", payloads


class _Bad(Exception):
    """A structural problem inside one line (turned into CorruptStoreError by the caller)."""


def _int(v: object, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _Bad(f"{what} must be a non-negative integer, got {v!r}")
    return v


def _str(v: object, what: str) -> str:
    if not isinstance(v, str):
        raise _Bad(f"{what} must be a string, got {v!r}")
    return v


def _resolve(table: AddressTable, ref: object, *, scope_ref: bool) -> AddrKey:
    if isinstance(ref, int) and not isinstance(ref, bool):
        if not 0 <= ref < len(table.by_id):
            raise _Bad(f"address id {ref} is used but was never defined in this file")
        key = table.by_id[ref]
        if isinstance(key, tuple) == scope_ref:
            kind = "a scope" if scope_ref else "a value/list address"
            raise _Bad(f"address id {ref} is not {kind}")
        return key
    if scope_ref:
        if not isinstance(ref, str):
            raise _Bad(f"scope reference must be an id or a scope id string, got {ref!r}")
        key = ref
    else:
        if not (isinstance(ref, list) and len(ref) == 2):
            raise _Bad(f"address must be an id or [namespace, key], got {ref!r:.80}")
        key = (_str(ref[0], "namespace"), _str(ref[1], "key"))
    table.seen.add(key)
    return key


def decode_line(
    table: AddressTable, line: JSON, scope: Scope, *, path: str, lineno: int
) -> list[tuple[int, Write, JSON]]:
    """Decode one parsed line into ``(seq, write, payload)`` records of ``scope``.

    ``scope`` is the file's scope (``SESSION`` for the main log, where ``e`` and ``!``
    are allowed). Updates ``table``. Any structural problem — unknown verb, wrong
    arity, an undefined address id, a redefined id — raises :class:`CorruptStoreError`
    naming ``path`` and ``lineno``.
    """
    try:
        return _decode(table, line, scope)
    except (_Bad, StorageError) as exc:
        raise CorruptStoreError(
            f"{path}: line {lineno} is not a valid record line ({exc}); the file is damaged "
            "or was edited by hand — restore it from a backup or move it away",
            path=path,
            record=lineno,
        ) from exc


def _decode(table: AddressTable, line: JSON, scope: Scope) -> list[tuple[int, Write, JSON]]:
    if not isinstance(line, list) or not line:
        raise _Bad(f"a line must be a non-empty JSON array of records, got {line!r:.80}")
    main = scope == SESSION
    out: list[tuple[int, Write, JSON]] = []
    for i, rec in enumerate(line):
        if not isinstance(rec, list) or not rec or not isinstance(rec[0], str):
            raise _Bad(f"record {i} must be an array starting with a verb, got {rec!r:.80}")
        verb, n = rec[0], len(rec)
        w: Write
        payload: JSON = None
        if verb == "@":
            new_id = _int(rec[1] if n > 1 else None, f"record {i}: '@' id")
            if n == 4:
                key: AddrKey = (_str(rec[2], "namespace"), _str(rec[3], "key"))
            elif n == 3:
                key = _str(rec[2], "scope id")
            else:
                raise _Bad(f"record {i}: '@' takes 3 or 4 fields, got {n}")
            if new_id != len(table.by_id):
                raise _Bad(
                    f"record {i}: '@' defines id {new_id} but the next id is {len(table.by_id)}"
                )
            if key in table.ids:
                raise _Bad(f"record {i}: '@' defines {key!r} again (it is id {table.ids[key]})")
            table.ids[key] = new_id
            table.by_id.append(key)
            table.seen.add(key)
            continue
        if verb == "e":
            if n not in (3, 4, 5) or not main:
                raise _Bad(f"record {i}: 'e' takes 3 to 5 fields and only appears in the main log")
            seq = _int(rec[1], f"record {i}: seq")
            payload = rec[2]
            entry_key = None if n < 4 or rec[3] is None else _str(rec[3], "entry key")
            w = AppendEntry(payload, entry_key, rec[4] if n == 5 else None)
        elif verb == "!":
            if n != 3 or not main:
                raise _Bad(f"record {i}: '!' takes 3 fields and only appears in the main log")
            sid = _resolve(table, rec[1], scope_ref=True)
            seq = _int(rec[2], f"record {i}: seq")
            w = RetireScope(EphemeralScope(str(sid)))
        elif verb in ("v", "l", "x"):
            if n < 3:
                raise _Bad(f"record {i}: {verb!r} has too few fields ({n})")
            addr = _resolve(table, rec[1], scope_ref=False)
            if not isinstance(addr, tuple):  # pragma: no cover - _resolve checked the kind
                raise _Bad(f"record {i}: {verb!r} needs a value/list address")
            ns, k = addr
            seq = _int(rec[2], f"record {i}: seq")
            if verb == "v":
                if n != 4:
                    raise _Bad(f"record {i}: 'v' takes 4 fields, got {n}")
                payload = rec[3]
                w = SetValue(ValueAddress(ns, k, scope), payload)
            elif verb == "l":
                if n not in (4, 5):
                    raise _Bad(f"record {i}: 'l' takes 4 or 5 fields, got {n}")
                tag = None if n == 4 else _str(rec[4], "tag")
                payload = rec[3]
                w = AppendList(ListAddress(ns, k, scope), payload, tag)
            elif n == 3:
                w = DeleteValue(ValueAddress(ns, k, scope))
            elif n == 4 and rec[3] == "l":
                w = DeleteList(ListAddress(ns, k, scope))
            else:
                raise _Bad(f"record {i}: 'x' takes 3 fields, or 4 ending in \"l\"")
        else:
            raise _Bad(f"record {i}: unknown record verb {verb!r}")
        if seq == 0:
            raise _Bad(f"record {i}: seq must be >= 1")
        out.append((seq, w, payload))
    return out

"""Model-based test: random commits, retirements, bad commits and reopens; every backend
(memory included) must agree on every read with a small plain-Python model of the documented
semantics (docs/storage.md), written here and sharing no code with toolfold.storage, so that a
bug in the backends' shared base class cannot hide behind itself."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from storage_backends import BACKENDS

from toolfold.storage import (
    SESSION,
    AppendEntry,
    AppendList,
    DeleteList,
    DeleteValue,
    FsyncPolicy,
    Repository,
    RetireScope,
    Session,
    SetValue,
    StorageError,
    Write,
    append_entry,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    list_address,
    open_repository,
    retire_scope,
    set_value,
    value,
)

NAMESPACES = ["a", "b"]
KEYS = ["k1", "k2", "", "k1/é"]
EPHEMERAL = [ephemeral_scope("op1"), ephemeral_scope("op 2"), ephemeral_scope("ø/%3")]
SCOPES = [SESSION, *EPHEMERAL]
TAGS = st.sampled_from([None, None, "base", "other"])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53 - 1), 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


def scoped_write(scope: Any) -> st.SearchStrategy[Write]:
    ns, key = st.sampled_from(NAMESPACES), st.sampled_from(KEYS)
    return st.one_of(
        st.builds(lambda n, k, v: set_value(value(n, k, scope), v), ns, key, json_values),
        st.builds(lambda n, k: delete_value(value(n, k, scope)), ns, key),
        st.builds(
            lambda n, k, v, t: append_list(list_address(n, k, scope), v, t),
            ns,
            key,
            json_values,
            TAGS,
        ),
        st.builds(lambda n, k: delete_list(list_address(n, k, scope)), ns, key),
    )


#: Entry keys, some a prefix of another ("c1" of "c10"), one beyond ASCII.
ENTRY_KEYS = ["c1", "c10", "c2", "é", "\U0010ffff"]

#: The entry pages every observation compares: (keyed, order, cursor, offset, limit,
#: summaries), and the key lookups: (key, prefix, limit).
ENTRY_READS = [
    (keyed, order, cursor, offset, limit, summaries)
    for keyed in (False, True)
    for order in ("asc", "desc")
    for cursor, offset, limit, summaries in (
        (None, 0, None, False),
        (3, 1, 2, False),
        (None, 2, 1, True),
        (9, 0, 3, True),
    )
]
KEY_READS = [
    *((key, False, None) for key in ENTRY_KEYS),
    *((key, True, 2) for key in ENTRY_KEYS),
    ("", True, None),
]

session_writes = st.lists(
    st.one_of(
        scoped_write(SESSION),
        st.builds(append_entry, json_values),
        st.builds(
            append_entry,
            json_values,
            key=st.none() | st.sampled_from(ENTRY_KEYS),
            summary=json_values,
        ),
        st.builds(retire_scope, st.sampled_from(EPHEMERAL)),
    ),
    min_size=1,
    max_size=4,
)


@st.composite
def ephemeral_writes(draw: st.DrawFn) -> list[Write]:
    scope = draw(st.sampled_from(EPHEMERAL))
    return draw(st.lists(scoped_write(scope), min_size=1, max_size=4))


class PlainModel:
    """The documented store semantics in plain Python: dicts, a list of entries, one seq.

    Values are normalised through the standard library's json module (tuples become lists);
    errors are the documented exception class names."""

    def __init__(self) -> None:
        self.next_seq = 1
        self.values: dict[tuple[Any, str, str], Any] = {}
        self.lists: dict[tuple[Any, str, str], list[tuple[int, Any, str | None]]] = {}
        self.entries: list[tuple[int, Any, str | None, Any]] = []

    @staticmethod
    def _scope_of(w: Any) -> Any:
        return SESSION if isinstance(w, AppendEntry | RetireScope) else w.address.scope

    @staticmethod
    def _valid(v: Any) -> bool:
        if v is None or isinstance(v, bool | str):
            return True
        if isinstance(v, int):
            return True
        if isinstance(v, float):
            return math.isfinite(v)
        if isinstance(v, list | tuple):
            return all(PlainModel._valid(x) for x in v)
        if isinstance(v, dict):
            return all(isinstance(k, str) and PlainModel._valid(x) for k, x in v.items())
        return False

    def commit(self, writes: Any) -> Any:
        writes = list(writes() if callable(writes) else writes)
        if len({repr(self._scope_of(w)) for w in writes}) > 1:
            return ("ScopeError",)
        payloads = [
            w.value
            if isinstance(w, SetValue)
            else w.element
            if isinstance(w, AppendList)
            else w.entry
            if isinstance(w, AppendEntry)
            else None
            for w in writes
        ]
        summaries = [w.summary for w in writes if isinstance(w, AppendEntry)]
        if not all(self._valid(p) for p in payloads + summaries):
            return ("InvalidValueError",)
        for w, p in zip(writes, payloads, strict=True):
            seq, self.next_seq = self.next_seq, self.next_seq + 1
            p = json.loads(json.dumps(p))
            if isinstance(w, SetValue | DeleteValue):
                k = (w.address.scope, w.address.namespace, w.address.key)
                if isinstance(w, SetValue):
                    self.values[k] = p
                else:
                    self.values.pop(k, None)
            elif isinstance(w, AppendList | DeleteList):
                k = (w.address.scope, w.address.namespace, w.address.key)
                if isinstance(w, AppendList):
                    self.lists.setdefault(k, []).append((seq, p, w.tag))
                else:
                    self.lists.pop(k, None)
            elif isinstance(w, AppendEntry):
                self.entries.append((seq, p, w.key, json.loads(json.dumps(w.summary))))
            else:
                for table in (self.values, self.lists):
                    for k in [k for k in table if k[0] == w.scope]:
                        del table[k]
        return ("ok",)

    def read_list(
        self, addr: Any, cursor: int | None, order: str, limit: int | None, tag: str | None
    ) -> list[tuple[int, Any, str | None]]:
        elements = self.lists.get((addr.scope, addr.namespace, addr.key), [])
        if order == "asc":
            candidates = [e for e in elements if cursor is None or e[0] > cursor]
        else:
            candidates = [e for e in reversed(elements) if cursor is None or e[0] < cursor]
        page: list[tuple[int, Any, str | None]] = []
        for e in candidates:
            if limit is not None and len(page) >= limit:
                break
            page.append(e)
            if tag is not None and e[2] == tag:
                break
        return page

    def observe_cheap(self) -> list[Any]:
        live = {k[0].id for table in (self.values, self.lists) for k in table if k[0] != SESSION}
        return [self.next_seq, sorted(live), [(e[0], e[1]) for e in self.entries]]

    def read_entries(
        self,
        keyed: bool,
        order: str,
        cursor: int | None,
        offset: int,
        limit: int | None,
        summaries: bool,
    ) -> list[Any]:
        items = [e for e in self.entries if not keyed or e[2] is not None]
        if order == "asc":
            items = [e for e in items if cursor is None or e[0] > cursor]
        else:
            items = [e for e in reversed(items) if cursor is None or e[0] < cursor]
        items = items[offset:] if limit is None else items[offset : offset + limit]
        return [(e[0], None if summaries else e[1], e[2], e[3]) for e in items]

    def observe(self, reads: list[tuple[Any, ...]]) -> list[Any]:
        out = self.observe_cheap()
        for scope in SCOPES:
            for ns in NAMESPACES:
                for prefix in ("", "k1"):
                    hits = [
                        (k[2], v)
                        for k, v in self.values.items()
                        if k[0] == scope and k[1] == ns and k[2].startswith(prefix)
                    ]
                    out.append(sorted(hits, key=lambda kv: kv[0]))
                for key in KEYS:
                    out.append(self.values.get((scope, ns, key)))
                    out.append(
                        self.read_list(list_address(ns, key, scope), None, "asc", None, None)
                    )
        for keyed, order, cursor, offset, limit, summaries in ENTRY_READS:
            out.append(self.read_entries(keyed, order, cursor, offset, limit, summaries))
        for keyed in (False, True):
            out.append(sum(1 for e in self.entries if not keyed or e[2] is not None))
        for key, prefix, limit in KEY_READS:
            hits = [
                e
                for e in self.entries
                if e[2] is not None and (e[2] == key or (prefix and e[2].startswith(key)))
            ]
            out.append(hits[:limit])
        for addr, cursor, order, limit, tag in reads:
            out.append(self.read_list(addr, cursor, order, limit, tag))
        return out


def _plain(elements: list[Any]) -> list[Any]:
    return [(e.seq, e.value, e.tag) for e in elements]


async def observe_cheap(s: Session) -> list[Any]:
    entries = [(e.seq, e.value) for e in await s.read_entries()]
    return [s.next_seq, [scope.id for scope in await s.live_scopes()], entries]


async def observe(s: Session, reads: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = await observe_cheap(s)
    for scope in SCOPES:
        for ns in NAMESPACES:
            out.append(list(await s.scan_values(ns, "", scope)))
            out.append(list(await s.scan_values(ns, "k1", scope)))
            for key in KEYS:
                out.append(await s.get_value(value(ns, key, scope)))
                out.append(_plain(await s.read_list(list_address(ns, key, scope))))
    for keyed, order, cursor, offset, limit, summaries in ENTRY_READS:
        page = await s.read_entries(
            cursor=cursor,
            order=order,
            keyed=keyed,
            offset=offset,
            limit=limit,
            summaries=summaries,
        )
        out.append([(e.seq, e.value, e.key, e.summary) for e in page])
    for keyed in (False, True):
        out.append(await s.count_entries(keyed=keyed))
    for key, prefix, limit in KEY_READS:
        page = await s.entries_by_key(key, prefix=prefix, limit=limit)
        out.append([(e.seq, e.value, e.key, e.summary) for e in page])
    for addr, cursor, order, limit, tag in reads:
        page = await s.read_list(addr, cursor=cursor, order=order, limit=limit, stop_at_tag=tag)
        out.append(_plain(page))
    return out


_names = itertools.count()


def make_machine(url: str) -> type[RuleBasedStateMachine]:
    class StorageAgreesWithModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.name = f"m{next(_names)}"
            self.model = PlainModel()
            self.repo: Repository = open_repository(url, fsync=FsyncPolicy("none", "none"))
            self.real = self.run(self.repo.open_session(self.name, create=True))
            self.reads: list[tuple[Any, ...]] = []

        def run(self, aw: Any) -> Any:
            return self.loop.run_until_complete(aw)

        def commit(self, writes: Any) -> str:
            """Commit on the backend and the model; both must succeed or fail the same way."""
            try:
                self.run(self.real.commit(writes))
                real = "ok"
            except StorageError as exc:
                real = type(exc).__name__
            [model] = self.model.commit(writes)
            assert real == model, f"backend: {real}, model: {model}"
            return model

        @rule(writes=session_writes)
        def commit_session(self, writes: list[Write]) -> None:
            self.commit(writes)

        @rule(writes=ephemeral_writes())
        def commit_ephemeral(self, writes: list[Write]) -> None:
            self.commit(lambda: writes)

        @rule(scope=st.sampled_from(EPHEMERAL), extra=session_writes)
        def settle(self, scope: Any, extra: list[Write]) -> None:
            self.commit([*extra, retire_scope(scope)])

        @rule(a=ephemeral_writes(), b=session_writes)
        def mixed_commit_rejected(self, a: list[Write], b: list[Write]) -> None:
            assert self.commit([*a, *b]) == "ScopeError"

        @rule(writes=session_writes, at=st.integers(0, 4))
        def bad_value_rejected(self, writes: list[Write], at: int) -> None:
            bad = [*writes]
            bad.insert(min(at, len(bad)), set_value(value("a", "k1"), float("nan")))
            assert self.commit(bad) == "InvalidValueError"

        @rule()
        def reopen(self) -> None:
            if url == "memory:":  # its data lives in the repository object
                self.run(self.real.close())
            else:
                self.run(self.repo.close())
                self.repo = open_repository(url, fsync=FsyncPolicy("none", "none"))
            self.real = self.run(self.repo.open_session(self.name))

        @rule(
            ns=st.sampled_from(NAMESPACES),
            key=st.sampled_from(KEYS),
            scope=st.sampled_from(SCOPES),
            order=st.sampled_from(["asc", "desc"]),
            limit=st.none() | st.integers(0, 5),
            tag=st.sampled_from([None, "base", "other"]),
            data=st.data(),
        )
        def paged_read(self, data: st.DataObject, **kw: Any) -> None:
            """A paged read, checked now and again at every later full comparison. Cursors
            are mostly the seqs the list holds (and their neighbours), where an off-by-one in
            the exclusive cursor shows."""
            addr = list_address(kw["ns"], kw["key"], kw["scope"])
            if self.model.lists and data.draw(st.booleans()):
                scope, ns, key = data.draw(st.sampled_from(sorted(self.model.lists, key=repr)))
                addr = list_address(ns, key, scope)
            held = [e[0] for e in self.model.read_list(addr, None, "asc", None, None)]
            near = [c + d for c in held for d in (-1, 1)]
            edges = st.none() | st.sampled_from([0, self.model.next_seq, *near])
            cursor = data.draw(st.sampled_from(held) | edges if held else edges)
            read = (addr, cursor, kw["order"], kw["limit"], kw["tag"])
            self.reads.append(read)
            page = self.run(
                self.real.read_list(
                    addr, cursor=cursor, order=kw["order"], limit=kw["limit"], stop_at_tag=kw["tag"]
                )
            )
            assert _plain(page) == self.model.read_list(*read)

        @invariant()
        def agree_on_seq_scopes_entries(self) -> None:
            assert self.run(observe_cheap(self.real)) == self.model.observe_cheap()

        @rule()
        def agree_on_everything(self) -> None:
            assert self.run(observe(self.real, self.reads)) == self.model.observe(self.reads)

        def teardown(self) -> None:
            try:
                self.agree_on_everything()
                self.run(self.repo.close())
            finally:
                self.loop.close()

    return StorageAgreesWithModel


EXAMPLES = {"memory": 60, "jsonl": 30, "sqlite": 25, "postgres": 20}


@pytest.mark.parametrize("kind", BACKENDS)
def test_backend_agrees_with_a_plain_model(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "memory":
        url = "memory:"
    elif kind == "sqlite":
        url = f"sqlite:{tmp_path / 'model.db'}"
    elif kind == "jsonl":
        url = f"jsonl:{tmp_path}"
    else:
        url = request.getfixturevalue("postgres_url")
    run_state_machine_as_test(
        make_machine(url),
        settings=settings(
            max_examples=EXAMPLES[kind],
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )

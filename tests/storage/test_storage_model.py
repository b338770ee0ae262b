"""Model-based test: random commits, retirements, bad commits and reopens against the
Memory backend as the model; every backend must agree with it on every read."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from storage_backends import BACKENDS

from toolfold.storage import (
    SESSION,
    FsyncPolicy,
    MemoryRepository,
    Repository,
    Session,
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
    | st.integers(-(2**63), 2**63 - 1)
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


session_writes = st.lists(
    st.one_of(
        scoped_write(SESSION),
        st.builds(append_entry, json_values),
        st.builds(retire_scope, st.sampled_from(EPHEMERAL)),
    ),
    min_size=1,
    max_size=4,
)


@st.composite
def ephemeral_writes(draw: st.DrawFn) -> list[Write]:
    scope = draw(st.sampled_from(EPHEMERAL))
    return draw(st.lists(scoped_write(scope), min_size=1, max_size=4))


async def observe_cheap(s: Session) -> list[Any]:
    return [s.next_seq, await s.live_scopes(), await s.read_entries()]


async def observe(s: Session, reads: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = await observe_cheap(s)
    for scope in SCOPES:
        for ns in NAMESPACES:
            out.append(await s.scan_values(ns, "", scope))
            out.append(await s.scan_values(ns, "k1", scope))
            for key in KEYS:
                out.append(await s.get_value(value(ns, key, scope)))
                out.append(await s.read_list(list_address(ns, key, scope)))
    for addr, cursor, order, limit, tag in reads:
        out.append(
            await s.read_list(addr, cursor=cursor, order=order, limit=limit, stop_at_tag=tag)
        )
    return out


_names = itertools.count()


def make_machine(url: str) -> type[RuleBasedStateMachine]:
    class StorageAgreesWithModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.name = f"m{next(_names)}"
            self.model_repo = MemoryRepository()
            self.model = self.run(self.model_repo.open_session(self.name, create=True))
            self.repo: Repository = open_repository(url, fsync=FsyncPolicy("none", "none"))
            self.real = self.run(self.repo.open_session(self.name, create=True))
            self.reads: list[tuple[Any, ...]] = []

        def run(self, aw: Any) -> Any:
            return self.loop.run_until_complete(aw)

        def both(self, fn: Any) -> tuple[Any, Any]:
            """Run ``fn(session)`` on the model and the backend; outcomes must match."""
            results = []
            for s in (self.model, self.real):
                try:
                    results.append(("ok", self.run(fn(s))))
                except StorageError as exc:
                    results.append((type(exc).__name__, str(exc)))
            assert results[0] == results[1]
            return results[0], results[1]

        @rule(writes=session_writes)
        def commit_session(self, writes: list[Write]) -> None:
            self.both(lambda s: s.commit(writes))

        @rule(writes=ephemeral_writes())
        def commit_ephemeral(self, writes: list[Write]) -> None:
            self.both(lambda s: s.commit(lambda: writes))

        @rule(scope=st.sampled_from(EPHEMERAL), extra=session_writes)
        def settle(self, scope: Any, extra: list[Write]) -> None:
            self.both(lambda s: s.commit([*extra, retire_scope(scope)]))

        @rule(a=ephemeral_writes(), b=session_writes)
        def mixed_commit_rejected(self, a: list[Write], b: list[Write]) -> None:
            model, _ = self.both(lambda s: s.commit([*a, *b]))
            assert model[0] == "ScopeError"

        @rule(writes=session_writes, at=st.integers(0, 4))
        def bad_value_rejected(self, writes: list[Write], at: int) -> None:
            bad = [*writes]
            bad.insert(min(at, len(bad)), set_value(value("a", "k1"), float("nan")))
            model, _ = self.both(lambda s: s.commit(bad))
            assert model[0] == "InvalidValueError"

        @rule()
        def reopen(self) -> None:
            self.run(self.model.close())
            self.model = self.run(self.model_repo.open_session(self.name))
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
            cursor=st.none() | st.integers(0, 40),
            order=st.sampled_from(["asc", "desc"]),
            limit=st.none() | st.integers(0, 5),
            tag=st.sampled_from([None, "base", "other"]),
        )
        def add_paged_read(self, **kw: Any) -> None:
            addr = list_address(kw["ns"], kw["key"], kw["scope"])
            self.reads.append((addr, kw["cursor"], kw["order"], kw["limit"], kw["tag"]))

        @invariant()
        def agree_on_seq_scopes_entries(self) -> None:
            self.both(lambda s: observe_cheap(s))

        @rule()
        def agree_on_everything(self) -> None:
            self.both(lambda s: observe(s, self.reads))

        def teardown(self) -> None:
            try:
                self.both(lambda s: observe(s, self.reads))
                self.run(self.repo.close())
                self.run(self.model_repo.close())
            finally:
                self.loop.close()

    return StorageAgreesWithModel


EXAMPLES = {"memory": 15, "jsonl": 30, "sqlite": 25, "postgres": 20}


@pytest.mark.parametrize("kind", BACKENDS)
def test_backend_agrees_with_memory_model(
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

"""The PostgreSQL backend: the SQLite schema and semantics on a shared server.

For sessions that outgrow one machine: many harness workers on many hosts share one
database, and viewers follow sessions live. Seqs are allocated under a row lock on the
session's ``next_seq`` (``SELECT ... FOR UPDATE``), so two hosts committing to one
session serialise on the database exactly as two tasks serialise on the session line.
Every commit sends a ``NOTIFY`` on the store's channel with the session name and its
new high-water seq; one ``LISTEN`` connection per repository turns that into
:meth:`Repository.wait_for_change` / :meth:`Repository.changes` for every follower, so
a server on another host tails any number of sessions without polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.conninfo

from toolfold import _json

from ._addresses import EphemeralScope, ListAddress, Scope, ValueAddress
from ._base import Session, check_expect
from ._base_repository import Repository
from ._changes import ChangeWaiters
from ._entries import Entry, ListElement
from ._errors import (
    BackendError,
    CorruptStoreError,
    SessionExistsError,
    SessionNotFoundError,
)
from ._records import FsyncPolicy, Order, decode_json
from ._sql import (
    ENTRY_INDEXES,
    POSTGRES,
    SCHEMA_VERSION,
    TABLES,
    count_entries_query,
    entries_by_key_query,
    payload,
    read_entries_query,
    scope_column,
    write_statements,
)
from ._writes import JSON, Write

__all__ = ["CHANNEL", "SCHEMA", "PostgresRepository", "PostgresSession"]

#: The LISTEN/NOTIFY channel of a store (one database = one store = one channel);
#: payload ``{"session": name, "seq": high_water}``.
CHANNEL = "toolfold_commits"

#: Same tables as the SQLite backend; keys compare in the "C" collation (code point
#: order, like every other backend), JSON is stored as text exactly as encoded.
SCHEMA = """
CREATE TABLE IF NOT EXISTS toolfold_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    name       TEXT COLLATE "C" PRIMARY KEY,
    next_seq   BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS kv_values (
    session   TEXT COLLATE "C" NOT NULL,
    scope_id  TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    key       TEXT COLLATE "C" NOT NULL,
    value     TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    PRIMARY KEY (session, scope_id, namespace, key)
);
CREATE TABLE IF NOT EXISTS list_elements (
    session   TEXT COLLATE "C" NOT NULL,
    scope_id  TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    key       TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    value     TEXT NOT NULL,
    tag       TEXT,
    PRIMARY KEY (session, scope_id, namespace, key, seq)
);
CREATE TABLE IF NOT EXISTS entries (
    session TEXT COLLATE "C" NOT NULL,
    seq     BIGINT NOT NULL,
    key     TEXT COLLATE "C",
    summary TEXT,
    value   TEXT NOT NULL,
    PRIMARY KEY (session, seq)
);
ALTER TABLE entries ADD COLUMN IF NOT EXISTS key TEXT COLLATE "C";
ALTER TABLE entries ADD COLUMN IF NOT EXISTS summary TEXT;
CREATE TABLE IF NOT EXISTS retirements (
    session  TEXT COLLATE "C" NOT NULL,
    scope_id TEXT COLLATE "C" NOT NULL,
    seq      BIGINT NOT NULL,
    PRIMARY KEY (session, seq)
)
"""


def redact(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable PostgreSQL DSN>"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000
"""How long the server lets one of our connections sit idle inside a transaction before
it ends that session: toolfold issues a transaction's statements back to back, so a
transaction left idle belongs to a host that was paused (``SIGSTOP``, a frozen VM) or
cut off mid-commit. Its row lock on the session would otherwise stop every other
writer of that session, the janitor that should take its calls over included, for as
long as the pause lasts; once the server ends it, they go on, and the paused host's
commit fails when it wakes (its lease has been taken over by then)."""


class PostgresRepository(Repository):
    """Sessions stored in a PostgreSQL database (``postgresql://...``).

    The tables are created on first use. ``fsync.main`` maps to ``synchronous_commit``:
    ``"commit"`` → ``on`` (a commit survives a server crash / power loss once it
    returns), ``"none"`` → ``off`` (the server may lose the last few hundred ms of
    commits on a crash, never consistency). The repository uses one connection for
    session management; every open session has its own connection.
    """

    def __init__(
        self, dsn: str, *, fsync: FsyncPolicy | None = None, read_only: bool = False
    ) -> None:
        super().__init__(read_only=read_only)
        self.dsn = dsn
        self.location = f"postgresql ({redact(dsn)})"
        self.fsync = fsync if fsync is not None else FsyncPolicy()
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._conn_lock = asyncio.Lock()

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """Open a new autocommit connection with the store's settings (schema ensured)."""
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        except psycopg.Error as exc:
            raise BackendError(f"cannot connect to {self.location}: {exc}") from exc
        try:
            sync = "on" if self.fsync.main == "commit" else "off"
            await conn.execute(f"SET synchronous_commit = {sync}")
            await conn.execute(
                f"SET idle_in_transaction_session_timeout = {int(IDLE_IN_TRANSACTION_TIMEOUT_MS)}"
            )
        except psycopg.Error as exc:
            await conn.close()
            raise BackendError(
                f"cannot configure the connection to {self.location}: {exc}"
            ) from exc
        return conn

    async def _repo_conn(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None:
            conn = await self.connect()
            try:
                await self._ensure_schema(conn)
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    async def _ensure_schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            async with conn.transaction():
                # Concurrent first uses (many workers starting at once) would race on
                # CREATE TABLE IF NOT EXISTS; one advisory lock makes it one at a time.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext('toolfold-schema'))")
                for stmt in SCHEMA.split(";"):
                    if stmt.strip():
                        await conn.execute(stmt)
                for stmt in ENTRY_INDEXES:
                    await conn.execute(stmt)
                cur = await conn.execute("SELECT value FROM toolfold_meta WHERE key = 'schema'")
                row = await cur.fetchone()
                if row is None:
                    await conn.execute(
                        "INSERT INTO toolfold_meta (key, value) VALUES ('schema', %s)",
                        (SCHEMA_VERSION,),
                    )
                elif row[0] != SCHEMA_VERSION:
                    raise CorruptStoreError(
                        f"{self.location} holds schema {row[0]!r}, this toolfold reads "
                        f"{SCHEMA_VERSION!r}; use a matching toolfold version",
                        path=self.location,
                    )
        except psycopg.Error as exc:
            raise BackendError(
                f"cannot create the toolfold tables in {self.location}: {exc}"
            ) from exc

    async def _with_repo_conn(self, what: str, fn: Any) -> Any:
        async with self._conn_lock:
            # A call that was in flight when the repository closed must not open a
            # connection nobody would close.
            self._check_open()
            conn = await self._repo_conn()
            try:
                return await fn(conn)
            except psycopg.Error as exc:
                raise BackendError(f"{what} failed on {self.location}: {exc}") from exc

    async def _create_session(self, name: str) -> Session:
        async def create(conn: psycopg.AsyncConnection[Any]) -> None:
            cur = await conn.execute(
                "INSERT INTO sessions (name, next_seq) VALUES (%s, 1) "
                "ON CONFLICT (name) DO NOTHING RETURNING name",
                (name,),
            )
            if await cur.fetchone() is None:
                raise SessionExistsError(f"session {name!r} already exists in {self.location}")

        await self._with_repo_conn(f"creating session {name!r}", create)
        return await PostgresSession.open(self, name, 1)

    async def _open_session(self, name: str, *, create: bool) -> Session:
        async def open_(conn: psycopg.AsyncConnection[Any]) -> int:
            if create:
                await conn.execute(
                    "INSERT INTO sessions (name, next_seq) VALUES (%s, 1) "
                    "ON CONFLICT (name) DO NOTHING",
                    (name,),
                )
            cur = await conn.execute("SELECT next_seq FROM sessions WHERE name = %s", (name,))
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFoundError(
                    f"no session {name!r} in {self.location}; create it first "
                    "(create_session, or open_session(..., create=True))"
                )
            return int(row[0])

        next_seq: int = await self._with_repo_conn(f"opening session {name!r}", open_)
        return await PostgresSession.open(self, name, next_seq)

    async def _list_sessions(self) -> list[str]:
        async def list_(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute("SELECT name FROM sessions")
            return [str(r[0]) for r in await cur.fetchall()]

        result: list[str] = await self._with_repo_conn("listing sessions", list_)
        return result

    async def _delete_session(self, name: str) -> None:
        async def delete(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction():
                cur = await conn.execute("DELETE FROM sessions WHERE name = %s", (name,))
                if cur.rowcount == 0:
                    raise SessionNotFoundError(f"no session {name!r} in {self.location} to delete")
                for table in TABLES:
                    await conn.execute(
                        f"DELETE FROM {table} WHERE session = %s",
                        (name,),
                    )

        await self._with_repo_conn(f"deleting session {name!r}", delete)

    async def _close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    # -- following a session from anywhere ------------------------------------------

    async def _high_water(self, name: str) -> int:
        async def high(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute("SELECT next_seq FROM sessions WHERE name = %s", (name,))
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFoundError(f"no session {name!r} in {self.location} to follow")
            return int(row[0]) - 1

        result: int = await self._with_repo_conn(f"following session {name!r}", high)
        return result

    async def _watch(self, waiters: ChangeWaiters, ready: Callable[[], None]) -> None:
        # ONE listening connection per repository, whatever the number of followed
        # sessions: each notification names its session and is handed to its waiters.
        # (LISTEN needs a session-mode connection: not through a transaction pooler.)
        conn = await self.connect()
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            ready()
            async for note in conn.notifies():
                try:
                    payload = _json.loads(note.payload)
                    session, seq = str(payload["session"]), int(payload["seq"])
                except (_json.DecodeError, KeyError, TypeError, ValueError):
                    continue  # not one of ours: the channel is public to the database
                waiters.publish(session, seq)
        except psycopg.Error as exc:
            raise BackendError(f"listening for commits on {self.location} failed: {exc}") from exc
        finally:
            await conn.close()


class PostgresSession(Session):
    """One session of a :class:`PostgresRepository`, with its own connection."""

    _expects_in_transaction = True

    def __init__(
        self, repo: PostgresRepository, name: str, next_seq: int, conn: psycopg.AsyncConnection[Any]
    ) -> None:
        super().__init__(name, next_seq)
        self._repo = repo
        self._conn = conn
        # One connection cannot run a read while a commit's transaction is open on it
        # (the read would see uncommitted rows), so reads and commits take turns.
        self._conn_lock = asyncio.Lock()

    @classmethod
    async def open(cls, repo: PostgresRepository, name: str, next_seq: int) -> PostgresSession:
        """Open a session object with its own connection."""
        return cls(repo, name, next_seq, await repo.connect())

    async def _run(self, what: str, fn: Any) -> Any:
        async with self._conn_lock:
            try:
                return await fn(self._conn)
            except psycopg.Error as exc:
                raise BackendError(
                    f"{what} of session {self._name!r} failed on {self._repo.location}: {exc}"
                ) from exc

    async def _commit_writes(self, writes: tuple[Write, ...], scope: Scope) -> tuple[int, ...]:
        payloads = [payload(w) for w in writes]
        name = self._name
        floor = self._next_seq
        expects = self._expect

        async def commit(conn: psycopg.AsyncConnection[Any]) -> tuple[int, ...]:
            async with conn.transaction():
                # One statement allocates the seqs and takes the row lock that serialises
                # every writer of this session, on any host, until we commit. The
                # database's next_seq is the authority; our floor keeps seqs burnt by a
                # failed commit of ours from coming back.
                cur = await conn.execute(
                    "UPDATE sessions SET next_seq = GREATEST(next_seq, %s) + %s "
                    "WHERE name = %s RETURNING next_seq",
                    (floor, len(writes), name),
                )
                row = await cur.fetchone()
                if row is None:
                    raise SessionNotFoundError(
                        f"session {name!r} no longer exists in {self._repo.location} "
                        "(deleted elsewhere?)"
                    )
                # The row lock above serialises every writer of the session, so what
                # these reads see (READ COMMITTED: a fresh snapshot per statement) is
                # what the writes below land on: a precondition cannot go stale.
                for e in expects:
                    cur = await conn.execute(
                        "SELECT value FROM kv_values WHERE session = %s AND scope_id = %s "
                        "AND namespace = %s AND key = %s",
                        (name, scope_column(e.address.scope), e.address.namespace, e.address.key),
                    )
                    found = await cur.fetchone()
                    check_expect(name, e, None if found is None else str(found[0]))
                first = int(row[0]) - len(writes)
                seqs = tuple(range(first, first + len(writes)))
                # The writes need no answers: pipeline them (one round trip, not one each).
                async with conn.pipeline():
                    for w, seq, data in zip(writes, seqs, payloads, strict=True):
                        await _apply(conn, name, w, seq, data)
                    # Delivered at commit, and only if the transaction commits.
                    await conn.execute(
                        "SELECT pg_notify(%s, %s)",
                        (CHANNEL, _json.dumps({"session": name, "seq": seqs[-1]}).decode()),
                    )
            return seqs

        try:
            seqs: tuple[int, ...] = await self._run("commit", commit)
        except BaseException:
            self._next_seq = floor + len(writes)  # burnt: gaps are fine, reuse is not
            raise
        self._next_seq = seqs[-1] + 1
        return seqs

    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None:
        async def get(conn: psycopg.AsyncConnection[Any]) -> str | None:
            cur = await conn.execute(
                "SELECT value FROM kv_values WHERE session = %s AND scope_id = %s "
                "AND namespace = %s AND key = %s",
                (self._name, scope_column(address.scope), address.namespace, address.key),
            )
            row = await cur.fetchone()
            return None if row is None else str(row[0])

        text = await self._run("get_value", get)
        return None if text is None else self._decode(text, "kv_values")

    async def _scan_values(
        self, namespace: str, key_prefix: str, scope: Scope
    ) -> list[tuple[str, JSON]]:
        async def scan(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str]]:
            cur = await conn.execute(
                "SELECT key, value FROM kv_values WHERE session = %s AND scope_id = %s "
                "AND namespace = %s AND starts_with(key, %s) ORDER BY key",
                (self._name, scope_column(scope), namespace, key_prefix),
            )
            return [(str(k), str(v)) for k, v in await cur.fetchall()]

        rows: list[tuple[str, str]] = await self._run("scan_values", scan)
        return [(k, self._decode(v, "kv_values")) for k, v in rows]

    async def _read_list(
        self,
        address: ListAddress[Any],
        cursor: int | None,
        order: Order,
        limit: int | None,
        stop_at_tag: str | None,
    ) -> list[ListElement]:
        if order == "asc":
            cond, direction = "seq > %s", "ASC"
            bound = -(2**63) if cursor is None else cursor
        else:
            cond, direction = "seq < %s", "DESC"
            bound = 2**63 - 1 if cursor is None else cursor
        query = (
            "SELECT seq, value, tag FROM list_elements WHERE session = %s AND scope_id = %s "
            f"AND namespace = %s AND key = %s AND {cond} ORDER BY seq {direction} LIMIT %s"
        )

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str, str | None]]:
            out: list[tuple[int, str, str | None]] = []
            async with conn.cursor() as cur:
                await cur.execute(
                    query,
                    (
                        self._name,
                        scope_column(address.scope),
                        address.namespace,
                        address.key,
                        bound,
                        limit,
                    ),
                )
                async for seq, value, tag in cur:
                    out.append((int(seq), str(value), tag))
                    if stop_at_tag is not None and tag == stop_at_tag:
                        break
            return out

        rows: list[tuple[int, str, str | None]] = await self._run("read_list", read)
        return [
            ListElement(seq, self._decode(v, "list_elements", seq), tag) for seq, v, tag in rows
        ]

    async def _read_entries(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        sql, params = read_entries_query(
            self._name, cursor, limit, order, keyed, offset, summaries, postgres=True
        )
        return await self._entries("read_entries", sql, params)

    async def _entries_by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        sql, params = entries_by_key_query(self._name, key, prefix, limit, postgres=True)
        return await self._entries("entries_by_key", sql, params)

    async def _count_entries(self, keyed: bool) -> int:
        sql, params = count_entries_query(self._name, keyed, postgres=True)

        async def count(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(sql, params)
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        n: int = await self._run("count_entries", count)
        return n

    async def _entries(self, what: str, sql: str, params: tuple[Any, ...]) -> list[Entry]:
        async def read(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())

        rows: list[tuple[Any, ...]] = await self._run(what, read)
        out = []
        for row in rows:
            seq, key, summary = int(row[0]), row[1], row[2]
            value = self._decode(row[3], "entries", seq) if len(row) > 3 else None
            out.append(
                Entry(
                    seq,
                    value,
                    key,
                    None if summary is None else self._decode(summary, "entries", seq),
                )
            )
        return out

    async def _live_scopes(self) -> list[EphemeralScope]:
        async def live(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(
                "SELECT scope_id FROM kv_values WHERE session = %s AND scope_id <> '' "
                "UNION SELECT scope_id FROM list_elements WHERE session = %s "
                "AND scope_id <> ''",
                (self._name, self._name),
            )
            return [str(r[0]) for r in await cur.fetchall()]

        ids: list[str] = await self._run("live_scopes", live)
        return [EphemeralScope(i) for i in ids]

    async def _close(self) -> None:
        await self._conn.close()

    def _decode(self, text: str, table: str, seq: int | None = None) -> JSON:
        return decode_json(
            text,
            path=f"{self._repo.location} table {table}",
            record=f"session {self._name!r} seq {seq}",
        )


async def _apply(
    conn: psycopg.AsyncConnection[Any], session: str, write: Write, seq: int, data: str | None
) -> None:
    # Module level so tests can inject a failure in the middle of a transaction.
    for sql, params in write_statements(POSTGRES, session, write, seq, data):
        await conn.execute(sql, params)

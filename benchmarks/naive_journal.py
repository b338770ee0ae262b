"""The least a durable MCP server or proxy must write, shared by ``mcp_naive_server.py``
and ``mcp_naive_proxy.py`` under ``--durable PATH``: one row per call in the SQLite file
``PATH`` (WAL, ``synchronous = FULL``: every commit flushed), its start committed before
the work and its result before the answer. Called from a worker thread
(``anyio.to_thread.run_sync``), as an async server would."""

from __future__ import annotations

import sqlite3
import threading
import time


class Journal:
    """One row per call: ``start`` inserts it, ``settle`` adds the result."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS calls (id INTEGER PRIMARY KEY, call TEXT NOT NULL, "
            "started REAL NOT NULL, result TEXT)"
        )
        self.lock = threading.Lock()

    def start(self, call: str) -> int:
        """Commit the start of ``call`` (what runs, as text); its row id."""
        with self.lock:
            cur = self.db.execute(
                "INSERT INTO calls (call, started) VALUES (?, ?)", (call, time.time())
            )
            return int(cur.lastrowid or 0)

    def settle(self, row: int, result: str) -> None:
        """Commit the result of the call started as ``row``."""
        with self.lock:
            self.db.execute("UPDATE calls SET result = ? WHERE id = ?", (result, row))

"""``GET /v1/overview``: sessions by recent activity, paged, opening only the page's sessions."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from toolfold.harness import Lanes
from toolfold.server import HarnessCommands, create_app, session_pool
from toolfold.storage import open_repository


def test_overview_orders_by_activity_pages_and_opens_only_the_page(
    serve: Any, tmp_path: Path
) -> None:
    spill = tmp_path / "spill"
    repo = open_repository(f"sqlite:{tmp_path / 'toolfold.db'}")
    pool = session_pool(repo)
    lanes = Lanes()
    commands = HarnessCommands(lanes, repository=repo, spill_dir=spill)
    server = serve(
        create_app(
            lanes=lanes,
            run_command=commands,
            repository=pool,
            spill_dirs=lambda session: spill / session,
        )
    )

    async def make_sessions() -> None:
        for i in range(40):
            session = await repo.create_session(f"s{i:03d}")
            await session.close()

    server.run(make_sessions())
    try:
        with server.client() as client:
            for command in ("seq 1 3000", "echo partial; exit 3"):
                r = client.post("/v1/lanes/main/commands", json={"command": command})
                assert r.status_code == 202, r.text
                server.run(commands.wait())
            now = time.time()
            for name, age in (("s010", 1000), ("s020", 2000)):
                (spill / name).mkdir(mode=0o700)
                os.utime(spill / name, (now - age, now - age))

            opened: list[str] = []
            real_use = pool.use

            @contextlib.asynccontextmanager
            async def counting_use(name: str, **kw: Any) -> AsyncIterator[Any]:
                opened.append(name)
                async with real_use(name, **kw) as session:
                    yield session

            pool.use = counting_use  # type: ignore[method-assign]
            r = client.get("/v1/overview", params={"limit": 5})
            assert r.status_code == 200, r.text
            body = r.json()
            names = [s["name"] for s in body["sessions"]]
            assert names == ["main", "s010", "s020", "s000", "s001"]
            assert body["total"] == 41
            assert sorted(opened) == sorted(names)  # only the page's sessions were read
            main = body["sessions"][0]
            assert main["calls"] == 2 and main["statuses"] == {"ok": 1, "error": 1}
            assert main["running"] == 0 and main["live_lane"] is True
            last = main["last"]
            assert last["command"] == "echo partial; exit 3" and last["status"] == "error"
            assert last["started_at"] <= last["ended_at"]
            assert body["sessions"][1]["calls"] == 0 and body["sessions"][1]["last"] is None
            assert [x["lane"] for x in body["lanes"]] == ["main"]
            assert body["lanes"][0]["statuses"] == {"ok": 1, "error": 1}

            opened.clear()
            r = client.get("/v1/overview", params={"offset": 40, "limit": 5})
            assert [s["name"] for s in r.json()["sessions"]] == ["s039"] and opened == ["s039"]
            for bad in ({"limit": 0}, {"limit": 101}, {"offset": "x"}):
                r = client.get("/v1/overview", params=bad)
                assert r.status_code == 400 and "limit" in r.json()["error"]
            # The calls route carries each call's start and end times.
            calls = client.get("/v1/sessions/main/calls").json()["calls"]
            assert all(c["started_at"] and c["ended_at"] for c in calls)
    finally:
        server.run(commands.aclose())
        server.run(repo.close())

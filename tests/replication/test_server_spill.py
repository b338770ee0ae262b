"""The spill route: a stored call's full output, paged by bytes and lines, downloaded —
and only the store's own spill files (traversal, symlinks, other sessions refused)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfold.history import run_record_address
from toolfold.server import HarnessCommands, create_app, session_pool
from toolfold.server._spill import LineIndex, SpillFile, open_spill, read_lines
from toolfold.storage import open_repository, set_value


@pytest.fixture
def stored(serve: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A server over a SQLite store with two sessions, each holding one spilled call."""
    from toolfold.harness import Lanes

    spill = tmp_path / "spill"
    repo = open_repository(f"sqlite:{tmp_path / 'toolfold.db'}")
    lanes = Lanes()
    commands = HarnessCommands(lanes, repository=repo, spill_dir=spill)
    server = serve(
        create_app(
            lanes=lanes,
            run_command=commands,
            repository=repo,
            spill_dirs=lambda session: spill / session,
        )
    )
    ids = {}
    with server.client() as client:
        for lane, command in (
            ("main", "seq 1 300000"),
            ("other", "seq 1 3000; echo secret of other"),
        ):
            r = client.post(f"/v1/lanes/{lane}/commands", json={"command": command})
            assert r.status_code == 202, r.text
            ids[lane] = r.json()["tool_call_id"]
            server.run(commands.wait())
    try:
        yield {"server": server, "repo": repo, "ids": ids, "spill": spill}
    finally:
        server.run(commands.aclose())
        server.run(repo.close())


def _record(ctx: dict[str, Any], session: str) -> dict[str, Any]:
    async def read() -> Any:
        async with session_pool(ctx["repo"]).use(session) as s:
            return await s.get_value(run_record_address(ctx["ids"][session]))

    record = ctx["server"].run(read())
    assert isinstance(record, dict) and isinstance(record.get("spill_path"), str), record
    return record


def _rewrite(ctx: dict[str, Any], session: str, **changes: Any) -> None:
    record = {**_record(ctx, session), **changes}

    async def write() -> None:
        async with session_pool(ctx["repo"]).use(session, create=True) as s:
            await s.commit([set_value(run_record_address(ctx["ids"][session]), record)])

    ctx["server"].run(write())


def _url(ctx: dict[str, Any], session: str = "main") -> str:
    return f"/v1/sessions/{session}/calls/{ctx['ids'][session]}/output"


def test_pages_by_lines_and_bytes_and_downloads_the_whole_file(stored: dict[str, Any]) -> None:
    server = stored["server"]
    path = Path(_record(stored, "main")["spill_path"])
    data = path.read_bytes()
    assert data == b"".join(b"%d\n" % i for i in range(1, 300001))
    with server.client() as client:
        r = client.get(_url(stored), params={"line": 250000, "lines": 3})
        assert r.status_code == 200, r.text
        page = r.json()
        assert page["lines"] == ["250000", "250001", "250002"]
        assert page["offset"] == data.index(b"\n250000\n") + 1
        assert page["size"] == len(data)
        # Asked again (from the cached index) and past the end.
        assert client.get(_url(stored), params={"line": 2, "lines": 1}).json()["lines"] == ["2"]
        last = client.get(_url(stored), params={"line": 299999, "lines": 10}).json()
        assert (
            last["lines"] == ["299999", "300000"] and last["eof"] and last["total_lines"] == 300000
        )
        assert client.get(_url(stored), params={"line": 400000}).json()["lines"] == []
        # The call's number names it too.
        assert (
            client.get("/v1/sessions/main/calls/1/output", params={"line": 7}).json()["lines"][0]
            == "7"
        )
        r = client.get(_url(stored), params={"offset": 10, "length": 20})
        assert r.json()["text"] == data[10:30].decode() and r.json()["next_offset"] == 30
        r = client.get(_url(stored), params={"offset": 0, "length": 2 * 1024 * 1024})
        assert r.status_code == 400 and "at most 1048576 bytes" in r.json()["error"]
        r = client.get(_url(stored), params={"line": "x"})
        assert r.status_code == 400 and "line must be an integer" in r.json()["error"]
        r = client.get(_url(stored), params={"download": "1"})
        assert r.status_code == 200 and r.content == data
        assert "attachment" in r.headers["content-disposition"]
        assert r.headers["content-type"] == "application/octet-stream"
        # Without the token: refused like every route.
        r = client.get(_url(stored), headers={"Authorization": "Bearer " + "x" * 32})
        assert r.status_code == 401


def test_an_unknown_call_or_session_is_a_clear_404(stored: dict[str, Any]) -> None:
    with stored["server"].client() as client:
        r = client.get("/v1/sessions/main/calls/call-nope/output")
        assert r.status_code == 404 and "has no call 'call-nope'" in r.json()["error"]
        r = client.get("/v1/sessions/nope/calls/x/output")
        assert r.status_code == 404 and "no session 'nope'" in r.json()["error"]
        r = client.get("/v1/sessions/.bad/calls/x/output")
        assert r.status_code == 400


def test_another_sessions_spill_file_is_refused(stored: dict[str, Any]) -> None:
    other = _record(stored, "other")["spill_path"]
    _rewrite(stored, "main", spill_path=other)
    with stored["server"].client() as client:
        r = client.get(_url(stored), params={"offset": 0})
        assert r.status_code == 403, r.text
        assert "not inside this session's spill directory" in r.json()["error"]
        assert "secret" not in r.text
        # The other session still reads its own file.
        r = client.get(_url(stored, "other"), params={"line": 3001})
        assert r.json()["lines"] == ["secret of other"]


@pytest.mark.parametrize(
    "target",
    ["{spill}/main/../other/{name}", "{spill}/main/sub/../../other/{name}", "/etc/passwd"],
)
def test_a_traversal_out_of_the_spill_directory_is_refused(
    stored: dict[str, Any], target: str
) -> None:
    name = Path(_record(stored, "other")["spill_path"]).name
    _rewrite(stored, "main", spill_path=target.format(spill=stored["spill"], name=name))
    with stored["server"].client() as client:
        r = client.get(_url(stored), params={"download": "1"})
        assert r.status_code == 403, r.text
        assert "secret" not in r.text and "root:" not in r.text


def test_a_symlinked_spill_file_or_directory_is_refused(stored: dict[str, Any]) -> None:
    spill: Path = stored["spill"]
    mine = Path(_record(stored, "main")["spill_path"])
    other = Path(_record(stored, "other")["spill_path"])
    # The recorded file replaced by a link to the other session's file.
    mine.unlink()
    mine.symlink_to(other)
    with stored["server"].client() as client:
        r = client.get(_url(stored), params={"line": 1})
        assert r.status_code == 403 and "symlink" in r.json()["error"], r.text
        assert "secret" not in r.text
        # The session's directory replaced by a link to the other session's directory.
        for f in (spill / "main").iterdir():
            f.unlink()
        (spill / "main").rmdir()
        (spill / "main").symlink_to(spill / "other")
        os.link(other, spill / "other" / mine.name)  # same name, so only the link differs
        r = client.get(_url(stored), params={"line": 1})
        assert r.status_code == 403 and "symlink" in r.json()["error"], r.text
        assert "secret" not in r.text


def test_a_spill_on_an_exec_host_says_where_it_is(stored: dict[str, Any]) -> None:
    _rewrite(stored, "main", spill_dir="ssh box:/var/tmp/toolfold-spill/main")
    with stored["server"].client() as client:
        r = client.get(_url(stored), params={"line": 1})
        assert r.status_code == 404
        body = r.json()
        assert body["exec_host"].startswith("ssh box:/var/tmp/toolfold-spill/main/exec-")
        assert "ran on an exec host" in body["error"]


def test_without_spill_dirs_the_route_says_how_to_turn_it_on(serve: Any) -> None:
    server = serve(create_app())
    with server.client() as client:
        r = client.get("/v1/sessions/main/calls/c1/output")
        assert r.status_code == 501 and "spill_dirs" in r.json()["error"]


def _open(tmp_path: Path, data: bytes) -> SpillFile:
    d = tmp_path / "d"
    d.mkdir(mode=0o700, exist_ok=True)
    f = d / "f.log"
    f.write_bytes(data)
    return open_spill(d, str(f))


@pytest.mark.parametrize("spacing", [1, 3, 64 * 1024])
def test_line_index_finds_every_line_and_stays_bounded(
    tmp_path: Path, spacing: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolfold.server import _spill

    monkeypatch.setattr(_spill, "CHUNK", spacing if spacing > 1 else 2)
    monkeypatch.setattr(_spill, "MAX_CHECKPOINTS", 8)
    raw = [b"x" * (i % 7) + b"%d" % i for i in range(200)] + [b"", b"\xc3\xa9\xff", b"end"]
    data = b"\n".join(raw)
    lines = [x.decode("utf-8", "replace") for x in raw]
    file = _open(tmp_path, data)
    index = LineIndex()
    try:
        for n in [1, 50, 2, 203, 150, 100, 201, 202]:
            start, _ = index.line_offset(file, n)
            got, _, _ = read_lines(file, start, 1)
            assert got == [lines[n - 1]], n
        assert index.stats()["checkpoints"] <= 9
        start, total = index.line_offset(file, 204)
        assert start == len(data) and total == 203
    finally:
        file.close()


def test_a_line_longer_than_a_page_is_cut_and_the_next_page_goes_on(tmp_path: Path) -> None:
    from toolfold.server._spill import MAX_PAGE_BYTES

    data = b"a" * (MAX_PAGE_BYTES + 10) + b"\nnext\n"
    file = _open(tmp_path, data)
    try:
        got, nxt, cut = read_lines(file, 0, 5)
        assert cut and len(got[0]) == MAX_PAGE_BYTES and nxt == MAX_PAGE_BYTES
        got, nxt, cut = read_lines(file, nxt, 5)
        assert got == ["a" * 10, "next"] and not cut and nxt == len(data)
    finally:
        file.close()


def test_find_answers_the_next_line_holding_the_text_anywhere_in_the_file(
    stored: dict[str, Any],
) -> None:
    data = Path(_record(stored, "main")["spill_path"]).read_bytes()
    with stored["server"].client() as client:

        def find(text: str, **params: Any) -> dict[str, Any]:
            r = client.get(_url(stored), params={"find": text, **params})
            assert r.status_code == 200, r.text
            return dict(r.json())

        # Deep in the file, far past any page; then "next" from the line after it.
        assert find("299999")["line"] == 299999 and "stopped_at_line" not in find("299999")
        assert find("1234")["line"] == 1234
        assert find("1234", from_line=1235)["line"] == 11234
        assert find("1234", from_line=291235)["line"] is None
        assert find("no such text")["line"] is None
        assert find("5", from_line=400000)["line"] is None
        # A needle across the boundary of the first 64 KiB chunk (and across a newline).
        needle = data[65530:65542]
        at = data.find(needle)
        assert at < 65536 < at + len(needle) and b"\n" in needle
        assert find(needle.decode())["line"] == data.count(b"\n", 0, at) + 1
        # Bad queries: a clear 400 each.
        for params, says in (
            ({"find": ""}, "find must be 1 to 1024 bytes"),
            ({"find": "x" * 1025}, "find must be 1 to 1024 bytes"),
            ({"find": "1", "from_line": "x"}, "from_line must be an integer"),
            ({"find": "1", "from_line": "0"}, "from_line must be an integer"),
        ):
            r = client.get(_url(stored), params=params)
            assert r.status_code == 400 and says in r.json()["error"], r.text


def test_a_find_stops_at_its_scan_bound_and_says_where_to_go_on(
    stored: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolfold.server import _output

    monkeypatch.setattr(_output, "MAX_FIND_BYTES", 100_000)
    asks = 0
    line = 1
    with stored["server"].client() as client:
        while True:
            r = client.get(_url(stored), params={"find": "299999", "from_line": line})
            assert r.status_code == 200, r.text
            asks += 1
            answer = r.json()
            if answer["line"] is not None:
                break
            assert answer["stopped_at_line"] > line
            line = answer["stopped_at_line"]
        # ~2 MB of file scanned 100 kB at a time: many answers, the same match.
        assert answer["line"] == 299999 and asks >= 19
        r = client.get(_url(stored), params={"find": "nowhere", "from_line": 1})
        assert r.json()["line"] is None and r.json()["stopped_at_line"] > 1
        # Near the end, the scan reaches it within the bound: no match, nothing to go on.
        r = client.get(_url(stored), params={"find": "nowhere", "from_line": 299990})
        assert r.json() == {"find": "nowhere", "from_line": 299990, "line": None}


def test_find_holds_a_line_longer_than_its_bound_to_one_answer(tmp_path: Path) -> None:
    from toolfold.server._spill import find_line

    file = _open(tmp_path, b"x" * 300_000 + b"needle\nnext needle\n")
    try:
        assert find_line(file, 0, 1, b"needle", 100_000) == (None, 1)
        assert find_line(file, 0, 1, b"needle", 1 << 20) == (1, None)
        assert find_line(file, 300_007, 2, b"needle", 1 << 20) == (2, None)
        assert find_line(file, 0, 1, b"absent", 1 << 20) == (None, None)
    finally:
        file.close()

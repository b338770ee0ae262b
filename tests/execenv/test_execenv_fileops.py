"""The file operations behind ``read`` and ``grep`` (``execenv._fileops``) and their head
window (``HeadWindow``), called directly: every bound, refusal and total, exactly.

These run in microseconds, so they are what a mutation run of these modules checks
against (docs/TESTING.md); the tool-level tests in tests/tools check the same bounds
through the tools."""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolfold.execenv._fileops import FileOpError, grep, op_error_text, read_bytes, read_lines, stat
from toolfold.execenv._headwindow import HeadWindow

GO = threading.Event()


def _reference(text: str, max_bytes: int, max_lines: int) -> dict[str, Any]:
    """The window's rule, stated directly: the first ``max_lines`` lines, then at most
    ``max_bytes`` UTF-8 bytes of them (no partial character), with the stream's totals."""
    lines = text.split("\n")
    pieces = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    head = "".join(pieces[:max_lines]).encode()
    view = head[:max_bytes].decode("utf-8", "ignore")
    shown = len(view.encode())
    total = len(text.encode())
    count = view.count("\n") + (1 if view and not view.endswith("\n") else 0)
    return {
        "text": view,
        "truncated": total > shown,
        "truncated_by": (
            ("lines" if view.count("\n") >= max_lines else "bytes") if total > shown else None
        ),
        "first_line_exceeds_limit": len(lines[0].encode()) > max_bytes,
        "max_bytes": max_bytes,
        "max_lines": max_lines,
        "output_lines": count,
        "output_bytes": shown,
        "total_lines": text.count("\n") + (1 if text and not text.endswith("\n") else 0),
        "total_bytes": total,
        "last_line_bytes": len(lines[-1].encode()),
    }


TEXT = st.text(alphabet=st.sampled_from("ab\n é€😀"), max_size=60)


@given(TEXT, st.lists(st.integers(0, 60), max_size=6), st.integers(1, 40), st.integers(1, 8))
@example("a\nb\nc\nd\n", [], 100, 3)  # several lines of one write, not all kept
@example("a\nbb\nc", [1, 3], 100, 2)
def test_the_head_window_of_any_chunking_is_the_rule_on_the_whole_text(
    text: str, cuts: list[int], max_bytes: int, max_lines: int
) -> None:
    window = HeadWindow(max_bytes, max_lines)
    edges = [0, *sorted(c for c in cuts if c <= len(text)), len(text)]
    kept = 0
    for a, b in itertools.pairwise(edges):
        kept += window.write(text[a:b])
    expected = _reference(text, max_bytes, max_lines)
    assert window.result() == expected
    assert kept == len(expected["text"])
    if expected["truncated"]:
        assert window.full  # whatever comes next is only counted


@given(TEXT, st.integers(0, 60), st.integers(1, 40), st.integers(1, 8))
@example("aaaaaaaaaa\nb\nc\n", 5, 4, 8)  # full inside the first line; two newlines left
@example("aaaaaa\nb", 0, 3, 8)  # what is tallied starts with the first line's newline
def test_tallying_the_rest_of_a_full_window_counts_it_as_writing_would(
    text: str, cut: int, max_bytes: int, max_lines: int
) -> None:
    window = HeadWindow(max_bytes, max_lines)
    pos = 0
    while pos < len(text) and not window.full:
        window.write(text[pos : pos + 3])
        pos += 3
    rest = text[pos:]
    if window.full:
        for piece in (rest[:cut], rest[cut:]):
            window.tally(piece.encode(), piece.count("\n"))
    else:
        assert rest == ""
    assert window.result() == _reference(text, max_bytes, max_lines)


def test_tally_before_the_window_is_full_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^tally\(\) counts what comes after a full window"):
        HeadWindow(10, 10).tally(b"x", 0)


def test_read_bytes_returns_a_file_up_to_its_cap_and_refuses_one_byte_more(
    tmp_path: Path,
) -> None:
    data = bytes(range(256)) * 4
    (tmp_path / "f").write_bytes(data)
    got = read_bytes({"path": "f", "cwd": str(tmp_path), "max_bytes": len(data)}, GO)
    assert got == {
        "path": str(tmp_path / "f"),
        "too_big": False,
        "size": len(data),
        "data": base64.b64encode(data).decode(),
    }
    got = read_bytes({"path": str(tmp_path / "f"), "max_bytes": len(data) - 1}, GO)
    assert got == {"path": str(tmp_path / "f"), "too_big": True, "size": len(data)}


def test_read_bytes_reads_past_a_megabyte_in_chunks_and_stops_when_cancelled(
    tmp_path: Path,
) -> None:
    data = b"x" * ((1 << 20) * 2 + 7)
    (tmp_path / "big").write_bytes(data)
    got = read_bytes({"path": str(tmp_path / "big"), "max_bytes": len(data)}, GO)
    assert got["too_big"] is False and base64.b64decode(got["data"]) == data
    stopped = threading.Event()
    stopped.set()
    got = read_bytes({"path": str(tmp_path / "big"), "max_bytes": len(data)}, stopped)
    assert got == {"path": str(tmp_path / "big"), "too_big": False, "size": 0, "data": ""}


@pytest.mark.parametrize("bad", [0, -1, True, "5", 1.5, None])
def test_every_bound_must_be_a_positive_int(tmp_path: Path, bad: object) -> None:
    (tmp_path / "f").write_text("a\n")
    path = str(tmp_path / "f")
    message = f"'max_bytes' must be a positive integer, got {bad!r}"
    with pytest.raises(FileOpError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_bytes({"path": path, "max_bytes": bad}, GO)
    args = {"path": path, "max_bytes": 10, "max_lines": 10}
    for name in ("max_lines", "start", "limit", "max_bytes"):
        if name in ("start", "limit") and bad is None:
            continue  # absent: the defaults (from line 1, no limit)
        with pytest.raises(FileOpError, match=rf"^'{name}' must be a positive integer, got "):
            read_lines({**args, name: bad}, GO)
    with pytest.raises(FileOpError, match=r"^'max_lines' must be a positive integer"):
        grep({"path": path, "pattern": "a", "max_bytes": 10, "max_lines": bad}, GO)


@pytest.mark.parametrize("bad", [-1, True, "1", 0.5])
def test_line_byte_must_be_a_non_negative_int(tmp_path: Path, bad: object) -> None:
    (tmp_path / "f").write_text("abc\n")
    with pytest.raises(
        FileOpError, match=f"^'line_byte' must be a non-negative integer, got {bad!r}$"
    ):
        read_lines(
            {"path": str(tmp_path / "f"), "max_bytes": 9, "max_lines": 9, "line_byte": bad}, GO
        )


@pytest.mark.parametrize("path", [None, "", 3])
def test_a_path_must_be_a_non_empty_string(path: object) -> None:
    with pytest.raises(FileOpError, match=f"^'path' must be a non-empty string, got {path!r}$"):
        stat({"path": path}, GO)


def test_read_lines_windows_from_a_line_and_byte_with_a_limit(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("one\ntwo\nthree\nfour\n")
    args = {"path": "f", "cwd": str(tmp_path), "max_bytes": 100, "max_lines": 100}
    got = read_lines({**args, "start": 2, "line_byte": 1, "limit": 2}, GO)
    assert got["path"] == str(tmp_path / "f")
    assert got["text"] == "wo\nthree\n" and got["shown"] == 2 and got["more"] is True
    got = read_lines({**args, "max_lines": 1}, GO)
    assert got["text"] == "one\n" and got["truncated"] and got["truncated_by"] == "lines"
    assert got["total_lines"] == 4 and got["total_bytes"] == 19
    got = read_lines({**args, "max_bytes": 5, "line_byte": 0}, GO)
    assert got["text"] == "one\nt" and got["truncated_by"] == "bytes"


def test_grep_windows_its_matches_and_counts_all_of_them(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hit 1\nmiss\nHIT 2\n")
    (tmp_path / "b.txt").write_text("hit 3\n")
    (tmp_path / "c.log").write_text("hit 4\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "d.txt").write_text("hit 5\n")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "e.txt").write_text("hit 6\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.md").write_text("no\nhit 7\n")
    base = {"path": str(tmp_path), "pattern": "hit", "max_bytes": 100, "max_lines": 100}
    got = grep(base, GO)
    assert got["text"] == "a.txt:1:hit 1\nb.txt:1:hit 3\nc.log:1:hit 4\nsub/f.md:2:hit 7\n"
    assert (got["matches"], got["files"], got["searched"], got["missing"]) == (4, 4, 4, False)
    got = grep({**base, "ignore_case": True, "glob": "*.txt", "max_lines": 2}, GO)
    assert got["text"] == "a.txt:1:hit 1\na.txt:3:HIT 2\n"
    assert (got["matches"], got["files"], got["searched"]) == (3, 2, 2)
    assert got["truncated"] and got["truncated_by"] == "lines"
    got = grep({**base, "path": str(tmp_path / "a.txt"), "pattern": "t ."}, GO)
    assert got["text"] == "a.txt:1:hit 1\n" and got["searched"] == 1
    got = grep({**base, "pattern": "t .", "literal": True}, GO)
    assert got["matches"] == 0 and got["searched"] == 4
    assert grep({**base, "path": str(tmp_path / "nope")}, GO) == {
        "path": str(tmp_path / "nope"),
        "missing": True,
    }
    with pytest.raises(FileOpError, match=r"^invalid regular expression '\(': missing "):
        grep({**base, "pattern": "("}, GO)
    with pytest.raises(FileOpError, match=r"^'pattern' must be a string, got None$"):
        grep({**base, "pattern": None}, GO)
    stopped = threading.Event()
    stopped.set()
    assert grep({**base}, stopped)["searched"] == 0
    # A search already cancelled reads no line of a file either.
    from toolfold.execenv._fileops import search_file

    assert list(search_file(tmp_path / "a.txt", re.compile("hit"), stopped)) == []
    assert list(search_file(tmp_path / "a.txt", re.compile("hit"))) == [(1, "hit 1")]


def test_stat_and_the_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"12345")
    assert stat({"path": "f", "cwd": str(tmp_path)}, GO) == {
        "path": str(tmp_path / "f"),
        "exists": True,
        "is_dir": False,
        "size": 5,
    }
    assert stat({"path": str(tmp_path)}, GO)["is_dir"] is True
    assert stat({"path": str(tmp_path / "x")}, GO) == {
        "path": str(tmp_path / "x"),
        "exists": False,
        "is_dir": False,
        "size": 0,
    }
    missing = FileNotFoundError(2, "No such file or directory", "/x")
    assert op_error_text(missing) == "No such file or directory: /x"
    assert op_error_text(FileOpError("bad")) == "bad"
    assert op_error_text(KeyError("k")) == "KeyError: 'k'"


async def test_run_file_op_runs_one_op_off_the_loop_with_its_path_rule(tmp_path: Path) -> None:
    from toolfold.execenv import ExecError
    from toolfold.execenv._fileops import READ_CHECK, run_file_op

    (tmp_path / "f").write_text("one\ntwo\n")
    (tmp_path / "secret").write_text("key\n")
    args = {"path": str(tmp_path / "f"), "max_bytes": 100, "max_lines": 100}
    got = await run_file_op("read_lines", args)
    assert got["text"] == "one\ntwo\n" and got["path"] == str(tmp_path / "f")

    def check(path: Path) -> str | None:
        return f"{path.name} is hidden" if path.name == "secret" else None

    with pytest.raises(ExecError, match=r"^secret is hidden$"):
        await run_file_op("read_lines", {**args, "path": str(tmp_path / "secret")}, check=check)
    assert READ_CHECK.get() is None  # the rule holds for that call only
    got = await run_file_op("grep", {**args, "path": str(tmp_path), "pattern": "e"}, check=check)
    assert got["text"] == "f:1:one\n" and got["searched"] == 1
    with pytest.raises(ExecError, match=r"^unknown file operation 'write'; expected one of "):
        await run_file_op("write", args)
    with pytest.raises(ExecError, match=r"^No such file or directory: "):
        await run_file_op("read_lines", {**args, "path": str(tmp_path / "nope")})
    with pytest.raises(ExecError, match=r"^'max_lines' must be a positive integer, got 0$"):
        await run_file_op("read_lines", {**args, "max_lines": 0})
    # A call whose cancel is already set reads nothing.
    stop = asyncio.Event()
    stop.set()
    got = await run_file_op("read_bytes", {**args, "max_bytes": 100}, stop)
    assert got["size"] == 0 and got["data"] == ""
    # Unset, it reads all, and the watch on it is gone once the call returns.
    got = await run_file_op("read_bytes", {**args, "max_bytes": 100}, asyncio.Event())
    assert base64.b64decode(got["data"]) == b"one\ntwo\n"


def _config_error(make: Any, **kwargs: Any) -> str:
    from toolfold.execenv import ExecConfigError

    with pytest.raises(ExecConfigError) as info:
        make(**kwargs)
    return str(info.value)


def test_output_limits_refuse_every_bad_value_in_one_line() -> None:
    from toolfold.execenv import ShellOutputLimits

    assert ShellOutputLimits(max_bytes=1, max_lines=1, retain="head").max_bytes == 1
    assert ShellOutputLimits(max_bytes=2, max_lines=2, retain="head_tail").max_lines == 2
    for name, default in (("max_bytes", 50 * 1024), ("max_lines", 2000)):
        for bad in (0, True, 1.0, "3"):
            assert _config_error(ShellOutputLimits, **{name: bad}) == (
                f"ShellOutputLimits.{name} must be a positive int, got {bad!r}; "
                f"use e.g. {name}={default}"
            )
    assert _config_error(ShellOutputLimits, retain="middle") == (
        "ShellOutputLimits.retain must be 'head', 'tail' or 'head_tail', got 'middle'"
    )
    assert _config_error(ShellOutputLimits, head_share=1.0).startswith(
        "ShellOutputLimits.head_share must be between 0 and 1"
    )
    for caps in ({"max_bytes": 1}, {"max_lines": 1}):
        assert _config_error(ShellOutputLimits, retain="head_tail", **caps) == (
            "ShellOutputLimits with retain='head_tail' needs max_bytes and max_lines of "
            f"at least 2 (one for each part), got {caps.get('max_bytes', 50 * 1024)} and "
            f"{caps.get('max_lines', 2000)}"
        )


def test_capture_options_refuse_every_bad_value_in_one_line() -> None:
    from toolfold.execenv import CaptureOptions

    ok = CaptureOptions(min_interval=0, target_rate=0.5, spill_high_water=1, max_spill=1)
    assert (ok.min_interval, ok.spill_high_water, ok.max_spill) == (0, 1, 1)
    assert _config_error(CaptureOptions, limits=None) == (
        "CaptureOptions.limits must be a ShellOutputLimits, got None"
    )
    for bad in (-0.1, "1", None):
        assert _config_error(CaptureOptions, min_interval=bad) == (
            f"CaptureOptions.min_interval must be a number >= 0 (seconds), got {bad!r}"
        )
    for bad in (0, -1, "1"):
        assert _config_error(CaptureOptions, target_rate=bad) == (
            f"CaptureOptions.target_rate must be a number > 0 (bytes/second), got {bad!r}"
        )
    for bad in (0, True, 1.5):
        assert _config_error(CaptureOptions, spill_high_water=bad) == (
            f"CaptureOptions.spill_high_water must be a positive int (bytes), got {bad!r}"
        )
        assert _config_error(CaptureOptions, max_spill=bad) == (
            f"CaptureOptions.max_spill must be a positive int (bytes), got {bad!r}; "
            "the default is 1073741824 (1 GiB)"
        )


def test_a_cut_inside_an_undecodable_byte_drops_it_whole() -> None:
    # A file's undecodable bytes arrive as lone surrogates (surrogateescape), 3 bytes each.
    window = HeadWindow(4, 10)
    assert window.write("ab\udcffcd") == 2
    assert window.result()["text"] == "ab" and window.result()["total_bytes"] == 7


def test_read_at_most_reads_in_bounded_chunks_and_never_past_its_count() -> None:
    import io

    class Recording(io.BytesIO):
        def __init__(self, data: bytes) -> None:
            super().__init__(data)
            self.asked: list[int | None] = []

        def read(self, size: int | None = -1, /) -> bytes:
            self.asked.append(size)
            return super().read(size)

    from toolfold.execenv._fileops import _read_at_most

    f = Recording(b"x" * ((3 << 20) + 10))
    n = (2 << 20) + 5
    assert _read_at_most(f, n, GO) == b"x" * n
    assert f.asked == [1 << 20, 1 << 20, 5]
    f = Recording(b"x" * 10)
    assert _read_at_most(f, 50, GO) == b"x" * 10 and f.asked == [50, 40]


def test_read_bytes_of_a_file_of_unknown_size_reads_one_byte_past_the_cap() -> None:
    # /proc files report size 0: the only size known is what was read, the cap plus one.
    got = read_bytes({"path": "/proc/self/status", "max_bytes": 10}, GO)
    assert got == {"path": "/proc/self/status", "too_big": True, "size": 11}


def test_paths_resolve_against_cwd_else_the_process_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f").write_text("x")
    monkeypatch.chdir(tmp_path)
    for cwd in (None, "", 7):
        assert stat({"path": "f", "cwd": cwd}, GO)["path"] == str(tmp_path / "f")


def test_grep_ignores_a_glob_that_is_not_a_string_and_stops_mid_tree_when_cancelled(
    tmp_path: Path,
) -> None:
    from toolfold.execenv._fileops import READ_CHECK

    for name in ("a", "b", "c"):
        (tmp_path / name).write_text("hit\n")
    base = {"path": str(tmp_path), "pattern": "hit", "max_bytes": 99, "max_lines": 99}
    got = grep({**base, "glob": 7}, GO)
    assert got["path"] == str(tmp_path) and got["matches"] == 3
    assert grep({**base, "pattern": "hi+t"}, GO)["matches"] == 3  # repetition, case kept
    token = READ_CHECK.set(lambda path: "hidden" if path.name == "a" else None)
    try:
        got = grep(base, GO)  # a hidden file is skipped, not the end of the search
    finally:
        READ_CHECK.reset(token)
    assert got["text"] == "b:1:hit\nc:1:hit\n" and got["searched"] == 2
    stop = threading.Event()

    def cancel_at_b(path: Path) -> str | None:
        if path.name == "b":
            stop.set()  # a cancel arriving while the tree is searched
        return None

    token = READ_CHECK.set(cancel_at_b)
    try:
        got = grep(base, stop)
    finally:
        READ_CHECK.reset(token)
    assert got["text"] == "a:1:hit\n" and got["searched"] == 2


async def test_setting_cancel_while_the_worker_runs_stops_it_at_its_next_read(
    tmp_path: Path,
) -> None:
    from toolfold.execenv._fileops import run_file_op

    for name in ("a", "b", "c"):
        (tmp_path / name).write_text("hit\n")
    in_worker, release = threading.Event(), threading.Event()

    def hold_at_a(path: Path) -> str | None:
        if path.name == "a":
            in_worker.set()
            release.wait()  # the worker stays on file "a" until the cancel went through
        return None

    cancel = asyncio.Event()
    args = {"path": str(tmp_path), "pattern": "hit", "max_bytes": 99, "max_lines": 99}
    call = asyncio.ensure_future(run_file_op("grep", args, cancel, check=hold_at_a))
    await asyncio.to_thread(in_worker.wait)
    # Waiters of an asyncio.Event wake in the order they began to wait, and a task's done
    # callbacks run in order: run_file_op's watch passes the cancel on before ours releases.
    mine = asyncio.ensure_future(cancel.wait())
    mine.add_done_callback(lambda _: release.set())
    cancel.set()
    got = await call
    assert (got["searched"], got["matches"]) == (1, 0)  # not even "a" was read on

"""The sink sends a window's slide as ``t`` + ``a`` itself, at any window size.

Folding the ops of any stream equals the sink's state for any writes, slides and
replaces and any caps, huge windows included; a pure write never costs a whole-text
``s``; and the bytes of one flush do not depend on how large the window is.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import _json
from toolfold.chord import apply, is_base
from toolfold.execenv import (
    Append,
    Metadata,
    ShellOutputMetadata,
    ShellOutputTruncation,
    Slide,
)
from toolfold.output import OutputPolicy, ToolOutput, output_text

TEXT = ["content", 0, "text"]
LINE = "0123456789abcdef" * 3 + "ok 😀 漢字 line\n"  # 64 bytes, 57 characters


def _fold(value: Any, ops: list[Any]) -> Any:
    return apply(value, ops)


def _text_ops(ops: list[Any]) -> list[Any]:
    return [op for op in ops if op[0] != "r" and op[1] == TEXT]


MARKER = ["content", 1, "text"]
TEXTS = (TEXT, ["content", 2, "text"])  # head_tail: head and tail (the marker is an `s`)


PIECE = st.one_of(
    st.sampled_from(["x", "\n", "é", "😀y", "line\n", "\n\n", LINE]),
    st.integers(1, 40_000).map(lambda n: LINE * n),  # up to ~2.5 MB in one write
    st.integers(1, 3000).map(lambda n: "z" * n),  # a long line without newline
)
ACTION = st.one_of(
    st.tuples(st.just("write"), st.lists(PIECE, max_size=4).map("".join)),
    st.tuples(st.just("replace"), st.lists(PIECE, max_size=2).map("".join)),
    st.tuples(st.just("footer"), st.sampled_from(["", "use offset=9", "more\n"])),
    st.tuples(st.just("take"), st.just("")),
)


@settings(max_examples=120)
@given(
    actions=st.lists(ACTION, max_size=12),
    retain=st.sampled_from(["head", "tail", "head_tail"]),
    max_bytes=st.sampled_from([1, 7, 100, 50 * 1024, 70_000, 500 * 1024, 5 * 1024 * 1024]),
    max_lines=st.sampled_from([1, 3, 2000, 100_000]),
)
def test_folding_the_ops_equals_the_sink_for_any_window(
    actions: list[tuple[str, str]], retain: Any, max_bytes: int, max_lines: int
) -> None:
    if retain == "head_tail":  # one of each cap for each part
        max_bytes, max_lines = max(max_bytes, 2), max(max_lines, 2)
    out = ToolOutput(OutputPolicy(retain=retain, max_bytes=max_bytes, max_lines=max_lines))
    stream = out.open_stream()
    replica = _fold(None, stream.take())
    whole_text_ok = False
    for kind, arg in actions:
        if kind == "write":
            out.write(arg)
        elif kind == "replace":
            out.replace(arg)
            whole_text_ok = True
        elif kind == "footer":
            out.footer(arg)
            whole_text_ok = True
        else:
            ops = stream.take()
            if not is_base(ops) and not whole_text_ok:
                # Writes alone are always a drop and an append, never the whole text
                # (head_tail: on its head and tail; its marker is one small `s`).
                text_ops = [op for op in ops if op[0] != "r" and op[1] in TEXTS]
                assert all(op[0] in ("t", "a") for op in text_ops), ops
                assert all(op[0] == "s" for op in ops if op[0] != "r" and op[1] == MARKER)
            whole_text_ok = False
            replica = _fold(replica, ops)
            assert replica == out.snapshot()
    out.settle("done.")
    replica = _fold(replica, stream.take())
    assert replica == out.snapshot()
    assert output_text(replica) == out.text


def _meta(view: str, total: int) -> ShellOutputMetadata:
    return ShellOutputMetadata(
        truncation=ShellOutputTruncation(
            truncated=True,
            truncated_by="bytes",
            total_lines=total,
            total_bytes=total * len(LINE.encode()),
            output_lines=view.count("\n"),
            output_bytes=len(view.encode()),
            last_line_partial=False,
            first_line_exceeds_limit=False,
            max_lines=10**6,
            max_bytes=10**8,
        )
    )


@settings(max_examples=60)
@given(slides=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), max_size=8))
def test_exec_env_slides_fold_to_the_same_text(slides: list[tuple[int, int]]) -> None:
    out = ToolOutput(OutputPolicy(max_bytes=10**8, max_lines=10**6))
    stream = out.open_stream()
    view = LINE * 2000
    out.feed(Append(view, _meta(view, 2000)))
    replica = _fold(None, stream.take())
    total = 2000
    for drop_lines, add_lines in slides:
        drop = min(drop_lines, view.count("\n")) * len(LINE)
        view = view[drop:] + LINE * add_lines
        total += add_lines
        out.feed(Slide(drop, LINE * add_lines, _meta(view, total)))
        out.feed(Metadata(_meta(view, total)))
        ops = stream.take()
        assert all(op[0] in ("t", "a") for op in _text_ops(ops)), ops
        replica = _fold(replica, ops)
        assert replica["content"][0]["text"] == view == out.text
        assert replica == out.snapshot()


def test_bytes_per_flush_do_not_depend_on_the_window_size() -> None:
    sizes = []
    for window in (50 * 1024, 500 * 1024, 5 * 1024 * 1024):
        out = ToolOutput(OutputPolicy(max_bytes=window, max_lines=10**6))
        stream = out.open_stream()
        out.write(LINE * (window // len(LINE.encode()) + 10))  # a full, sliding window
        stream.take()
        for _ in range(32):
            out.write(LINE)
        ops = stream.take()
        text_ops = _text_ops(ops)
        assert [op[0] for op in text_ops] == ["t", "a"]
        assert text_ops[1][2] == LINE * 32
        sizes.append(len(_json.dumps(text_ops)))
    assert sizes[0] == sizes[1] == sizes[2], sizes

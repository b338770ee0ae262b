"""``retain="head_tail"``: the start and a rolling end, cut in the middle by one marker.

The sink's text is compared with a reference built from the whole output by walking
its lines (independent of the window code): the whole text while it fits both caps,
else the head under the head's share of the caps + the marker + the tail under the
rest. Totals stay exact; folding the sink's ops equals its state; the head only ever
gets ``a``, the marker one ``s`` when it changes, the tail ``t`` + ``a``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import _json
from toolfold.chord import apply, is_base
from toolfold.execenv import ExecConfigError, ShellOutputLimits
from toolfold.output import OutputPolicy, OutputPolicyError, ToolOutput, output_text
from toolfold.output._cutnotice import cut_marker

HEAD, MARKER, TAIL = (["content", i, "text"] for i in range(3))
LINE = "0123456789abcdef" * 3 + "ok 😀 漢字 line\n"  # 64 bytes


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _ref_head(text: str, max_bytes: int, max_lines: int) -> str:
    kept, used = [], 0
    for line in _lines(text)[:max_lines]:
        size = len(line.encode())
        if used + size > max_bytes:
            kept.append(line.encode()[: max_bytes - used].decode("utf-8", "ignore"))
            break
        kept.append(line)
        used += size
    return "".join(kept)


def _ref_tail(text: str, max_bytes: int, max_lines: int) -> tuple[str, bool]:
    chosen: list[str] = []
    used = 0
    for line in reversed(_lines(text)):
        if len(chosen) == max_lines:
            break
        size = len(line.encode())
        if used + size > max_bytes:
            if not chosen:
                raw = line.encode()[-max_bytes:]
                while raw and 0x80 <= raw[0] < 0xC0:
                    raw = raw[1:]
                return raw.decode(), True
            break
        chosen.append(line)
        used += size
    return "".join(reversed(chosen)), False


def _share(cap: int, share: float) -> int:
    return min(cap - 1, max(1, int(cap * share)))


def reference(
    text: str, max_bytes: int, max_lines: int, share: float
) -> tuple[str, str, bool] | None:
    """``None`` when ``text`` fits, else ``(head, tail, tail_partial)``."""
    if len(text.encode()) <= max_bytes and len(_lines(text)) <= max_lines:
        return None
    hb, hl = _share(max_bytes, share), _share(max_lines, share)
    head = _ref_head(text, hb, hl)
    tail, partial = _ref_tail(text, max_bytes - hb, max_lines - hl)
    return head, tail, partial


def check_against_reference(out: ToolOutput, whole: str) -> None:
    p = out.policy
    t = out.truncation
    assert t["total_bytes"] == len(whole.encode())
    assert t["total_lines"] == len(_lines(whole))
    ref = reference(whole, p.max_bytes, p.max_lines, p.head_share)
    if ref is None:
        assert out.text == whole
        assert not t["truncated"] and t["cut_lines"] == t["cut_bytes"] == t["cut_line"] == 0
        return
    head, tail, partial = ref
    assert t["truncated"] and t["last_line_partial"] == partial
    assert t["cut_line"] == head.count("\n") + 1
    whole_tail_lines = 0 if partial else len(_lines(tail))
    assert t["cut_lines"] == len(_lines(whole)) - whole_tail_lines - t["cut_line"] + 1
    assert t["cut_bytes"] == len(whole.encode()) - len(head.encode()) - len(tail.encode())
    assert t["output_bytes"] == len((head + tail).encode()) <= p.max_bytes
    assert t["output_lines"] <= p.max_lines
    marker = cut_marker(t, None)
    assert marker.startswith("[... ") and f"{t['cut_lines']:,}" in marker
    lead = "\n" if head and not head.endswith("\n") else ""
    assert out.text == head + lead + marker + "\n" + tail


PIECE = st.one_of(
    st.sampled_from(["x", "\n", "é", "😀y", "line\n", "\n\n", LINE, "漢字\n"]),
    st.integers(1, 60).map(lambda n: LINE * n),
    st.integers(1, 300).map(lambda n: "z" * n),  # a long line without newline
)
CAPS = st.tuples(
    st.sampled_from([2, 3, 7, 64, 100, 1000, 5000]),
    st.sampled_from([2, 3, 5, 20, 2000]),
    st.sampled_from([0.2, 0.05, 0.5, 0.9, 0.3]),
)


@settings(max_examples=400)
@given(writes=st.lists(PIECE, max_size=25), caps=CAPS)
def test_text_equals_the_reference_built_from_the_whole_output(
    writes: list[str], caps: tuple[int, int, float]
) -> None:
    max_bytes, max_lines, share = caps
    out = ToolOutput(
        OutputPolicy(
            retain="head_tail",
            max_bytes=max_bytes,
            max_lines=max_lines,
            head_share=share,
            cut_notice=False,
        )
    )
    whole = ""
    for piece in writes:
        out.write(piece)
        whole += piece
        check_against_reference(out, whole)


ACTION = st.one_of(
    st.tuples(st.just("write"), st.lists(PIECE, max_size=4).map("".join)),
    st.tuples(st.just("replace"), st.lists(PIECE, max_size=2).map("".join)),
    st.tuples(st.just("footer"), st.sampled_from(["", "use offset=9", "more\n"])),
    st.tuples(st.just("take"), st.just("")),
)


@settings(max_examples=300)
@given(actions=st.lists(ACTION, max_size=14), caps=CAPS)
def test_folding_the_ops_equals_the_state(
    actions: list[tuple[str, str]], caps: tuple[int, int, float]
) -> None:
    max_bytes, max_lines, share = caps
    policy = OutputPolicy(
        retain="head_tail", max_bytes=max_bytes, max_lines=max_lines, head_share=share
    )
    out = ToolOutput(policy)
    stream = out.open_stream()
    replica = apply(None, stream.take())
    set_ok = footered = False
    for kind, arg in actions:
        if kind == "write":
            out.write(arg)
        elif kind == "replace":
            out.replace(arg)
            set_ok = True
        elif kind == "footer":
            out.footer(arg)
            set_ok = True
            footered = footered or bool(arg)
        else:
            ops = stream.take()
            if not is_base(ops) and not set_ok:
                for op in ops:
                    if op[1] == HEAD:
                        assert op[0] == "a", ops  # the head only ever grows
                    elif op[1] == MARKER:
                        assert op[0] == "s", ops
                    elif op[1] == TAIL and not footered:
                        # (behind a footer, an append sets the tail block whole, as it
                        # sets the text of a single-block output)
                        assert op[0] in ("t", "a"), ops
            set_ok = False
            replica = apply(replica, ops)
            assert replica == out.snapshot()
            assert output_text(replica) == out.text
    out.settle("done.")
    replica = apply(replica, stream.take())
    assert replica == out.snapshot()
    assert output_text(replica) == out.text
    assert out.text.endswith("done.")


def test_small_output_is_untouched_and_the_cut_is_one_marker_line() -> None:
    out = ToolOutput(OutputPolicy(retain="head_tail", max_bytes=10_000, max_lines=10))
    out.write("".join(f"line {i}\n" for i in range(1, 11)))
    assert out.text == "".join(f"line {i}\n" for i in range(1, 11))
    out.write("line 11\n")
    state = out.settle()
    head, marker, tail = (block["text"] for block in state["content"])
    assert head == "line 1\nline 2\n"  # 20 % of 10 lines
    assert marker == "[... 1 line (7 B) cut here: line 3 of 11 ...]\n"
    assert tail.startswith("line 4\n") and "line 11\n" in tail
    assert tail.endswith(
        "[Showing the start and the end of 11 lines; line 3 (7 B) was cut in the middle]"
    )


def test_bytes_per_flush_do_not_depend_on_the_window_size() -> None:
    sizes, markers = [], []
    for window in (50 * 1024, 500 * 1024, 5 * 1024 * 1024):
        out = ToolOutput(OutputPolicy(retain="head_tail", max_bytes=window, max_lines=10**6))
        stream = out.open_stream()
        out.write(LINE * (window // len(LINE.encode()) + 10))  # over the caps: cut
        stream.take()
        for _ in range(32):
            out.write(LINE)
        ops = stream.take()
        text_ops = [op for op in ops if op[1] in (HEAD, MARKER, TAIL)]
        assert [op[0] for op in text_ops] == ["s", "t", "a"]
        assert [op[1] for op in text_ops] == [MARKER, TAIL, TAIL]
        assert text_ops[2][2] == LINE * 32
        sizes.append(len(_json.dumps(text_ops[1:])))
        markers.append(len(_json.dumps(text_ops[0])))
    assert sizes[0] == sizes[1] == sizes[2], sizes
    assert max(markers) < 160, markers  # the marker is one short line whatever the window


def test_a_spill_path_puts_the_file_and_the_first_cut_line_in_the_marker() -> None:
    t: Any = {
        "truncated": True,
        "total_lines": 5000,
        "cut_line": 401,
        "cut_lines": 2934,
        "cut_bytes": 150_000,
    }
    assert cut_marker(t, "/s/exec-1.log") == (
        "[... 2,934 lines (146 KiB) cut here: lines 401-3,334 of 5,000. "
        "Full output: /s/exec-1.log; read on from line 401 (offset=401) ...]"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"head_share": 0}, "head_share must be between 0 and 1"),
        ({"head_share": 1.0}, "head_share must be between 0 and 1"),
        ({"head_share": "half"}, "head_share must be a number"),
        ({"retain": "head_tail", "max_lines": 1}, "at least 2"),
        ({"retain": "middle"}, "'head', 'tail' or 'head_tail'"),
    ],
)
def test_bad_policies_are_refused_with_the_reason(kwargs: Any, message: str) -> None:
    with pytest.raises(OutputPolicyError, match=message):
        OutputPolicy(**kwargs)
    with pytest.raises(ExecConfigError, match=message):
        ShellOutputLimits(**kwargs)


def test_a_seeded_sink_resumes_its_head_marker_and_tail() -> None:
    policy = OutputPolicy(retain="head_tail", max_bytes=10_000, max_lines=10)
    out = ToolOutput(policy)
    for i in range(1, 30):
        out.write(f"line {i}\n")
    out.footer("[note]")
    state = out.snapshot()
    again = ToolOutput(policy, seed=state)
    assert again.snapshot() == state
    again.write("line 30\n")
    assert again.truncation["total_lines"] == 30
    assert again.text.startswith("line 1\nline 2\n[... ")
    assert "line 30\n" in again.text and "lines 3-22 of 30" in again.text


def test_totals_adopted_after_writing_keep_the_parts_and_name_the_spill_file() -> None:
    # What the MCP proxy does with a result: write it, spill it, then adopt the totals
    # with the spill path (no cut_at: the text was windowed by this sink itself).
    import dataclasses

    from toolfold.execenv import ShellOutputMetadata, ShellOutputTruncation

    fields = [f.name for f in dataclasses.fields(ShellOutputTruncation)]
    out = ToolOutput(OutputPolicy(retain="head_tail", max_bytes=10_000, max_lines=10))
    stream = out.open_stream()
    replica = apply(None, stream.take())
    out.write("".join(f"row {i}\n" for i in range(1, 101)))
    t: Any = out.truncation
    out.capture(
        ShellOutputMetadata(
            truncation=ShellOutputTruncation(**{k: t[k] for k in fields if k in t}),
            spill_path="/spill/mcp-x.txt",
            last_line_bytes=t["last_line_bytes"],
        )
    )
    out.footer("\n[note]")
    assert out.text.startswith("row 1\nrow 2\n[... 90 lines (")
    assert (
        "Full output: /spill/mcp-x.txt; read on from line 3 (offset=3) ...]\nrow 93\n" in out.text
    )
    assert out.text.endswith("row 100\n\n[note]")
    assert out.truncation["total_lines"] == 100 and out.truncation["cut_lines"] == 90
    replica = apply(replica, stream.take())
    assert replica == out.snapshot() and output_text(replica) == out.text

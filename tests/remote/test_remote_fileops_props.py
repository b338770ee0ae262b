"""The exec host's head window (``HeadWindow``, behind remote ``read`` and ``grep``) is the
tools' sink window: same text and totals for any text and any chunking; and exec results
survive the wire format."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolfold.execenv import ShellExecResult, ShellOutputTruncation
from toolfold.execenv._headwindow import HeadWindow
from toolfold.execenv._protocol import decode, encode, result_from_dict, result_to_dict
from toolfold.output import OutputPolicy
from toolfold.output._retention import TextWindow

TEXT = st.text(alphabet=st.sampled_from(["a", "b", "é", "€", "😀", "\n", "\n", " "]), max_size=300)


@given(
    chunks=st.lists(TEXT, max_size=8),
    max_bytes=st.integers(1, 80),
    max_lines=st.integers(1, 12),
)
def test_head_window_is_the_sinks_head_window(
    chunks: list[str], max_bytes: int, max_lines: int
) -> None:
    window = HeadWindow(max_bytes, max_lines)
    for chunk in chunks:
        window.write(chunk)
    got = window.result()
    sink = TextWindow(OutputPolicy(retain="head", max_bytes=max_bytes, max_lines=max_lines))
    sink.write("".join(chunks))
    want = sink.truncation()
    assert got["text"] == sink.text
    for key in (
        "truncated",
        "truncated_by",
        "total_lines",
        "total_bytes",
        "output_lines",
        "output_bytes",
        "first_line_exceeds_limit",
        "last_line_bytes",
    ):
        assert got[key] == want[key], key  # type: ignore[literal-required]
    whole = HeadWindow(max_bytes, max_lines)
    whole.write("".join(chunks))
    assert whole.result() == got  # chunking never matters


@given(
    text=st.text(max_size=200),
    exit_code=st.none() | st.integers(0, 255),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    spill=st.none() | st.text(min_size=1, max_size=40),
    numbers=st.lists(st.integers(0, 10**12), min_size=6, max_size=6),
)
def test_exec_results_survive_the_wire(
    text: str,
    exit_code: int | None,
    flags: tuple[bool, bool, bool],
    spill: str | None,
    numbers: list[int],
) -> None:
    result = ShellExecResult(
        truncation=ShellOutputTruncation(
            truncated=flags[0],
            truncated_by="lines" if flags[0] else None,
            total_lines=numbers[0],
            total_bytes=numbers[1],
            output_lines=numbers[2],
            output_bytes=numbers[3],
            last_line_partial=flags[1],
            first_line_exceeds_limit=flags[2],
            max_lines=numbers[4] + 1,
            max_bytes=numbers[5] + 1,
        ),
        spill_path=spill,
        last_line_bytes=numbers[1],
        exit_code=exit_code,
        text=text,
        timed_out=flags[0],
        cancelled=flags[1],
        background_killed=flags[2],
    )
    line = encode({"op": "result", "id": 1, "result": result_to_dict(result)})
    assert line.count(b"\n") == 1  # one message, one line, whatever the text holds
    assert result_from_dict(decode(line)["result"]) == result

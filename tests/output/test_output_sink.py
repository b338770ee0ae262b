"""ToolOutput: replicas folded from op streams equal the sink; limits; lifecycle; seeding."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.chord import apply, is_base
from toolfold.execenv import (
    Append,
    Metadata,
    Replace,
    ShellOutputMetadata,
    ShellOutputTruncation,
    ShellOutputView,
    Slide,
    head_tail_window,
)
from toolfold.output import (
    OutputClosedError,
    OutputLimitError,
    OutputPolicy,
    OutputValueError,
    SinkState,
    ToolOutput,
    image_block,
    output_text,
)
from toolfold.output._retention import count_lines, head_window, tail_window, utf8_len

TEXT_PATH = ["content", 0, "text"]
PNG = image_block(b"\x89PNG fake image bytes", "image/png")


def fold(replica: Any, ops: list[Any]) -> Any:
    return apply(replica, copy.deepcopy(ops)) if ops else replica


def metadata(
    total_bytes: int, total_lines: int, *, spill: str | None = None
) -> ShellOutputMetadata:
    return ShellOutputMetadata(
        truncation=ShellOutputTruncation(
            truncated=True,
            truncated_by="bytes",
            total_lines=total_lines,
            total_bytes=total_bytes,
            output_lines=1,
            output_bytes=1,
            last_line_partial=False,
            first_line_exceeds_limit=False,
            max_lines=2000,
            max_bytes=51200,
        ),
        spill_path=spill,
        last_line_bytes=0,
    )


ALPHABET = st.sampled_from(["x", "y", "\n", "é", "😀", "line\n", "\n\n"])
CHUNK = st.lists(ALPHABET, max_size=20).map("".join)
ACTION = st.one_of(
    st.tuples(st.just("write"), CHUNK),
    st.tuples(st.just("replace"), CHUNK),
    st.tuples(st.just("image"), st.just("")),
    st.tuples(st.just("details"), CHUNK),
    st.tuples(st.just("take_live"), st.just("")),
    st.tuples(st.just("take_durable"), st.just("")),
)


@settings(max_examples=400)
@given(
    actions=st.lists(ACTION, max_size=30),
    retain=st.sampled_from(["head", "tail", "head_tail"]),
    max_bytes=st.integers(1, 40),
    max_lines=st.integers(1, 5),
)
def test_replicas_of_every_stream_equal_the_sink(
    actions: list[tuple[str, str]], retain: Any, max_bytes: int, max_lines: int
) -> None:
    if retain == "head_tail":  # one of each cap for each part
        max_bytes, max_lines = max(max_bytes, 2), max(max_lines, 2)
    out = ToolOutput(
        OutputPolicy(retain=retain, max_bytes=max_bytes, max_lines=max_lines, max_images=50)
    )
    live, durable = out.open_stream(), out.open_stream()
    replicas: dict[str, Any] = {"live": None, "durable": None}
    full = ""
    for kind, chunk in actions:
        if kind == "write":
            out.write(chunk)
            full += chunk
        elif kind == "replace":
            out.replace(chunk)
            full = chunk
        elif kind == "image":
            out.image(PNG)
        elif kind == "details":
            out.details.setdefault("log", []).append(chunk)
        else:
            stream = live if kind == "take_live" else durable
            name = "live" if kind == "take_live" else "durable"
            ops = stream.take()
            if replicas[name] is None:
                assert is_base(ops)
            replicas[name] = fold(replicas[name], ops)
            assert replicas[name] == out.snapshot()
        # The text never exceeds the caps and the totals are exact, at every step.
        t = out.truncation
        if retain == "tail":
            view, _ = tail_window(full, max_bytes, max_lines)
        elif retain == "head":
            view, _ = head_window(full, max_bytes, max_lines)
        else:
            cut = head_tail_window(full, max_bytes, max_lines, 0.2)
            view = full if cut is None else cut[0] + cut[1]
        shown = out.text if retain != "head_tail" else output_text(out.snapshot())
        if retain == "head_tail" and t["truncated"]:
            # The marker line sits between the two parts, outside the window.
            head, marker, tail = (b["text"] for b in out.snapshot()["content"][:3])
            assert marker.lstrip("\n").startswith("[... ") and head + marker + tail == shown
            shown = head + tail
        assert shown == view
        assert utf8_len(view) <= max_bytes and count_lines(view) <= max_lines
        assert (t["total_bytes"], t["total_lines"]) == (utf8_len(full), count_lines(full))
    for name, stream in (("live", live), ("durable", durable)):
        replicas[name] = fold(replicas[name], stream.take())
        assert replicas[name] == out.snapshot()
        assert output_text(replicas[name]) == out.text


def test_seed_op_examples_are_granular() -> None:
    out = ToolOutput()
    stream = out.open_stream()
    out.details.update({"total": 3, "passed": 0, "failures": [], "current": "t1"})
    stream.take()  # base
    out.details["passed"] += 1
    assert stream.take() == [["s", ["details", "passed"], 1]]
    out.details["failures"].append({"name": "t2", "message": "boom"})
    assert stream.take() == [
        ["p", ["details", "failures"], 0, 0, [{"name": "t2", "message": "boom"}]]
    ]
    del out.details["current"]
    assert stream.take() == [["d", ["details", "current"]]]


def test_256kb_build_in_a_50kb_tail_streams_as_truncate_and_append() -> None:
    out = ToolOutput(OutputPolicy(retain="tail", max_bytes=50 * 1024))
    stream = out.open_stream()
    replica = fold(None, stream.take())
    sent_text = 0
    for i in range(5600):
        out.write(f"[{i:05d}] compiling module_{i * 7919 % 10007:05d}.c ... ok ({i % 97} ms)\n")
        if i % 32 == 31:
            ops = stream.take()
            assert not is_base(ops)
            for op in ops:
                if op[1] == TEXT_PATH:
                    assert op[0] in ("t", "a"), op  # never a whole-window set
                    if op[0] == "a":
                        sent_text += len(op[2])
            replica = fold(replica, ops)
    replica = fold(replica, stream.take())
    assert replica == out.snapshot()
    t = replica["truncation"]
    assert t["truncated"] and t["total_lines"] == 5600 and t["output_bytes"] <= 50 * 1024
    assert t["total_bytes"] > 256 * 1024
    assert sent_text < t["total_bytes"] * 1.01  # each byte travels about once


def test_image_limits_fail_loudly_and_keep_what_was_written() -> None:
    out = ToolOutput(OutputPolicy(max_images=2, max_image_bytes=64, max_total_image_bytes=100))
    out.write("before\n")
    out.image(PNG)
    out.image(PNG)
    with pytest.raises(OutputLimitError) as info:
        out.image(PNG)
    assert "image 3 exceeds max_images=2" in str(info.value)
    big = image_block(b"x" * 65, "image/png")
    out2 = ToolOutput(OutputPolicy(max_image_bytes=64, max_total_image_bytes=100))
    with pytest.raises(OutputLimitError, match="image 1 is 65 bytes, over max_image_bytes=64"):
        out2.image(big)
    out3 = ToolOutput(OutputPolicy(max_image_bytes=64, max_total_image_bytes=100))
    out3.image(image_block(b"y" * 60, "image/png"))
    with pytest.raises(OutputLimitError, match="over max_total_image_bytes=100"):
        out3.image(image_block(b"z" * 60, "image/png"))
    state = out.snapshot()
    assert state["content"][0]["text"] == "before\n"
    assert len(state["content"]) == 3


def test_bad_image_blocks_are_refused_with_the_fix() -> None:
    out = ToolOutput()
    with pytest.raises(OutputValueError, match="not valid base64"):
        out.image({"type": "image", "data": "%%%", "mime_type": "image/png"})
    with pytest.raises(OutputValueError, match="mime_type 'text/plain'"):
        out.image(
            {"type": "image", "data": base64.b64encode(b"x").decode(), "mime_type": "text/plain"}
        )


def test_oversized_details_roll_back_and_fail_the_tool() -> None:
    out = ToolOutput(OutputPolicy(max_details_bytes=200))
    stream = out.open_stream()
    out.write("kept\n")
    out.details["items"] = ["a" * 50]
    replica = fold(None, stream.take())
    out.details["items"].append("b" * 300)
    replica = fold(replica, stream.take())
    assert out.failure is not None
    assert "over max_details_bytes=200" in str(out.failure)
    assert replica["details"] == {"items": ["a" * 50]}  # the oversized value never left
    assert replica["content"][0]["text"] == "kept\n"
    with pytest.raises(OutputLimitError, match="max_details_bytes"):
        out.write("more")


def test_writes_after_settlement_raise() -> None:
    out = ToolOutput()
    out.write("done")
    state = out.settle()
    assert out.lifecycle is SinkState.SETTLED
    assert state["content"][0]["text"] == "done"
    with pytest.raises(OutputClosedError, match=r"write\(\) on a ToolOutput that already settled"):
        out.write("late")
    with pytest.raises(OutputClosedError):
        out.terminate(True)


def test_settle_notice_is_kept_even_past_a_full_head_window() -> None:
    out = ToolOutput(OutputPolicy(retain="head", max_bytes=10))
    out.write("0123456789abcdef")
    out.footer("[use offset]")
    state = out.settle("Error: boom")
    assert state["content"][0]["text"] == "0123456789[use offset]\nError: boom"


def test_usage_accumulates_tools_and_terminate_replace() -> None:
    out = ToolOutput()
    out.usage({"input_tokens": 10, "cost": 0.5})
    out.usage({"input_tokens": 5, "output_tokens": 2})
    out.add_tools(["a"])
    out.add_tools(["b", "c"])
    out.terminate(True)
    out.terminate(False)
    state = out.snapshot()
    assert state["usage"] == {"input_tokens": 15, "cost": 0.5, "output_tokens": 2}
    assert state["added_tools"] == ["b", "c"]
    assert state["terminate"] is False
    with pytest.raises(OutputValueError, match="usage key 'tokens' is not one of"):
        out.usage({"tokens": 1})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(OutputValueError, match="wrap it in a list"):
        out.add_tools("bash")


def test_idle_stream_backlog_collapses_to_a_base() -> None:
    out = ToolOutput(OutputPolicy(max_bytes=1024))
    idle, busy = out.open_stream(), out.open_stream()
    replica = fold(None, idle.take())
    busy.take()
    for i in range(3000):
        out.write(f"line {i}\n")
        busy.take()  # each take flushes and fans out to the idle stream too
    assert idle._backlog_bytes < 128 * 1024  # bounded, not 3000 batches
    ops = idle.take()
    assert is_base(ops)
    assert fold(replica, ops) == out.snapshot()


def test_rebase_makes_the_next_take_a_base() -> None:
    out = ToolOutput()
    s = out.open_stream()
    s.take()
    out.write("x")
    s.rebase()
    ops = s.take()
    assert is_base(ops) and ops[0][1]["content"][0]["text"] == "x"
    assert s.take() == [] and not s.dirty


def test_seeded_sink_resumes_where_the_state_left_off() -> None:
    policy = OutputPolicy(retain="tail", max_bytes=64, max_lines=4)
    first = ToolOutput(policy)
    first.write("alpha\nbeta\ngamma\ndelta\nepsilon\n")
    first.details["done"] = ["step1"]
    first.usage({"input_tokens": 3})
    first.add_tools(["extra"])
    first.terminate(True)
    first.image(PNG)
    recovered = first.snapshot()
    second = ToolOutput(policy, seed=recovered)
    assert second.snapshot() == recovered
    for out in (first, second):
        out.write("zeta\n")
        out.details["done"].append("step2")
        out.usage({"input_tokens": 1})
    assert second.snapshot() == first.snapshot()
    assert second.snapshot()["truncation"]["total_lines"] == 6


def test_seed_refuses_a_state_that_is_not_tool_output() -> None:
    with pytest.raises(OutputValueError, match="cannot seed a ToolOutput from this state"):
        ToolOutput(seed={"content": []})  # type: ignore[typeddict-item]


def test_feed_pipes_execenv_updates_and_takes_totals_from_the_source() -> None:
    out = ToolOutput()
    stream = out.open_stream()
    replica = fold(None, stream.take())
    out.feed(Replace(ShellOutputView(text="a\nb\n", metadata=metadata(4, 2))))
    out.feed(Append("c\n", metadata(6, 3)))
    out.feed(Slide(2, "d\n", metadata(8, 4, spill="/spill/1.log")))
    out.feed(Metadata(metadata(1_000_000, 9999, spill="/spill/1.log")))
    ops = stream.take()
    replica = fold(replica, ops)
    assert out.text == "b\nc\nd\n"
    assert replica == out.snapshot()
    t = replica["truncation"]
    assert (t["total_bytes"], t["total_lines"]) == (1_000_000, 9999)  # not re-counted
    assert t["output_bytes"] == 6
    assert replica["spill_path"] == "/spill/1.log"


def test_seed_with_broken_totals_names_the_problem() -> None:
    state = ToolOutput().snapshot()
    del state["truncation"]["total_bytes"]  # type: ignore[misc]
    with pytest.raises(OutputValueError, match="KeyError: 'total_bytes'"):
        ToolOutput(seed=state)


def test_seed_under_tighter_caps_cuts_the_view_and_keeps_the_totals() -> None:
    wide = ToolOutput(OutputPolicy(retain="tail", max_bytes=1000))
    wide.write("".join(f"line {i}\n" for i in range(50)))
    narrow = ToolOutput(OutputPolicy(retain="tail", max_bytes=20), seed=wide.snapshot())
    assert narrow.text == "line 48\nline 49\n"
    t = narrow.snapshot()["truncation"]
    assert t["total_lines"] == 50 and t["truncated"] and t["output_bytes"] == 16


def test_non_json_details_are_refused_naming_the_path_and_nothing_changes() -> None:
    import datetime

    out = ToolOutput()
    stream = out.open_stream()
    out.details["ok"] = 1
    replica = fold(None, stream.take())
    with pytest.raises(ValueError, match=r"path \['details', 'when'\]: datetime"):
        out.details["when"] = datetime.datetime(2020, 1, 1)
    with pytest.raises(
        OutputValueError, match=r"details = \.\.\. refused: .*set \{1, 2\} is not a JSON value"
    ):
        out.details = {"a": {1, 2}}
    replica = fold(replica, stream.take())
    assert replica["details"] == {"ok": 1} == out.snapshot()["details"]


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda o: o.write(b"raw"), "write() takes a str, got bytes"),
        (lambda o: o.replace(None), "replace() takes a str, got NoneType"),
        (
            lambda o: o.usage({"input_tokens": -1}),
            "usage['input_tokens'] must be a non-negative number, got -1",
        ),
        (lambda o: o.usage({"output_tokens": 1.5}), "counts tokens: use an int, got 1.5"),
        (lambda o: o.add_tools(["ok", ""]), "add_tools() names must be non-empty str, got ''"),
        (lambda o: o.terminate("yes"), "terminate() takes a bool, got 'yes'"),
        (lambda o: o.footer("x" * 5000), "footer of 5000 characters is over MAX_FOOTER_CHARS=4096"),
        (lambda o: o.feed("not an update"), "feed() takes an execenv ShellOutputUpdate"),
    ],
)
def test_bad_arguments_name_the_value_and_lose_nothing(call: Any, needle: str) -> None:
    out = ToolOutput()
    out.write("kept\n")
    out.usage({"input_tokens": 2})
    before = out.snapshot()
    with pytest.raises(OutputValueError) as info:
        call(out)
    assert needle in str(info.value)
    assert out.snapshot() == before


def test_a_full_head_window_keeps_sending_counter_only_updates() -> None:
    out = ToolOutput(OutputPolicy(retain="head", max_bytes=16))
    stream = out.open_stream()
    out.write("0123456789abcdef")
    replica = fold(None, stream.take())
    out.write("suppressed\n")
    ops = stream.take()
    assert ops and all(op[1][0] == "truncation" for op in ops)  # no text op at all
    assert ["s", ["truncation", "total_bytes"], 27] in ops
    assert ["s", ["truncation", "truncated"], True] in ops
    replica = fold(replica, ops)
    assert replica["content"][0]["text"] == "0123456789abcdef"
    assert replica == out.snapshot()


@pytest.mark.parametrize("retain", ["tail", "head"])
def test_seeding_keeps_a_footer_outside_the_window(retain: str) -> None:
    policy = OutputPolicy(retain=retain, max_lines=3)  # type: ignore[arg-type]
    first = ToolOutput(policy)
    for i in range(1, 11):
        first.write(f"line {i} ✓\n")
    first.footer("[Showing 3 of 10 lines. Full output: /spill/x.log]")
    state = first.snapshot()

    seeded = ToolOutput(policy, seed=state)
    assert seeded.snapshot() == state  # nothing re-windowed, nothing lost
    seeded.write("line 11 ✓\n")
    text = seeded.snapshot()["content"][0]["text"]
    window, footer = text.split("[", 1)
    expected = (
        "line 9 ✓\nline 10 ✓\nline 11 ✓\n" if retain == "tail" else "line 1 ✓\nline 2 ✓\nline 3 ✓\n"
    )
    assert window == expected
    assert footer.startswith("Showing 3 of 10 lines")
    assert seeded.truncation["total_lines"] == 11

"""Property: for any interleaving of sink calls and any flush points, the replica folded
from the ToolUpdate events equals the sink's state, and the text respects the caps."""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

from harness_helpers import FakeClock
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolfold.chord import apply, is_base
from toolfold.execenv import (
    Append,
    Metadata,
    Replace,
    ShellOutputMetadata,
    ShellOutputTruncation,
    ShellOutputView,
    Slide,
)
from toolfold.harness import (
    EventBus,
    HarnessEvent,
    ToolContext,
    ToolEnd,
    ToolUpdate,
    execute_tool_call,
    tool,
)
from toolfold.output import OutputPolicy, ToolOutput, image_block, output_text
from toolfold.output._retention import count_lines, utf8_len


def meta(view: str, total: int) -> ShellOutputMetadata:
    return ShellOutputMetadata(
        truncation=ShellOutputTruncation(
            truncated=total > utf8_len(view),
            truncated_by="bytes" if total > utf8_len(view) else None,
            total_lines=count_lines(view),
            total_bytes=total,
            output_lines=count_lines(view),
            output_bytes=utf8_len(view),
            last_line_partial=False,
            first_line_exceeds_limit=False,
            max_lines=100,
            max_bytes=1000,
        ),
        last_line_bytes=0,
    )


PIECE = st.lists(st.sampled_from(["a", "b", "\n", "é", "😀", "word "]), max_size=12).map("".join)
STEP = st.one_of(
    st.tuples(st.just("write"), PIECE),
    st.tuples(st.just("replace"), PIECE),
    st.tuples(st.just("image"), st.just("")),
    st.tuples(st.just("details"), PIECE),
    st.tuples(st.just("usage"), st.just("")),
    st.tuples(st.just("terminate"), st.just("")),
    st.tuples(st.just("capture"), PIECE),
    st.tuples(st.just("tick"), st.sampled_from(["0.01", "0.2", "1"])),
)


class Empty(BaseModel):
    pass


def run_example(
    steps: list[tuple[str, str]], retain: str, max_bytes: int, max_lines: int, fails: bool
) -> None:
    policy = OutputPolicy(retain=retain, max_bytes=max_bytes, max_lines=max_lines, max_images=100)  # type: ignore[arg-type]
    clock = FakeClock()
    seen: dict[str, Any] = {}

    @tool(params=Empty, name="scripted", output=policy)
    async def scripted(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: scripted."""
        view = ""  # the exec-env view this tool pretends to receive
        total = 0
        full = ""  # everything written since the last replace (agent-side totals)
        for kind, arg in steps:
            if kind == "write":
                out.write(arg)
                full += arg
            elif kind == "replace":
                out.replace(arg)
                full = arg
            elif kind == "image":
                out.image(image_block(b"img", "image/png"))
            elif kind == "details":
                out.details.setdefault("log", []).append(arg)
            elif kind == "usage":
                out.usage({"input_tokens": 1})
            elif kind == "terminate":
                out.terminate(not out.snapshot()["terminate"])
            elif kind == "capture":
                # A source-bounded stream: grow, slide, replace, or metadata only.
                seen["captured"] = True
                total += utf8_len(arg)
                choice = len(arg) % 4
                if choice == 0 or not view:
                    view = arg
                    out.feed(Replace(ShellOutputView(text=view, metadata=meta(view, total))))
                elif choice == 1:
                    view += arg
                    out.feed(Append(arg, meta(view, total)))
                elif choice == 2:
                    drop = min(len(view), 3)
                    view = view[drop:] + arg
                    out.feed(Slide(drop, arg, meta(view, total)))
                else:
                    out.feed(Metadata(meta(view, total)))
            else:
                clock.advance(float(arg))
                await asyncio.sleep(0)  # let a deferred details notification run
            t = out.truncation
            if retain == "head_tail":
                # The cut marker is a line of its own between the parts, outside the caps.
                assert t["output_bytes"] <= max_bytes and t["output_lines"] <= max_lines
            else:
                assert utf8_len(out.text) <= max_bytes and count_lines(out.text) <= max_lines
            if "captured" in seen:
                assert t["total_bytes"] == total  # the source's totals, not re-counted
            else:
                assert (t["total_bytes"], t["total_lines"]) == (utf8_len(full), count_lines(full))
        seen["final_text"] = out.text
        if fails:
            raise RuntimeError("scripted failure")

    async def main() -> None:
        bus = EventBus()
        events: list[HarnessEvent] = []
        bus.add_listener(events.append)
        result = await execute_tool_call(
            scripted, "c", {}, run_id="r", turn_id="t", bus=bus, clock=clock
        )
        clock.advance(100.0)  # any stray timer would publish now
        updates = [e for e in events if isinstance(e, ToolUpdate)]
        assert is_base(updates[0].ops)
        end = next(i for i, e in enumerate(events) if isinstance(e, ToolEnd))
        assert not any(isinstance(e, ToolUpdate) for e in events[end:])
        replica: Any = None
        for u in updates:
            replica = apply(replica, copy.deepcopy(u.ops))
        assert replica == result.state
        assert result.is_error == fails, result.text
        if fails:
            assert output_text(replica).endswith("RuntimeError: scripted failure")
        else:
            text, written = output_text(replica), seen["final_text"]
            if retain == "head_tail":
                # Settling appends its notice to the tail part, after what was written.
                assert text.startswith(written) or not result.state["truncation"]["truncated"]
                assert text == written or result.state["truncation"]["truncated"]
                return
            assert text.startswith(written)
            if result.state["truncation"]["truncated"]:
                # a cut text settles with the standard notice after it (outside the window)
                assert re.fullmatch(
                    r"\n?\[Showing the (first|last) [^\n]* cut\]", text[len(written) :]
                )
            else:
                assert text == written

    asyncio.run(main())


@settings(max_examples=250)
@given(
    steps=st.lists(STEP, max_size=25),
    retain=st.sampled_from(["head", "tail", "head_tail"]),
    max_bytes=st.integers(1, 48),
    max_lines=st.integers(1, 6),
    fails=st.booleans(),
)
def test_the_fold_of_tool_updates_is_the_result(
    steps: list[tuple[str, str]], retain: str, max_bytes: int, max_lines: int, fails: bool
) -> None:
    if retain == "head_tail":  # one byte and one line at least for each part
        max_bytes, max_lines = max(max_bytes, 2), max(max_lines, 2)
        # A head_tail sink takes a source's updates only from a head_tail capture with its
        # own caps (the exec env's); this script's source keeps a plain view.
        steps = [step for step in steps if step[0] != "capture"]
    run_example(steps, retain, max_bytes, max_lines, fails)

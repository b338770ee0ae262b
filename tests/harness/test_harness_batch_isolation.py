"""A tool or a model never aborts a batch: each of these becomes an error result for that one
call, while the sibling call runs to the end — on a durable store and with a lane host folding
the events (no listener is detached, the store holds the sibling's settled result)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolfold.chord import MAX_DEPTH
from toolfold.harness import (
    Harness,
    HarnessEvent,
    LaneHost,
    Tool,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    ToolResult,
    ToolStart,
    tool,
)
from toolfold.output import MAX_OUTPUT_DEPTH, ToolOutput
from toolfold.storage import Session, open_repository


class Anything(BaseModel):
    x: Any = None


@tool(params=Anything)
async def sibling(
    tool_call_id: str,
    params: Anything,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Yield a few times, then write; it must finish whatever its neighbour does."""
    for _ in range(5):
        await asyncio.sleep(0)
    out.write("sibling done\n")


def nest(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


@pytest.fixture(params=["memory", "sqlite", "jsonl"])
async def session(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Session]:
    url = {
        "memory": "memory:",
        "sqlite": f"sqlite:{tmp_path / 'tf.db'}",
        "jsonl": f"jsonl:{tmp_path / 'jsonl'}",
    }[request.param]
    async with open_repository(url) as repo:
        yield await repo.open_session("s", create=True)


async def run_batch(
    session: Session, tools: list[Tool[Any]], bad: ToolCall
) -> tuple[ToolResult, ToolResult, Harness, list[HarnessEvent]]:
    harness = Harness([sibling, *tools], session=session)
    lane = LaneHost("main")
    harness.bus.add_listener(lane.handle)
    events: list[HarnessEvent] = []
    harness.bus.add_listener(events.append)
    first, second = await harness.run([ToolCall("ok", "sibling"), bad])
    assert first.outcome == "ok" and first.text == "sibling done\n"
    assert harness.bus.listener_errors == []  # the lane host stayed attached
    assert lane.view["tools"]["ok"]["status"] in ("ok", "done")
    # The sibling's result is in the store; nothing is left to resume.
    entries = [e.value for e in await session.read_entries()]
    assert any(isinstance(e, dict) and e.get("tool_call_id") == "ok" for e in entries)
    assert await harness.resume() == []
    return first, second, harness, events


# -- wrong signature -----------------------------------------------------------------------


def test_a_wrong_signature_is_refused_when_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match=r"cannot be called as execute\(tool_call_id"):

        @tool(params=Anything)
        async def no_context(
            tool_call_id: str, params: Anything, cancel: asyncio.Event, out: ToolOutput
        ) -> None:
            """Forgot the context."""

    async def extra(a: Any, b: Any, c: Any, d: Any, e: Any, f: Any) -> None:
        """One too many."""

    with pytest.raises(ToolDefinitionError, match="'async def extra"):
        Tool(name="extra", description="d", params=Anything, execute=extra)

    async def keyword_only(
        *, tool_call_id: Any, params: Any, cancel: Any, out: Any, context: Any
    ) -> None:
        """Keyword-only parameters cannot take the positional call."""

    with pytest.raises(ToolDefinitionError, match="cannot be called"):
        Tool(name="kw", description="d", params=Anything, execute=keyword_only)


async def test_a_signature_that_only_fails_when_called_is_that_calls_error(
    session: Session,
) -> None:
    async def four(tool_call_id: Any, params: Any, cancel: Any, out: Any) -> None:
        """Claims five parameters, takes four."""

    # A signature Python reports wrongly passes the definition check; the call still fails
    # alone.
    four.__signature__ = inspect.signature(sibling.execute)  # type: ignore[attr-defined]
    liar = Tool(name="liar", description="d", params=Anything, execute=four)
    _, bad, _, _ = await run_batch(session, [liar], ToolCall("bad", "liar"))
    assert bad.outcome == "error"
    assert "tool 'liar' could not be started (TypeError" in bad.text
    assert "async def execute(tool_call_id, params, cancel, out, context)" in bad.text


# -- a returned value ------------------------------------------------------------------------


async def test_a_returned_value_is_an_error_naming_out_write(session: Session) -> None:
    @tool(params=Anything)
    async def returns(
        tool_call_id: str,
        params: Anything,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> Any:
        """Writes a line, then returns what it should have written."""
        out.write("partial\n")
        return {"answer": 42}

    _, bad, _, _ = await run_batch(session, [returns], ToolCall("bad", "returns"))
    assert bad.outcome == "error" and bad.is_error
    assert bad.text.startswith("partial\n")  # what it wrote is kept
    assert "returned {'answer': 42} instead of None" in bad.text
    assert "out.write()" in bad.text


# -- values the store cannot hold: model-controlled arguments --------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"x": 2**64}, "at path ['args', 'x']: integer 18446744073709551616 is beyond"),
        ({"x": 2**53}, "at path ['args', 'x']: integer 9007199254740992 is beyond"),
        ({"x": [1, float("nan")]}, "at path ['args', 'x', 1]: nan is not a finite number"),
        ({"x": float("-inf")}, "at path ['args', 'x']: -inf is not a finite number"),
        ({"x": "a\ud800"}, "at path ['args', 'x']: string 'a\\ud800' holds a lone surrogate"),
        ({"x": {"k\udc00": 1}}, "at path ['args', 'x']: object key 'k\\udc00' holds a lone"),
    ],
)
async def test_arguments_no_store_can_hold_are_that_calls_invalid_arguments(
    session: Session, args: Any, fragment: str
) -> None:
    _, bad, _, events = await run_batch(session, [], ToolCall("bad", "sibling", args))
    assert bad.outcome == "invalid_arguments"
    assert "Invalid arguments for tool 'sibling'; the tool was not run" in bad.text
    assert fragment in bad.text
    # The arguments were recorded nowhere: the start event carries none.
    [start] = [e for e in events if isinstance(e, ToolStart) and e.tool_call_id == "bad"]
    assert start.args is None


async def test_nul_in_a_string_argument_is_an_ordinary_character(session: Session) -> None:
    _, second, _, _ = await run_batch(session, [], ToolCall("nul", "sibling", {"x": "a\x00b"}))
    assert second.outcome == "ok"


# -- call ids and names the store cannot key --------------------------------------------------


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (ToolCall("b\x00", "sibling"), "contains a NUL character at index 1"),
        (ToolCall("b\ud800", "sibling"), "holds a lone surrogate"),
        (ToolCall("", "sibling"), "is not a non-empty str"),
        (ToolCall("ok", "sibling"), "is used by an earlier call of this run"),
        (ToolCall("n", "sib\udc00ling"), "is not a str of valid Unicode"),
    ],
)
async def test_a_call_id_the_store_cannot_key_is_that_calls_error(
    session: Session, call: ToolCall, fragment: str
) -> None:
    _, bad, _, events = await run_batch(session, [], call)
    assert bad.outcome == "error" and bad.is_error
    assert fragment in bad.text and "the call was not run" in bad.text
    assert bad.tool_call_id == call.id  # the caller can match it to the model's call
    # No event names it (every subscriber keys calls by id); the sibling's are all there.
    assert sum(isinstance(e, ToolStart) for e in events) == 1


# -- values the store cannot hold: details a tool writes ---------------------------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (2**64, "at path ['details', 'n']: integer 18446744073709551616 is beyond"),
        (float("nan"), "at path ['details', 'n']: nan is not a finite number"),
        ({"s": "\udc00"}, "at path ['details', 'n', 's']: string '\\udc00' holds a lone"),
        (nest(MAX_OUTPUT_DEPTH), f"nested deeper than {MAX_OUTPUT_DEPTH} levels"),
    ],
)
async def test_details_no_store_can_hold_are_refused_when_written(
    session: Session, value: Any, fragment: str
) -> None:
    @tool(params=Anything)
    async def detailed(
        tool_call_id: str,
        params: Anything,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """Writes a line, then a detail no store can hold."""
        out.write("before\n")
        out.details["n"] = value

    _, bad, _, _ = await run_batch(session, [detailed], ToolCall("bad", "detailed"))
    assert bad.outcome == "error"
    assert bad.text.startswith("before\n")
    assert fragment in bad.text
    assert bad.details == {}  # refused: nothing of it was recorded


def test_the_output_depth_bound_leaves_room_for_the_lane_view() -> None:
    # A lane view holds outputs at tools.<id>.output: three levels down.
    assert MAX_OUTPUT_DEPTH + 3 <= MAX_DEPTH


# -- a description is required ----------------------------------------------------------------


def test_a_tool_without_a_docstring_or_description_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="has no description: the model chooses"):

        @tool(params=Anything)
        async def undocumented(
            tool_call_id: str,
            params: Anything,
            cancel: asyncio.Event,
            out: ToolOutput,
            context: ToolContext,
        ) -> None:
            out.write("x")

    with pytest.raises(ToolDefinitionError, match="give the execute function a docstring"):
        Tool(name="blank", description="   ", params=Anything, execute=sibling.execute)

    @tool(params=Anything, description="Described here instead of a docstring.")
    async def described(
        tool_call_id: str,
        params: Anything,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        out.write("x")

    assert described.description == "Described here instead of a docstring."

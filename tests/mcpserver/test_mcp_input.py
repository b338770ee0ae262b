"""``CallInputs`` (what ``ask_client`` waits on), as a property test: whatever order
and grouping the client answers in, with stray keys among them, the pending requests
are exactly the unanswered ones, and the tool gets each answer under its own key."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolfold.mcp._input import MAX_PENDING, CallInputs, InputUnavailable

ELICIT = {"method": "elicitation/create", "params": {"message": "?"}}


@given(
    keys=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
    order=st.randoms(use_true_random=False),
    groups=st.lists(st.integers(1, 3), min_size=8, max_size=8),
    strays=st.lists(st.sampled_from(["x", "y"]), max_size=3),
)
def test_answers_in_any_grouping_resume_the_tool_with_each_answer(
    keys: list[str], order: object, groups: list[int], strays: list[str]
) -> None:
    async def scenario() -> None:
        asked = asyncio.Event()
        inputs = CallInputs(allowed=True, on_ask=asked.set)
        waiter = asyncio.ensure_future(inputs.ask({k: ELICIT for k in keys}))
        await asked.wait()
        assert sorted(inputs.pending) == sorted(keys)
        left = list(keys)
        order.shuffle(left)  # type: ignore[attr-defined]
        answered: set[str] = set()
        for size in groups:
            if not left:
                break
            batch, left = left[:size], left[size:]
            inputs.answer({**{k: f"answer {k}" for k in batch}, **{s: "stray" for s in strays}})
            answered |= set(batch)
            assert set(inputs.pending) == set(keys) - answered
        inputs.answer({k: f"answer {k}" for k in left})
        assert await waiter == {k: f"answer {k}" for k in keys}
        assert inputs.pending == {}

    asyncio.run(scenario())


def test_a_call_that_may_not_ask_and_bad_requests_are_refused() -> None:
    async def scenario() -> None:
        with pytest.raises(InputUnavailable, match="cannot ask its client"):
            await CallInputs(allowed=False).ask({"a": ELICIT})
        inputs = CallInputs(allowed=True)
        with pytest.raises(InputUnavailable, match="asks for 'tools/call'"):
            await inputs.ask({"a": {"method": "tools/call"}})
        with pytest.raises(InputUnavailable, match=f"at most {MAX_PENDING}"):
            await inputs.ask({str(i): ELICIT for i in range(MAX_PENDING + 1)})
        assert inputs.pending == {}

    asyncio.run(scenario())

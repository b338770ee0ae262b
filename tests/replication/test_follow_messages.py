"""``SessionFollower`` follows an assistant message another repository handle writes
(as ``toolfold serve`` follows a ``toolfold agent`` run): every poll's fold equals the
message at its last checkpoint, and the lane ends with the settled message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolfold.chord import apply
from toolfold.harness import (
    EventBus,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    MessageWriter,
    new_lane_view,
    reduce_lane_snapshot,
)
from toolfold.history import SessionFollower
from toolfold.storage import open_repository


async def test_a_follower_folds_a_message_another_handle_streams(tmp_path: Path) -> None:
    # SQLite: a JSONL session has one writer, and no second handle reads it live.
    url = f"sqlite:{tmp_path / 's.db'}"
    writer_repo, reader_repo = open_repository(url), open_repository(url)
    try:
        session = await writer_repo.open_session("agent", create=True)
        reader = await reader_repo.open_session("agent")
        follower = SessionFollower(reader, "agent")
        folded: Any = None
        lane = new_lane_view("agent")
        kinds: list[str] = []

        async def poll() -> None:
            nonlocal folded
            for event in await follower.poll():
                reduce_lane_snapshot(lane, event)
                kinds.append(event.type)
                if isinstance(event, MessageStart):
                    assert event.message_id == "m1"
                if isinstance(event, MessageUpdate):
                    folded = apply(folded, event.ops)
                if isinstance(event, MessageEnd):
                    assert (event.stop_reason, event.is_error) == ("tool_calls", False)

        writer = MessageWriter(
            bus=EventBus(), run_id="r", turn_id="turn-1", message_id="m1", session=session
        )
        async with writer:
            assert writer.durable is not None
            for i in range(30):
                writer.out.text(f"word {i} ")
                if i % 7 == 0:
                    writer.out.tool_call(0, id="c1", name="bash", arguments=f"{i},")
                    await writer.durable.stream.force()
                    checkpoint = writer.out.snapshot()
                    await poll()
                    assert folded == checkpoint
            writer.out.end("tool_calls")
        await poll()
        assert folded == writer.message
        assert kinds[0] == "message_start" and kinds[-1] == "message_end"
        assert kinds.count("message_start") == 1
        assert lane["messages"]["m1"]["output"] == writer.message
        assert lane["messages"]["m1"]["status"] == "ok"
        await poll()  # nothing new: no second start, no second end
        assert kinds.count("message_end") == 1
    finally:
        await writer_repo.close()
        await reader_repo.close()

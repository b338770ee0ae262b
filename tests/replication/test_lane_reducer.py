"""Unit tests of reduce_lane_snapshot: every harness event type, bad input, bounds."""

from __future__ import annotations

import copy
from typing import Any

from toolfold.harness._lane import new_lane_view, reduce_lane_snapshot
from toolfold.harness.events import RunEnd, RunStart, ToolEnd, ToolSettled, ToolStart, ToolUpdate


def _state(text: str = "") -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "details": {},
        "terminate": False,
        "truncation": {"truncated": False, "total_lines": 0},
    }


def _start(tid: str, run: str = "run1", name: str = "bash") -> ToolStart:
    return ToolStart(run, "turn1", tid, name, {"command": "echo hi"})


def _update(tid: str, ops: list[list[Any]], run: str = "run1") -> ToolUpdate:
    return ToolUpdate(run, "turn1", tid, ops)


TEXT = ["content", 0, "text"]


def test_run_start_sets_the_operation_and_run_end_completes_it() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, RunStart("run1", lane="main"))
    assert view["operation"] == {"run_id": "run1", "status": "running"}
    reduce_lane_snapshot(view, RunEnd("other"))
    assert view["operation"] == {"run_id": "run1", "status": "running"}
    reduce_lane_snapshot(view, RunEnd("run1"))
    assert view["operation"] == {"run_id": "run1", "status": "done"}


def test_tool_start_adds_a_running_entry_with_no_output() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    assert view["order"] == ["t1"]
    assert view["tools"]["t1"] == {
        "tool_name": "bash",
        "args": {"command": "echo hi"},
        "run_id": "run1",
        "turn_id": "turn1",
        "status": "running",
        "output": None,
    }


def test_args_are_copied_not_aliased() -> None:
    args = {"command": "ls", "env": {"A": "1"}}
    view = new_lane_view("main")
    reduce_lane_snapshot(view, ToolStart("r", "t", "t1", "bash", args))
    args["env"]["A"] = "changed"
    assert view["tools"]["t1"]["args"] == {"command": "ls", "env": {"A": "1"}}


def test_repeated_tool_start_resets_the_entry_without_duplicating_order() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, _update("t1", [["r", _state("x")]]))
    reduce_lane_snapshot(view, _start("t1"))
    assert view["order"] == ["t1"]
    assert view["tools"]["t1"]["output"] is None


def test_tool_update_folds_base_then_deltas() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, _update("t1", [["r", _state("hello")]]))
    reduce_lane_snapshot(view, _update("t1", [["a", TEXT, " world😀"], ["t", TEXT, 6]]))
    reduce_lane_snapshot(view, _update("t1", [["s", ["details", "exit_code"], 0]]))
    out = view["tools"]["t1"]["output"]
    assert out["content"][0]["text"] == "world😀"
    assert out["details"] == {"exit_code": 0}


def test_update_payload_is_not_aliased_into_the_view() -> None:
    state = _state("a")
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, _update("t1", [["r", state]]))
    state["details"]["x"] = 1
    assert view["tools"]["t1"]["output"]["details"] == {}


def test_update_for_an_unknown_tool_is_ignored() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    before = copy.deepcopy(view)
    reduce_lane_snapshot(view, _update("nope", [["r", _state("x")]]))
    assert view == before


def test_delta_before_any_base_leaves_the_view_unchanged() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    before = copy.deepcopy(view)
    reduce_lane_snapshot(view, _update("t1", [["a", TEXT, "x"]]))
    assert view == before


def test_an_update_that_cannot_apply_leaves_the_view_unchanged() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, _update("t1", [["r", _state("keep")]]))
    before = copy.deepcopy(view)
    # Valid ops first, then one that cannot resolve: the whole batch is refused.
    bad = [
        ["a", TEXT, " more"],
        ["s", ["details", "n"], 1],
        ["a", ["content", 5, "text"], "x"],
    ]
    reduce_lane_snapshot(view, _update("t1", bad))
    assert view == before
    # Malformed ops (unknown verb, forged reserved segment) are refused the same way.
    reduce_lane_snapshot(view, _update("t1", [["x", ["a"], 1]]))
    reduce_lane_snapshot(view, _update("t1", [["s", ["__proto__", "p"], True]]))
    assert view == before
    # And the call keeps folding afterwards.
    reduce_lane_snapshot(view, _update("t1", [["a", TEXT, "!"]]))
    assert view["tools"]["t1"]["output"]["content"][0]["text"] == "keep!"


def test_tool_end_sets_done_or_error_and_nothing_else() -> None:
    view = new_lane_view("main")
    for tid in ("ok", "bad"):
        reduce_lane_snapshot(view, _start(tid))
        reduce_lane_snapshot(view, _update(tid, [["r", _state(tid)]]))
    outputs = copy.deepcopy({t: view["tools"][t]["output"] for t in ("ok", "bad")})
    reduce_lane_snapshot(view, ToolEnd("run1", "turn1", "ok", is_error=False))
    reduce_lane_snapshot(view, ToolEnd("run1", "turn1", "bad", is_error=True))
    reduce_lane_snapshot(view, ToolEnd("run1", "turn1", "unknown", is_error=True))
    assert view["tools"]["ok"]["status"] == "ok"
    assert view["tools"]["bad"]["status"] == "error"
    assert {t: view["tools"][t]["output"] for t in ("ok", "bad")} == outputs
    assert "unknown" not in view["tools"]


def _settled(tid: str, text: str = "", is_error: bool = False) -> ToolSettled:
    message = {
        "role": "tool_result",
        "tool_call_id": tid,
        "tool_name": "bash",
        "content": [{"type": "text", "text": text}],
        "details": {},
        "is_error": is_error,
    }
    return ToolSettled("run1", "turn1", tid, message)


def test_tool_settled_appends_to_a_bounded_transcript_tail() -> None:
    view = new_lane_view("main")
    for i in range(7):
        reduce_lane_snapshot(view, _settled(f"t{i}", str(i)), transcript_tail=3)
    assert [m["tool_call_id"] for m in view["transcript"]] == ["t4", "t5", "t6"]


def test_settled_message_marks_a_call_that_never_saw_tool_end() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, _settled("t1", "boom", is_error=True))
    assert view["tools"]["t1"]["status"] == "error"


def test_settled_calls_past_the_bound_leave_tools_but_running_ones_stay() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("running"))
    for i in range(5):
        reduce_lane_snapshot(view, _start(f"t{i}"))
        reduce_lane_snapshot(view, ToolEnd("run1", "turn1", f"t{i}", is_error=False))
        reduce_lane_snapshot(view, _settled(f"t{i}"), settled_tools=2)
    assert view["order"] == ["running", "t3", "t4"]
    assert set(view["tools"]) == {"running", "t3", "t4"}


def _folded_and_settled(view: Any, tid: str, text: str, **bounds: int) -> None:
    reduce_lane_snapshot(view, _start(tid))
    reduce_lane_snapshot(view, _update(tid, [["r", _state(text)]]))
    reduce_lane_snapshot(view, ToolEnd("run1", "turn1", tid, is_error=False), **bounds)
    reduce_lane_snapshot(view, _settled(tid, text), **bounds)


def test_a_settled_result_the_lane_folded_is_referred_to_not_copied() -> None:
    view = new_lane_view("main")
    _folded_and_settled(view, "t1", "x" * 5000)
    (entry,) = view["transcript"]
    assert entry["output_ref"] == ["tools", "t1", "output"]
    assert "content" not in entry and "details" not in entry
    assert entry["tool_name"] == "bash" and entry["is_error"] is False
    assert view["tools"]["t1"]["output"]["content"][0]["text"] == "x" * 5000


def test_a_settled_result_that_differs_from_the_fold_is_copied() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, _update("t1", [["r", _state("live")]]))
    reduce_lane_snapshot(view, _settled("t1", "different"))
    reduce_lane_snapshot(view, _settled("never-started", "alone"))
    assert [e["content"][0]["text"] for e in view["transcript"]] == ["different", "alone"]
    assert not any("output_ref" in e for e in view["transcript"])


def test_settled_status_uses_the_stored_views_words() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, _start("t1"))
    reduce_lane_snapshot(view, ToolEnd("run1", "turn1", "t1", is_error=True))
    message = {**_settled("t1").message, "is_error": True, "outcome": "cancelled"}
    reduce_lane_snapshot(view, ToolSettled("run1", "turn1", "t1", message))
    assert view["tools"]["t1"]["status"] == "cancelled"


def test_calls_the_transcript_refers_to_stay_until_the_transcript_drops_them() -> None:
    view = new_lane_view("main")
    for i in range(6):
        _folded_and_settled(view, f"t{i}", str(i), settled_tools=1, transcript_tail=3)
    # Newest settled call, plus the ones the 3-entry transcript still refers to.
    assert view["order"] == ["t3", "t4", "t5"]
    for entry in view["transcript"]:
        (_, tid, _) = entry["output_ref"]
        assert view["tools"][tid]["output"]["content"][0]["text"] == tid[1:]


def test_a_restarted_call_leaves_the_transcript_its_own_copy() -> None:
    view = new_lane_view("main")
    _folded_and_settled(view, "t1", "first run")
    reduce_lane_snapshot(view, _start("t1"))
    (entry,) = view["transcript"]
    assert "output_ref" not in entry
    assert entry["content"] == [{"type": "text", "text": "first run"}]
    assert view["tools"]["t1"]["output"] is None


def test_run_start_keeps_settled_calls_of_earlier_runs_within_the_bound() -> None:
    view = new_lane_view("main")
    reduce_lane_snapshot(view, RunStart("run1", lane="main"))
    reduce_lane_snapshot(view, _start("done1"))
    reduce_lane_snapshot(view, _start("still"))
    reduce_lane_snapshot(view, ToolEnd("run1", "turn1", "done1", is_error=False))
    reduce_lane_snapshot(view, RunStart("run2", lane="main"))
    assert view["order"] == ["done1", "still"]
    assert view["operation"] == {"run_id": "run2", "status": "running"}
    reduce_lane_snapshot(view, _start("new", run="run2"))
    reduce_lane_snapshot(view, ToolEnd("run2", "turn1", "new", is_error=False), settled_tools=1)
    assert view["order"] == ["still", "new"]


def test_an_unknown_event_is_ignored() -> None:
    view = new_lane_view("main")
    before = copy.deepcopy(view)
    reduce_lane_snapshot(view, object())  # type: ignore[arg-type]
    assert view == before

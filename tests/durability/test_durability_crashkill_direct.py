"""``toolfold run``'s direct driver killed (SIGKILL) at each of its storage calls, then
``toolfold resume``: the call settles exactly once, an acknowledged result is intact,
a resumed one keeps a prefix of the output with the interruption marker, and nothing of
its operation (scope, lease holder) outlives the settlement (``crashkill_direct.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from crashkill_direct import LONG, SHORT, kill_point


@pytest.mark.parametrize("command", [SHORT, LONG], ids=["short", "long"])
def test_a_kill_at_every_storage_call_loses_and_duplicates_nothing(
    tmp_path: Path, command: str
) -> None:
    reference = kill_point(tmp_path / "ref", 0, command)
    assert reference.violations == [] and reference.settled_before
    assert reference.calls >= (2 if command == SHORT else 4)  # start, (checkpoints,) settle
    outcomes = [kill_point(tmp_path / f"k{k}", k, command) for k in range(1, reference.calls + 2)]
    assert [o.violations for o in outcomes] == [[] for _ in outcomes]
    # The sweep reached each case: killed before the start committed, and between the
    # start and the settlement (resumed); the reference is the run never killed. (How
    # many checkpoints and renewals a long run makes depends on timing: a kill point
    # past this run's last call is a run that settled.)
    assert not outcomes[0].started and outcomes[0].killed
    assert any(o.resumed for o in outcomes)

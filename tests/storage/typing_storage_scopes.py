"""Examples the type checker must accept, and mixed-scope transactions it must reject.

Not a test module: test_storage_typing.py runs mypy over it and expects an error on
exactly the lines marked ``# E``.
"""

from __future__ import annotations

from toolfold.storage import (
    EphemeralWrite,
    Session,
    SessionWrite,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)


async def accepted(s: Session) -> None:
    op = ephemeral_scope("op")
    await s.commit([set_value(value("a", "b"), 1), append_entry("e"), retire_scope(op)])
    await s.commit(
        [set_value(value("a", "b", op), 1), append_list(list_address("a", "l", op), [1])]
    )
    await s.commit(lambda: [append_list(list_address("a", "l", op), 1, "base")])
    pending: list[EphemeralWrite] = [set_value(value("a", "b", op), {"x": [1, None]})]
    await s.commit(pending)
    settled: list[SessionWrite] = [append_entry({"role": "tool"}), retire_scope(op)]
    await s.commit(settled)


async def rejected(s: Session) -> None:
    op = ephemeral_scope("op")
    await s.commit([set_value(value("a", "b"), 1), set_value(value("a", "b", op), 1)])  # E
    await s.commit([append_entry("e"), append_list(list_address("a", "l", op), 1)])  # E
    bad: list[SessionWrite] = [set_value(value("a", "b", op), 1)]  # E
    await s.commit(bad)
    retire_scope(value("a", "b"))  # E

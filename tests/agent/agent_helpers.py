"""Reading what an agent run left in its store, for the agent tests."""

from __future__ import annotations

from toolfold.durability import pending_assistant_output, pending_messages, recover
from toolfold.storage import StorageError, open_repository


async def checkpointed_text(url: str, name: str) -> str:
    """The text of session ``name``'s first unsettled assistant message, as last
    checkpointed ("" if there is none yet, or the store cannot be read yet)."""
    repo = open_repository(url)
    try:
        session = await repo.open_session(name)
        found = await pending_messages(session)
        if not found:
            return ""
        state = await recover(
            session, pending_assistant_output(found[0].operation_id, found[0].message_id)
        )
        parts = state.value.get("content", []) if state is not None else []
        return "".join(p.get("text", "") for p in parts)
    except StorageError:
        return ""
    finally:
        await repo.close()

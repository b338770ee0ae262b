"""An agent process for the crash test: FRAMEWORK STORE_URL SESSION.

Runs one agent on the framework's offline model, with a durable session, whose
only tool call writes a line and then never returns; the test kills it with
SIGKILL and settles the call with ``toolfold resume``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from integrations_helpers import TEST_TOOLS, drive

from toolfold.integrations import ToolLoop
from toolfold.storage import open_repository


async def main(framework: str, url: str, name: str) -> None:
    repo = open_repository(url)
    session = await repo.open_session(name, create=True)
    loop = ToolLoop(TEST_TOOLS, session=session)
    await drive(framework, loop, [[("c1", "hang", {})], "never reached"])


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

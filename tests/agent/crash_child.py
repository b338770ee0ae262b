"""An agent process for the crash test: BASE_URL STORE_URL SESSION (killed mid-answer)."""

from __future__ import annotations

import asyncio
import sys

from openai import AsyncOpenAI

from toolfold.agent import run_agent
from toolfold.harness import ToolLoop
from toolfold.storage import open_repository


async def main(base_url: str, url: str, name: str) -> None:
    session = await open_repository(url).open_session(name, create=True)
    client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    await run_agent(
        "q", client=client, model="scripted", loop=ToolLoop([], session=session), session=session
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

"""Images a tool writes reach the model in each framework's own image type."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from integrations_helpers import NoParams

from toolfold.harness import ToolContext, tool
from toolfold.integrations import ToolLoop
from toolfold.output import ToolOutput, image_block

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(24))


@tool(params=NoParams)
async def picture(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Draws a picture."""
    out.write("a picture:\n")
    out.image(image_block(PNG, "image/png"))


async def test_pydantic_ai_receives_binary_content() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        BinaryContent,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolfold.integrations.pydantic_ai import run

    received: list[Any] = []

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("picture", {}, tool_call_id="c1")])
        received.extend(p.content for p in messages[-1].parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("seen")])

    await run(Agent(FunctionModel(model)), "go", ToolLoop([picture]))
    [[text, image]] = received
    assert text == "a picture:\n"
    assert isinstance(image, BinaryContent)
    assert image.data == PNG and image.media_type == "image/png"


async def test_langgraph_tool_message_has_an_image_block() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage

    from toolfold.integrations.langgraph import agent_graph

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = Fake(
        messages=iter(
            [
                AIMessage("", tool_calls=[{"name": "picture", "args": {}, "id": "c1"}]),
                AIMessage("seen"),
            ]
        )
    )
    loop = ToolLoop([picture])
    async with loop:
        state = await agent_graph(model, loop).ainvoke({"messages": [("user", "go")]})
    [message] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert message.content == [
        {"type": "text", "text": "a picture:\n"},
        {"type": "image", "base64": base64.b64encode(PNG).decode(), "mime_type": "image/png"},
    ]


async def test_agents_sdk_receives_an_input_image() -> None:
    from agents import Agent, Model, ModelResponse, Usage, set_tracing_disabled
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from toolfold.integrations.openai_agents import run

    set_tracing_disabled(True)
    received: list[Any] = []

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = args[1] if len(args) > 1 else kwargs["input"]
            outputs = [
                i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
            ]
            usage = Usage(requests=1)
            if not outputs:
                call = ResponseFunctionToolCall(
                    type="function_call",
                    call_id="c1",
                    name="picture",
                    arguments=json.dumps({}),
                    id="fc_1",
                    status="completed",
                )
                return ModelResponse(output=[call], usage=usage, response_id=None)
            received.extend(outputs[0]["output"])
            message = ResponseOutputMessage(
                id="m",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text="seen", annotations=[])],
            )
            return ModelResponse(output=[message], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    await run(Agent(name="a", model=Scripted()), "go", ToolLoop([picture]))
    kinds = [item["type"] for item in received]
    assert kinds == ["input_text", "input_image"]
    assert received[0]["text"] == "a picture:\n"
    assert received[1]["image_url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()

"""The output sink: one bounded, tracked ``ToolOutput`` per tool call.

Tools write into a ``ToolOutput`` and return nothing; the sink *is* the result.
It owns retention (head, tail or head-and-tail windows with exact totals), one Chord tracker over
the ``ToolOutputState``, and any number of independent op streams
(``open_stream``) for the live publisher and the durable checkpointer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports

from ._errors import (
    OutputClosedError,
    OutputError,
    OutputLimitError,
    OutputPolicyError,
    OutputValueError,
)

if TYPE_CHECKING:
    from ._assistant import AssistantMessageState, AssistantOutput, MessageStream
    from ._images import image_block
    from ._opstream import OpStream
    from ._retention import OutputPolicy, Retain
    from ._sink import MAX_OUTPUT_DEPTH, ToolOutput
    from ._state import (
        ImageContent,
        SinkState,
        TextContent,
        ToolOutputState,
        Truncation,
        Usage,
        output_text,
        text_blocks,
    )

# Every name but the errors is imported on first use: each user imports what it uses (a
# tool call alone, as `toolfold run` makes, none of an assistant message's output), and
# the state, the windows and the policy import no asyncio.
__getattr__ = lazy_exports(
    __name__,
    {
        "AssistantMessageState": "._assistant",
        "AssistantOutput": "._assistant",
        "MessageStream": "._assistant",
        "image_block": "._images",
        "OpStream": "._opstream",
        "OutputPolicy": "._retention",
        "Retain": "._retention",
        "MAX_OUTPUT_DEPTH": "._sink",
        "ToolOutput": "._sink",
        "ImageContent": "._state",
        "SinkState": "._state",
        "TextContent": "._state",
        "ToolOutputState": "._state",
        "Truncation": "._state",
        "Usage": "._state",
        "output_text": "._state",
        "text_blocks": "._state",
    },
)

__all__ = [
    "MAX_OUTPUT_DEPTH",
    "AssistantMessageState",
    "AssistantOutput",
    "ImageContent",
    "MessageStream",
    "OpStream",
    "OutputClosedError",
    "OutputError",
    "OutputLimitError",
    "OutputPolicy",
    "OutputPolicyError",
    "OutputValueError",
    "Retain",
    "SinkState",
    "TextContent",
    "ToolOutput",
    "ToolOutputState",
    "Truncation",
    "Usage",
    "image_block",
    "output_text",
    "text_blocks",
]

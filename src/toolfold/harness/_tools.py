"""``Tool``: a tool definition (name, description, pydantic params, output policy)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from toolfold.output import OutputPolicy

from ._errors import ToolDefinitionError

if TYPE_CHECKING:
    import asyncio

    from toolfold.output import ToolOutput

    from ._context import ToolContext


class ParamsModel(Protocol):
    """What a tool's ``params`` class must offer: a pydantic ``BaseModel`` subclass, or a
    class with the same two class methods (the built-in ``bash`` has one, so that
    ``toolfold run`` starts without importing pydantic)."""

    @classmethod
    def model_validate(cls, obj: Any) -> Self: ...

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]: ...


P = TypeVar("P", bound=ParamsModel)

ExecuteFn = Callable[
    [str, P, "asyncio.Event", "ToolOutput", "ToolContext"], Coroutine[Any, Any, None]
]
"""``async def execute(tool_call_id, params, cancel, out, context) -> None`` (a tool is
defined without importing asyncio: its ``execute`` runs on the loop, its definition
does not)."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,63}")

EXECUTE_ARGS = ("tool_call_id", "params", "cancel", "out", "context")
"""What the harness passes ``execute``, positionally and in this order."""


def check_execute_signature(name: str, execute: Callable[..., Any]) -> None:
    """Refuse an ``execute`` that cannot be called with the harness's five arguments, at
    definition time (a wrong signature would otherwise only fail when the model calls it).

    A callable whose signature Python cannot inspect passes here; the harness then turns a
    failing call into that call's error result.
    """
    try:
        signature = inspect.signature(execute)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*EXECUTE_ARGS)
    except TypeError as exc:
        raise ToolDefinitionError(
            f"tool {name!r}: execute{signature} cannot be called as "
            f"execute({', '.join(EXECUTE_ARGS)}) ({exc}); define it as "
            f"'async def {getattr(execute, '__name__', 'execute')}"
            f"({', '.join(EXECUTE_ARGS)}) -> None'"
        ) from None


@dataclass(frozen=True)
class Tool(Generic[P]):
    """A tool: what the model sees (name, description, JSON schema of ``params``) and
    how it runs (``execute``, ``output`` policy, ``replay_safe``).

    ``execute`` returns nothing: everything goes into ``out``. Failing is raising.
    ``replay_safe`` says the tool may be re-run after a crash, seeded with the output
    it had already produced (it should memoise finished work with
    ``context.set_memo``); a tool that is not replay-safe is settled from its last
    checkpoint with an interruption marker instead.
    """

    name: str
    description: str
    params: type[P]
    execute: ExecuteFn[P]
    output: OutputPolicy = field(default_factory=OutputPolicy)
    replay_safe: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise ToolDefinitionError(
                f"tool name {self.name!r} is invalid: use 1-64 characters, a letter first, "
                "then letters, digits, '_' or '-'"
            )
        # Checked by shape, not by issubclass(BaseModel): importing pydantic here would
        # cost every `toolfold run` its import (docs/BENCHMARKS.md, start-up).
        if not (
            isinstance(self.params, type)
            and callable(getattr(self.params, "model_validate", None))
            and callable(getattr(self.params, "model_json_schema", None))
        ):
            raise ToolDefinitionError(
                f"tool {self.name!r}: params must be a pydantic BaseModel subclass, got {self.params!r}"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ToolDefinitionError(
                f"tool {self.name!r} has no description: the model chooses and calls tools by "
                "their description, so give the execute function a docstring (or pass "
                "description=...) saying what the tool does and what its parameters mean"
            )
        if not inspect.iscoroutinefunction(self.execute):
            raise ToolDefinitionError(
                f"tool {self.name!r}: execute must be an 'async def' function, got {self.execute!r}"
            )
        check_execute_signature(self.name, self.execute)
        if not isinstance(self.output, OutputPolicy):
            raise ToolDefinitionError(
                f"tool {self.name!r}: output must be an OutputPolicy, got {self.output!r}"
            )

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the params, as sent to the model."""
        return self.params.model_json_schema()

    def definition(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` for a model's tool list."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.json_schema(),
        }


def tool(
    *,
    params: type[P],
    name: str | None = None,
    description: str | None = None,
    output: OutputPolicy | None = None,
    replay_safe: bool = False,
) -> Callable[[ExecuteFn[P]], Tool[P]]:
    """Decorator: turn ``async def execute(tool_call_id, params, cancel, out, context)``
    into a ``Tool``. The name defaults to the function name and the description to
    its docstring."""

    def wrap(fn: ExecuteFn[P]) -> Tool[P]:
        doc = inspect.getdoc(fn) or ""
        return Tool(
            name=name if name is not None else getattr(fn, "__name__", ""),
            description=description if description is not None else doc,
            params=params,
            execute=fn,
            output=output if output is not None else OutputPolicy(),
            replay_safe=replay_safe,
        )

    return wrap

"""``BashParams`` is a plain class (so ``toolfold run`` starts without pydantic) that must
behave exactly like the pydantic model it replaced: same accepted values, same coercions,
same validation errors, same JSON schema."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from toolfold.tools import BASH
from toolfold.tools import BashParams as Plain


class BashParams(BaseModel):  # the pydantic model it replaced (its name is in errors)
    """Arguments of the ``bash`` tool."""

    command: str = Field(description="The shell command to run (bash -c).")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed (default: none)."
    )
    yield_after: float | None = Field(
        default=10.0,
        gt=0,
        le=120.0,
        description=(
            "Seconds to wait for the command to end. One still running then keeps "
            "running in the background: the result shows its output so far and a "
            "handle for bash_read, bash_write, bash_signal and bash_stop. null: wait "
            "until it ends."
        ),
    )
    tty: bool = Field(
        default=False,
        description=(
            "Run it on a pseudo-terminal (120x40), for REPLs, prompts (read -p) and "
            "programs that want a terminal."
        ),
    )


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "true", "echo hi", "1.5", "-2", "nan", " 3 "]),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.builds(bytes, st.binary(max_size=3)),
)
ARGS = st.one_of(
    st.dictionaries(
        st.sampled_from(["command", "timeout", "yield_after", "tty", "extra"]), VALUES, max_size=4
    ),
    VALUES,
)


def outcome(validate: Any, obj: Any) -> tuple[str, Any]:
    try:
        params = validate(obj)
    except ValidationError as exc:
        return "invalid", exc.errors(include_url=False)
    timeout = params.timeout
    key = "nan" if isinstance(timeout, float) and math.isnan(timeout) else timeout
    extra = (params.yield_after, type(params.yield_after), params.tty, type(params.tty))
    return "ok", (params.command, type(params.command), key, type(timeout), *extra)


@settings(max_examples=400, deadline=None)
@given(ARGS)
def test_validation_matches_the_pydantic_model(obj: Any) -> None:
    assert outcome(Plain.model_validate, obj) == outcome(BashParams.model_validate, obj)


@settings(max_examples=200, deadline=None)
@given(VALUES, VALUES)
def test_construction_matches_the_pydantic_model(command: Any, timeout: Any) -> None:
    assert outcome(lambda kw: Plain(**kw), {"command": command, "timeout": timeout}) == (
        outcome(lambda kw: BashParams(**kw), {"command": command, "timeout": timeout})
    )


def test_schema_is_the_pydantic_models() -> None:
    assert BASH.json_schema() == BashParams.model_json_schema()
    assert BASH.json_schema()["title"] == "BashParams"


def test_an_instance_validates_to_itself() -> None:
    params = Plain(command="true", timeout=2)
    assert params.timeout == 2.0 and isinstance(params.timeout, float)
    assert Plain.model_validate(params) is params
    with pytest.raises(ValidationError, match="greater than 0"):
        Plain(command="true", timeout=0)

"""What a finished ``bash`` command makes of its output (``tools._bash_output``) imports
neither the harness nor asyncio, so a driver without them settles a command as the tool
does; the package imports no tool until one is used. (The ``bash`` tool itself is a
harness ``Tool``: its module imports the harness, and with it asyncio.)"""

from __future__ import annotations

from fresh_modules import loaded_of


def test_the_result_building_imports_neither_harness_nor_asyncio() -> None:
    watched = ("asyncio", "toolfold.harness", "toolfold.tools.bash")
    assert loaded_of(("toolfold.tools._bash_output",), watched) == []


def test_the_package_imports_no_tool() -> None:
    watched = ("asyncio", "toolfold.harness", "toolfold.tools.bash", "pydantic")
    assert loaded_of(("toolfold.tools",), watched) == []


def test_the_tool_module_shares_the_result_building() -> None:
    from toolfold.tools import _bash_output, bash

    assert bash.finish_output is _bash_output.finish_output
    assert bash.bash_capture is _bash_output.bash_capture
    assert bash.footer is _bash_output.footer

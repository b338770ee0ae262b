"""What a finished ``bash`` command makes of its output (``tools._bash_output``) imports
neither the harness nor asyncio, so a driver without them settles a command as the tool
does; the package imports no tool until one is used. (The ``bash`` tool itself is a
harness ``Tool``: its module imports the harness, and with it asyncio.)"""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import sys
for name in sys.argv[1:]:
    __import__(name)
print(" ".join(sorted(m for m in {names} if m in sys.modules)))
"""


def loaded(modules: tuple[str, ...], watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a fresh interpreter has loaded after importing ``modules``."""
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(names=set(watched)), *modules],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.split()


def test_the_result_building_imports_neither_harness_nor_asyncio() -> None:
    watched = ("asyncio", "toolfold.harness", "toolfold.tools.bash")
    assert loaded(("toolfold.tools._bash_output",), watched) == []


def test_the_package_imports_no_tool() -> None:
    watched = ("asyncio", "toolfold.harness", "toolfold.tools.bash", "pydantic")
    assert loaded(("toolfold.tools",), watched) == []


def test_the_tool_module_shares_the_result_building() -> None:
    from toolfold.tools import _bash_output, bash

    assert bash.finish_output is _bash_output.finish_output
    assert bash.bash_capture is _bash_output.bash_capture
    assert bash.footer is _bash_output.footer

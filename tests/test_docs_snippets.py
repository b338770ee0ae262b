"""Every Python block in docs/ runs as written, or is marked as a fragment.

A block opened with ```` ```python ```` is a complete script: it runs here in a fresh
directory and must exit 0. A block that shows a call in context (names the surrounding
text defines, top-level ``await``) is opened with ```` ```python fragment ```` instead.
The framework pages (docs/integrations/) run in tests/integrations/test_integrations_docs.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.M | re.S)


def _blocks() -> list[tuple[str, int, str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for n, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8"))):
            found.append((page.name, n, match.group(1).strip(), match.group(2)))
    return found


RUNNABLE = [(page, n, code) for page, n, info, code in _blocks() if info == "python"]


def test_python_blocks_are_runnable_or_marked_fragments() -> None:
    infos = {info for _, _, info, _ in _blocks()}
    python_like = {i for i in infos if i.split()[:1] in (["python"], ["py"], ["python3"])}
    assert python_like <= {"python", "python fragment"}, python_like
    assert len(RUNNABLE) >= 5  # the examples that must keep running


@pytest.mark.parametrize(
    ("page", "n", "code"), RUNNABLE, ids=[f"{p}-block{n}" for p, n, _ in RUNNABLE]
)
def test_docs_python_block_runs(page: str, n: int, code: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"{page} block {n} failed:\n{proc.stderr[-3000:]}"

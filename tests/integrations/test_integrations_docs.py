"""Every Python block of docs/integrations/*.md runs as written (offline models)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
PAGES = sorted(DOCS.glob("*.md"))


def test_there_is_a_page_per_framework() -> None:
    assert [p.name for p in PAGES] == ["langgraph.md", "openai-agents.md", "pydantic-ai.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_example_runs(page: Path, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert blocks, f"{page.name} has no python example"
    for i, block in enumerate(blocks):
        script = tmp_path / f"example_{i}.py"
        script.write_text(block, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, f"{page.name} block {i}: {proc.stderr[-3000:]}"
        assert "Full output: spill/" in proc.stdout, proc.stdout

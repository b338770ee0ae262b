"""The README's Python example runs as written and its claims hold (the fold is the result)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "README.md has no python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    # the tail window of three lines, the notice that says the rest was cut (the
    # model must not believe it saw everything), the details, and the exact total
    assert proc.stdout.startswith(
        "998\n999\n1000\n[Showing the last 3 of 1,000 lines; 997 earlier lines were cut]"
    )
    assert "{'done': 1000} 1000" in proc.stdout


def test_readme_links_point_to_existing_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\((docs/[^)]+)\)", readme):
        assert (ROOT / target).exists(), f"README links to missing {target}"

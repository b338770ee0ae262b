"""The one-scope rule is visible to the type checker: mypy over typing_storage_scopes.py."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

EXAMPLES = Path(__file__).with_name("typing_storage_scopes.py")


def test_mypy_accepts_single_scope_and_rejects_mixed_transactions(tmp_path: Path) -> None:
    out, err, _ = api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(EXAMPLES)]
    )
    assert err == ""
    flagged = {int(m.group(1)) for m in re.finditer(r"typing_storage_scopes\.py:(\d+): error", out)}
    marked = {
        i for i, line in enumerate(EXAMPLES.read_text().splitlines(), 1) if line.endswith("# E")
    }
    assert marked and flagged == marked, out

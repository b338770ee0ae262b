"""``toolfold run`` / ``show`` / ``sessions`` on a PostgreSQL store (``postgresql://``)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import toolfold


def test_run_and_show_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    proc = toolfold(
        "run",
        "--store",
        postgres_url,
        "--session",
        "pg",
        "--max-lines",
        "2",
        "--",
        "seq 1 5; exit 4",
        cwd=tmp_path,
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout.startswith(("4\n5\n", "5\n")) and "[Showing lines 4-5 of 5" in proc.stdout
    # Spill files of a database store go under ./.toolfold/spill/SESSION/.
    spill = next((tmp_path / ".toolfold" / "spill" / "pg").glob("*.log"))
    assert spill.read_text() == "1\n2\n3\n4\n5\n"
    listed = toolfold("sessions", "--store", postgres_url, cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:3] == ["pg", "1", "0"]
    message = json.loads(
        toolfold("show", "pg", "1", "--store", postgres_url, "--json", cwd=tmp_path).stdout
    )
    assert message["details"]["exit_code"] == 4 and message["outcome"] == "error"

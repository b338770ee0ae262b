"""What a fresh interpreter loads: the one probe behind every "imports no asyncio" and
"stays off the run path" test (an assertion about behaviour, the modules a process
holds, never about timing)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path


def modules_after(
    code: str, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> set[str]:
    """Every module a fresh interpreter holds after running ``code``."""
    proc = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=dict(env) if env is not None else dict(os.environ),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(proc.stdout.split())


def loaded_of(modules: Iterable[str], watched: Iterable[str]) -> list[str]:
    """Which of ``watched`` a fresh interpreter holds after importing ``modules``."""
    held = modules_after("".join(f"import {name}\n" for name in modules))
    return sorted(set(watched) & held)

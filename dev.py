#!/usr/bin/env python3
"""One entry point for a fresh checkout: `python3 dev.py demo` and `python3 dev.py test`.

Each command creates `.venv/` (if missing), installs toolfold with the extras it
needs (re-installing only when pyproject.toml changed), then runs:

    demo   the main job on the embedded default store (SQLite): `toolfold demo`
    run    `toolfold ARGS...` inside the virtualenv (e.g. `python3 dev.py run run -- make`)
    test   every check CI runs: ruff, mypy --strict, the import-layering contracts, pytest
    bench  every script in benchmarks/ (slow; writes nothing outside .toolfold/)

Only the standard library is used here, so this works with nothing but Python 3.11+.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"


def _ensure_venv(extras: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may be started by an older python3
        sys.exit(f"toolfold needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PY.exists():
        print(f"creating virtualenv in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    stamp = VENV / f".toolfold-installed-{extras}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"installing toolfold[{extras}] into {VENV}", flush=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run(
        [str(PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{extras}]"], check=True
    )
    stamp.write_text(digest)


def _run(args: list[str]) -> int:
    print("$ " + " ".join(args), flush=True)
    return subprocess.run(args, cwd=ROOT).returncode


def test(pytest_args: list[str]) -> int:
    _ensure_venv("dev")
    failures: list[str] = []
    checks = [
        ("ruff", [str(BIN / "ruff"), "check", "src", "tests", "benchmarks", "dev.py"]),
        ("mypy --strict", [str(BIN / "mypy")]),
        ("import layering", [str(BIN / "lint-imports")]),
    ]
    for name, cmd in checks:
        if _run(cmd) != 0:
            failures.append(name)
    code = _run([str(PY), "-m", "pytest", *pytest_args])
    if code == 5:
        print("pytest collected no tests: that is a failure, not a pass", flush=True)
    if code != 0:
        failures.append(f"pytest (exit {code})")
    if failures:
        print("FAILED: " + ", ".join(failures), flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "test":
        return test(rest)
    if cmd == "demo":
        _ensure_venv("all")
        return _run([str(BIN / "toolfold"), "demo", *rest])
    if cmd == "run":
        _ensure_venv("all")
        return _run([str(BIN / "toolfold"), *rest])
    if cmd == "bench":
        _ensure_venv("dev")
        code = 0
        for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
            code |= _run([str(PY), str(script), *rest])
        return code
    print(f"unknown command {cmd!r}; try: demo, test, run, bench", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

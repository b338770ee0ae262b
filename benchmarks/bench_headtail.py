"""What each retention mode shows of real long outputs: the lines that matter.

Run: .venv/bin/python benchmarks/bench_headtail.py [--max-bytes N] [--max-lines N]

Runs real commands on this machine (nothing leaves it: pip is run with ``--no-index``),
each with stdout and stderr merged the way the ``bash`` tool reads them:

- ``pip install --no-index`` of a requirement that does not exist, and of a malformed one;
- ``pytest`` on a generated test file with 400 tests, 60 of them failing;
- ``gcc`` on a generated C file with 1,500 bad statements (an error storm);
- ``mypy`` on a generated module with 1,500 type errors;
- ``git log --stat`` of this repository;
- ``find /usr``.

Each raw output is fed to the exec env's capture in the three modes (``head``,
``tail``, ``head_tail`` with the default share), under the ``bash`` tool's caps
(50 KiB / 2,000 lines unless given), and the script reports which of the lines that
matter each view shows: the **first error** (the first diagnostic), the **last error**
(the last diagnostic, usually the one that ended the run) and the **summary** (the
closing line: pytest's ``N failed, M passed``, mypy's ``Found N errors``, pip's
``No matching distribution``, gcc's last error, git's first commit, find's last path).

Not measured: what a model does with the view (this counts lines, not answers), time
(``bench_window.py`` measures the cost per flush), outputs that fit the caps (every
mode shows them whole: the pip cases show that).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from toolfold.execenv import (  # noqa: E402
    DEFAULT_HEAD_SHARE,
    ShellOutputLimits,
    capture_for,
)

MODES = ("head", "tail", "head_tail")


@dataclass
class Case:
    name: str
    command: list[str]
    first: str  # regex of the first error line (first match)
    last: str  # regex of the last error line (last match)
    summary: str  # regex of the summary line (last match)
    cwd: Path | None = None


def _run(case: Case) -> bytes:
    proc = subprocess.run(
        case.command,
        cwd=case.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "LC_ALL": "C"},
    )
    return proc.stdout


def _find(lines: list[str], pattern: str, last: bool) -> str | None:
    rx = re.compile(pattern)
    hits = [line for line in lines if rx.search(line)]
    if not hits:
        return None
    return hits[-1] if last else hits[0]


def _shown(view: str, line: str | None) -> str:
    if line is None:
        return "n/a"
    return "yes" if line.rstrip("\n") in view.split("\n") else "—"


def _pytest_case(work: Path) -> Case:
    body = ["import pytest", ""]
    for i in range(1200):
        check = f"assert {i} % 5 != 3, 'value {i} hit the bad residue'"
        body += [
            f"def test_case_{i:04d}():",
            f"    data = list(range({i % 50}))",
            f"    {check}",
            "",
        ]
    (work / "test_storm.py").write_text("\n".join(body))
    # A module that fails to import: its collection error is reported first.
    (work / "test_broken.py").write_text("import no_such_module_toolfold_bench\n")
    return Case(
        "pytest, a collection error + 240 of 1,200 failing",
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--color=no",
            "-rfE",
            "--continue-on-collection-errors",
            "test_broken.py",
            "test_storm.py",
        ],
        first=r"^_+ ERROR collecting",
        last=r"^FAILED test_storm.py",
        summary=r"\d+ failed, \d+ passed",
        cwd=work,
    )


def _gcc_case(work: Path) -> Case:
    lines = ["#include <stdio.h>", "int main(void) {"]
    for i in range(1500):
        lines.append(f"    int v{i} = undefined_{i} + ;")
    lines += ["    return 0;", "}"]
    (work / "storm.c").write_text("\n".join(lines) + "\n")
    return Case(
        "gcc, 1,500 bad statements",
        ["gcc", "-fmax-errors=0", "-fdiagnostics-color=never", "-c", "storm.c", "-o", os.devnull],
        first=r"error:",
        last=r"error:",
        summary=r"error:",
        cwd=work,
    )


def _mypy_case(work: Path) -> Case:
    lines = []
    for i in range(1500):
        lines += [f"def f{i}(x: int) -> str:", f"    return x + {i}", ""]
    (work / "storm.py").write_text("\n".join(lines))
    mypy = Path(sys.executable).with_name("mypy")
    return Case(
        "mypy, 1,500 type errors",
        [str(mypy), "--no-incremental", "--cache-dir", os.devnull, "storm.py"],
        first=r"error:",
        last=r"error:",
        summary=r"^Found \d+ errors?",
        cwd=work,
    )


def cases(work: Path) -> list[Case]:
    pip = [sys.executable, "-m", "pip", "install", "--no-index", "--disable-pip-version-check"]
    return [
        Case(
            "pip install, no such package",
            [*pip, "--find-links", str(work), "no-such-package-toolfold-bench==1.0"],
            first=r"^ERROR:",
            last=r"^ERROR:",
            summary=r"No matching distribution",
        ),
        Case(
            "pip install, bad requirement",
            [*pip, "toolfold-bench>=1,<<2"],
            first=r"^ERROR:",
            last=r"^ERROR:",
            summary=r"^ERROR:",
        ),
        _pytest_case(work),
        _gcc_case(work),
        _mypy_case(work),
        Case(
            "git log --stat (this repo)",
            ["git", "-C", str(ROOT), "log", "--stat", "--no-color"],
            first=r"^commit [0-9a-f]{40}",
            last=r"^commit [0-9a-f]{40}",
            summary=r"^commit [0-9a-f]{40}",
        ),
        Case(
            "find /usr",
            ["find", "/usr"],
            first=r"^/usr",
            last=r"^/usr",
            summary=r"^/usr",
        ),
    ]


def view_of(raw: bytes, retain: str, max_bytes: int, max_lines: int) -> str:
    capture = capture_for(
        ShellOutputLimits(max_bytes=max_bytes, max_lines=max_lines, retain=retain)  # type: ignore[arg-type]
    )
    for i in range(0, len(raw), 65536):
        capture.feed(raw[i : i + 65536])
    capture.close()
    return capture.snapshot().text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-bytes", type=int, default=50 * 1024)
    parser.add_argument("--max-lines", type=int, default=2000)
    args = parser.parse_args()
    print(
        f"## What each mode shows ({args.max_bytes:,} bytes / {args.max_lines:,} lines; "
        f"head_tail head share {DEFAULT_HEAD_SHARE})\n"
    )
    print("| output | size | lines | mode | first error | last error | summary |")
    print("|---|---:|---:|---|:-:|:-:|:-:|")
    score: dict[str, int] = dict.fromkeys(MODES, 0)
    possible = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases(Path(tmp)):
            raw = _run(case)
            text = raw.decode("utf-8", "replace")
            lines = text.splitlines()
            wanted = [
                _find(lines, case.first, last=False),
                _find(lines, case.last, last=True),
                _find(lines, case.summary, last=True),
            ]
            if case.name.startswith("git log"):
                wanted[1] = wanted[2] = lines[-1] if lines else None  # the first commit
            possible += sum(w is not None for w in wanted)
            for mode in MODES:
                view = view_of(raw, mode, args.max_bytes, args.max_lines)
                marks = [_shown(view, w) for w in wanted]
                score[mode] += marks.count("yes")
                print(
                    f"| {case.name} | {len(raw):,} B | {len(lines):,} | {mode} | "
                    + " | ".join(marks)
                    + " |"
                )
    print("\n| mode | lines that matter shown |")
    print("|---|---:|")
    for mode in MODES:
        print(f"| {mode} | {score[mode]} of {possible} |")


if __name__ == "__main__":
    main()

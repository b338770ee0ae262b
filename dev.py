#!/usr/bin/env python3
"""One entry point for a fresh checkout: `python3 dev.py demo` and `python3 dev.py test`.

Each command creates `.venv/` (if missing), installs toolfold with the extras it
needs (re-installing only when pyproject.toml changed), then runs:

    demo   the main job on the embedded default store (SQLite): `toolfold demo`
    run    `toolfold ARGS...` inside the virtualenv (e.g. `python3 dev.py run run -- make`)
    test   every check CI runs: ruff (lint and format), mypy --strict, the import-layering
           contracts, pytest
           (`test --random`: hypothesis draws new examples instead of CI's fixed ones)
    mutate the mutation run on the modules where a bug corrupts data or breaks a bound
           (mutmut; slow, not part of CI): prints the score per module for docs/TESTING.md
           (`mutate server`: only that package's listed modules, against its own tests
           from [tool.toolfold.mutate.tests]; `--tests PATH` narrows those further;
           mutmut's mutant-name globs such as `toolfold.storage._base*` narrow the mutants,
           and its options pass through, e.g. `--max-children 1`). It runs at the lowest
           CPU priority, and on Linux a watchdog stops a mutant whose tests hang
    bench  every script in benchmarks/ (slow; writes nothing outside .toolfold/)

Only the standard library is used here, so this works with nothing but Python 3.11+
(with its `venv` module: `python3-venv` on Debian/Ubuntu). `test` also needs three system
services that the suite starts on loopback: PostgreSQL server binaries, Chromium and the
OpenSSH server (for the remote exec tests; they run sshd as root). Run
as root on a machine with apt-get (a CI container), `test` installs whatever of them is
missing; otherwise it says what to install, and the tests that need them fail with the
same instruction.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"


#: Where the tests look for the PostgreSQL server binaries, Chromium, sshd and bubblewrap
#: (tests/pg_fixture.py, tests/replication/conftest.py, tests/sshd_fixture.py, the sandbox
#: tests, which run `bwrap` from the PATH, and tests/remote/test_remote_podman.py).
POSTGRES_INITDB = "/usr/lib/postgresql/*/bin/initdb"
CHROMIUM = Path("/usr/bin/chromium")
SSHD = Path("/usr/sbin/sshd")
BWRAP = Path("/usr/bin/bwrap")
PODMAN = Path("/usr/bin/podman")
RUNC = Path("/usr/sbin/runc")  # podman's crun refuses hosts that mix cgroup v1 and v2
#: The apt packages that provide them, by what is missing.
SYSTEM_PACKAGES = {
    "PostgreSQL": "postgresql",
    "Chromium": "chromium",
    "sshd": "openssh-server",
    "bubblewrap": "bubblewrap",
    "podman": "podman",
    "runc": "runc",
}


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _apt_install(packages: list[str]) -> bool:
    """Install ``packages`` with apt-get when we are root and apt-get exists; False when we
    cannot (the caller then says what to install)."""
    if not packages or not _is_root() or shutil.which("apt-get") is None:
        return False
    print(f"installing with apt-get: {' '.join(packages)}", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env)
    return True


def missing_system_services() -> list[str]:
    """What the test suite needs from the system and cannot find (names, not packages)."""
    missing = []
    has_postgres = glob.glob(POSTGRES_INITDB) or shutil.which("initdb")
    if not has_postgres and not os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN"):
        missing.append("PostgreSQL")
    if not CHROMIUM.exists():
        missing.append("Chromium")
    if not SSHD.exists():
        missing.append("sshd")
    if not BWRAP.exists():
        missing.append("bubblewrap")
    if not PODMAN.exists():
        missing.append("podman")
    if not RUNC.exists():
        missing.append("runc")
    return missing


def ensure_system_services() -> None:
    """Install PostgreSQL, Chromium, sshd, bubblewrap and podman when missing and we may (root + apt-get); otherwise
    print exactly what to install. Never fails: the tests that need a missing service fail
    with the same instruction, and every other check still runs."""
    missing = missing_system_services()
    if not missing:
        return
    packages = [SYSTEM_PACKAGES[name] for name in missing]
    if _apt_install(packages):
        return
    print(
        f"{' and '.join(missing)} not found: the tests that need them will fail. Install "
        f"them with `sudo apt-get install {' '.join(packages)}` (Debian/Ubuntu; Chromium must "
        f"be at {CHROMIUM}), or run `python3 dev.py test` as root, which installs them.",
        flush=True,
    )


def _ensure_venv(extras: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may be started by an older python3
        sys.exit(f"toolfold needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PY.exists() and importlib.util.find_spec("ensurepip") is None:
        # Debian/Ubuntu ship venv's pip bootstrap separately.
        venv_package = f"python3.{sys.version_info[1]}-venv"
        if not _apt_install([venv_package]):
            sys.exit(
                f"this Python has no ensurepip, so it cannot create .venv/: install "
                f"{venv_package} (`sudo apt-get install {venv_package}`) and re-run"
            )
    if not PY.exists():
        print(f"creating virtualenv in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    stamp = VENV / f".toolfold-installed-{extras}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"installing toolfold[{extras}] into {VENV}", flush=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{extras}]"], check=True)
    stamp.write_text(digest)


def _run(args: list[str]) -> int:
    print("$ " + " ".join(args), flush=True)
    return subprocess.run(args, cwd=ROOT).returncode


def test(pytest_args: list[str]) -> int:
    ensure_system_services()
    _ensure_venv("dev")
    if "--random" in pytest_args:
        # Fresh hypothesis examples each run (CI's profile is derandomized, so it reproduces).
        pytest_args = [a for a in pytest_args if a != "--random"]
        os.environ["HYPOTHESIS_PROFILE"] = "random"
    failures: list[str] = []
    checks = [
        ("ruff", [str(BIN / "ruff"), "check", "src", "tests", "benchmarks", "dev.py"]),
        (
            "ruff format",
            [str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks", "dev.py"],
        ),
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


#: A mutant's worker whose processes used no CPU at all for this long is waiting on something
#: the mutant broke (docs/TESTING.md, "Mutation testing"): the watchdog stops it at once instead
#: of leaving it to mutmut's own limit, 15 times the tests' duration (up to half an hour).
HUNG_AFTER_S = 30.0


def _proc_table() -> dict[int, tuple[int, str, int, str]]:
    """Every process from /proc: pid -> (parent pid, state, CPU ticks of the process and of
    the children it reaped, start time). Linux only."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:  # it exited while we looked
            continue
        # The command name, in parentheses, may hold spaces: the fields follow the last ")".
        fields = stat.rpartition(")")[2].split()
        cpu = sum(int(t) for t in fields[11:15])  # utime, stime, cutime, cstime
        table[int(entry.name)] = (int(fields[1]), fields[0], cpu, fields[19])
    return table


def _has_cpu_limit(pid: int) -> bool:
    """Whether the process runs under an RLIMIT_CPU: mutmut sets one in each mutant's worker
    (and its test's subprocesses inherit it), never in its own or its fork server's process."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            line = next((ln for ln in f if ln.startswith("Max cpu time")), "")
    except OSError:
        return False
    return line.split()[3:4] != ["unlimited"]


def _subtree(children: dict[int, list[int]], pid: int) -> list[int]:
    """``pid`` and every process below it (``children``: parent pid -> its children)."""
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], ()))
    return found


def watch_for_hung_mutants(
    root: int, done: threading.Event, hung_after: float = HUNG_AFTER_S, poll: float = 2.0
) -> None:
    """Until ``done`` is set, send SIGXCPU (which mutmut records as a timeout) to every mutant
    worker under ``root`` whose processes (the worker and all it started) used no CPU for
    ``hung_after`` seconds while none of them was waiting for a CPU or a disk. A worker is a
    process under a CPU limit whose parent has none. Linux only: elsewhere it returns at once."""
    if not os.path.exists("/proc/self/stat"):
        return
    last: dict[tuple[int, str], tuple[int, float]] = {}  # (pid, start) -> (cpu, since)
    while not done.wait(poll):
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_) in table.items():
            children.setdefault(ppid, []).append(pid)
        now = time.monotonic()
        seen = {}
        for pid in _subtree(children, root)[1:]:
            if not _has_cpu_limit(pid) or _has_cpu_limit(table[pid][0]):
                continue
            procs = [table[p] for p in _subtree(children, pid)]
            cpu = sum(p[2] for p in procs)
            key = (pid, table[pid][3])
            before, since = last.get(key, (-1, now))
            if cpu != before or any(p[1] in "RD" for p in procs):
                since = now
            elif now - since >= hung_after:
                print(
                    f"watchdog: mutant worker {pid} used no CPU for {hung_after:.0f} s: "
                    "sent SIGXCPU (mutmut counts it as a timeout)",
                    flush=True,
                )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGXCPU)
            seen[key] = (cpu, since)
        last = seen


#: Runs mutmut with the module list and test selection of `[tool.mutmut]` replaced by those
#: given as its first argument (JSON; an empty list keeps pyproject.toml's). mutmut reads its
#: config once per process and its fork server and workers are forks of this one, so the
#: replacement holds for the whole run, the stats run included, without editing any file.
_MUTMUT_LAUNCHER = """
import json, sys
from mutmut.configuration import config
from mutmut.__main__ import CatchOutput, cli
# mutmut swaps sys.stdout for an object with no file descriptor while it runs the stats
# and clean runs; tests that start processes need a real one (pytest stops with exit 3).
CatchOutput.start = CatchOutput.stop
narrowed = json.loads(sys.argv[1])
for key in ("only_mutate", "pytest_add_cli_args_test_selection"):
    if narrowed[key]:
        setattr(config(), key, narrowed[key])
sys.argv = ["mutmut", *sys.argv[2:]]
cli()
"""


def mutate_selection(
    args: list[str], settings: dict[str, object]
) -> tuple[list[str], list[str], list[str], list[str]]:
    """What `dev.py mutate ARGS` runs, from `[tool.mutmut]` and `[tool.toolfold.mutate]`
    (``settings`` is pyproject.toml's ``tool`` table): (the modules to mutate, the pytest
    selection, mutmut's mutant-name globs, mutmut's other arguments). A bare package name
    (`server`) stands for its modules listed in `only_mutate` and is checked against that
    package's tests from `[tool.toolfold.mutate] tests`; `--tests PATH` (repeatable) narrows
    the selection further; anything else goes to `mutmut run` as it is (its options, or
    mutant-name globs such as `toolfold.server._guard*`). An empty list keeps pyproject's."""
    mutmut = settings.get("mutmut", {})
    ours = settings.get("toolfold", {})
    assert isinstance(mutmut, dict) and isinstance(ours, dict)
    listed: list[str] = list(mutmut.get("only_mutate", []))
    package_tests: dict[str, list[str]] = dict(ours.get("mutate", {}).get("tests", {}))
    modules: list[str] = []
    tests: list[str] = []
    names: list[str] = []
    rest: list[str] = []
    explicit: list[str] = []
    globs: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "--tests":
            explicit.append(next(it, ""))
        elif arg.startswith("--tests="):
            explicit.append(arg.partition("=")[2])
        elif arg.isidentifier():
            mine = [m for m in listed if m.startswith(f"src/toolfold/{arg}/")]
            if not mine:
                raise SystemExit(
                    f"dev.py mutate: no module of package {arg!r} is listed under "
                    "[tool.mutmut] only_mutate in pyproject.toml; add the ones to mutate"
                )
            modules += mine
            tests += package_tests.get(arg, [f"tests/{arg}"])
            names.append(f"toolfold.{arg}.*")
        elif arg == "--max-children":  # mutmut run's one option with a separate value
            rest += [arg, next(it, "")]
        elif arg.startswith("-"):
            rest.append(arg)
        else:
            globs.append(arg)
    if "" in explicit:
        raise SystemExit("dev.py mutate: --tests needs a test path, e.g. --tests tests/output")
    # Mutant-name globs narrow a package to some of its mutants (`server
    # 'toolfold.server._guard.x_allowed_hosts*'`): they replace the package's own glob.
    return modules, explicit or tests, globs or names, rest


def mutate(args: list[str]) -> int:
    """Run mutmut on the modules listed under [tool.mutmut] in pyproject.toml (or those of
    the packages named), then print killed / survived per module and every survivor
    (docs/TESTING.md keeps the verdicts)."""
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    modules, tests, names, options = mutate_selection(args, settings)
    _ensure_venv("dev,mutate")
    children = str(max(1, (os.cpu_count() or 2)))
    os.environ.setdefault("HYPOTHESIS_PROFILE", "mutate")  # tests/conftest.py: no shrinking
    if hasattr(os, "nice"):
        os.nice(19)  # inherited by mutmut and every test it runs: the run yields to all else
    if "--max-children" not in " ".join(options):
        options = ["--max-children", children, *options]
    narrowed = json.dumps({"only_mutate": modules, "pytest_add_cli_args_test_selection": tests})
    cmd = [str(PY), "-c", _MUTMUT_LAUNCHER, narrowed, "run", *options, *names]
    print(f"$ mutmut run {' '.join([*options, *names])}", flush=True)
    if modules:
        print(f"  mutating {' '.join(modules)}\n  against {' '.join(tests)}", flush=True)
    with subprocess.Popen(cmd, cwd=ROOT) as run:
        done = threading.Event()
        watchdog = threading.Thread(
            target=watch_for_hung_mutants, args=(run.pid, done), daemon=True
        )
        watchdog.start()
        try:
            code = run.wait()
        finally:
            done.set()
            watchdog.join()
    if code != 0:
        return code
    listing = subprocess.run(
        [str(BIN / "mutmut"), "results", "--all", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print(mutate_report(listing, names))
    return 0


def mutate_report(listing: str, names: list[str]) -> str:
    """The per-module table and the survivors of `mutmut results --all true`'s ``listing``,
    for the mutants matching ``names`` (all of them when empty). The score counts timeouts
    as caught, as mutmut's own does."""
    import fnmatch

    per_module: dict[str, dict[str, int]] = {}
    survivors: list[str] = []
    for line in listing.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if not sep or "__mutmut_" not in name:
            continue
        if names and not any(fnmatch.fnmatchcase(name, n) for n in names):
            continue
        module = name.split(".x", 1)[0]  # toolfold.chord._apply.x_apply__mutmut_3
        counts = per_module.setdefault(module, {})
        counts[status] = counts.get(status, 0) + 1
        if status == "survived":
            survivors.append(name)
    lines = [
        "| module | mutants | killed | survived | timeouts | other | score |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    total = caught = 0
    for module, counts in sorted(per_module.items()):
        n, k, s = sum(counts.values()), counts.get("killed", 0), counts.get("survived", 0)
        t = counts.get("timeout", 0)
        total, caught = total + n, caught + k + t
        score = 100 * (k + t) / max(n, 1)
        lines.append(f"| {module} | {n} | {k} | {s} | {t} | {n - k - s - t} | {score:.1f} % |")
    lines.append(f"| all | {total} | | | | | {100 * caught / max(total, 1):.1f} % |")
    lines.append("\nsurvivors (give each a verdict in docs/TESTING.md):")
    lines.append("\n".join(survivors) or "none")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "test":
        return test(rest)
    if cmd == "demo":
        _ensure_venv("pytest")  # the tour needs the core and the pytest tool, no more
        return _run([str(BIN / "toolfold"), "demo", *rest])
    if cmd == "run":
        _ensure_venv("all")
        return _run([str(BIN / "toolfold"), *rest])
    if cmd == "mutate":
        return mutate(rest)
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

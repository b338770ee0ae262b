"""``dev.py test`` on a machine without PostgreSQL or Chromium: as root it installs them with
apt-get (what CI relies on); otherwise it says exactly what to install, as do the fixtures of
the tests that need them."""

from __future__ import annotations

import glob
import importlib.util
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """dev.py as a module, looking for the services where nothing is installed, with a fake
    apt-get on PATH that records its arguments."""
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "POSTGRES_INITDB", str(tmp_path / "pg" / "*" / "bin" / "initdb"))
    monkeypatch.setattr(module, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(module, "BWRAP", tmp_path / "no-bwrap")
    monkeypatch.setattr(module, "PODMAN", tmp_path / "podman")  # present: see below
    monkeypatch.setattr(module, "RUNC", tmp_path / "runc")
    (tmp_path / "podman").touch()
    (tmp_path / "runc").touch()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    apt = bindir / "apt-get"
    apt.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "apt.log"}\n')
    apt.chmod(apt.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("TOOLFOLD_TEST_POSTGRES_DSN", raising=False)
    return module


def _apt_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_as_root_dev_py_test_installs_missing_postgres_and_chromium(
    dev: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert dev.missing_system_services() == ["PostgreSQL", "Chromium", "bubblewrap"]
    dev.ensure_system_services()
    assert _apt_log(tmp_path) == ["update -qq", "install -y -qq postgresql chromium bubblewrap"]


def test_as_root_nothing_is_installed_when_nothing_is_missing(
    dev: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    initdb = tmp_path / "pg" / "16" / "bin" / "initdb"
    initdb.parent.mkdir(parents=True)
    initdb.touch()
    (tmp_path / "no-chromium").touch()
    (tmp_path / "no-bwrap").touch()
    assert dev.missing_system_services() == []
    dev.ensure_system_services()
    assert _apt_log(tmp_path) == []


def test_as_root_missing_podman_and_runc_are_installed(
    dev: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (tmp_path / "podman").unlink()
    (tmp_path / "runc").unlink()
    assert dev.missing_system_services()[-2:] == ["podman", "runc"]
    dev.ensure_system_services()
    assert _apt_log(tmp_path)[-1].endswith("bubblewrap podman runc")


def test_without_root_dev_py_says_exactly_what_to_install(
    dev: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    dev.ensure_system_services()
    assert _apt_log(tmp_path) == []  # never tries to install without root
    out = capsys.readouterr().out
    assert "PostgreSQL and Chromium and bubblewrap not found" in out
    assert "sudo apt-get install postgresql chromium bubblewrap" in out


def test_ci_runs_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert script.rstrip().endswith("exec python3 dev.py test")
    assert "apt-get" not in script.split("set -euo pipefail", 1)[1]  # dev.py installs


def test_postgres_tests_fail_with_the_install_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    import pg_fixture

    monkeypatch.setattr(pg_fixture, "find_bindir", lambda: None)
    with pytest.raises(RuntimeError, match=r"sudo apt-get install postgresql"):
        pg_fixture.start_cluster()


# A stand-in for mutmut: it forks one "mutant worker" under a CPU limit (as mutmut's workers
# are), waits for it and prints the signal that ended it (0: it exited by itself).
FAKE_MUTMUT = """
import os, resource, sys, time
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_CPU, (3600, 3601))
    if sys.argv[1] == "hung":
        time.sleep(20)  # the test it runs waits on something the mutant broke
    else:  # busy: idle itself while a process it started computes
        child = os.fork()
        if child == 0:
            while time.process_time() < 0.6:
                pass
            os._exit(0)
        os.waitpid(child, 0)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0, flush=True)
"""


def _watched(dev: ModuleType, kind: str) -> int:
    """Run the fake mutmut with its worker ``kind`` under the watchdog (a hang is 0.3 s of no
    CPU here); the signal that ended the worker."""
    done = threading.Event()
    with subprocess.Popen(
        [sys.executable, "-c", FAKE_MUTMUT, kind], stdout=subprocess.PIPE, text=True
    ) as run:
        watchdog = threading.Thread(
            target=dev.watch_for_hung_mutants, args=(run.pid, done, 0.3, 0.05), daemon=True
        )
        watchdog.start()
        try:
            out, _ = run.communicate(timeout=30)
        finally:
            done.set()
            run.kill()
            watchdog.join(timeout=10)
    assert not watchdog.is_alive()
    return int(out)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the watchdog reads /proc")
def test_the_mutate_watchdog_stops_a_worker_that_uses_no_cpu(dev: ModuleType) -> None:
    # SIGXCPU is what mutmut's own CPU limit sends: mutmut records the mutant as a timeout.
    assert _watched(dev, "hung") == signal.SIGXCPU


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the watchdog reads /proc")
def test_the_mutate_watchdog_leaves_a_worker_alone_while_its_subprocess_computes(
    dev: ModuleType,
) -> None:
    # The worker itself uses no CPU while it waits; the watchdog counts all it started, and
    # never touches mutmut's own process (no CPU limit), idle in waitpid the whole time.
    assert _watched(dev, "busy") == 0


def _mutate_settings() -> dict[str, object]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]  # type: ignore[no-any-return]


def test_mutate_with_a_package_mutates_its_listed_modules_against_its_own_tests(
    dev: ModuleType,
) -> None:
    settings = _mutate_settings()
    modules, tests, names, options = dev.mutate_selection(
        ["--max-children", "1", "server"], settings
    )
    listed = settings["mutmut"]["only_mutate"]  # type: ignore[index]
    assert modules == [m for m in listed if m.startswith("src/toolfold/server/")]
    assert "src/toolfold/server/_guard.py" in modules
    assert tests == settings["toolfold"]["mutate"]["tests"]["server"]  # type: ignore[index]
    assert all(t.startswith("tests/replication/test_server_") for t in tests)
    assert names == ["toolfold.server.*"]
    assert options == ["--max-children", "1"]
    for test in tests:
        assert (ROOT / test).exists(), test


def test_mutate_every_package_named_in_the_docs_has_modules_and_tests(dev: ModuleType) -> None:
    settings = _mutate_settings()
    for package in (
        "chord",
        "output",
        "execenv",
        "durability",
        "storage",
        "server",
        "mcp",
        "agent",
        "integrations",
        "cli",
        "harness",
    ):
        modules, tests, names, _ = dev.mutate_selection([package], settings)
        assert modules and tests and names == [f"toolfold.{package}.*"], package
        for path in [*modules, *tests]:
            assert glob.glob(str(ROOT / path)), path


def test_mutate_tests_narrows_the_selection_and_globs_pass_through(dev: ModuleType) -> None:
    settings = _mutate_settings()
    modules, tests, names, _ = dev.mutate_selection(
        ["execenv", "--tests", "tests/tools/test_read_bounds.py", "toolfold.execenv._fileops*"],
        settings,
    )
    assert tests == ["tests/tools/test_read_bounds.py"]
    assert names == ["toolfold.execenv._fileops*"]
    assert "src/toolfold/execenv/_capture.py" in modules
    # No package: pyproject.toml's own lists stand (empty means "keep them").
    assert dev.mutate_selection(["toolfold.chord._apply*"], settings)[:3] == (
        [],
        [],
        ["toolfold.chord._apply*"],
    )


def test_mutate_refuses_a_package_with_nothing_listed_in_one_line(dev: ModuleType) -> None:
    with pytest.raises(SystemExit, match="no module of package 'nosuch' is listed"):
        dev.mutate_selection(["nosuch"], _mutate_settings())
    with pytest.raises(SystemExit, match="--tests needs a test path"):
        dev.mutate_selection(["server", "--tests"], _mutate_settings())


def test_mutate_report_counts_only_the_selected_mutants_and_timeouts_as_caught(
    dev: ModuleType,
) -> None:
    listing = "\n".join(
        [
            "    toolfold.server._guard.x__name__mutmut_1: killed",
            "    toolfold.server._guard.x__name__mutmut_2: survived",
            "    toolfold.server._guard.x__name__mutmut_3: timeout",
            "    toolfold.server._guard.x__name__mutmut_4: killed",
            "    toolfold.chord._apply.x_apply__mutmut_1: survived",
        ]
    )
    report = dev.mutate_report(listing, ["toolfold.server.*"])
    assert "| toolfold.server._guard | 4 | 2 | 1 | 1 | 0 | 75.0 % |" in report
    assert "toolfold.server._guard.x__name__mutmut_2" in report
    assert "chord" not in report

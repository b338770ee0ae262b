"""What a bare ``toolfold run -- COMMAND`` on the direct driver loads: no event loop, none
of the harness's events, bus, hooks or call lifecycle, no click, no rich, and none of what
a few small records, three ids and one ``prctl`` call do not need (orjson: the standard
library's json encodes them; uuid and the platform module it imports; ctypes: its C
module ``_ctypes`` makes the call). An assertion about behaviour (the modules a fresh
process holds after a whole run), not timing."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import clean_env

from fresh_modules import modules_after

NEVER = (
    "asyncio",
    "click",
    "rich",
    "socket",  # the host name comes from os.uname (toolfold._host)
    "toolfold.harness.events",
    "toolfold.harness._bus",
    "toolfold.harness._hooks",
    "toolfold.harness._execute",
    "toolfold.harness._durable_hooks",
    "toolfold.execenv._local",
    "orjson",  # toolfold._json: the direct driver prefers the standard library's json
    "uuid",  # ids from os.urandom
    "platform",  # what uuid imports
    "ctypes",  # prctl through _ctypes (execenv._reaper)
    "dataclasses",  # records are made without it (toolfold._record)
    "inspect",  # what dataclasses imports
)

A_DIRECT_RUN = (
    "from toolfold.cli._entry import main\n"
    "try:\n"
    "    main(['run', '--', 'echo hi'])\n"
    "except SystemExit as end:\n"
    "    assert end.code == 0, end.code\n"
)
"""A whole ``toolfold run -- 'echo hi'`` on the direct driver, in a fresh process."""


def test_importing_the_driver_loads_nothing_of_the_asyncio_path(tmp_path: Path) -> None:
    loaded = modules_after("import toolfold.cli._run_direct", cwd=tmp_path, env=clean_env())
    assert not [m for m in loaded if m.split(".")[0] in ("asyncio", "click", "rich")]
    assert not [m for m in loaded if m.startswith("toolfold.harness")]
    assert not [m for m in loaded if m.split(".")[0] in ("orjson", "uuid", "platform", "ctypes")]


def test_a_whole_direct_run_loads_none_of_it(tmp_path: Path) -> None:
    loaded = modules_after(A_DIRECT_RUN, cwd=tmp_path, env=clean_env())
    assert "toolfold.cli._run_direct" in loaded and "toolfold.storage._sqlite_sync" in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in NEVER or m in NEVER) == []
    assert "toolfold.cli._run" not in loaded  # the asyncio path's module


def test_the_check_sees_the_asyncio_path(tmp_path: Path) -> None:
    """The assertion above can fail: with an option, the same run imports it."""
    code = (
        "from toolfold.cli._entry import main\n"
        "try:\n"
        "    main(['run', '--retain', 'tail', '--', 'echo hi'])\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    assert {
        "asyncio",
        "toolfold.harness._execute",
        "orjson",
        "uuid",
        "platform",
        "dataclasses",
    } <= modules_after(code, cwd=tmp_path, env=clean_env())


# Which module asked for dataclasses or inspect first: the module whose import was
# under way (importlib's _find_and_load frames, innermost first) when it was requested.
WATCH_IMPORTERS = """
import sys
importers = {}
class _Watch:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in ("dataclasses", "inspect") and name not in importers:
            chain = []
            frame = sys._getframe(1)
            while frame is not None:
                if frame.f_code.co_name == "_find_and_load":
                    chain.append(frame.f_locals["name"])
                frame = frame.f_back
            assert chain[0] == name, chain
            importers[name] = chain[1] if len(chain) > 1 else "__main__"
        return None
sys.meta_path.insert(0, _Watch)
"""
REPORT_IMPORTERS = "print(' '.join(f'importer:{k}:{v}' for k, v in importers.items()))\n"


def _importers(code: str, cwd: Path) -> dict[str, str]:
    loaded = modules_after(WATCH_IMPORTERS + code + REPORT_IMPORTERS, cwd=cwd, env=clean_env())
    return dict(w.split(":")[1:] for w in loaded if w.startswith("importer:"))


def test_no_module_of_a_direct_run_imports_dataclasses_or_inspect(tmp_path: Path) -> None:
    """Records are declared without dataclasses (toolfold._record), and orjson, which
    imports it for its dataclass encoding, is off the path: nothing in a whole direct
    run imports dataclasses or inspect (a failure names the module that did)."""
    assert _importers(A_DIRECT_RUN, tmp_path) == {}


def test_the_watch_names_a_module_that_imports_dataclasses(tmp_path: Path) -> None:
    """The assertion above can fail: a module of toolfold's that imports dataclasses
    itself is named."""
    importers = _importers("import toolfold.harness._context\n", tmp_path)
    assert importers["dataclasses"] == "toolfold.harness._context"

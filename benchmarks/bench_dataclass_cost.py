"""What defining a ``@dataclass`` costs at import, by option, beside ``toolfold._record.record``
(the declarator ``toolfold run``'s records use): the part of start-up the classes take.

    .venv/bin/python benchmarks/bench_dataclass_cost.py [--classes 60] [--repeat 15]
        [--runs 21] [--before DIR]

Each variant defines ``--classes`` classes of four fields (two with defaults) in one
process, with each declarator in turn; the figure is the least CPU time over
``--repeat`` rounds, per class. ``--before DIR`` adds the ``record`` of an older source
tree (``DIR/toolfold/_record.py``, loaded under another name) as a third column, timed
in the same rounds::

    git archive COMMIT src | tar -x -C /tmp/before
    .venv/bin/python benchmarks/bench_dataclass_cost.py --before /tmp/before/src

The decorator writes each generated method (``__init__``, ``__repr__``, ``__eq__``, and for
a frozen class ``__hash__``, ``__setattr__``, ``__delattr__``) as source and compiles it:
most of the cost, which is why ``frozen`` doubles it and ``eq=False`` or
``repr=False`` (changes of behaviour) take a method's share off. ``record`` compiles only
``__init__`` when the class is defined (the other methods on first use).

A second table is what importing the declarator costs: the CPU time (user + system,
least of ``--runs``) of fresh interpreters importing ``typing`` (which every module of
toolfold's imports, with ``re``; the floor), then with it ``dataclasses`` (which imports
``inspect``, and with it ``ast``, ``dis``, ``tokenize``...) or ``toolfold._record``
(this tree's, and with ``--before`` the older one's), interleaved run by run, bytecode
compiled beforehand in a scratch ``PYTHONPYCACHEPREFIX``.

Not measured: the first comparison, hash or repr of a record (which compiles that
method, as dataclass did at definition), building an instance (the same generated
``__init__``), and what else imports ``dataclasses`` in a given process (orjson does, at
its own import; ``bench_startup.py`` measures a whole run).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from startup_floor import record_class
from toolfold._record import record

VARIANTS: dict[str, dict[str, Any]] = {
    "frozen=True, slots=True (most of toolfold's)": {"frozen": True, "slots": True},
    "frozen=True, slots=True, kw_only=True": {"frozen": True, "slots": True, "kw_only": True},
    "frozen=True": {"frozen": True},
    "(no options)": {},
    "slots=True": {"slots": True},
    "frozen=True, slots=True, eq=False": {"frozen": True, "slots": True, "eq": False},
    "frozen=True, slots=True, repr=False": {"frozen": True, "slots": True, "repr": False},
}


def define(n: int, decorator: Any, options: dict[str, Any]) -> float:
    """CPU seconds to define ``n`` classes with ``decorator(**options)``."""
    start = time.process_time()
    for i in range(n):
        record_class(i, decorator, **options)
    return time.process_time() - start


def before_record(src: str) -> Any:
    """``record`` of the source tree ``src``, loaded as a module of its own."""
    path = Path(src) / "toolfold" / "_record.py"
    spec = importlib.util.spec_from_file_location("before_record", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.record


def import_cpu(code: str, env: dict[str, str]) -> float:
    """CPU seconds (user + system) of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_table(before: str | None, runs: int) -> None:
    """The CPU of importing each declarator in a fresh interpreter (see the docstring)."""
    with tempfile.TemporaryDirectory(prefix="bench-dataclass-") as scratch:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = scratch
        rows: dict[str, tuple[str, dict[str, str]]] = {
            "`import typing`": ("import typing", env),
            "`import typing, dataclasses`": ("import typing, dataclasses", env),
        }
        if before:
            rows["`import typing, toolfold._record`, before"] = (
                "import typing, toolfold._record",
                {**env, "PYTHONPATH": before},
            )
        rows["`import typing, toolfold._record`"] = ("import typing, toolfold._record", env)
        for code, row_env in rows.values():
            import_cpu(code, row_env)  # compiles the bytecode
        cpu: dict[str, list[float]] = {label: [] for label in rows}
        for _ in range(runs):
            for label, (code, row_env) in rows.items():
                cpu[label].append(import_cpu(code, row_env))
    print()
    floor = min(cpu["`import typing`"])
    print("| fresh interpreter | CPU (min) | over `import typing` |")
    print("|---|---:|---:|")
    for label, times in cpu.items():
        print(f"| {label} | {min(times) * 1000:.1f} ms | {(min(times) - floor) * 1000:+.1f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--before", metavar="DIR", help="an older src tree's record, beside")
    parser.add_argument("--runs", type=int, default=21, help="fresh interpreters per row")
    args = parser.parse_args()
    declarators: dict[str, Any] = {"`@dataclass`": dataclass}
    if args.before:
        declarators["`@record`, before"] = before_record(args.before)
    declarators["`@record`"] = record
    print(f"| options | {' | '.join(declarators)} |")
    print(f"|---|{'---:|' * len(declarators)}")
    for label, options in VARIANTS.items():
        best = dict.fromkeys(declarators, float("inf"))
        for _ in range(args.repeat):  # the declarators alternate, round by round
            for name, decorator in declarators.items():
                best[name] = min(best[name], define(args.classes, decorator, options))
        cells = " | ".join(f"{best[name] * 1000 / args.classes:.3f} ms" for name in declarators)
        print(f"| {label} | {cells} |")
    import_table(args.before, args.runs)


if __name__ == "__main__":
    main()

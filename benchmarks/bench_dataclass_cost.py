"""What defining a ``@dataclass`` costs at import, by option: the part of ``toolfold
run``'s start-up its 57 dataclasses take (``bench_startup.py`` counts them).

    .venv/bin/python benchmarks/bench_dataclass_cost.py [--classes 60] [--repeat 15]

Each variant defines ``--classes`` classes of four fields (two with defaults) in one
process; the figure is the least CPU time over ``--repeat`` rounds, per class. The
decorator writes each generated method (``__init__``, ``__repr__``, ``__eq__``, and for
a frozen class ``__hash__``, ``__setattr__``, ``__delattr__``) as source and compiles it:
most of the cost, which is why ``frozen`` doubles it and ``eq=False`` or
``repr=False`` (changes of behaviour) take a method's share off.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from startup_floor import record_class

VARIANTS: dict[str, dict[str, Any]] = {
    "frozen=True, slots=True (most of toolfold's)": {"frozen": True, "slots": True},
    "frozen=True": {"frozen": True},
    "(no options)": {},
    "slots=True": {"slots": True},
    "frozen=True, slots=True, eq=False": {"frozen": True, "slots": True, "eq": False},
    "frozen=True, slots=True, repr=False": {"frozen": True, "slots": True, "repr": False},
}


def define(n: int, options: dict[str, Any]) -> float:
    """CPU seconds to define ``n`` dataclasses with ``options``."""
    start = time.process_time()
    for i in range(n):
        record_class(i, **options)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print("| `@dataclass(...)` | CPU per class (min) |")
    print("|---|---:|")
    for label, options in VARIANTS.items():
        best = min(define(args.classes, options) for _ in range(args.repeat))
        print(f"| {label} | {best * 1000 / args.classes:.2f} ms |")


if __name__ == "__main__":
    main()

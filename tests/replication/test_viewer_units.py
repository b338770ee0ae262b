"""The web viewer reads sizes and counts as the CLI and the footers do: its ``units.js``
gives the same text as ``toolfold._units`` for every size (in real Chromium)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from toolfold._units import format_bytes, plural

UNITS_JS = (
    Path(__file__).resolve().parents[2] / "src" / "toolfold" / "server" / "static" / "units.js"
)


@pytest.fixture(scope="module")
def page(browser_context: Any) -> Any:
    p = browser_context.new_page()
    p.set_content("<!doctype html><title>units</title>")
    p.add_script_tag(content=UNITS_JS.read_text(encoding="utf-8"))
    yield p
    p.close()


def _sizes() -> list[int]:
    rng = random.Random(18)
    edges = [0, 1, 1023, 1024, 1280, 1536, 10188, 10189, 10240, 1024**2 - 1, 1024**2, 2**53 - 1]
    # every unit's rounding edges (9.95 and 1023.5 of it), then random sizes of any scale
    for power in range(1, 5):
        d = 1024**power
        edges += [d * 995 // 100 + k for k in (-1, 0, 1)] + [d * 2047 // 2 + k for k in (-1, 0, 1)]
    edges += [rng.randrange(1 << rng.randrange(1, 53)) for _ in range(2000)]
    return edges


def test_js_and_python_format_every_size_alike(page: Any) -> None:
    sizes = _sizes()
    got = json.loads(
        page.evaluate("(ns) => JSON.stringify(ns.map(window.toolfoldUnits.formatBytes))", sizes)
    )
    mismatches = [
        (n, js, format_bytes(n)) for n, js in zip(sizes, got, strict=True) if js != format_bytes(n)
    ]
    assert not mismatches, mismatches[:5]


def test_js_and_python_plurals_agree(page: Any) -> None:
    counts = [0, 1, 2, 999, 1000, 1234567]
    got = page.evaluate(
        "(cs) => cs.map((c) => window.toolfoldUnits.plural(c, 'settled result'))", counts
    )
    assert got == [plural(c, "settled result") for c in counts]
    assert got[1] == "1 settled result"


def test_a_background_calls_card_names_its_command_and_the_call_that_started_it(
    browser_context: Any,
) -> None:
    static = UNITS_JS.parent
    p = browser_context.new_page()
    try:
        p.set_content("<!doctype html><title>cards</title>")
        for name in ("units.js", "parts.js", "cards.js"):
            p.add_script_tag(content=(static / name).read_text(encoding="utf-8"))
        what = "a => window.toolfoldCards.whatText(a)"
        args = {"command": "npm run dev", "handle": "bg-1", "started_by": "c1"}
        assert p.evaluate(what, args) == "bg-1 of c1: npm run dev"
        assert p.evaluate(what, {"command": "npm run dev"}) == "npm run dev"
    finally:
        p.close()

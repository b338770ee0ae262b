"""Real-browser tests: headless Chromium folds a live bash stream and runs the Chord vectors.

The page's JavaScript applier (``static/chord.js``) must agree with the Python
applier on every shared vector and on seeded random (often malformed) streams,
and the viewer's replica must equal the server's lane view after a long,
truncating bash stream with emoji and CJK text.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from lane_fixtures import tail_stream

from toolfold.chord import ChordError, Decoder, Encoder, apply

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "chord"  # tests/vectors/chord

# Runs one decode+apply case in the page; returns JSON text (JSON.stringify
# escapes lone surrogates, which the Playwright channel could not carry raw).
JS_RUN_CASES = """
(lines) => {
  const out = [];
  for (const line of lines) {
    const req = JSON.parse(line);
    const dec = new Chord.Decoder();
    let state = req.base;
    const ops = [];
    let res = null;
    for (let i = 0; i < req.batches.length; i++) {
      let o;
      try { o = dec.decode(req.batches[i]); }
      catch (e) { res = {ok: false, cls: e.name, at: i, phase: "decode", chord: e instanceof Chord.ChordError}; break; }
      ops.push(o);
      const before = JSON.stringify(state);
      try { state = Chord.apply(state, o); }
      catch (e) {
        res = {ok: false, cls: e.name, at: i, phase: "apply", chord: e instanceof Chord.ChordError,
               intact: JSON.stringify(state) === before};
        break;
      }
    }
    if (res === null) res = {ok: true, ops, state};
    out.push(res);
  }
  return JSON.stringify(out);
}
"""

JS_VALIDATE = """
(lines) => JSON.stringify(lines.map((line) => {
  const op = JSON.parse(line);
  const r = {};
  for (const [name, fn] of [["validate_wire", Chord.validateWireOp], ["validate", Chord.validateOp]]) {
    try { fn(op); r[name] = "ok"; } catch (e) { r[name] = e.name; }
  }
  return r;
}))
"""


def _py_run(req: dict[str, Any]) -> dict[str, Any]:
    dec = Decoder()
    state = copy.deepcopy(req["base"])
    ops: list[Any] = []
    for i, batch in enumerate(req["batches"]):
        try:
            decoded = dec.decode(batch)
        except ChordError as exc:
            return {"ok": False, "cls": type(exc).__name__, "at": i, "phase": "decode"}
        ops.append(decoded)
        try:
            state = apply(state, decoded)
        except ChordError as exc:
            return {"ok": False, "cls": type(exc).__name__, "at": i, "phase": "apply"}
    return {"ok": True, "ops": ops, "state": state}


def _reference_class(error: str) -> str:
    cls = error.split(":", 1)[0]
    return "ShapeError" if cls == "TypeError" else cls


def _load_vectors() -> list[dict[str, Any]]:
    cases = []
    for name in ("decode.jsonl", "edge_ok.jsonl", "malformed.jsonl"):
        with (VECTORS / name).open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    case = json.loads(line)
                    case["file"] = name
                    cases.append(case)
    return cases


@pytest.fixture(scope="module")
def page(browser_context: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A page with chord.js loaded from the package's static directory (no server needed)."""
    chord_js = (
        Path(__file__).resolve().parents[2] / "src" / "toolfold" / "server" / "static" / "chord.js"
    )
    p = browser_context.new_page()
    p.set_content("<!doctype html><title>chord</title>")
    p.add_script_tag(content=chord_js.read_text(encoding="utf-8"))
    yield p
    p.close()


def test_js_applier_matches_the_reference_vectors_and_python(page: Any) -> None:
    cases = _load_vectors()
    assert len(cases) >= 100, (
        f"expected the recorded vectors at {VECTORS}, found {len(cases)} cases"
    )
    lines = [json.dumps(c["request"]) for c in cases]
    js_results = json.loads(page.evaluate(JS_RUN_CASES, lines))
    mismatches = []
    for case, js in zip(cases, js_results, strict=True):
        label = f"{case['file']}#{case['id']}"
        py = _py_run(case["request"])
        want = case["response"]
        if want["ok"]:
            if not js["ok"] or js["ops"] != want["ops"] or js["state"] != want["state"]:
                mismatches.append(f"{label}: JS {js} != reference")
            if not py["ok"] or py["state"] != js.get("state"):
                mismatches.append(f"{label}: Python {py} != JS")
        else:
            expected = (_reference_class(want["error"]), want["at_batch"], want["phase"])
            got = (js.get("cls"), js.get("at"), js.get("phase"))
            if js["ok"] or got != expected or not js["chord"]:
                mismatches.append(f"{label}: JS failed as {got}, reference {expected}")
            if js.get("phase") == "apply" and not js.get("intact"):
                mismatches.append(f"{label}: JS apply failure changed the replica")
            if py["ok"] or (py["cls"], py["at"], py["phase"]) != got:
                mismatches.append(f"{label}: Python {py} disagrees with JS {got}")
    assert not mismatches, "\n".join(mismatches)


def test_js_validators_match_the_reference_on_single_ops(page: Any) -> None:
    cases = [c for c in _load_vectors() if "validate_wire" in c and c.get("validate_wire")]
    assert cases
    ops = [json.dumps(c["request"]["batches"][0][0]) for c in cases]
    results = json.loads(page.evaluate(JS_VALIDATE, ops))
    for case, got in zip(cases, results, strict=True):
        for name in ("validate_wire", "validate"):
            want = case[name]
            expected = "ok" if want["ok"] else _reference_class(want["error"])
            assert got[name] == expected, (
                f"malformed#{case['id']} {name}: {got[name]} != {expected}"
            )


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 2 or pick < 0.5:
        return rng.choice(["", "abc", "😀x", "漢字", "\U0001f1ef\U0001f1f5", 0, 1.5, True, None])
    if pick < 0.75:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(["a", "b", "0", "text"]): _random_value(rng, depth + 1)
        for _ in range(rng.randint(0, 3))
    }


def _random_path(rng: random.Random) -> list[Any]:
    segs: list[Any] = ["a", "b", "0", "text", 0, 1, 2, 5, "__proto__"]
    return [rng.choice(segs) for _ in range(rng.randint(0, 3))]


# Paths that exist in the base value below, by what they hold, so most random
# ops apply and the comparison covers successes as well as failures.
_STRINGS: list[list[Any]] = [["a", "text"], ["b", 0], ["b", 1, "text"], ["text"], ["a", "0", 1]]
_LISTS: list[list[Any]] = [["a", "0"], ["b"]]
_KEYS: list[list[Any]] = [["a", "new"], ["b", 1, "k"], ["z"], ["b", 2], ["a", "0", 0]]


def _random_op(rng: random.Random) -> list[Any]:
    verb = rng.choice("sdatpm")
    sensible = rng.random() < 0.85
    if verb in "at":
        path = rng.choice(_STRINGS) if sensible else _random_path(rng)
    elif verb in "pm":
        path = rng.choice(_LISTS) if sensible else _random_path(rng)
    else:
        path = rng.choice(_KEYS + _STRINGS) if sensible else _random_path(rng)
    if verb == "m" and sensible:
        return ["m", path, [1, 0] if path == ["a", "0"] else [0, 1]]
    if verb == "s":
        return ["s", path, _random_value(rng)]
    if verb == "d":
        return ["d", path]
    if verb == "a":
        return ["a", path, rng.choice(["x", "😀", "字", ""])]
    if verb == "t":
        return ["t", path, rng.randint(0, 4)]
    if verb == "p":
        return ["p", path, rng.randint(0, 4), rng.randint(0, 2), [_random_value(rng)]]
    n = rng.randint(0, 3)
    perm = list(range(n))
    rng.shuffle(perm)
    return ["m", path, perm]


def _mutate(rng: random.Random, wire: list[Any]) -> list[Any]:
    wire = copy.deepcopy(wire)
    if not wire:
        return wire
    i = rng.randrange(len(wire))
    op = wire[i]
    choice = rng.random()
    if choice < 0.2:
        op[0] = rng.choice(["x", "#", "r", "s", "d"])
    elif choice < 0.4 and len(op) > 1:
        op[rng.randrange(1, len(op))] = rng.choice(
            [-1, 1.5, "0", None, [], 99, True, ["__proto__"]]
        )
    elif choice < 0.6:
        op.pop()
    elif choice < 0.8:
        op.append(0)
    else:
        wire[i] = ["#", rng.choice([0, 1, 7]), _random_path(rng)]
    return wire


def _nest(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


# Wire text (so JavaScript parses it as a browser would) that the two appliers must handle
# identically: integer fields past the safe integers, lone surrogates, depth across batches.
_VALUE_EDGE_CASES: list[tuple[str, str, int, str]] = [
    # (wire batches as JSON text, expected class, failing batch, phase)
    ('[[["s", ["o", 1e21], 1]]]', "UnsafePathError", 0, "decode"),
    ('[[["s", ["o", 9007199254740993], 1]]]', "UnsafePathError", 0, "decode"),
    ('[[["s", ["o", 9007199254740992], 1]]]', "UnsafePathError", 0, "decode"),
    ('[[["t", ["s"], 9007199254740993]]]', "ShapeError", 0, "decode"),
    ('[[["#", 1e21, ["o"]]]]', "ShapeError", 0, "decode"),
    ('[[["s", ["o", "k"], "x\\ud800"]]]', "JSONValueError", 0, "apply"),
    ('[[["s", ["o", "k"], {"\\udc00": 1}]]]', "JSONValueError", 0, "apply"),
    ('[[["a", ["s"], "\\ud83d"]]]', "JSONValueError", 0, "apply"),
    ('[[["p", ["xs"], 0, 0, ["\\ude00"]]]]', "JSONValueError", 0, "apply"),
    (
        json.dumps([[["s", ["o", "d"], _nest(200)]], [["s", ["o", "d", *[0] * 199], _nest(50)]]]),
        "JSONValueError",
        1,
        "apply",
    ),
]


def test_js_and_python_agree_on_integer_bounds_surrogates_and_depth(page: Any) -> None:
    base = {"o": {}, "s": "x", "xs": [1]}
    lines = [
        json.dumps({"cmd": "decode_apply", "base": base, "batches": json.loads(batches)})
        for batches, *_ in _VALUE_EDGE_CASES
    ]
    js_results = json.loads(page.evaluate(JS_RUN_CASES, lines))
    for (batches, cls, at, phase), js, line in zip(
        _VALUE_EDGE_CASES, js_results, lines, strict=True
    ):
        py = _py_run(json.loads(line))
        assert (js.get("cls"), js.get("at"), js.get("phase")) == (cls, at, phase), (batches, js)
        assert (py.get("cls"), py.get("at"), py.get("phase")) == (cls, at, phase), (batches, py)
        assert js["chord"], (batches, js)
        if phase == "apply":
            assert js["intact"], batches
    # One level less than the depth case above fits exactly (MAX_DEPTH): both apply it.
    ok = json.dumps(
        {
            "cmd": "decode_apply",
            "base": base,
            "batches": [
                [["s", ["o", "d"], _nest(200)]],
                [["s", ["o", "d", *[0] * 199], _nest(49)]],
            ],
        }
    )
    [js] = json.loads(page.evaluate(JS_RUN_CASES, [ok]))
    py = _py_run(json.loads(ok))
    assert js["ok"] and py["ok"] and js["state"] == py["state"]


def test_js_and_python_agree_on_seeded_random_and_mutated_streams(page: Any) -> None:
    rng = random.Random(20261130)
    requests = []
    for _ in range(400):
        base = {"a": {"text": "héllo😀", "0": [1, "x"]}, "b": ["漢字", {"text": ""}], "text": "t"}
        enc = Encoder()
        batches = []
        for _ in range(rng.randint(1, 3)):
            ops = [_random_op(rng) for _ in range(rng.randint(1, 3))]
            try:
                wire = enc.encode(ops)
            except ChordError:
                # The encoder refuses invalid ops at record time; a forged stream
                # sends them inline anyway.
                wire = copy.deepcopy(ops)
            if rng.random() < 0.15:
                wire = _mutate(rng, wire)
            batches.append(wire)
        requests.append({"cmd": "decode_apply", "base": base, "batches": batches})
    requests.append({"cmd": "decode_apply", "base": {}, "batches": [[["#", 0, ["__proto__"]]]]})
    js_results = json.loads(page.evaluate(JS_RUN_CASES, [json.dumps(r) for r in requests]))
    outcomes = {"ok": 0, "failed": 0}
    for i, (req, js) in enumerate(zip(requests, js_results, strict=True)):
        py = _py_run(req)
        outcomes["ok" if py["ok"] else "failed"] += 1
        if py["ok"]:
            assert js["ok"], f"case {i}: Python applied, JS failed with {js}: {req['batches']}"
            assert js["state"] == py["state"], f"case {i}: states differ: {req['batches']}"
        else:
            assert not js["ok"], f"case {i}: Python failed {py}, JS applied: {req['batches']}"
            assert js["chord"], f"case {i}: JS raised a non-Chord error {js}"
            assert (js["cls"], js["at"], js["phase"]) == (py["cls"], py["at"], py["phase"]), (
                f"case {i}: JS {js} vs Python {py}: {req['batches']}"
            )
    # The generator must exercise both paths, or this test proves little.
    assert outcomes["ok"] > 50 and outcomes["failed"] > 50, outcomes


@pytest.mark.parametrize("retain", ["head", "tail", "head_tail"])
def test_js_folds_each_retention_modes_stream_to_the_sinks_state(page: Any, retain: str) -> None:
    # Imported here so the vector tests above depend on chord.js and toolfold.chord only.
    from toolfold.output import OutputPolicy, ToolOutput, output_text

    rng = random.Random(20261203)
    out = ToolOutput(OutputPolicy(retain=retain, max_bytes=3000, max_lines=40))  # type: ignore[arg-type]
    stream = out.open_stream()
    enc = Encoder()
    batches = [enc.encode(stream.take())]
    for i in range(400):
        out.write(f"{i:04d} 😀 漢字 línea {rng.randrange(10**6)}" + "x" * rng.randrange(80) + "\n")
        if rng.random() < 0.3:
            batches.append(enc.encode(stream.take()))
    state = out.settle("[done]")
    batches.append(enc.encode(stream.take()))
    request = {"cmd": "decode_apply", "base": None, "batches": batches}
    [js] = json.loads(page.evaluate(JS_RUN_CASES, [json.dumps(request)]))
    py = _py_run(request)
    assert js["ok"] and py["ok"]
    assert js["state"] == py["state"] == state
    assert output_text(js["state"]) == out.text
    if retain == "head_tail":
        assert state["content"][1]["text"].startswith("[... ")  # the marker between


# --- the viewer following a real bash command ---------------------------------------

LINES = 4000
# Several thousand varied lines with emoji, CJK and a flag; then the command waits
# for a file the test creates once it has seen (and photographed) the running
# call, so "running" is a state the test observes rather than a race it hopes for.
COMMAND = (
    "for i in $(seq 1 {lines}); do "
    'printf "%05d 😀 漢字テスト 🇯🇵 línea %s 👩‍💻 中文输出\\n" "$i" "$(( i * 7919 % 10007 ))"; '
    "done; "
    'while [ ! -e "{gate}" ]; do sleep 0.05; done; '
    "echo finished ✅"
)

JS_CALL_STATE = """
(id) => {
  const v = window.toolfoldViewer.state();
  if (!v || !v.tools || !v.tools[id] || !v.tools[id].output) return null;
  const t = v.tools[id];
  return {status: t.status, total: t.output.truncation.total_lines, op: v.operation && v.operation.status};
}
"""


def test_viewer_replica_equals_server_view_after_a_long_bash_stream(
    browser_context: Any, serve: Any, tmp_path: Path
) -> None:
    # Imported here so the vector tests above depend on chord.js and toolfold.chord only.
    from toolfold.harness import Lanes
    from toolfold.server import HarnessCommands, create_app

    lanes = Lanes()
    commands = HarnessCommands(lanes)
    server = serve(create_app(lanes=lanes, run_command=commands))
    page = browser_context.new_page()
    try:
        page.goto(server.viewer_url("lane=live"))
        page.wait_for_function("() => window.toolfoldViewer")
        # Lane "live" does not exist until its first command: the viewer subscribes then.
        gate = tmp_path / "go"
        page.fill("#command-input", COMMAND.format(lines=LINES, gate=gate))
        page.click("button[type=submit]")
        page.wait_for_function("() => window.toolfoldViewer.lastToolCallId")
        call_id = page.evaluate("() => window.toolfoldViewer.lastToolCallId")
        page.wait_for_function("() => window.toolfoldViewer.connected")
        subscriptions = page.evaluate("() => window.toolfoldViewer.subscriptions")
        # Running, with every line produced: the tail window is full and truncated.
        page.wait_for_function(
            f"(id) => {{ const s = ({JS_CALL_STATE})(id); return s && s.status === 'running' && s.total >= {LINES}; }}",
            arg=call_id,
            timeout=120_000,
        )
        page.wait_for_selector(f"article[data-tool-call-id='{call_id}'] .truncation:not([hidden])")
        shot = tmp_path / "viewer-running.png"
        page.screenshot(path=str(shot), full_page=False)
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert (width, height) == (1280, 900)
        assert len(data) > 20_000, f"screenshot is only {len(data)} bytes: the page looks empty"
        card = page.inner_text(f"article[data-tool-call-id='{call_id}']")
        assert "running" in card and "showing last" in card and f"of {LINES:,}" in card
        assert "漢字テスト" in card and "😀" in card

        gate.write_text("go")
        page.wait_for_function(
            f"(id) => {{ const s = ({JS_CALL_STATE})(id); return s && s.status !== 'running' && s.op === 'done'; }}",
            arg=call_id,
            timeout=120_000,
        )
        server.run(commands.wait())
        expected = server.call(lambda: copy.deepcopy(lanes.host("live").view))
        # The page may still be folding the last batches: wait until it has them all
        # (it subscribed after the lane's first batches, so count from its own base).
        page.wait_for_function(
            "(want) => JSON.stringify(window.toolfoldViewer.state()) === JSON.stringify(want)",
            arg=expected,
            timeout=60_000,
        )
        replica = json.loads(page.evaluate("() => JSON.stringify(window.toolfoldViewer.state())"))
        assert replica == expected
        tool = expected["tools"][call_id]
        assert tool["status"] == "ok"
        text = tool["output"]["content"][0]["text"]
        assert "finished ✅" in text and "😀 漢字テスト 🇯🇵" in text
        assert tool["output"]["truncation"]["truncated"] is True
        assert tool["output"]["truncation"]["total_lines"] > LINES
        # Once live, the long stream never needed a resubscribe.
        assert page.evaluate("() => window.toolfoldViewer.subscriptions") == subscriptions
        page.screenshot(path=str(tmp_path / "viewer-settled.png"))

        # A failing command: its card is marked as an error, its output kept.
        page.fill("#command-input", "echo partial output; exit 3")
        page.click("button[type=submit]")
        page.wait_for_function("(id) => window.toolfoldViewer.lastToolCallId !== id", arg=call_id)
        failed_id = page.evaluate("() => window.toolfoldViewer.lastToolCallId")
        card = page.wait_for_selector(f"article.status-error[data-tool-call-id='{failed_id}']")
        text = card.inner_text()
        assert "partial output" in text and "error" in text
        assert "3" in text  # the exit code is named in the error text or the details
        # The "started call-…" note goes once the call has ended.
        page.wait_for_function(
            "() => !document.getElementById('command-status').textContent.includes('started')"
        )
        page.screenshot(path=str(tmp_path / "viewer-error.png"))
        # The earlier, settled call is still listed (settled calls stay, bounded).
        assert page.query_selector(f"article.status-ok[data-tool-call-id='{call_id}']")
    finally:
        page.close()


def test_viewer_resubscribes_on_a_gap_and_on_a_batch_it_cannot_fold(
    browser_context: Any, serve: Any
) -> None:
    from toolfold.harness import Lanes
    from toolfold.server import create_app

    lanes = Lanes()
    server = serve(create_app(lanes=lanes))
    events = list(tail_stream("t1", lines=900, window=60))
    server.call(lambda: [lanes.handle(e) for e in events[:100]])
    page = browser_context.new_page()

    def converged() -> None:
        expected = server.call(lambda: copy.deepcopy(lanes.host("main").view))
        page.wait_for_function(
            "(want) => JSON.stringify(window.toolfoldViewer.state()) === JSON.stringify(want)"
            " || window.__mismatch",
            arg=expected,
        )
        got = json.loads(page.evaluate("() => JSON.stringify(window.toolfoldViewer.state())"))
        assert got == expected

    try:
        page.goto(server.viewer_url("lane=main"))
        page.wait_for_function("() => window.toolfoldViewer.connected")
        converged()
        # A gap: an event whose id is not the next one.
        page.evaluate(
            "() => window.toolfoldViewer.source.onmessage({lastEventId: '999', data: '[]'})"
        )
        page.wait_for_function("() => window.toolfoldViewer.subscriptions === 2")
        server.call(lambda: [lanes.handle(e) for e in events[100:300]])
        converged()
        # A batch that cannot fold: the right id, but a path id the decoder never saw.
        page.evaluate(
            """() => { const v = window.toolfoldViewer;
                       v.source.onmessage({lastEventId: String(v.expectedId),
                                           data: '[["a", 99, "x"]]'}); }"""
        )
        page.wait_for_function("() => window.toolfoldViewer.subscriptions === 3")
        reasons = page.evaluate("() => window.toolfoldViewer.resubscribeReasons")
        assert reasons[0].startswith("gap: expected id")
        assert reasons[1].startswith("PathError at id")
        server.call(lambda: [lanes.handle(e) for e in events[300:]])
        converged()
    finally:
        page.close()


def test_viewer_shows_a_stored_sessions_settled_calls(
    browser_context: Any, serve: Any, tmp_path: Path
) -> None:

    from toolfold.harness import Lanes
    from toolfold.server import HarnessCommands, create_app
    from toolfold.storage import open_repository

    repo = open_repository(f"sqlite:{tmp_path / 'toolfold.db'}")
    lanes = Lanes()
    commands = HarnessCommands(lanes, repository=repo, spill_dir=tmp_path / "spill")
    server = serve(create_app(lanes=lanes, run_command=commands, repository=repo))
    page = browser_context.new_page()
    try:
        with server.client() as client:
            ids = []
            for command in ("seq 1 2500", "echo partial output; exit 3"):
                r = client.post("/v1/lanes/main/commands", json={"command": command})
                assert r.status_code == 202, r.text
                ids.append(r.json()["tool_call_id"])
                server.run(commands.wait())
        long_id, failed_id = ids
        page.goto(server.viewer_url("lane=other&session=main"))
        page.wait_for_function(
            "() => window.toolfoldViewer.stored && window.toolfoldViewer.stored.calls"
        )
        assert page.evaluate("() => window.toolfoldViewer.stored.total") == 2
        long = page.inner_text(f"#stored article.status-ok[data-tool-call-id='{long_id}']")
        assert "seq 1 2500" in long and "ok" in long
        assert "showing last 2,000 of 2,500 lines" in long
        assert f"full output at {tmp_path / 'spill' / 'main'}" in long
        assert "exit_code" in long  # the details table
        failed = page.inner_text(f"#stored article.status-error[data-tool-call-id='{failed_id}']")
        assert "partial output" in failed and "exit_code" in failed and "3" in failed
        assert "2 calls" in page.inner_text("#stored-title")
        # The session picker lists the store's sessions with this one selected.
        assert page.eval_on_selector("#session-select", "s => s.value") == "main"
        # Watching lane "main" with its session open: a command run from the command
        # box appears in the stored view once it settles.
        page.goto(f"{server.url}/?lane=main&session=main")
        page.wait_for_function(
            "() => window.toolfoldViewer.stored && window.toolfoldViewer.connected"
        )
        page.fill("#command-input", "echo third")
        page.click("button[type=submit]")
        page.wait_for_function("() => window.toolfoldViewer.stored.total === 3", timeout=60_000)
        third = page.evaluate("() => window.toolfoldViewer.lastToolCallId")
        card = page.wait_for_selector(f"#stored article.status-ok[data-tool-call-id='{third}']")
        assert "third" in card.inner_text()
    finally:
        page.close()
        # Playwright's sync API holds this thread's loop: close the store on the server's.
        server.run(commands.aclose())
        server.run(repo.close())


def test_viewer_shows_a_head_tail_call_as_one_text_with_its_cut(
    browser_context: Any, serve: Any
) -> None:
    from toolfold.harness import Lanes
    from toolfold.harness.events import RunEnd, RunStart, ToolEnd, ToolStart, ToolUpdate
    from toolfold.output import OutputPolicy, ToolOutput, output_text

    lanes = Lanes()
    server = serve(create_app_for(lanes))
    out = ToolOutput(OutputPolicy(retain="head_tail", max_bytes=4000, max_lines=50))
    stream = out.open_stream()
    events: list[Any] = [RunStart("r1", lane="main"), ToolStart("r1", "t1", "c1", "bash", {})]
    events.append(ToolUpdate("r1", "t1", "c1", stream.take()))
    for i in range(600):
        out.write(f"{i:04d} 😀 漢字 step {i * 7919 % 10007}\n")
        if i % 37 == 0:
            events.append(ToolUpdate("r1", "t1", "c1", stream.take()))
    events.append(ToolUpdate("r1", "t1", "c1", stream.take()))
    server.call(lambda: [lanes.handle(e) for e in events[:3]])  # the lane exists
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.viewer_url("lane=main"))
        page.wait_for_function("() => window.toolfoldViewer.connected")
        server.call(lambda: [lanes.handle(e) for e in events[3:]])
        card = "article[data-tool-call-id='c1']"
        page.wait_for_selector(f"{card} .truncation:not([hidden])")
        # The cut shows from the first flush past the caps; wait for the last flush.
        page.wait_for_function(
            "sel => (document.querySelector(sel)?.innerText ?? '').includes('0599 ')",
            arg=f"{card} pre.text",
        )
        shown = page.inner_text(f"{card} pre.text")
        # The card shows the three blocks as one text: start, the marker line, end.
        assert shown.rstrip("\n") == output_text(out.snapshot()).rstrip("\n")
        assert shown.startswith("0000 😀") and "0599 😀" in shown and "[... " in shown
        cut = page.inner_text(f"{card} .truncation")
        assert "showing the start and the end" in cut and "of 600 lines" in cut, cut
        assert errors == []
        server.call(
            lambda: [
                lanes.handle(e) for e in (ToolEnd("r1", "t1", "c1", is_error=False), RunEnd("r1"))
            ]
        )
    finally:
        page.close()


def create_app_for(lanes: Any) -> Any:
    from toolfold.server import create_app

    return create_app(lanes=lanes)

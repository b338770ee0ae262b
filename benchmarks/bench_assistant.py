"""Assistant output as ops: bytes per subscriber and CPU for a 20 KB answer streamed
in 2,000 deltas, side by side with the two alternatives a harness would pick.

- **ops**: ``AssistantOutput`` + one ``MessageStream``, a batch every 100 ms (the
  live publisher's cadence), Chord-encoded (one encoder per subscriber);
- **snapshots**: the whole message, JSON, at the same cadence;
- **raw deltas**: every delta as its own event (what an OpenAI-style SSE stream
  forwards), 2,000 events.

Deltas arrive every 5 ms (10 s of generation), simulated: no sleeping. CPU is
``time.process_time`` for the producer side (building and encoding what is sent)
and for one subscriber's side (decoding and folding), best of 5.

Not measured: network framing (SSE headers per event), compression, the model.

Run: ``.venv/bin/python benchmarks/bench_assistant.py`` (a few seconds).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from toolfold.chord import Decoder, Encoder, apply
from toolfold.output import AssistantOutput

DELTAS = 2000
EVERY = 20  # 100 ms cadence / 5 ms per delta


def deltas() -> list[str]:
    rng = random.Random(7)
    words = ["the", "harness", "folds", "ops", "into", "one", "view,", "and", "nothing", "is"]
    out = []
    for _ in range(DELTAS):
        piece = (" ".join(rng.choice(words) for _ in range(2)) + " " * 10)[:9] + " "
        out.append(piece)
    return out


def ops_side(parts: list[str]) -> tuple[list[str], Callable[[], Any]]:
    out = AssistantOutput()
    stream = out.open_stream()
    encoder = Encoder()
    sent: list[str] = [json.dumps(encoder.encode(stream.take()))]
    for i, delta in enumerate(parts, 1):
        out.text(delta)
        if i % EVERY == 0:
            sent.append(json.dumps(encoder.encode(stream.take())))
    out.end("stop")
    sent.append(json.dumps(encoder.encode(stream.take())))

    def fold() -> Any:
        decoder, value = Decoder(), None
        for data in sent:
            value = apply(value, decoder.decode(json.loads(data)))
        return value

    return sent, fold


def snapshot_side(parts: list[str]) -> tuple[list[str], Callable[[], Any]]:
    message: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": ""}]}
    sent: list[str] = [json.dumps(message)]
    for i, delta in enumerate(parts, 1):
        message["content"][0]["text"] += delta
        if i % EVERY == 0:
            sent.append(json.dumps(message))
    sent.append(json.dumps({**message, "stop_reason": "stop"}))

    def fold() -> Any:
        value = None
        for data in sent:
            value = json.loads(data)
        return value

    return sent, fold


def raw_side(parts: list[str]) -> tuple[list[str], Callable[[], Any]]:
    sent = [json.dumps({"choices": [{"delta": {"content": d}}]}) for d in parts]

    def fold() -> Any:
        text = "".join(json.loads(data)["choices"][0]["delta"]["content"] for data in sent)
        return {"content": [{"type": "text", "text": text}]}

    return sent, fold


def best(fn: Callable[[], Any], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    parts = deltas()
    answer = "".join(parts)
    rows = []
    for name, side in (("ops", ops_side), ("snapshots", snapshot_side), ("raw deltas", raw_side)):
        sent, fold = side(parts)
        assert fold()["content"][0]["text"] == answer
        rows.append(
            (name, len(sent), sum(len(s) for s in sent), best(lambda s=side: s(parts)), best(fold))
        )
    ops_bytes = rows[0][2]
    print(
        f"answer: {len(answer.encode()):,} bytes in {DELTAS} deltas, a batch every {EVERY} deltas"
    )
    print()
    print("| stream | events | bytes per subscriber | vs ops | producer CPU | subscriber CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, events, size, produce, fold in rows:
        print(
            f"| {name} | {events:,} | {size:,} | {size / ops_bytes:.1f}x "
            f"| {produce * 1000:.1f} ms | {fold * 1000:.1f} ms |"
        )


if __name__ == "__main__":
    main()

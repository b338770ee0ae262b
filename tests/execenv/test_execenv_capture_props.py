"""Property tests: any chunking of any byte stream folds to the reference bounded view."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from execenv_helpers import FakeClock, raw_totals, reference_view
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolfold.execenv import (
    CaptureOptions,
    CaptureSession,
    CaptureSnapshot,
    OutputCapture,
    Replace,
    ShellOutputLimits,
    ShellOutputUpdate,
    ShellOutputView,
    apply_shell_output_update,
    capture_for,
    update_from_dict,
    update_to_dict,
)

PIECES = [
    b"hello",
    b"world ",
    b"\t",
    b"\n",
    b"\n",
    b"\r\n",
    b"\r",
    "é".encode(),
    "€uro".encode(),
    "𝄞".encode(),
    "日本語".encode(),
    b"\xff",
    b"\xe2\x82",  # truncated multi-byte sequence
    b"\xed\xa0\x80",  # encoded surrogate: invalid
    b"\x1b[31m",
    b"\x1b[0m",
    b"\x1b[2K",
    b"\x1b]0;title\x07",
    b"\x1b(B",
    b"\x1b",
    b"\x1b[",
    "\x9b31m".encode(),  # 8-bit CSI (C1)
    "\x9b".encode(),
    "\x85\x9d".encode(),  # other C1 controls
    "\xa0".encode(),  # not a control, but shares the 0xC2 lead byte
    b"\x07",
    b"\x08",
    b"\x00",
    b"10%\r20%\r",
]

piece = st.one_of(
    st.sampled_from(PIECES),
    st.integers(1, 400).map(lambda n: b"x" * n),  # long runs make huge lines for small caps
    st.binary(max_size=8),
)
streams = st.lists(piece, max_size=60).map(b"".join)


def _limits(max_bytes: int, max_lines: int, retain: str, share: float) -> ShellOutputLimits:
    if retain == "head_tail":  # one of each cap for each part
        max_bytes, max_lines = max(max_bytes, 2), max(max_lines, 2)
    return ShellOutputLimits(
        max_bytes=max_bytes, max_lines=max_lines, retain=retain, head_share=share
    )  # type: ignore[arg-type]


SHARES = st.sampled_from([0.2, 0.5, 0.05, 0.9])
limits = st.builds(
    _limits,
    st.integers(1, 300),
    st.integers(1, 12),
    st.sampled_from(["head", "tail", "head_tail"]),
    SHARES,
)


# Large reads past the cap: the tail capture skips decoding whatever cannot reach the
# view (see OutputCapture._skip_point). Streams of many short lines, read in few large
# chunks, with control bytes and \r only now and then, so both the skipping and the
# fallback paths run; everything must still equal the whole-stream reference.
LINE_PIECES = [b"a\n", b"bb\n", b"\n", b"ccc ddd\n", "é€\n".encode(), b"x" * 40 + b"\n", b"tail"]
RARE_PIECES = [
    b"\x1b[31m",
    "\x9b1m".encode(),
    b"\r",
    b"\r\n",
    b"\xff",
    b"\xe2\x82",
    b"\x1b",
    b"10%\r20%",
]
many_lines = st.tuples(
    st.lists(st.sampled_from(LINE_PIECES), min_size=1, max_size=12),
    st.integers(1, 300),
    st.lists(st.tuples(st.integers(0, 100_000), st.sampled_from(RARE_PIECES)), max_size=3),
).map(
    lambda t: _insert_rare(b"".join(t[0]) * t[1], t[2]),
)


def _insert_rare(raw: bytes, rare: list[tuple[int, bytes]]) -> bytes:
    for at, piece_ in rare:
        at %= len(raw) + 1
        raw = raw[:at] + piece_ + raw[at:]
    return raw


def chunked(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(raw)]:
        out.append(raw[prev:p])
        prev = p
    return out


def capture_matching_reference(
    raw: bytes, cuts: list[int], lim: ShellOutputLimits
) -> CaptureSnapshot:
    """Feed ``raw`` in the given chunks and check the snapshot against the independent
    whole-stream reference (view, flags and exact totals); return the snapshot."""
    cap = capture_for(lim)
    for chunk in chunked(raw, cuts):
        cap.feed(chunk)
    cap.close()
    snap = cap.snapshot()
    ref = reference_view(raw, lim.max_bytes, lim.max_lines, lim.retain, lim.head_share)
    tr = snap.truncation
    assert snap.text == ref.text
    assert (tr.truncated, tr.truncated_by) == (ref.truncated, ref.truncated_by)
    assert tr.last_line_partial == ref.last_line_partial
    assert tr.first_line_exceeds_limit == ref.first_line_exceeds_limit
    total_bytes, total_lines, last_line_bytes = raw_totals(raw)
    assert (tr.total_bytes, tr.total_lines, snap.last_line_bytes) == (
        total_bytes,
        total_lines,
        last_line_bytes,
    )
    if ref.head is not None:
        # head_tail, cut: where the head ends, and which lines the cut covers.
        tail = ref.text[len(ref.head) :]
        assert tr.cut_at == len(ref.head)
        assert tr.cut_line == ref.head.count("\n") + 1
        whole_tail_lines = (
            0 if ref.last_line_partial else tail.count("\n") + (0 if tail.endswith("\n") else 1)
        )
        assert tr.cut_lines == total_lines - whole_tail_lines - tr.cut_line + 1
        assert tr.cut_bytes == total_bytes - len(ref.text.encode()) or (
            tr.cut_bytes == 0 and total_bytes < len(ref.text.encode())
        )
    elif lim.retain != "head_tail":
        assert tr.cut_at is None
    return snap


@pytest.fixture(scope="module")
def spill_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spill")


@settings(max_examples=600)
@given(raw=streams, cuts=st.lists(st.integers(0, 10_000), max_size=30), lim=limits)
# A current line that outgrew the cap pushed the completed lines out, then a \r redraw made
# it short again: the cut is still the line cap's doing.
@example(
    raw=b"hellohellohello\nhello10%\r20%\r",
    cuts=[23],
    lim=ShellOutputLimits(max_bytes=3, max_lines=1, retain="tail"),
)
def test_capture_snapshot_matches_reference_for_any_chunking(
    raw: bytes, cuts: list[int], lim: ShellOutputLimits
) -> None:
    snap = capture_matching_reference(raw, cuts, lim)
    tr = snap.truncation
    assert tr.output_bytes == len(snap.text.encode()) <= lim.max_bytes
    assert tr.output_lines <= lim.max_lines


@settings(max_examples=400, deadline=None)
@given(
    raw=st.one_of(streams, many_lines),
    cuts=st.lists(st.integers(0, 10_000), max_size=30),
    gaps=st.lists(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3, 1.0]), min_size=1),
    lim=limits,
    spill=st.booleans(),
)
def test_fold_of_published_updates_is_the_bounded_view_and_spill_is_exact(
    spill_root: Path,
    raw: bytes,
    cuts: list[int],
    gaps: list[float],
    lim: ShellOutputLimits,
    spill: bool,
) -> None:
    clock = FakeClock()
    updates: list[ShellOutputUpdate] = []
    spill_dir = spill_root / uuid.uuid4().hex

    async def run() -> ShellOutputView:
        session = CaptureSession(
            CaptureOptions(limits=lim, spill=spill, min_interval=0.1, target_rate=2000),
            spill_dir=spill_dir,
            on_update=updates.append,
            clock=clock,
        )
        for i, chunk in enumerate(chunked(raw, cuts)):
            session.feed(chunk)
            clock.advance(gaps[i % len(gaps)])
            await asyncio.sleep(0)  # let the spill writer task run (not a timing wait)
        return await session.finish()

    final = asyncio.run(run())
    assert updates and isinstance(updates[0], Replace)
    view = None
    for u in updates:
        view = apply_shell_output_update(view, u)
        # What a remote exec host would ship: JSON round trip is lossless.
        assert update_from_dict(json.loads(json.dumps(update_to_dict(u)))) == u
    assert view == final
    ref = reference_view(raw, lim.max_bytes, lim.max_lines, lim.retain, lim.head_share)
    assert final.text == ref.text
    total_bytes, total_lines, _ = raw_totals(raw)
    assert final.metadata.truncation.total_bytes == total_bytes
    assert final.metadata.truncation.total_lines == total_lines
    # Every update is bounded by the cap (text) — Replace and Slide never resend more.
    for u in updates:
        text = u.output.text if isinstance(u, Replace) else getattr(u, "text", "")
        assert len(text.encode()) <= lim.max_bytes
    files = list(spill_dir.glob("*.log")) if spill_dir.exists() else []
    if spill and ref.truncated:
        assert final.metadata.spill_path is not None
    if final.metadata.spill_path is not None:
        assert files == [Path(final.metadata.spill_path)]
        assert files[0].read_bytes() == raw
    else:
        assert files == []
    if not spill:
        assert not spill_dir.exists()


@settings(max_examples=200)
@given(raw=streams, lim=limits)
def test_chunking_does_not_change_the_view(raw: bytes, lim: ShellOutputLimits) -> None:
    whole = capture_for(lim)
    whole.feed(raw)
    whole.close()
    bytewise = capture_for(lim)
    for i in range(len(raw)):
        bytewise.feed(raw[i : i + 1])
    bytewise.close()
    assert whole.snapshot() == bytewise.snapshot()


@settings(max_examples=300, deadline=None)
@given(
    raw=many_lines,
    cuts=st.lists(st.integers(0, 100_000), max_size=4),
    lim=st.builds(
        _limits,
        st.integers(1, 400),
        st.integers(1, 40),
        st.sampled_from(["head", "tail", "head_tail"]),
        SHARES,
    ),
)
# A large read ends in a current line over the cap, and the next read redraws it short: the
# lines before it are in view again, so the first read must not have skipped them.
@example(
    raw=b"b\n" * 5 + b"z" * 60 + b"\rw",
    cuts=[70],
    lim=ShellOutputLimits(max_bytes=10, max_lines=40, retain="tail"),
)
def test_large_reads_past_the_cap_match_the_reference(
    raw: bytes, cuts: list[int], lim: ShellOutputLimits
) -> None:
    snap = capture_matching_reference(raw, cuts, lim)
    # The skipping capture agrees with one fed byte-exact small reads (no skipping).
    small = capture_for(lim)
    for i in range(0, len(raw), 7):
        small.feed(raw[i : i + 7])
    small.close()
    assert small.snapshot() == snap


def test_a_large_read_past_the_cap_skips_decoding_what_cannot_be_seen() -> None:
    lim = ShellOutputLimits(max_bytes=100, max_lines=5)
    cap = OutputCapture(lim)
    cap.feed(b"\xff\x1b[31m" + b"line\n" * 1000 + b"last")
    assert cap._skipped  # the invalid byte and escape at the start were never decoded
    snap = cap.snapshot()
    assert snap.text == "line\n" * 4 + "last"
    assert snap.start == (996, 0)
    assert (snap.truncation.truncated, snap.truncation.truncated_by) == (True, "lines")
    assert (snap.truncation.total_lines, snap.truncation.total_bytes) == (1001, 5010)

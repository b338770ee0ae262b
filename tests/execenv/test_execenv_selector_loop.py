"""The synchronous selector loop: the exec env's pipe reader and publisher run on it
unchanged (what ``toolfold run``'s direct path needs), timers keep their order, and
another thread can wake it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, cast

from toolfold.execenv import CaptureOptions, ShellOutputLimits
from toolfold.execenv._pipes import PipeReader, output_pipe
from toolfold.execenv._publisher import AdaptivePublisher
from toolfold.execenv._selector_loop import SelectorLoop
from toolfold.execenv._session import CaptureSession


class _Collect:
    def __init__(self) -> None:
        self.reads: list[bytes] = []

    def tee(self, pipe_fd: int, size: int) -> int:
        return 0

    def feed(self, data: bytes, *, spilled: int = 0) -> None:
        self.reads.append(data)


def test_the_pipe_reader_reads_both_pipes_to_their_end_on_it() -> None:
    loop = SelectorLoop()
    (out_r, out_w), (err_r, err_w) = output_pipe(), output_pipe()
    session = _Collect()
    closed: list[bool] = []
    reader = PipeReader(cast(Any, loop), [out_r, err_r], session, lambda: closed.append(True))
    reader.start()
    os.write(out_w, b"out\n")
    os.write(err_w, b"err\n")
    os.close(out_w)
    os.close(err_w)
    for _ in range(100):
        if closed:
            break
        loop.run_once(1.0)
    assert closed == [True]
    assert sorted(session.reads) == [b"err\n", b"out\n"]
    loop.close()


def test_timers_run_in_time_order_and_a_cancelled_one_never() -> None:
    now = [0.0]
    loop = SelectorLoop(clock=lambda: now[0])
    ran: list[str] = []
    loop.call_later(2.0, ran.append, "b")
    loop.call_later(1.0, ran.append, "a")
    loop.call_later(1.5, ran.append, "x").cancel()
    assert loop.next_timer() == 1.0
    now[0] = 1.0
    loop.run_once(0)
    assert ran == ["a"]
    now[0] = 5.0
    loop.run_once(0)
    assert ran == ["a", "b"]
    assert loop.next_timer() is None
    loop.close()


def test_the_publisher_paces_on_it() -> None:
    now = [0.0]
    loop = SelectorLoop(clock=lambda: now[0])
    state = {"v": 0}
    got: list[int] = []
    publisher: AdaptivePublisher[int] = AdaptivePublisher(
        produce=lambda: (state["v"], 1), consume=got.append, min_interval=1.0, clock=loop
    )
    publisher.mark_dirty()  # idle: published at once
    state["v"] = 1
    publisher.mark_dirty()  # within the interval: one trailing timer
    state["v"] = 2
    publisher.mark_dirty()
    assert got == [0]
    now[0] = 1.0
    loop.run_once(0)
    assert got == [0, 2]
    loop.close()


def test_another_thread_wakes_it() -> None:
    loop = SelectorLoop()
    woke: list[str] = []
    thread = threading.Thread(target=loop.call_soon_threadsafe, args=(woke.append, "t"))
    thread.start()
    thread.join()
    loop.run_once(5.0)  # returns at once: the wake-up pipe is readable
    assert woke == ["t"]
    loop.close()


def test_a_capture_session_spills_byte_exact_on_it(tmp_path: Path) -> None:
    loop = SelectorLoop()
    updates: list[Any] = []
    session = CaptureSession(
        CaptureOptions(limits=ShellOutputLimits(max_bytes=64, max_lines=4)),
        spill_dir=tmp_path / "spill",
        on_update=updates.append,
        clock=loop,
        loop=loop,
    )
    data = b"".join(b"line %d\n" % i for i in range(1, 2001))
    for i in range(0, len(data), 1000):
        session.feed(data[i : i + 1000])
    view = session.finish_on()  # turns the loop until the spill's writer is done
    loop.close()
    assert view.text == "line 1997\nline 1998\nline 1999\nline 2000\n"
    assert view.metadata.spill_path is not None
    assert Path(view.metadata.spill_path).read_bytes() == data
    assert updates  # the publisher published on the loop's clock

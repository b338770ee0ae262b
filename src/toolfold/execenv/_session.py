"""One command's capture pipeline: raw bytes → bounded view + lazy spill → paced updates.

``CaptureSession`` is transport-agnostic: ``LocalExecEnv`` feeds it from pipes, a
remote exec host would feed it the same way and ship the updates it publishes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ._capture import CaptureSnapshot, OutputCapture
from ._errors import CallbackError, ExecError, SpillError
from ._headtail import HeadTailCapture, capture_for
from ._limits import CaptureOptions
from ._output_view import ShellOutputMetadata, ShellOutputView
from ._publisher import AdaptivePublisher, Clock
from ._spill import SpillFile, human_size
from ._updates import Replace, update_cost

if TYPE_CHECKING:
    from ._updates import ShellOutputUpdate

    UpdateConsumer: TypeAlias = Callable[[ShellOutputUpdate], Awaitable[None] | None]


def _discard(update: ShellOutputUpdate) -> None:
    return None


def _offset_in(text: str, text_start: tuple[int, int], point: tuple[int, int]) -> int:
    """Character offset in ``text`` (which starts at ``text_start``) of ``point``; -1 if
    ``point`` is before ``text`` or beyond its lines. Points are (line, column)."""
    lines = point[0] - text_start[0]
    if lines == 0:
        return point[1] - text_start[1]
    if lines < 0 or lines > text.count("\n"):
        return -1
    # Offset of the start of line ``point[0]``: just after the lines-th newline of text.
    line_start = len(text) - len(text.split("\n", lines)[-1])
    return line_start + point[1]


class CaptureSession:
    """Feeds one command's raw output through capture, spill and publisher.

    ``feed(data)`` per read; ``await finish()`` once at the end returns the final
    view after the spill is complete and the final publication went out. A spill or
    consumer failure is recorded in ``failure`` (and reported through ``on_failure``
    so the caller can kill the command); ``finish()`` does not raise it.
    """

    def __init__(
        self,
        options: CaptureOptions | None = None,
        *,
        spill_dir: Path | None = None,
        on_update: UpdateConsumer | None = None,
        clock: Clock | None = None,
        on_pause: Callable[[], None] | None = None,
        on_resume: Callable[[], None] | None = None,
        on_failure: Callable[[ExecError], None] | None = None,
        loop: Any = None,
    ) -> None:
        #: A ``SelectorLoop`` to run on instead of asyncio's (then ``finish_on``).
        self._loop = loop
        self.options = options if options is not None else CaptureOptions()
        self.capture: OutputCapture | HeadTailCapture = capture_for(self.options.limits)
        self._spill_dir = spill_dir if self.options.spill else None
        self._prefix: list[bytes] = []
        self.spill: SpillFile | None = None
        self._spill_budget = 0
        self._budget_note: str | None = None  # why the budget is below max_spill
        #: Set once the spill stopped short of the whole output (or was never written).
        self._spill_note: str | None = None
        self._on_pause = on_pause
        self._on_resume = on_resume
        self._on_failure = on_failure
        self.failure: ExecError | None = None
        self._base: ShellOutputView | None = None
        self._base_start = (0, 0)
        self._consumer: UpdateConsumer = on_update if on_update is not None else _discard
        #: Also given every raw read (a background command's "new since the last read").
        self.tap: Callable[[bytes], None] | None = None
        self.publisher: AdaptivePublisher[ShellOutputUpdate] = AdaptivePublisher(
            produce=self._produce,
            consume=lambda update: self._consumer(update),
            min_interval=self.options.min_interval,
            target_rate=self.options.target_rate,
            clock=clock,
            on_error=self._consumer_failed,
        )

    def redirect(self, on_update: UpdateConsumer | None) -> None:
        """Publish to ``on_update`` from now on, starting with a ``Replace`` of the whole
        view (a command that outlives the call that started it changes consumers)."""
        self._consumer = on_update if on_update is not None else _discard
        self._base = None
        self.publisher.mark_dirty()

    @property
    def spill_path(self) -> str | None:
        """Path of the spill file once it exists."""
        if self.spill is None or self.spill.path is None:
            return None
        return str(self.spill.path)

    def tee(self, pipe_fd: int, size: int) -> int:
        """Before reading pipe ``pipe_fd``: have up to ``size`` of its waiting bytes put
        in the spill file by the kernel (``SpillFile.tee``), within the spill cap.

        Returns how many: read exactly that many, then ``feed(data, spilled=n)``. 0 when
        nothing is being spilled or the kernel cannot: read as usual and ``feed(data)``.
        """
        if self.spill is None or self._spill_note is not None or self.failure is not None:
            return 0
        room = self._spill_budget - self.spill.queued
        return self.spill.tee(pipe_fd, min(size, room)) if room > 0 else 0

    def feed(self, data: bytes, *, spilled: int = 0) -> None:
        """Add one read of raw output (stdout and stderr alike, in arrival order).

        ``spilled``: how many of its first bytes ``tee`` already queued to the spill.
        """
        if self.failure is not None:
            return  # the command is being killed; nothing more is published
        self.capture.feed(data)
        if self.tap is not None:
            self.tap(data)
        if self._spill_dir is not None and self._spill_note is None:
            if self.spill is None:
                self._prefix.append(data)
                if self.capture.exceeds_cap:
                    self._start_spill()
            elif spilled < len(data):
                self._spill_write(data[spilled:] if spilled else data)
        self.publisher.mark_dirty()

    def _spill_write(self, data: bytes) -> None:
        if self.spill is None:  # pragma: no cover - guarded by the callers
            return
        room = self._spill_budget - self.spill.queued
        if len(data) <= room:
            self.spill.write(data)
            return
        # The cap: keep its first bytes exactly, then stop spilling. The view and the
        # totals go on from the capture, which never depended on the spill.
        self.spill.write(data[:room])
        self._stop_spill(
            self._budget_note
            or f"the first {human_size(self._spill_budget)} only: the spill cap (max_spill)"
        )

    def _stop_spill(self, note: str) -> None:
        if self._spill_note is None:
            self._spill_note = note
            self._prefix = []
            self.publisher.force()  # the footer must say so as soon as it is true

    def _spill_full(self, size: int) -> None:
        self._stop_spill(f"the first {human_size(size)} only: the disk filled up")

    def _start_spill(self) -> None:
        if self._spill_dir is None:  # pragma: no cover - guarded by the callers
            return
        spill = SpillFile(
            self._spill_dir,
            high_water=self.options.spill_high_water,
            on_pause=self._on_pause,
            on_resume=self._on_resume,
            on_error=self._fail,
            on_full=self._spill_full,
        )
        if self._loop is not None:
            spill.run_on(self._loop)
        prefix = b"".join(self._prefix)
        self._prefix = []
        try:
            path, budget, note = spill.open(prefix, max_size=self.options.max_spill)
        except SpillError as exc:
            self._fail(exc)
            return
        if path is None:  # no room on the disk at all: no file, and the metadata says why
            self._stop_spill(note or "not written")
            return
        self.spill = spill
        self._spill_budget = budget
        self._budget_note = note
        if len(prefix) > budget:
            self._stop_spill(
                note or f"the first {human_size(budget)} only: the spill cap (max_spill)"
            )
        # The path must be visible at once (the model may need it), whatever the deadline.
        self.publisher.force()

    def _fail(self, error: ExecError) -> None:
        if self.failure is None:
            self.failure = error
            if self._on_failure is not None:
                self._on_failure(error)

    def _consumer_failed(self, exc: BaseException) -> None:
        error = CallbackError(
            f"the on_update consumer raised {type(exc).__name__}: {exc}; "
            "the command was stopped because its output could not be delivered"
        )
        error.__cause__ = exc
        self._fail(error)

    def view(self) -> ShellOutputView:
        """The current bounded view (not a publication)."""
        snap = self.capture.snapshot()
        return ShellOutputView(text=snap.text, metadata=self._metadata(snap))

    def _metadata(self, snap: CaptureSnapshot) -> ShellOutputMetadata:
        return ShellOutputMetadata(
            truncation=snap.truncation,
            spill_path=self.spill_path,
            last_line_bytes=snap.last_line_bytes,
            spill_note=self._spill_note,
        )

    def _produce(self) -> tuple[ShellOutputUpdate, int] | None:
        snap = self.capture.snapshot()
        meta = self._metadata(snap)
        text = snap.text
        base = self._base
        update: ShellOutputUpdate | None
        if base is None:
            update = Replace(ShellOutputView(text=text, metadata=meta))
        elif (update := self._update(base, text, meta, snap)) is None:
            return None
        self._base = ShellOutputView(text=text, metadata=meta)
        self._base_start = snap.start
        return update, update_cost(update)

    def _update(
        self,
        base: ShellOutputView,
        text: str,
        meta: ShellOutputMetadata,
        snap: CaptureSnapshot,
    ) -> ShellOutputUpdate | None:
        """The update from the published ``base`` to the view now (None: no change)."""
        from ._deltas import Append, Metadata, Slide  # once a first Replace went out

        if text == base.text:
            if meta == base.metadata:
                return None
            return Metadata(meta)
        if text.startswith(base.text):
            return Append(text[len(base.text) :], meta)
        if snap.truncation.cut_at is not None:
            return self._roll(base, text, meta, snap)
        # Only a verified overlap becomes a Slide: the retained old text must be
        # exactly the start of the new view. Anything else is a bounded Replace.
        drop = _offset_in(base.text, self._base_start, snap.start)
        if 0 < drop < len(base.text) and text.startswith(base.text[drop:]):
            return Slide(drop, text[len(base.text) - drop :], meta)
        return Replace(ShellOutputView(text=text, metadata=meta))

    def _roll(
        self,
        base: ShellOutputView,
        text: str,
        meta: ShellOutputMetadata,
        snap: CaptureSnapshot,
    ) -> ShellOutputUpdate:
        """head_tail: the head is fixed, so only the part after it can slide (a Slide at
        the cut); anything else is a bounded Replace."""
        from ._deltas import Slide

        cut = snap.truncation.cut_at or 0
        if base.metadata.truncation.cut_at == cut and text[:cut] == base.text[:cut]:
            old = base.text[cut:]
            drop = _offset_in(old, self._base_start, snap.start)
            if 0 <= drop <= len(old) and text.startswith(old[drop:], cut):
                return Slide(drop, text[cut + len(old) - drop :], meta, cut)
        return Replace(ShellOutputView(text=text, metadata=meta))

    def finish_on(self) -> ShellOutputView:
        """:meth:`finish` on the ``SelectorLoop`` given (consumers are synchronous)."""
        self._close_capture()
        if self.spill is not None:
            try:
                self.spill.close_on(self._loop)
            except SpillError as exc:
                self._fail(exc)
        self.publisher.force()
        return self.view()

    def _close_capture(self) -> None:
        self.capture.close()
        if (
            self._spill_dir is not None
            and self.spill is None
            and self._spill_note is None
            and self.failure is None
            and self.capture.exceeds_cap
        ):
            self._start_spill()
        self._prefix = []

    async def finish(self) -> ShellOutputView:
        """Close the capture, complete the spill, publish the final state; return the view."""
        self._close_capture()
        if self.spill is not None:
            try:
                await self.spill.close()
            except SpillError as exc:
                self._fail(exc)
        with contextlib.suppress(CallbackError):  # recorded through on_error already
            await self.publisher.finish()
        return self.view()


def __getattr__(name: str) -> Any:
    """``UpdateConsumer``, defined on first use with the ``ShellOutputUpdate`` union it
    names (whose updates after the first are defined on first use)."""
    if name != "UpdateConsumer":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ._updates import ShellOutputUpdate

    value = Callable[[ShellOutputUpdate], Awaitable[None] | None]
    globals()[name] = value
    return value

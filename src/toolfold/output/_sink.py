"""``ToolOutput``: the per-call sink a tool writes into (its op feeds are ``OpStream``s)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from toolfold import _json
from toolfold.chord import MAX_DEPTH, ChordError, track

from ._cutnotice import cut_notice
from ._errors import OutputClosedError, OutputLimitError, OutputValueError
from ._headtail import HeadTailWindow
from ._images import check_image
from ._opstream import OpStream
from ._retention import OutputPolicy, TextWindow, clean_text
from ._sink_ops import SinkOps
from ._state import (
    USAGE_KEYS,
    ImageContent,
    SinkState,
    ToolOutputState,
    Truncation,
    Usage,
    text_blocks,
)
from ._text_ops import MAX_FOOTER_CHARS, split_footer

if TYPE_CHECKING:
    import asyncio

    from toolfold.execenv import ShellOutputMetadata, ShellOutputUpdate

MAX_OUTPUT_DEPTH = MAX_DEPTH - 8
"""Deepest container nesting of a call's output state (``details`` sits one level down).

Below Chord's ``MAX_DEPTH`` because hosts embed the state deeper: a lane view holds it three
levels down (``tools.<id>.output``), and its transcript holds the details the same way. A
deeper ``details`` value is refused when it is written, naming its path."""


class ToolOutput(SinkOps):
    """The per-invocation output sink. Tools write here and return nothing.

    The state is a ``ToolOutputState``: one text block (windowed by ``policy``),
    image blocks, the tool's own ``details`` object, accumulated ``usage``,
    ``added_tools``, ``terminate``, and ``truncation`` totals. Every change is
    recorded by one Chord tracker; consumers read ops through ``open_stream()``.

    ``seed`` resumes from a recovered state (replay): the tool appends to what it
    had already produced.
    """

    def __init__(
        self, policy: OutputPolicy | None = None, *, seed: ToolOutputState | None = None
    ) -> None:
        self.policy = policy if policy is not None else OutputPolicy()
        self._split = self.policy.retain == "head_tail"
        self._blocks = 3 if self._split else 1
        if self._split:
            self._window = HeadTailWindow(self.policy)
        else:
            self._window = TextWindow(self.policy)
        self._marker = ""  # head_tail: the cut marker as the replicas hold it
        self._lifecycle = SinkState.OPEN
        self._streams: list[OpStream] = []
        self._listeners: list[Callable[[], None]] = []
        self._soon: asyncio.Handle | None = None
        self._failure: OutputLimitError | None = None
        self._blocked = False  # settled or failed: writes raise (see _check_open)
        self._text_dirty = False
        self._notice = ""
        self._footer = ""
        # The text slot is the sink's own: the window reports what it dropped and
        # appended, and _stage() turns that into `t` / `a` ops (the tracker would
        # have to rediscover the slide by comparing the old text with the new).
        # The tracker's copy of the text is refreshed only when a whole state is
        # needed (a base batch, a snapshot).
        self._text_ops = []
        self._suffix = ""  # footer + notice as the replicas hold them
        self._replaced_from: str | None = None  # the replicas' text before a replace()
        self._replaced_head = ""  # head_tail: the head before it (_replaced_from: the tail)
        self._image_bytes = 0
        self._image_decoded = 0
        state: dict[str, Any] = {
            "content": [{"type": "text", "text": ""}] * (3 if self._split else 1),
            "details": {},
            "terminate": False,
            "truncation": self._window.truncation(),
        }
        if seed is not None:
            state = self._seeded(seed)
        self._details_good = _json.dumps(state["details"])
        self._window.drain()  # the initial state carries the text: nothing to send
        self._suffix = self._footer
        if self._split:
            self._marker = self._marker_now(state)
        state["content"][: self._blocks] = self._blocks_now()
        self._tracker = track(state, max_depth=MAX_OUTPUT_DEPTH)
        # The first flush of a tracker is a base batch; streams start from their own
        # base anyway, so that batch carries nothing a stream needs.
        self._tracker.flush()

    def _seeded(self, seed: ToolOutputState) -> dict[str, Any]:
        try:
            data = _json.loads(_json.dumps(seed))
            content = data["content"]
            blocks = 3 if self._split else 1
            if text_blocks(data) != blocks or not all(
                isinstance(block.get("text"), str) for block in content[:blocks]
            ):
                raise TypeError(f"content does not start with {blocks} text block(s)")
            images = content[blocks:]
            for i, image in enumerate(images, start=blocks):
                self._image_decoded += check_image(image, i)
            if not isinstance(data.get("details"), dict):
                raise TypeError("details is not an object")
            text = content[blocks - 1]["text"]
            truncation = data["truncation"]
            if isinstance(self._window, HeadTailWindow):
                head = content[0]["text"]
                window_part = dict(truncation)
                window_part["output_bytes"] = truncation["output_bytes"] - len(head.encode())
                footer = split_footer(text, window_part)  # type: ignore[arg-type]
                self._window.seed(head, text[: len(text) - len(footer)], truncation)
            else:
                footer = split_footer(text, truncation)
                self._window.seed(text[: len(text) - len(footer)], truncation)
            self._footer = footer
        except (
            KeyError,
            IndexError,
            TypeError,
            ValueError,
            AttributeError,
        ) as exc:
            raise OutputValueError(
                f"cannot seed a ToolOutput from this state ({type(exc).__name__}: {exc}); "
                "seed with a ToolOutputState recovered from a sink's ops"
            ) from exc
        self._image_bytes = sum(len(image["data"]) for image in images)
        state: dict[str, Any] = {
            "content": [{"type": "text", "text": ""}] * blocks + images,
            "details": data["details"],
            "terminate": bool(data.get("terminate", False)),
            "truncation": self._window.truncation(),
        }
        for key in ("usage", "added_tools", "spill_path"):
            if key in data:
                state[key] = data[key]
        return state

    # -- lifecycle ----------------------------------------------------------------

    @property
    def lifecycle(self) -> SinkState:
        """``OPEN`` until ``settle()``, then ``SETTLED``."""
        return self._lifecycle

    @property
    def failure(self) -> OutputLimitError | None:
        """The limit error that failed this output, if a bound was exceeded."""
        return self._failure

    def check_bounds(self) -> OutputLimitError | None:
        """Check the details bound now (it is otherwise checked at every flush) and
        return the limit error that failed this output, if any. The harness calls
        this when a tool returns, so a last oversized mutation still fails the call."""
        if self._lifecycle is SinkState.OPEN and self._failure is None:
            self._check_details()
        return self._failure

    def _check_open(self, what: str) -> None:
        if self._lifecycle is SinkState.SETTLED:
            raise OutputClosedError(
                f"{what} on a ToolOutput that already settled; a tool must not keep "
                "writing after execute() returned (await background work before returning)"
            )
        if self._failure is not None:
            raise self._failure

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every change made through the sink; returns an
        unsubscribe function. Changes through ``details`` are reported on the next
        event-loop iteration (after the tool's synchronous mutation has happened)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def _changed_soon(self) -> None:
        if self._soon is not None or not self._listeners:
            return
        # No loop can be running in a process that never imported asyncio (a run
        # without an event loop): this sink does not import it to find out.
        asyncio = sys.modules.get("asyncio")
        if asyncio is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._soon = loop.call_soon(self._fire_soon)

    def _fire_soon(self) -> None:
        self._soon = None
        if self._lifecycle is SinkState.OPEN:
            self._changed()

    def settle(self, notice: str | None = None) -> ToolOutputState:
        """Freeze the output and return a copy of the final state.

        A text that was cut and has no ``footer()`` gets the standard cut notice as its
        footer (unless ``policy.cut_notice`` is off). ``notice`` (an error text, a
        cancellation marker) is appended to the text
        block *outside* the window, so it is never cut, whatever was written.
        Streams can still ``take()`` the final ops; writes now raise
        ``OutputClosedError``.
        """
        if self._lifecycle is SinkState.SETTLED:
            raise OutputClosedError("settle() called twice on the same ToolOutput")
        if self.policy.cut_notice and not self._footer:
            cut = cut_notice(self._window.truncation(), self.policy.retain)
            if cut:
                text = self._visible()
                self._footer = ("\n" if text and not text.endswith("\n") else "") + cut
                self._text_dirty = True
        if notice:
            text = self._visible() + self._footer
            self._notice = ("\n" if text and not text.endswith("\n") else "") + clean_text(notice)
            self._text_dirty = True
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        self._pump()
        self._lifecycle = SinkState.SETTLED
        self._blocked = True
        return self.snapshot()

    # -- writing ------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Append to the text block (windowed by the policy)."""
        # The per-line path: one flag for "settled or failed", a type check, the
        # window's park. Everything else waits for the next publish.
        if self._blocked:
            self._check_open("write()")
        if type(text) is not str and not isinstance(text, str):
            raise OutputValueError(f"write() takes a str, got {type(text).__name__}: {text!r:.80}")
        if text:
            window = self._window
            if window.parks:
                # The window's own park (TextWindow.write), inlined: a call per line
                # costs about as much as the rest of this method.
                window.parked.append(text)
                window.parked_chars += len(text)
                if window.parked_chars > window.park_limit:
                    window.settle()
            else:
                window.write(text)  # cleaned by the window
            self._text_dirty = True
            if self._listeners:
                self._changed()

    def replace(self, text: str) -> None:
        """Replace the retained text wholesale (the op stream still finds a ``t`` + ``a``
        slide when the new text overlaps the old)."""
        self._check_open("replace()")
        if not isinstance(text, str):
            raise OutputValueError(
                f"replace() takes a str, got {type(text).__name__}: {text!r:.80}"
            )
        self._replace_window(clean_text(text))
        self._text_dirty = True
        self._changed()

    def _replace_window(self, text: str) -> None:
        if self._replaced_from is None:
            self._stage()  # what the replicas will hold before this replace
            window = self._window
            if isinstance(window, HeadTailWindow):
                self._replaced_head = window.head
                self._replaced_from = window.tail + self._suffix
            else:
                self._replaced_from = window.text + self._suffix
        else:
            # A replace is already pending: one diff from the replicas' text to the
            # final one covers both (and whatever was written in between).
            self._window.drain()
        self._window.replace(text)

    def footer(self, text: str) -> None:
        """Set a closing note shown after the retained text, outside the window.

        It is never cut and not counted in the totals, so a head-mode tool can say
        "use offset=2001 to continue" even when the window is full. It replaces any
        earlier footer; set it once, at the end (at most ``MAX_FOOTER_CHARS``).
        """
        self._check_open("footer()")
        if not isinstance(text, str):
            raise OutputValueError(f"footer() takes a str, got {type(text).__name__}")
        if len(text) > MAX_FOOTER_CHARS:
            raise OutputValueError(
                f"footer of {len(text)} characters is over MAX_FOOTER_CHARS={MAX_FOOTER_CHARS}; "
                "a footer is a short note — write bulk text with write()"
            )
        self._footer = clean_text(text)
        self._text_dirty = True
        self._changed()

    @property
    def truncation(self) -> Truncation:
        """The current truncation totals (a copy)."""
        return self._window.truncation()

    def capture(self, metadata: ShellOutputMetadata) -> None:
        """Adopt source-owned truncation totals and spill path without resending text.

        From the first capture on, totals come from the source (the execution
        environment counted the whole stream), not from re-counting.
        """
        self._check_open("capture()")
        self._capture(metadata)
        self._text_dirty = True
        self._changed()

    def _capture(self, metadata: ShellOutputMetadata) -> None:
        t = metadata.truncation
        truncation: Truncation = {
            "truncated": t.truncated,
            "truncated_by": t.truncated_by,
            "total_lines": t.total_lines,
            "total_bytes": t.total_bytes,
            "output_lines": t.output_lines,
            "output_bytes": t.output_bytes,
            "last_line_partial": t.last_line_partial,
            "first_line_exceeds_limit": t.first_line_exceeds_limit,
            "max_lines": t.max_lines,
            "max_bytes": t.max_bytes,
            "last_line_bytes": metadata.last_line_bytes or 0,
        }
        if isinstance(self._window, HeadTailWindow):
            truncation["cut_line"] = t.cut_line
            truncation["cut_lines"] = t.cut_lines
            truncation["cut_bytes"] = t.cut_bytes
            self._window.capture(truncation, t.cut_at or 0)
        else:
            self._window.capture(truncation)
        if (
            metadata.spill_path is not None
            and self._tracker.target.get("spill_path") != metadata.spill_path
        ):
            self._tracker.state["spill_path"] = metadata.spill_path

    def feed(self, update: ShellOutputUpdate) -> None:
        """Pipe one execution-environment update into the sink.

        ``Replace`` → ``replace``, ``Append`` → ``write`` (the source already bounded
        it), ``Slide`` → drop and append (sent as ``t`` + ``a``), ``Metadata`` →
        ``capture``. The metadata is captured first,
        so source text is never counted twice, and observers are notified once per
        update (never a state with new totals but old text).
        """
        from toolfold.execenv import Replace

        self._check_open("feed()")
        if isinstance(update, Replace):
            self._capture(update.output.metadata)
            self._replace_window(clean_text(update.output.text))
        else:
            self._feed_delta(update)
        self._text_dirty = True
        self._changed()

    def _feed_delta(self, update: ShellOutputUpdate) -> None:
        # The updates after a stream's first Replace (defined once a command printed).
        from toolfold.execenv import Append, Metadata, Slide

        if isinstance(update, Append):
            self._capture(update.metadata)
            self._window.write(clean_text(update.text))
        elif isinstance(update, Slide) and update.at and not self._split:
            # A head_tail source feeding a single-text sink: apply the slide to the view.
            self._capture(update.metadata)
            view = self._window.text
            self._replace_window(
                view[: update.at] + view[update.at + update.drop :] + clean_text(update.text)
            )
        elif isinstance(update, Slide):
            self._capture(update.metadata)
            self._window.slide(update.drop, clean_text(update.text))
        elif isinstance(update, Metadata):
            self._capture(update.metadata)
        else:
            raise OutputValueError(
                f"feed() takes an execenv ShellOutputUpdate (Replace, Append, Slide, Metadata), "
                f"got {type(update).__name__}"
            )

    def image(self, image: ImageContent) -> None:
        """Append an image block. Images are never windowed, but bounded by the policy
        (``max_images``, ``max_image_bytes``, ``max_total_image_bytes``)."""
        self._check_open("image()")
        index = len(self._tracker.target["content"]) - self._blocks + 1
        size = check_image(image, index)
        policy = self.policy
        if index > policy.max_images:
            raise OutputLimitError(
                f"image {index} exceeds max_images={policy.max_images} for this tool; "
                "the image was not added (raise OutputPolicy.max_images or send fewer images)"
            )
        if size > policy.max_image_bytes:
            raise OutputLimitError(
                f"image {index} is {size} bytes, over max_image_bytes={policy.max_image_bytes}; "
                "the image was not added (downscale it or raise OutputPolicy.max_image_bytes)"
            )
        if self._image_decoded + size > policy.max_total_image_bytes:
            raise OutputLimitError(
                f"image {index} ({size} bytes) would bring the images to "
                f"{self._image_decoded + size} bytes, over max_total_image_bytes="
                f"{policy.max_total_image_bytes}; the image was not added"
            )
        self._tracker.state["content"].append(
            {"type": "image", "data": image["data"], "mime_type": image["mime_type"]}
        )
        self._image_bytes += len(image["data"])
        self._image_decoded += size
        self._changed()

    @property
    def details(self) -> Any:
        """The tool's own details object (a dict), tracked: mutate it directly.

        ``out.details["passed"] += 1`` becomes one ``s`` op, ``.append`` on a list
        one ``p``, ``del`` one ``d``. Bounded by ``policy.max_details_bytes``
        (serialised): past it the details roll back to the last state that fitted
        and the tool fails with ``OutputLimitError``.
        """
        self._check_open("details")
        self._changed_soon()
        return self._tracker.state["details"]

    @details.setter
    def details(self, value: dict[str, Any]) -> None:
        self._check_open("details")
        if not isinstance(value, dict):
            raise OutputValueError(
                f"details must be a dict (a JSON object), got {type(value).__name__}"
            )
        try:
            self._tracker.state["details"] = value
        except ChordError as exc:
            raise OutputValueError(f"details = ... refused: {exc}") from exc
        self._changed()

    def usage(self, usage: Usage) -> None:
        """Add ``usage`` to the accumulated usage (a subagent reports each model call)."""
        self._check_open("usage()")
        if not isinstance(usage, dict):
            raise OutputValueError(f"usage() takes a Usage dict, got {type(usage).__name__}")
        for key, value in usage.items():
            if key not in USAGE_KEYS:
                raise OutputValueError(
                    f"usage key {key!r} is not one of {sorted(USAGE_KEYS)}; rename it"
                )
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise OutputValueError(
                    f"usage[{key!r}] must be a non-negative number, got {value!r}"
                )
            if key != "cost" and not isinstance(value, int):
                raise OutputValueError(f"usage[{key!r}] counts tokens: use an int, got {value!r}")
        state = self._tracker.state
        if "usage" not in self._tracker.target:
            state["usage"] = dict(usage)
        else:
            current = state["usage"]
            for key, value in usage.items():
                current[key] = self._tracker.target["usage"].get(key, 0) + value
        self._changed()

    def add_tools(self, names: Iterable[str]) -> None:
        """Set the tools this call adds to the agent (replaces any earlier list)."""
        self._check_open("add_tools()")
        if isinstance(names, str):
            raise OutputValueError(
                f"add_tools() takes a list of tool names, got the str {names!r}; wrap it in a list"
            )
        listed = list(names)
        for name in listed:
            if not isinstance(name, str) or not name:
                raise OutputValueError(f"add_tools() names must be non-empty str, got {name!r}")
        self._tracker.state["added_tools"] = listed
        self._changed()

    def terminate(self, value: bool = True) -> None:
        """Ask the agent loop to stop after this call (replaces; orthogonal to failure)."""
        self._check_open("terminate()")
        if not isinstance(value, bool):
            raise OutputValueError(f"terminate() takes a bool, got {value!r}")
        if self._tracker.target["terminate"] is not value:
            self._tracker.state["terminate"] = value
            self._changed()

    # -- reading and streams -----------------------------------------------------

    @property
    def text(self) -> str:
        """The retained text as it stands (under head_tail: head, marker line, tail)."""
        return self._visible() + self._footer + self._notice

    def snapshot(self) -> ToolOutputState:
        """A deep copy of the current state (everything written so far)."""
        self._pump()
        copied: ToolOutputState = _json.loads(_json.dumps(self._current_target()))
        return copied

    def open_stream(self) -> OpStream:
        """A new, independent op feed over this sink (first take is a base batch)."""
        stream = OpStream(self)
        self._streams.append(stream)
        return stream

"""``TextWindow``: a sink's retained text, windowed incrementally, and what changed in it.

The text is kept as a deque of the chunks written (the first one entered at an
offset), never joined per write: a write appends a chunk and, in tail mode, drops
whole chunks (or the start of one) from the front until the window rule holds
again. Both cost what was written and what was dropped, not the window's size.

The window also remembers what changed since the last ``drain()``: how many
UTF-16 units left the front of the text the replicas hold, and which chunks were
appended since. ``drain()`` turns that into ``t`` / ``a`` (or, after a replace,
``s``), which the sink emits as Chord ops itself: the slide of a 5 MB window is
as cheap to find and to send as that of a 50 KB one, because nothing has to
rediscover it by comparing the old text with the new.

The rule itself (which part a head or tail view keeps) is ``toolfold.execenv``'s
(see ``_window.py`` there); this module applies the same definitions to a text
that arrives in chunks, and ``tests/output/test_window_rule_props.py`` checks it
against the exec env's capture.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from typing import Literal, Protocol

from toolfold.chord import utf16_len
from toolfold.execenv import Retain, head_window, last_line_bytes, tail_truncated_by, utf8_len

from ._state import Truncation

__all__ = ["TextDelta", "TextWindow", "clean_text"]


class WindowLimits(Protocol):
    """The caps a window applies; ``OutputPolicy`` is the one a sink passes. A protocol,
    not an import: the policy module is built on this one, not the other way round."""

    @property
    def retain(self) -> Retain: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def max_lines(self) -> int: ...


TextDelta = tuple[Literal["t"], int] | tuple[Literal["a", "s"], str]
"""One change to the text replicas hold: drop UTF-16 units, append, or set."""

_PART = 65536
"""Longest chunk held, in characters: a big write is split, so finding a byte offset
inside a chunk (which encodes it) costs at most this much, whatever the window."""

_MERGE = 4096
"""Small writes are merged into the last fresh chunk up to this many characters, so a
window of tiny writes is not millions of chunks."""


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (they cannot be UTF-8 encoded,
    stored or shown to a model)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


def _units(text: str) -> int:
    return len(text) if text.isascii() else utf16_len(text)


class TextWindow:
    """The retained text of one sink plus exact totals, maintained incrementally.

    After ``capture`` the text comes from a source that already bounded it (the
    execution environment): totals are the source's, and text is only cut if it
    would exceed this policy's caps anyway (e.g. a source with larger caps).
    """

    __slots__ = (
        "_capped",
        "_captured",
        "_drop_units",
        "_first_line_exceeds",
        "_fresh",
        "_head_cut_by",
        "_joined",
        "_last_line_bytes",
        "_max_bytes",
        "_max_lines",
        "_off",
        "_off_bytes",
        "_old_parts",
        "_partial",
        "_parts",
        "_replaced",
        "_retain",
        "_sizes",
        "_total_bytes",
        "_total_newlines",
        "_view_bytes",
        "_view_chars",
        "_view_newlines",
        "park_limit",
        "parked",
        "parked_chars",
        "parks",
    )

    def __init__(self, policy: WindowLimits) -> None:
        self._retain = policy.retain
        self._max_bytes = policy.max_bytes
        self._max_lines = policy.max_lines
        self._captured: Truncation | None = None
        # Tail writes are parked (appended to ``parked``) until the next read or drain,
        # until a source's capture takes over. The sink's write() parks inline, so these
        # four names are the sink's to use; anything else goes through the methods.
        self.parks = self._retain == "tail"
        self.park_limit = 2 * self._max_bytes + _PART
        self._reset("")

    def _reset(self, view: str) -> None:
        self._set_view(view)
        self._partial = False
        self._capped = False
        self._head_cut_by: Literal["lines", "bytes"] | None = None
        self._first_line_exceeds = False
        self._total_bytes = self._view_bytes
        self._total_newlines = self._view_newlines
        self._last_line_bytes = last_line_bytes(view)

    def _set_view(self, view: str) -> None:
        self._parts: deque[str] = deque()
        self._sizes: deque[int] = deque()  # UTF-8 bytes of each part (whole)
        self._off = 0  # characters of _parts[0] no longer in the view
        self._off_bytes = 0  # ... and their UTF-8 bytes
        self._view_chars = 0
        self._view_bytes = 0
        self._view_newlines = 0
        for i in range(0, len(view), _PART):
            piece = view[i : i + _PART]
            size = utf8_len(piece)
            self._parts.append(piece)
            self._sizes.append(size)
            self._view_bytes += size
        self._view_chars = len(view)
        self._view_newlines = view.count("\n")
        self._joined: str | None = view
        self.parked: list[str] = []  # tail writes not yet windowed (see write)
        self.parked_chars = 0
        # What replicas hold: after a replace, nothing they can build on.
        self._replaced = True
        self._drop_units = 0
        # Invariant: len(_parts) == _old_parts + _fresh. Old parts are what replicas
        # hold (dropping them costs a `t`), fresh ones were appended since the drain.
        self._old_parts = len(self._parts)
        self._fresh = 0

    # -- writing -----------------------------------------------------------------

    def write(self, text: str) -> None:
        """Append ``text`` to the output (lone surrogates become U+FFFD: ``clean_text``,
        applied once per windowing rather than once per write)."""
        if not text:
            return
        if self.parks:
            # The tail rule applied to (view + everything written since) gives the view
            # of everything written, so a write is only parked: counting, appending and
            # cutting wait until the window is read or drained (once per publish, not
            # once per line). The parked text is bounded by about twice the cap.
            self.parked.append(text)
            self.parked_chars += len(text)
            if self.parked_chars > self.park_limit:
                self.settle()
        else:
            self._write(text)

    def _write(self, text: str) -> None:
        if text.isascii():
            size = len(text)
        else:
            try:  # one encode both sizes the text and proves it holds no lone surrogate
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError:
                text = clean_text(text)
                size = len(text.encode("utf-8"))
        newlines = text.count("\n")
        if self._captured is None:
            self._count(text, size, newlines)
        if self._retain == "head":
            self._write_head(text, size, newlines)
        else:
            self._append(text, size, newlines)
            self._trim_tail()

    def slide(self, drop: int, text: str) -> None:
        """Drop the first ``drop`` characters of the view, then append ``text`` (an exec
        env ``Slide``: the source already windowed it)."""
        self.settle()
        self._drop_chars(min(drop, self._view_chars))
        self.write(text)

    def retarget(self, max_bytes: int, max_lines: int, *, partial: bool) -> None:
        """Tail mode: cut the view to new caps, ``partial`` saying whether its position 0
        is not a line start (a head-and-tail window's rolling part, once the text stops
        fitting: its text then continues a line the head shows part of)."""
        self.settle()
        self._max_bytes = max_bytes
        self._max_lines = max_lines
        self.park_limit = 2 * max_bytes + _PART
        self._partial = partial
        self._trim_tail()

    @property
    def partial(self) -> bool:
        """Tail mode: the view starts inside a line."""
        self.settle()
        return self._partial

    @property
    def view_lines(self) -> int:
        """Lines of the retained text (a final line without a newline counts)."""
        self.settle()
        return self._lines()

    def settle(self) -> None:
        """Window the parked writes now (every read and drain does this first)."""
        if self.parked:
            text = "".join(self.parked)
            self.parked = []
            self.parked_chars = 0
            self._write(text)

    def replace(self, text: str) -> None:
        """Make ``text`` (already cleaned) the whole output so far."""
        self.parked = []
        self.parked_chars = 0
        if self._captured is not None:
            # The source's view is authoritative; it is only re-cut if it is over
            # our caps (a source configured with larger limits than the tool).
            self._set_view("")
            self._capped = False
            self._head_cut_by = None
            self._partial = bool(self._captured.get("last_line_partial", False))
            self.write(text)
            return
        self._reset("")
        self.write(text)

    def capture(self, truncation: Truncation) -> None:
        """Adopt source-owned totals (the execution environment counted the stream)."""
        self.settle()  # what was written before is counted and cut as before
        self._captured = truncation
        self.parks = False
        # The source's view may begin mid-line; then its position 0 is no line start.
        self._partial = bool(truncation.get("last_line_partial", False))

    def _count(self, text: str, size: int, newlines: int) -> None:
        self._total_bytes += size
        self._total_newlines += newlines
        if not newlines:
            self._last_line_bytes += size
        elif text.endswith("\n"):
            self._last_line_bytes = 0
        else:
            self._last_line_bytes = utf8_len(text[text.rfind("\n") + 1 :])

    def _append(self, text: str, size: int, newlines: int) -> None:
        parts = self._parts
        if self._fresh and len(parts[-1]) + len(text) <= _MERGE:
            parts[-1] += text
            self._sizes[-1] += size
        elif len(text) <= _PART:
            parts.append(text)
            self._sizes.append(size)
            self._fresh += 1
        else:
            for i in range(0, len(text), _PART):
                piece = text[i : i + _PART]
                parts.append(piece)
                self._sizes.append(utf8_len(piece))
                self._fresh += 1
        self._view_chars += len(text)
        self._view_bytes += size
        self._view_newlines += newlines
        self._joined = None

    def _write_head(self, text: str, size: int, newlines: int) -> None:
        if self._capped:
            return  # head: past the cap nothing is shown, only counted
        if self._view_bytes + size <= self._max_bytes and (
            self._view_newlines + newlines < self._max_lines
            or (self._view_newlines + newlines == self._max_lines and text.endswith("\n"))
        ):
            self._append(text, size, newlines)
            return
        # The head view of everything is the view so far plus the head of the rest
        # within the room left (it only ever grows).
        kept, cut_by = head_window(
            text, self._max_bytes - self._view_bytes, self._max_lines - self._view_newlines
        )
        if len(kept) < len(text):
            self._capped = True
            self._head_cut_by = cut_by
            # The first cut decides it for good: no complete line in the view.
            self._first_line_exceeds = self._view_newlines == 0 and "\n" not in kept
        if kept:
            self._append(kept, utf8_len(kept), kept.count("\n"))

    # -- the tail rule, on chunks ---------------------------------------------------

    def _lines(self) -> int:
        if not self._view_chars:
            return 0
        return self._view_newlines + (0 if self._parts[-1].endswith("\n") else 1)

    def _trim_tail(self) -> None:
        lines = self._lines()
        start_ok = not self._partial
        if lines > self._max_lines:
            self._drop_past_newlines(lines - self._max_lines)
            start_ok = True
        if start_ok and self._view_bytes <= self._max_bytes:
            self._partial = False
            return
        excess = max(self._view_bytes - self._max_bytes, 0)
        # The first line start at or after the bytes that must go; position 0 only
        # counts when it is a real line start, handled above.
        at = self._newline_at_or_after_byte(max(excess - 1, 0))
        if at is not None and at < self._view_chars:
            self._drop_chars(at)
            self._partial = False
            return
        # No line start fits: the last max_bytes bytes, on a character boundary.
        if self._view_bytes > self._max_bytes:
            self._drop_chars(self._chars_before_byte(self._view_bytes - self._max_bytes))
        self._partial = True

    def _spans(self) -> Iterator[tuple[str, int, int]]:
        """``(part, first character in the view, UTF-8 bytes in the view)`` per part."""
        off = self._off
        for part, size in zip(self._parts, self._sizes, strict=True):
            if off:
                yield part, off, size - self._off_bytes
                off = 0
            else:
                yield part, 0, size

    def _drop_past_newlines(self, n: int) -> None:
        chars = 0
        for part, start, _ in self._spans():
            count = part.count("\n", start)
            if count < n:
                n -= count
                chars += len(part) - start
                continue
            pos = start - 1
            for _ in range(n):
                pos = part.find("\n", pos + 1)
            self._drop_chars(chars + pos + 1 - start)
            return

    @staticmethod
    def _char_at_byte(part: str, start: int, byte: int) -> int:
        """Index in ``part`` of the first character at or after UTF-8 offset ``byte``
        counted from ``part[start]``."""
        if part.isascii():
            return start + byte
        # Every character is at least one byte: the answer lies within byte + 1
        # characters, so only that much is encoded (not the whole part).
        raw = part[start : start + byte + 1].encode("utf-8")
        while byte < len(raw) and (raw[byte] & 0xC0) == 0x80:
            byte += 1
        return start + len(raw[:byte].decode("utf-8"))

    def _chars_before_byte(self, byte: int) -> int:
        """Characters of the view before the first character starting at or after ``byte``."""
        chars = 0
        for part, start, size in self._spans():
            if byte < size:
                return chars + self._char_at_byte(part, start, byte) - start
            byte -= size
            chars += len(part) - start
        return chars

    def _newline_at_or_after_byte(self, byte: int) -> int | None:
        """The position just after the first newline at UTF-8 offset >= ``byte``."""
        chars = 0
        found_start = False
        for part, start, size in self._spans():
            if not found_start:
                if byte >= size:
                    byte -= size
                    chars += len(part) - start
                    continue
                at = self._char_at_byte(part, start, byte)
                found_start = True
            else:
                at = start
            nl = part.find("\n", at)
            if nl != -1:
                return chars + nl + 1 - start
            chars += len(part) - start
        return None

    def _drop_chars(self, k: int) -> None:
        """Drop the first ``k`` characters of the view, noting what replicas lose."""
        parts = self._parts
        while k > 0 and parts:
            first = parts[0]
            avail = len(first) - self._off
            take = min(k, avail)
            old = self._old_parts > 0
            if take == avail:
                piece = first[self._off :] if self._off else first
                size = self._sizes[0] - self._off_bytes
                parts.popleft()
                self._sizes.popleft()
                self._off = self._off_bytes = 0
                if old:
                    self._old_parts -= 1
                else:
                    self._fresh -= 1
            else:
                piece = first[self._off : self._off + take]
                size = utf8_len(piece)
                self._off += take
                self._off_bytes += size
            if old and not self._replaced:
                self._drop_units += _units(piece)
            self._view_chars -= take
            self._view_bytes -= size
            self._view_newlines -= piece.count("\n")
            k -= take
        self._joined = None

    # -- what changed ------------------------------------------------------------------

    def drain(self) -> list[TextDelta]:
        """What turns the text replicas held at the previous drain into the current
        view: ``[("s", text)]`` after a replace, else ``("t", units)`` then
        ``("a", text)`` (each only when non-empty). The replicas hold the view after."""
        self.settle()
        out: list[TextDelta] = []
        if self._replaced:
            out.append(("s", self.text))
        else:
            if self._drop_units:
                out.append(("t", self._drop_units))
            if self._fresh:
                n = len(self._parts)
                fresh = list(itertools.islice(self._parts, n - self._fresh, n))
                if self._fresh == n and self._off:
                    fresh[0] = fresh[0][self._off :]
                out.append(("a", "".join(fresh)))
        self._replaced = False
        self._drop_units = 0
        self._old_parts = len(self._parts)
        self._fresh = 0
        return out

    @property
    def changed(self) -> bool:
        """Whether ``drain()`` has something to say."""
        self.settle()
        return self._replaced or bool(self._drop_units) or bool(self._fresh)

    # -- reading -----------------------------------------------------------------

    @property
    def text(self) -> str:
        """The retained text (joined on read, then kept until the next change)."""
        self.settle()
        if self._joined is None:
            self._joined = "".join(
                part[start:] if start else part for part, start, _ in self._spans()
            )
        return self._joined

    @property
    def view_bytes(self) -> int:
        """UTF-8 bytes of the retained text."""
        self.settle()
        return self._view_bytes

    def truncation(self) -> Truncation:
        """The ``truncation`` object for the current state."""
        self.settle()
        lines = self._lines()
        if self._captured is not None:
            result = dict(self._captured)
            result["output_lines"] = lines
            result["output_bytes"] = self._view_bytes
            return result  # type: ignore[return-value]
        truncated = self._total_bytes > self._view_bytes
        truncated_by: Literal["lines", "bytes"] | None = None
        if truncated:
            if self._retain == "head":
                truncated_by = self._head_cut_by or "bytes"
            else:
                truncated_by = tail_truncated_by(lines, self._max_lines, self._partial)
        return {
            "truncated": truncated,
            "truncated_by": truncated_by,
            "total_lines": self._total_newlines + (1 if self._last_line_bytes else 0),
            "total_bytes": self._total_bytes,
            "output_lines": lines,
            "output_bytes": self._view_bytes,
            "last_line_partial": truncated and self._retain == "tail" and self._partial,
            "first_line_exceeds_limit": self._retain == "head" and self._first_line_exceeds,
            "max_lines": self._max_lines,
            "max_bytes": self._max_bytes,
            "last_line_bytes": self._last_line_bytes,
        }

    # -- resuming ----------------------------------------------------------------

    def seed(self, text: str, truncation: Truncation) -> None:
        """Resume from a recovered state: ``text`` is its retained view and
        ``truncation`` its totals (as produced by ``truncation()``)."""
        self._reset(text)
        self._total_bytes = int(truncation["total_bytes"])
        last = int(truncation.get("last_line_bytes", last_line_bytes(text)))
        self._last_line_bytes = last
        total_lines = int(truncation["total_lines"])
        self._total_newlines = total_lines - (1 if last else 0)
        self._first_line_exceeds = bool(truncation.get("first_line_exceeds_limit", False))
        if truncation.get("truncated"):
            if self._retain == "tail":
                self._partial = bool(truncation.get("last_line_partial", False))
            else:
                self._capped = True
                self._head_cut_by = truncation.get("truncated_by") or "bytes"
        if self._view_bytes > self._max_bytes or self._lines() > self._max_lines:
            # Recovered under tighter caps than it was written with: cut the view
            # again, keeping the totals (they describe what was written, not shown).
            if self._retain == "tail":
                self._trim_tail()
            else:
                kept, _ = head_window(text, self._max_bytes, self._max_lines)
                self._set_view(kept)

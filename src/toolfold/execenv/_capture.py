"""Bounded, incremental capture of a command's output: decoding, cleanup, head/tail view, totals.

The cleaned stream is defined over the whole decoded output (see docs/execenv.md):

1. decode UTF-8 with ``errors="replace"`` (incrementally: a read boundary never splits
   a code point);
2. remove ANSI escape sequences (CSI, OSC, nF and two-character escapes), other C0
   control characters except ``\\t``, ``\\n`` and ``\\r``, C1 controls, and the
   bidirectional embedding, override and isolate controls (U+202A-U+202E,
   U+2066-U+2069);
3. per line, ``\\r`` redraws collapse to the last non-empty ``\\r``-separated segment
   (so ``\\r\\n`` is just a line end and a progress bar shows its last frame).

The view is a bounded head or tail of the cleaned stream. Everything here is
streaming: the working buffer is trimmed from 4x back to 2x the cap (amortised), so
memory does not depend on the size of the output, and the result does not depend
on how the bytes were chunked.
"""

from __future__ import annotations

import codecs
import functools
import re
from typing import Literal

from toolfold._record import record

from ._errors import ExecConfigError, ExecError
from ._limits import ShellOutputLimits
from ._output_view import ShellOutputTruncation
from ._updates import utf8_len
from ._window import (
    count_lines,
    head_first_line_exceeds,
    head_window,
    tail_truncated_by,
    tail_window,
)

# The patterns are compiled on first use (a command whose output has no control
# character, such as one that prints nothing, never needs them).


# One pass removes complete escape sequences and stray C0 and C1 controls (\t \n \r stay:
# \r is the redraw rule's business). C1 matters because some terminals act on U+009B
# (CSI) and friends even in UTF-8. Quantifiers are bounded so an unterminated sequence
# can only be held back for a bounded number of characters across read boundaries.
@functools.cache
def _escape() -> re.Pattern[str]:
    return re.compile(
        r"\x1b(?:\[[0-?]{0,64}[ -/]{0,16}[@-~]"  # CSI: ESC [ params intermediates final
        r"|\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)"  # OSC: ESC ] ... BEL | ST
        r"|[ -/]{1,4}[0-~]"  # nF: ESC ( B and friends
        r"|[0-Z\\^-~])"  # Fp / Fe / Fs two-character escapes (not [ or ])
        r"|\x9b[0-?]{0,64}[ -/]{0,16}[@-~]"  # 8-bit CSI: U+009B params intermediates final
        r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
        # Bidirectional embeddings, overrides and isolates: U+202E makes "exe.txt"
        # display as "txt.exe" (and hides what a line really says from a reviewer).
        r"|[\u202a-\u202e\u2066-\u2069]"
    )


# A proper prefix of an _escape() sequence at the very end of the text: hold it back until
# the next read decides it. Leftmost match wins (an OSC can end with the ESC of its ST).
@functools.cache
def _escape_prefix() -> re.Pattern[str]:
    return re.compile(
        r"(?:\x1b(?:\[[0-?]{0,64}[ -/]{0,16}|\][^\x07\x1b\n]{0,512}\x1b?|[ -/]{1,4})?"
        r"|\x9b[0-?]{0,64}[ -/]{0,16})\Z"
    )


_MAX_ESCAPE_PREFIX = 1 + 1 + 512 + 1
# Bytes that _escape() can act on. In UTF-8 they never occur inside a multi-byte sequence,
# so a read without any of them needs no regex pass (the common case, and the fast one).
# 0xC2 leads every C1 control (U+0080-U+009F); it also leads U+00A0-U+00BF, and 0xE2
# leads the bidirectional controls (U+202A-U+202E, U+2066-U+2069) and other common
# punctuation: those only cost their reads the regex pass.
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, 0xC2, 0xE2])


# Everything of a line up to its last \r that is followed by visible text.
@functools.cache
def _cr_redraw() -> re.Pattern[str]:
    return re.compile(r"^[^\n]*\r(?=[^\r\n])", re.MULTILINE)


class CaptureClosedError(ExecError):
    """Raised when bytes are fed to an ``OutputCapture`` after ``close()``."""


@record(frozen=True, slots=True)
class CaptureSnapshot:
    """The bounded view at one moment: text, where it starts in the cleaned stream, totals."""

    text: str
    start: tuple[int, int]
    """Where ``text`` starts in the cleaned stream: (line index, character offset in that
    line). Exact and chunk-independent even when the capture skipped decoding output
    that could no longer reach the view (line indices are raw newline counts, which
    cleanup never changes). Used to detect slides."""
    truncation: ShellOutputTruncation
    last_line_bytes: int | None


class OutputCapture:
    """Feeds raw bytes, keeps a bounded view and exact totals.

    ``feed(data)`` for every read (stdout and stderr interleaved in arrival order),
    ``close()`` once at the end (flushes a trailing partial code point as U+FFFD and
    any held-back partial escape), ``snapshot()`` whenever the view is needed.
    """

    def __init__(self, limits: ShellOutputLimits | None = None) -> None:
        self.limits = limits if limits is not None else ShellOutputLimits()
        if self.limits.retain == "head_tail":
            raise ExecConfigError(
                "OutputCapture keeps a head or a tail; for retain='head_tail' use "
                "capture_for(limits) (or HeadTailCapture), as CaptureSession does"
            )
        self._cap = self.limits.max_bytes
        self._tail = self.limits.retain == "tail"
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._esc_carry = ""
        self._pending_cr = False
        self._closed = False
        # raw totals
        self.total_bytes = 0
        self._raw_newlines = 0
        self._raw_cur = 0
        self._raw_last_complete = 0
        # cleaned stream: completed text and the current (unterminated) line
        self._done = ""
        self._done_trimmed = False  # tail: _done lost its beginning
        self._done_abs = 0  # characters of completed cleaned text so far
        self._done_bytes = 0
        self._done_lines = 0
        self._frozen = False  # head: the view can no longer change
        self._cur = ""
        self._cur_trimmed = False  # tail: lost its beginning; head: lost its end
        self._cur_abs = 0
        self._cur_bytes = 0
        self._last_line_chars = 0  # characters of the last completed line (without \n)
        # tail: a prefix of the output was never decoded (it could not reach the view)
        self._skipped = False
        # head: view and truncation are final; only the raw totals still move
        self._settled = False
        # Smallest raw suffix that can decide a tail view by itself (see _skip_point).
        self._skip_lines = self.limits.max_lines + 1
        self._skip_bytes = self._cap + 4
        self._skip_min = 4 * min(2 * self._skip_lines, self._skip_bytes)

    # -- feeding ---------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Add raw output bytes."""
        if self._closed:
            raise CaptureClosedError(
                f"{len(data)} bytes fed to a closed OutputCapture; create a new capture per command"
            )
        if not data:
            return
        self.total_bytes += len(data)
        nl = data.rfind(b"\n")
        newlines = 0
        if nl == -1:
            self._raw_cur += len(data)
        else:
            prev = data.rfind(b"\n", 0, nl)
            self._raw_last_complete = self._raw_cur + nl if prev == -1 else nl - prev - 1
            self._raw_cur = len(data) - nl - 1
            newlines = data.count(b"\n")
            self._raw_newlines += newlines
        if self._settled:
            return
        plain: bool | None = None
        if self._tail and len(data) >= self._skip_min and nl != -1:
            skip, plain = self._skip_point(data, newlines)
            if skip:
                self._skip_to_line_start()
                data = data[skip:]
        if plain is None or self._esc_carry:
            plain = not self._esc_carry and not _has_control(data, 0)
        if plain and self._decoder.getstate()[0]:
            plain = False  # the partial code point held from the last read may lead a C1
        text = self._decoder.decode(data)
        if plain:
            if text:
                self._feed_clean(text)
        else:
            self._feed_decoded(text)
        if self._frozen and self._done_abs + self._cur_abs > len(self._done):
            # Head mode: the view is decided and already shorter than the cleaned stream,
            # so nothing later can change text or flags; stop decoding (totals are raw).
            self._settled = True

    def _skip_point(self, data: bytes, newlines: int) -> tuple[int, bool | None]:
        """A line start ``p`` in ``data`` such that ``data[p:]`` alone decides the tail view.

        Tail mode only. The view is at most ``max_lines`` whole lines and ``max_bytes``
        bytes at the end, so a suffix starting at a line start decides it when it holds
        more than ``max_lines`` newlines, or when its complete lines alone are larger than
        ``max_bytes`` once cleaned (the view walk then stops inside the suffix without
        accepting its first line, with the same verdict as on the whole stream). Only
        complete lines count for the bytes: a later ``\\r`` can redraw the current line
        down to one character, and the lines before the suffix would then be in view
        again. Cleanup never spans a newline (escape sequences cannot contain one,
        ``\\r`` redraws are per line, and the decoder holds nothing after a ``\\n``), so
        the suffix cleans the same on its own. The bytes test is only trusted for a suffix
        without control bytes or ``\\r`` (the cleaned size of its complete lines is then at
        least their raw size). Returns 0 when no such point is found; the whole read is
        then processed.
        Also returns whether the part that will be decoded is free of control bytes, when
        that was found out on the way (None otherwise).
        """
        n = len(data)
        end = data.rfind(b"\n") + 1  # the complete lines of the read end here
        need_lines, need_bytes = self._skip_lines, self._skip_bytes
        lines_ok = newlines >= need_lines  # else no suffix can hold enough newlines
        window = min(2 * need_lines, need_bytes) if lines_ok else need_bytes
        bytes_ok = True
        plain: bool | None = None
        while window < n:
            p = data.rfind(b"\n", 0, n - window) + 1
            if p == 0:
                return 0, plain
            if bytes_ok and end - p >= need_bytes:
                if data.find(b"\r", p) == -1:
                    if not _has_control(data, p):
                        return p, True
                    plain = False  # so does every larger suffix, and the whole read
                bytes_ok = False  # a larger suffix contains the same \r or control bytes
            if lines_ok and data.count(b"\n", p) >= need_lines:
                return p, plain
            window *= 4
        return 0, plain

    def _skip_to_line_start(self) -> None:
        # Everything fed so far (and the skipped part of this read) ends with a newline
        # and lies before the view: restart the line machine on a clean line start.
        self._skipped = True
        self._decoder.reset()
        self._esc_carry = ""
        self._pending_cr = False
        self._done = ""
        self._done_trimmed = True
        self._wipe()

    def close(self) -> None:
        """End of output: flush the decoder and any held-back partial escape sequence."""
        if self._closed:
            return
        if self._settled:
            self._closed = True
            return
        text = self._esc_carry + self._decoder.decode(b"", final=True)
        self._esc_carry = ""
        self._closed = True
        if text:
            self._feed_clean(_escape().sub("", text))

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._closed

    @property
    def total_lines(self) -> int:
        """Raw lines so far; a final line without newline counts."""
        return self._raw_newlines + (1 if self._raw_cur else 0)

    @property
    def exceeds_cap(self) -> bool:
        """True when the raw or cleaned output so far is beyond the limits.

        This is what starts the spill file: the raw prefix kept until then is at most
        about ``max_bytes`` (plus one read), whatever the cleanup removes or adds.
        """
        return (
            self.total_bytes > self._cap
            or self._done_bytes + self._cur_bytes > self._cap
            or self.total_lines > self.limits.max_lines
        )

    def _feed_decoded(self, text: str) -> None:
        if self._esc_carry:
            text = self._esc_carry + text
            self._esc_carry = ""
        window = max(0, len(text) - _MAX_ESCAPE_PREFIX)
        if text.find("\x1b", window) != -1 or text.find("\x9b", window) != -1:
            m = _escape_prefix().search(text, window)
            if m is not None:
                self._esc_carry = text[m.start() :]
                text = text[: m.start()]
        if text:
            self._feed_clean(_escape().sub("", text))

    def _feed_clean(self, text: str) -> None:
        # text has no escapes left; \r and \n drive the line machine.
        if not self._pending_cr and "\r" not in text:
            self._feed_lines(text)
            return
        nl = text.find("\n")
        first = text if nl == -1 else text[:nl]
        s = "\r" + first if self._pending_cr else first
        if "\r" in s:
            segs = s.split("\r")
            k = len(segs) - 1
            while k >= 0 and not segs[k]:
                k -= 1
            if k > 0:
                self._wipe()
                self._append(segs[k])
            elif k == 0:
                self._append(segs[0])
            self._pending_cr = s.endswith("\r")
        else:
            self._append(s)
            self._pending_cr = False
        if nl == -1:
            return
        rest = text[nl + 1 :]
        pending = rest.endswith("\r")
        if "\r" in rest:
            rest = _cr_redraw().sub("", rest).replace("\r", "")
        self._pending_cr = False
        self._feed_lines("\n" + rest)
        self._pending_cr = pending

    def _wipe(self) -> None:
        self._cur = ""
        self._cur_trimmed = False
        self._cur_abs = 0
        self._cur_bytes = 0

    def _append(self, s: str) -> None:
        if not s:
            return
        self._cur_abs += len(s)
        self._cur_bytes += utf8_len(s)
        if self._tail:
            self._cur += s
            if len(self._cur) > 4 * self._cap:
                self._cur = self._cur[-2 * self._cap :]
                self._cur_trimmed = True
        elif not self._frozen:
            room = self._cap + 1 - len(self._cur)
            if room > 0:
                self._cur += s[:room]
            if room < len(s):
                self._cur_trimmed = True

    def _feed_lines(self, text: str) -> None:
        # text has no \r; the part after its last \n becomes the new current line.
        nl = text.rfind("\n")
        if nl == -1:
            self._append(text)
            return
        end = nl + 1
        prev = text.rfind("\n", 0, nl)
        self._last_line_chars = self._cur_abs + nl if prev == -1 else nl - prev - 1
        self._done_abs += self._cur_abs + end
        self._done_bytes += self._cur_bytes + (end if text.isascii() else utf8_len(text[:end]))
        if self._tail:
            # A finished line that was trimmed alone is larger than the cap, so nothing
            # before it can ever be in a tail view again: the buffer restarts with it.
            cur_trimmed = self._cur_trimmed
            size = len(self._cur) + end + (0 if cur_trimmed else len(self._done))
            keep = 2 * self._cap
            if size > 4 * self._cap:
                # Trim (4x -> 2x) without first building the whole 4x string.
                if end >= keep:
                    self._done = text[end - keep : end]
                else:
                    before = self._cur if cur_trimmed else self._done + self._cur
                    self._done = before[end - keep :] + text[:end]
                self._done_trimmed = True
            elif cur_trimmed:
                self._done = self._cur + text[:end]
                self._done_trimmed = True
            else:
                self._done += self._cur + text[:end]
        elif not self._frozen:
            completed = text[:end]
            self._done_lines += completed.count("\n")
            self._done += self._cur + completed
            if (
                self._cur_trimmed
                or self._done_bytes >= self._cap
                or self._done_lines >= self.limits.max_lines
            ):
                # The head view is now decided by completed text alone.
                self._frozen = True
                self._done = self._done[: self._cap + 1]
        self._wipe()
        self._append(text[nl + 1 :])

    # -- the view --------------------------------------------------------------------

    def snapshot(self) -> CaptureSnapshot:
        """The bounded view of everything fed so far, with exact totals."""
        total_clean = self._done_abs + self._cur_abs
        start: tuple[int, int]
        if self._tail:
            text, col, by, partial = self._tail_view()
            # Cleaned newlines == raw newlines: nothing held back ever contains one.
            start = (self._raw_newlines - text.count("\n"), col)
            first_exceeds = False
        else:
            text, by, first_exceeds = self._head_view()
            start, partial = (0, 0), False
        truncated = self._skipped or len(text) < total_clean
        if not truncated:
            by = None
        elif by is None and self._tail:
            # The cut happened before the buffer we windowed (a current line that once
            # outgrew the cap pushed the completed lines out, then a \r redraw shortened
            # it): decide by the view itself, with the same rule.
            by = tail_truncated_by(count_lines(text), self.limits.max_lines, partial)
        elif by is None:
            by = "bytes"
        out_bytes = utf8_len(text)
        out_lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        last_line_bytes: int | None = None
        if self.total_bytes:
            last_line_bytes = self._raw_cur if self._raw_cur else self._raw_last_complete
        return CaptureSnapshot(
            text=text,
            start=start,
            truncation=ShellOutputTruncation(
                truncated=truncated,
                truncated_by=by,
                total_lines=self.total_lines,
                total_bytes=self.total_bytes,
                output_lines=out_lines,
                output_bytes=out_bytes,
                last_line_partial=partial,
                first_line_exceeds_limit=first_exceeds,
                max_lines=self.limits.max_lines,
                max_bytes=self._cap,
            ),
            last_line_bytes=last_line_bytes,
        )

    def _tail_view(self) -> tuple[str, int, Literal["lines", "bytes"] | None, bool]:
        # Returns (text, column of its first character in its line, truncated_by, partial).
        if self._cur_trimmed:
            buf, trimmed = self._cur, True
        else:
            buf = self._done + self._cur
            trimmed = self._done_trimmed if self._done else False
        max_lines, cap = self.limits.max_lines, self._cap
        # The window rule the output sink uses too (one implementation, _window.py).
        text, partial = tail_window(buf, cap, max_lines, at_line_start=not trimmed)
        by: Literal["lines", "bytes"] | None = (
            tail_truncated_by(count_lines(text), max_lines, partial)
            if len(text) < len(buf)
            else None
        )
        if partial:
            # The last line alone exceeds the cap: the view is its last max_bytes bytes.
            if self._cur_abs:
                return text, self._cur_abs - len(text), by, True
            return text, self._last_line_chars + 1 - len(text), by, True
        return text, 0, by, False

    def _head_view(self) -> tuple[str, Literal["lines", "bytes"] | None, bool]:
        buf = self._done if self._frozen else self._done + self._cur
        text, by = head_window(buf, self._cap, self.limits.max_lines)
        if len(text) < len(buf):
            return text, by, head_first_line_exceeds(text, buf)
        return text, ("lines" if count_lines(buf) == self.limits.max_lines else None), False


def _has_control(data: bytes, start: int) -> bool:
    """True when ``data[start:]`` holds a byte the escape/control cleanup acts on."""
    part = data[start:] if start else data
    return len(part.translate(None, _CONTROL_BYTES)) != len(part)

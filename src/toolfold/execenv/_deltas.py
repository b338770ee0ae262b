"""The updates after a stream's first ``Replace``: ``Append``, ``Slide`` and ``Metadata``.

Defined on first use (``_updates`` and the package export them): a command that prints
nothing publishes its ``Replace`` alone and never needs them. Their fold and wire form
are ``_updates``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._record import record

if TYPE_CHECKING:
    from ._output_view import ShellOutputMetadata

__all__ = ["Append", "Metadata", "Slide"]


@record(frozen=True, slots=True)
class Append:
    """Append ``text`` to the view and take the new metadata."""

    text: str
    metadata: ShellOutputMetadata


@record(frozen=True, slots=True)
class Slide:
    """Drop ``drop`` characters (code points) of the view from ``at`` on, then append
    ``text``: ``view[:at] + view[at + drop:] + text``. ``at`` is 0 (drop the start) except
    for a head_tail view, whose tail part rolls behind its fixed head (``at`` = its
    ``cut_at``)."""

    drop: int
    text: str
    metadata: ShellOutputMetadata
    at: int = 0


@record(frozen=True, slots=True)
class Metadata:
    """Only the metadata moved (totals, spill path); the text is unchanged."""

    metadata: ShellOutputMetadata

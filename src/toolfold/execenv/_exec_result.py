"""``ShellExecResult``: how a local or remote command ended, with its final bounded output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._record import record

from ._output_view import ShellOutputMetadata, ShellOutputView

if TYPE_CHECKING:
    from ._session import CaptureSession


@record(frozen=True, slots=True, kw_only=True)
class ShellExecResult(ShellOutputMetadata):
    """How a command ended, with the final bounded output.

    ``exit_code`` is ``None`` when the command was killed (timeout, ``cancel``, a
    spill failure, or a signal from elsewhere). ``text`` is the final view text — the
    same as the fold of every published update. ``timed_out`` / ``cancelled`` say
    why it was killed, when it was killed by us. ``background_killed`` is true when the
    shell exited by itself (``exit_code`` is its status) but processes it left in its
    group still held stdout/stderr, so the group was killed: after ``exit_grace``, or
    earlier when the timeout or ``cancel`` came during that grace (then ``timed_out`` /
    ``cancelled`` is set too).
    """

    exit_code: int | None
    text: str = ""
    timed_out: bool = False
    cancelled: bool = False
    background_killed: bool = False
    handle: str | None = None
    """Set when the command was still running at ``yield_after``: it goes on in the
    background (``env.background``), and this is the output so far."""

    @classmethod
    def from_view(
        cls,
        view: ShellOutputView,
        *,
        exit_code: int | None,
        timed_out: bool = False,
        cancelled: bool = False,
        background_killed: bool = False,
        handle: str | None = None,
    ) -> ShellExecResult:
        """The result whose final output is ``view``, with how the command ended."""
        meta = view.metadata
        return cls(
            truncation=meta.truncation,
            spill_path=meta.spill_path,
            last_line_bytes=meta.last_line_bytes,
            spill_note=meta.spill_note,
            exit_code=exit_code,
            text=view.text,
            timed_out=timed_out,
            cancelled=cancelled,
            background_killed=background_killed,
            handle=handle,
        )

    @property
    def view(self) -> ShellOutputView:
        """The final view (text + metadata), as a consumer's fold ends."""
        return ShellOutputView(
            text=self.text,
            metadata=ShellOutputMetadata(
                truncation=self.truncation,
                spill_path=self.spill_path,
                last_line_bytes=self.last_line_bytes,
                spill_note=self.spill_note,
            ),
        )


def running_result(session: CaptureSession, handle: str) -> ShellExecResult:
    """The result of a command that yielded: its output so far, and its handle."""
    return ShellExecResult.from_view(session.view(), exit_code=None, handle=handle)

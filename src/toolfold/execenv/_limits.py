"""Output limits and capture options for shell commands."""

from __future__ import annotations

from typing import Literal

from toolfold._record import field, record

from ._errors import ExecConfigError
from ._window import DEFAULT_HEAD_SHARE, check_head_share

Retain = Literal["head", "tail", "head_tail"]
RETAIN_MODES: tuple[Retain, ...] = ("head", "tail", "head_tail")

DEFAULT_MAX_BYTES = 50 * 1024
DEFAULT_MAX_LINES = 2000
DEFAULT_MIN_INTERVAL = 0.1
DEFAULT_TARGET_RATE = 100 * 1024
DEFAULT_SPILL_HIGH_WATER = 8 * 1024 * 1024
DEFAULT_MAX_SPILL = 1 << 30
"""Per-command spill cap: ``yes`` writes gigabytes in seconds, and a spill that fills the
disk would also stop the store from recording the call."""
DEFAULT_MAX_RUNNING = 8
"""Commands one environment may run in the background at once (``BackgroundCommands``)."""
DEFAULT_IDLE_TIMEOUT = 3600.0
"""A background command nobody looked at for an hour is stopped: a forgotten dev server
must not run for the rest of the session."""


def check_background_limits(max_running: int, idle_timeout: float | None) -> None:
    """Raise ``ExecConfigError`` for a bad ``BackgroundCommands`` limit. Here rather than
    in ``_background``: a ``LocalExecEnv`` checks its limits when it is made, and imports
    the background machinery only once a command goes to the background."""
    if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
        raise ExecConfigError(f"max_running must be an int >= 1 (commands), got {max_running!r}")
    if idle_timeout is not None and (
        isinstance(idle_timeout, bool)
        or not isinstance(idle_timeout, int | float)
        or idle_timeout <= 0
    ):
        raise ExecConfigError(
            f"idle_timeout must be a number of seconds > 0 or None, got {idle_timeout!r}"
        )


@record(frozen=True, slots=True)
class ShellOutputLimits:
    """How much of a command's output the bounded view retains.

    ``max_bytes`` counts UTF-8 bytes of the (cleaned) view text, ``max_lines`` counts
    its lines (a final line without newline counts). ``retain="tail"`` keeps the end,
    ``"head"`` the beginning, ``"head_tail"`` both: ``head_share`` of each cap for the
    beginning, the rest for a rolling end, cut in the middle (both caps at least 2).
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES
    retain: Retain = "tail"
    head_share: float = DEFAULT_HEAD_SHARE

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_lines"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ExecConfigError(
                    f"ShellOutputLimits.{name} must be a positive int, got {value!r}; "
                    f"use e.g. {name}={DEFAULT_MAX_BYTES if name == 'max_bytes' else DEFAULT_MAX_LINES}"
                )
        if self.retain not in RETAIN_MODES:
            raise ExecConfigError(
                f"ShellOutputLimits.retain must be 'head', 'tail' or 'head_tail', "
                f"got {self.retain!r}"
            )
        problem = check_head_share(self.head_share)
        if problem:
            raise ExecConfigError(f"ShellOutputLimits.{problem}")
        if self.retain == "head_tail" and min(self.max_bytes, self.max_lines) < 2:
            raise ExecConfigError(
                "ShellOutputLimits with retain='head_tail' needs max_bytes and max_lines of "
                f"at least 2 (one for each part), got {self.max_bytes} and {self.max_lines}"
            )


@record(frozen=True, slots=True)
class CaptureOptions:
    """What ``exec`` captures and how it publishes.

    ``spill`` enables the lazy spill file; ``max_spill`` caps its size in bytes (at
    the cap spilling stops, the view and totals stay exact, and the metadata's
    ``spill_note`` says so). ``min_interval`` (seconds) and ``target_rate``
    (bytes/second) drive the adaptive publisher; ``spill_high_water`` bounds the spill
    write buffer (pipes stop being read while it is full).
    """

    limits: ShellOutputLimits = field(default_factory=ShellOutputLimits)
    spill: bool = True
    min_interval: float = DEFAULT_MIN_INTERVAL
    target_rate: float = DEFAULT_TARGET_RATE
    spill_high_water: int = DEFAULT_SPILL_HIGH_WATER
    max_spill: int = DEFAULT_MAX_SPILL

    def __post_init__(self) -> None:
        if not isinstance(self.limits, ShellOutputLimits):
            raise ExecConfigError(
                f"CaptureOptions.limits must be a ShellOutputLimits, got {self.limits!r}"
            )
        if not (isinstance(self.min_interval, int | float) and self.min_interval >= 0):
            raise ExecConfigError(
                f"CaptureOptions.min_interval must be a number >= 0 (seconds), got {self.min_interval!r}"
            )
        if not (isinstance(self.target_rate, int | float) and self.target_rate > 0):
            raise ExecConfigError(
                f"CaptureOptions.target_rate must be a number > 0 (bytes/second), got {self.target_rate!r}"
            )
        if (
            isinstance(self.spill_high_water, bool)
            or not isinstance(self.spill_high_water, int)
            or self.spill_high_water < 1
        ):
            raise ExecConfigError(
                f"CaptureOptions.spill_high_water must be a positive int (bytes), got {self.spill_high_water!r}"
            )
        if (
            isinstance(self.max_spill, bool)
            or not isinstance(self.max_spill, int)
            or self.max_spill < 1
        ):
            raise ExecConfigError(
                f"CaptureOptions.max_spill must be a positive int (bytes), got {self.max_spill!r}; "
                f"the default is {DEFAULT_MAX_SPILL} (1 GiB)"
            )

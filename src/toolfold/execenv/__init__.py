"""Execution environment: bounded shell output at the source, spill files, adaptive publishing.

``LocalExecEnv(spill_dir).exec(command, ...)`` runs a command in its own process
group and returns a ``ShellExecResult``; while it runs, ``on_update`` receives a
paced stream of ``ShellOutputUpdate`` (``Replace | Append | Slide | Metadata``) whose
fold with ``apply_shell_output_update`` is the bounded view. ``AdaptivePublisher`` is
the one pacing policy of the harness, generic over its payload (the output sink
reuses it for Chord ops). ``OutputCapture`` and ``CaptureSession`` are the
transport-agnostic pieces a remote exec host runs.

This package imports nothing else from toolfold.
"""

from __future__ import annotations

from ._capture import CaptureClosedError, CaptureSnapshot, OutputCapture
from ._errors import (
    CallbackError,
    ExecConfigError,
    ExecError,
    ExecStartError,
    SpillError,
    UpdateError,
)
from ._limits import CaptureOptions, ShellOutputLimits
from ._local import LocalExecEnv, ShellExecResult
from ._publisher import AdaptivePublisher, Cancellable, Clock, LoopClock
from ._session import CaptureSession, UpdateConsumer
from ._spill import SpillFile
from ._updates import (
    Append,
    Metadata,
    Replace,
    ShellOutputMetadata,
    ShellOutputTruncation,
    ShellOutputUpdate,
    ShellOutputView,
    Slide,
    apply_shell_output_update,
    update_cost,
    update_from_dict,
    update_to_dict,
    utf8_len,
)

__all__ = [
    "AdaptivePublisher",
    "Append",
    "CallbackError",
    "Cancellable",
    "CaptureClosedError",
    "CaptureOptions",
    "CaptureSession",
    "CaptureSnapshot",
    "Clock",
    "ExecConfigError",
    "ExecError",
    "ExecStartError",
    "LocalExecEnv",
    "LoopClock",
    "Metadata",
    "OutputCapture",
    "Replace",
    "ShellExecResult",
    "ShellOutputLimits",
    "ShellOutputMetadata",
    "ShellOutputTruncation",
    "ShellOutputUpdate",
    "ShellOutputView",
    "Slide",
    "SpillError",
    "SpillFile",
    "UpdateConsumer",
    "UpdateError",
    "apply_shell_output_update",
    "update_cost",
    "update_from_dict",
    "update_to_dict",
    "utf8_len",
]

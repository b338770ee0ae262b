"""Execution environment: bounded shell output at the source, spill files, adaptive publishing.

``LocalExecEnv(spill_dir).exec(command, ...)`` runs a command in its own process
group and returns a ``ShellExecResult``; while it runs, ``on_update`` receives a
paced stream of ``ShellOutputUpdate`` (``Replace | Append | Slide | Metadata``) whose
fold with ``apply_shell_output_update`` is the bounded view. ``AdaptivePublisher`` is
the one pacing policy of the harness, generic over its payload (the output sink
reuses it for Chord ops). ``OutputCapture`` and ``CaptureSession`` are the
transport-agnostic pieces a remote exec host runs: ``toolfold exec-host``
(``run_exec_host``) runs them on another machine, and ``RemoteExecEnv(transport)``
(``SSHTransport``, ``CommandTransport`` for ``docker exec -i`` and the like) gives
the same ``exec`` on this side, receiving only the bounded updates.
``LocalExecEnv(spill_dir, sandbox=Sandbox("workspace-write"))`` confines every
command with bubblewrap (read-only or workspace-write, no network, secrets hidden).

This package imports nothing else from toolfold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports

from ._errors import (
    BackgroundLimitError,
    CallbackError,
    ExecConfigError,
    ExecError,
    ExecStartError,
    HandleError,
    ProtocolError,
    SpillError,
    TransportError,
    UpdateError,
)

if TYPE_CHECKING:
    from ._background import BackgroundCommands
    from ._background_entry import BackgroundInfo, BackgroundRead
    from ._capture import CaptureClosedError, CaptureSnapshot, OutputCapture
    from ._deltas import Append, Metadata, Slide
    from ._exec_host import DEFAULT_SPILL_DIR, run_exec_host
    from ._exec_result import ShellExecResult
    from ._fileops import (
        SEARCH_MAX_LINE_CHARS,
        SEARCH_SKIP_DIRS,
        iter_files,
        run_file_op,
        search_file,
    )
    from ._headtail import HeadTailCapture, capture_for
    from ._hostguard import kill_marked
    from ._ledger import OrphanReport, stop_orphans
    from ._limits import (
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_MAX_RUNNING,
        DEFAULT_MAX_SPILL,
        RETAIN_MODES,
        CaptureOptions,
        Retain,
        ShellOutputLimits,
    )
    from ._local import LocalExecEnv
    from ._output_view import ShellOutputMetadata, ShellOutputTruncation, ShellOutputView
    from ._protocol import PROTOCOL_VERSION
    from ._publisher import AdaptivePublisher, Cancellable, Clock, LoopClock
    from ._remote import HostInfo, RemoteExecEnv
    from ._sandbox import PROFILES, SECRET_ENV, SECRET_PATHS, Profile, Sandbox
    from ._session import CaptureSession, UpdateConsumer
    from ._spill import SpillFile
    from ._transport import DEFAULT_REMOTE_COMMAND, CommandTransport, SSHTransport, Transport
    from ._updates import (
        Replace,
        ShellOutputUpdate,
        apply_shell_output_update,
        update_cost,
        update_from_dict,
        update_to_dict,
        utf8_len,
    )
    from ._window import (
        DEFAULT_HEAD_SHARE,
        check_head_share,
        count_lines,
        head_first_line_exceeds,
        head_tail_caps,
        head_tail_window,
        head_window,
        last_line_bytes,
        tail_truncated_by,
        tail_window,
    )

# Every name but the errors is imported on first use: a package import costs nothing,
# and each command imports what it uses. A foreground `toolfold run` needs neither the
# background machinery (handles, the ledger, pseudo-terminals), the remote side (the
# exec host, its protocol and file operations, transports) nor the sandbox; and the
# modules a run without an event loop uses (capture, windows, spill, limits, updates,
# views, results) import no asyncio.
__getattr__ = lazy_exports(
    __name__,
    {
        "BackgroundCommands": "._background",
        "BackgroundInfo": "._background_entry",
        "BackgroundRead": "._background_entry",
        "CaptureClosedError": "._capture",
        "CaptureSnapshot": "._capture",
        "OutputCapture": "._capture",
        "DEFAULT_SPILL_DIR": "._exec_host",
        "run_exec_host": "._exec_host",
        "ShellExecResult": "._exec_result",
        "SEARCH_MAX_LINE_CHARS": "._fileops",
        "SEARCH_SKIP_DIRS": "._fileops",
        "iter_files": "._fileops",
        "run_file_op": "._fileops",
        "search_file": "._fileops",
        "HeadTailCapture": "._headtail",
        "capture_for": "._headtail",
        "kill_marked": "._hostguard",
        "OrphanReport": "._ledger",
        "stop_orphans": "._ledger",
        "CaptureOptions": "._limits",
        "DEFAULT_IDLE_TIMEOUT": "._limits",
        "DEFAULT_MAX_RUNNING": "._limits",
        "DEFAULT_MAX_SPILL": "._limits",
        "RETAIN_MODES": "._limits",
        "Retain": "._limits",
        "ShellOutputLimits": "._limits",
        "LocalExecEnv": "._local",
        "ShellOutputMetadata": "._output_view",
        "ShellOutputTruncation": "._output_view",
        "ShellOutputView": "._output_view",
        "PROTOCOL_VERSION": "._protocol",
        "AdaptivePublisher": "._publisher",
        "Cancellable": "._publisher",
        "Clock": "._publisher",
        "LoopClock": "._publisher",
        "HostInfo": "._remote",
        "RemoteExecEnv": "._remote",
        "PROFILES": "._sandbox",
        "Profile": "._sandbox",
        "SECRET_ENV": "._sandbox",
        "SECRET_PATHS": "._sandbox",
        "Sandbox": "._sandbox",
        "CaptureSession": "._session",
        "UpdateConsumer": "._session",
        "SpillFile": "._spill",
        "CommandTransport": "._transport",
        "DEFAULT_REMOTE_COMMAND": "._transport",
        "SSHTransport": "._transport",
        "Transport": "._transport",
        "Append": "._deltas",
        "Metadata": "._deltas",
        "Replace": "._updates",
        "ShellOutputUpdate": "._updates",
        "Slide": "._deltas",
        "apply_shell_output_update": "._updates",
        "update_cost": "._updates",
        "update_from_dict": "._updates",
        "update_to_dict": "._updates",
        "utf8_len": "._updates",
        "DEFAULT_HEAD_SHARE": "._window",
        "check_head_share": "._window",
        "count_lines": "._window",
        "head_first_line_exceeds": "._window",
        "head_tail_caps": "._window",
        "head_tail_window": "._window",
        "head_window": "._window",
        "last_line_bytes": "._window",
        "tail_truncated_by": "._window",
        "tail_window": "._window",
    },
)

__all__ = [
    "DEFAULT_HEAD_SHARE",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_MAX_SPILL",
    "DEFAULT_REMOTE_COMMAND",
    "DEFAULT_SPILL_DIR",
    "PROFILES",
    "PROTOCOL_VERSION",
    "RETAIN_MODES",
    "SEARCH_MAX_LINE_CHARS",
    "SEARCH_SKIP_DIRS",
    "SECRET_ENV",
    "SECRET_PATHS",
    "AdaptivePublisher",
    "Append",
    "BackgroundCommands",
    "BackgroundInfo",
    "BackgroundLimitError",
    "BackgroundRead",
    "CallbackError",
    "Cancellable",
    "CaptureClosedError",
    "CaptureOptions",
    "CaptureSession",
    "CaptureSnapshot",
    "Clock",
    "CommandTransport",
    "ExecConfigError",
    "ExecError",
    "ExecStartError",
    "HandleError",
    "HeadTailCapture",
    "HostInfo",
    "LocalExecEnv",
    "LoopClock",
    "Metadata",
    "OrphanReport",
    "OutputCapture",
    "Profile",
    "ProtocolError",
    "RemoteExecEnv",
    "Replace",
    "Retain",
    "SSHTransport",
    "Sandbox",
    "ShellExecResult",
    "ShellOutputLimits",
    "ShellOutputMetadata",
    "ShellOutputTruncation",
    "ShellOutputUpdate",
    "ShellOutputView",
    "Slide",
    "SpillError",
    "SpillFile",
    "Transport",
    "TransportError",
    "UpdateConsumer",
    "UpdateError",
    "apply_shell_output_update",
    "capture_for",
    "check_head_share",
    "count_lines",
    "head_first_line_exceeds",
    "head_tail_caps",
    "head_tail_window",
    "head_window",
    "iter_files",
    "kill_marked",
    "last_line_bytes",
    "run_exec_host",
    "run_file_op",
    "search_file",
    "stop_orphans",
    "tail_truncated_by",
    "tail_window",
    "update_cost",
    "update_from_dict",
    "update_to_dict",
    "utf8_len",
]

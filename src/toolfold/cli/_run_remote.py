"""Where ``toolfold run --ssh`` / ``--exec-host`` runs its command: ``RemoteSettings``,
defined when a run names a remote target (a local run never does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolfold.execenv import RemoteExecEnv, Transport


@dataclass(frozen=True)
class RemoteSettings:
    """Where ``--ssh`` / ``--exec-host`` runs the command."""

    transport: Transport
    cwd: str | None

    def env(self, session: str) -> RemoteExecEnv:
        from toolfold.execenv import RemoteExecEnv  # the remote side, only when asked for

        # Spill files stay on the exec host, one directory per session as locally.
        return RemoteExecEnv(self.transport, spill_dir=session)


__all__ = ["RemoteSettings"]

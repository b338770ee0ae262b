"""toolfold._host.hostname: the value socket.gethostname() gives, without socket."""

from __future__ import annotations

import os
import socket

import pytest

from toolfold._host import hostname


def test_hostname_is_what_socket_gives() -> None:
    assert hostname() == socket.gethostname()


def test_without_uname_it_asks_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "uname", raising=False)
    monkeypatch.setattr(socket, "gethostname", lambda: "elsewhere")
    assert hostname() == "elsewhere"

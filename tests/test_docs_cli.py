"""Every CLI command and option is documented in docs/cli.md and has help text."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from toolfold.cli._main import cli
from toolfold.cli._store import SCHEMES

DOC = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
_CTX = click.Context(cli)
# Through the group's own listing: some commands are defined on first use.
COMMANDS = {
    name: command
    for name in cli.list_commands(_CTX)
    if (command := cli.get_command(_CTX, name)) is not None and not command.hidden
}


def section(name: str) -> str:
    """The part of docs/cli.md under ``## `toolfold NAME ...`` (up to the next ``## ``)."""
    found = re.search(rf"^## `toolfold {name}\b[^\n]*\n(.*?)(?=^## |\Z)", DOC, re.M | re.S)
    if found is None:
        raise AssertionError(f"docs/cli.md has no '## `toolfold {name} ...`' section")
    return found.group(0)


def test_there_are_commands() -> None:
    assert set(COMMANDS) >= {"run", "sessions", "show", "resume", "serve", "demo"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_documented_with_every_option(name: str) -> None:
    text = section(name)
    command = COMMANDS[name]
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                if opt.startswith("--") and opt != "--help":
                    assert f"`{opt}" in text or f"[{opt}" in text, f"{name}: {opt} undocumented"
        elif isinstance(param, click.Argument):
            metavar = (param.metavar or param.name or "").strip("[]. ")
            assert metavar.split()[-1].rstrip(".") in text, f"{name}: argument {metavar}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_has_help_text(name: str) -> None:
    command = COMMANDS[name]
    assert command.help and len(command.help.split()) >= 8, name
    for param in command.params:
        if isinstance(param, click.Option) and "--help" not in param.opts:
            assert param.help, f"{name}: option {param.opts} has no help text"


def test_store_urls_and_exit_statuses_documented() -> None:
    for scheme in SCHEMES:
        assert f"`{scheme.split('PATH')[0].split('DIR')[0].rstrip('.')}" in DOC, scheme
    assert "TOOLFOLD_STORE" in DOC and "sqlite:.toolfold/toolfold.db" in DOC
    exits = DOC.split("## Exit statuses", 1)[1]
    for status in ("| 0 |", "| 1 |", "| 2 |", "| 130 / 143 |"):
        assert status in exits

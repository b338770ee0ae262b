"""The click command group behind ``toolfold``."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Bounded, streamed, durable tool output for agent harnesses."""


def main() -> None:
    """Entry point of the ``toolfold`` script."""
    cli(prog_name="toolfold")

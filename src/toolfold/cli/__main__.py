"""``python -m toolfold.cli`` runs the ``toolfold`` command."""

from __future__ import annotations

from ._main import main

main()

"""``python -m toolfold.cli`` runs the ``toolfold`` command."""

from __future__ import annotations

from ._entry import main

main()

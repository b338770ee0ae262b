"""What importing the store's synchronous parts costs: no asyncio. The writes, records,
addresses, errors and the SQLite file's statements (and Chord, which the writes check
values with) are what a caller committing without an event loop needs; the asyncio
session and repository are imported only when first used."""

from __future__ import annotations

import pytest

from fresh_modules import modules_after

SYNC_MODULES = (
    "toolfold.chord",
    "toolfold.storage",
    "toolfold.storage._addresses",
    "toolfold.storage._commit_checks",
    "toolfold.storage._errors",
    "toolfold.storage._paging",
    "toolfold.storage._records",
    "toolfold.storage._sql",
    "toolfold.storage._sqlite_file",
    "toolfold.storage._sqlite_sync",
    "toolfold.storage._writes",
)


@pytest.mark.parametrize("module", SYNC_MODULES)
def test_sync_parts_import_without_asyncio(module: str) -> None:
    loaded = modules_after(f"import {module}")
    assert module in loaded
    assert "asyncio" not in loaded
    assert "toolfold.storage._base" not in loaded
    # what a read hands back is defined with the first read
    assert "toolfold.storage._entries" not in loaded


def test_reads_records_are_still_exported() -> None:
    loaded = modules_after(
        "from toolfold.storage import Entry, ListElement\n"
        "assert Entry(1, None) == Entry(1, None, None, None)\n"
        "assert repr(ListElement(2, [1], 't')) == \"ListElement(seq=2, value=[1], tag='t')\""
    )
    assert "toolfold.storage._entries" in loaded


def test_the_asyncio_parts_are_still_exported() -> None:
    loaded = modules_after(
        "from toolfold.storage import (CHANGE_POLL_INTERVAL, Repository, Session,"
        " open_repository)\n"
        "assert Session.__module__ == 'toolfold.storage._base'\n"
        "assert Repository.__module__ == 'toolfold.storage._base_repository'\n"
        "assert CHANGE_POLL_INTERVAL > 0 and callable(open_repository)"
    )
    assert {"asyncio", "toolfold.storage._base", "toolfold.storage._repository"} <= loaded

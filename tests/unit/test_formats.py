"""The one table of stored formats (core.formats, docs/upgrades.md "Formats")."""

from __future__ import annotations

import pytest
from hourglass.core import formats
from hourglass.errors import NewerFormatError, StoreError


@pytest.mark.parametrize("kind", sorted(formats.FORMATS))
def test_a_record_without_a_format_is_format_1(kind: str) -> None:
    assert formats.check(kind, None) == 1


@pytest.mark.parametrize("kind", sorted(formats.FORMATS))
def test_a_record_one_format_newer_than_this_release_reads_is_refused_as_a_store_error(kind: str) -> None:
    with pytest.raises(NewerFormatError) as refused:
        formats.check(kind, formats.FORMATS[kind] + 1)
    assert (refused.value.kind, refused.value.fv, isinstance(refused.value, StoreError)) == (
        kind,
        formats.FORMATS[kind] + 1,
        True,
    )


def test_a_queue_is_format_2_only_with_ordering() -> None:
    assert (formats.queue_format(True), formats.queue_format(False)) == (2, 1)

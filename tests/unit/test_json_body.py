"""Strict request JSON: out-of-range numbers and duplicate keys are refused, naming what is wrong."""

from __future__ import annotations

import pytest
from hourglass.core.json_body import decode
from hourglass.errors import ValidationError


def refused(raw: bytes) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        decode(raw)
    return info.value


@pytest.mark.parametrize(
    "raw",
    [b"1e400", b"-1e400", b'{"messages": [{"body": {"x": [1, 2e999]}}]}', b"[NaN]", b'{"a": Infinity}', b"-Infinity"],
)
def test_out_of_range_numbers_are_refused_anywhere(raw):
    err = refused(raw)
    assert err.field == "body"


def test_a_number_out_of_range_is_named():
    assert "1e400" in refused(b'{"delay": 1e400}').message


def test_numbers_in_range_and_underflow_to_zero_are_kept():
    assert decode(b"[1.7e308, -2.5e-3, 1e-400]") == [1.7e308, -2.5e-3, 0.0]


def test_a_duplicate_key_is_refused_naming_the_key():
    err = refused(b'{"messages": [{"body": 1, "delay": 5, "delay": 0}]}')
    assert err.field == "body"
    assert '"delay"' in err.message


def test_the_same_key_in_different_objects_is_fine():
    assert decode(b'[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]

"""The mode comparison's parts that need no deployed stack: the atomicity race and the table."""

from __future__ import annotations

from bench import modes
from devstack.emulator import use_dummy_credentials


def test_the_patched_moto_lets_exactly_one_contender_claim_each_item() -> None:
    use_dummy_credentials("us-east-1")
    with modes.emulator("moto + moto_atomic") as endpoint:
        result = modes.atomicity(endpoint)
    assert (result["double_claims"], result["double_receives"], result["lost_receives"]) == (0, 0, 0)


def test_the_table_puts_the_modes_side_by_side() -> None:
    figures = {"startup_s": 8.0, "lateness_p50_ms": 79.2, "early": 0, "delivered": 5, "expected": 5}
    doc = {
        "modes": {"moto + in-process": figures, "MiniStack, deployed": {**figures, "startup_s": 57.6}},
        "atomicity": {
            "MiniStack": {"double_claims": 0, "claims": 25, "double_receives": 0, "lost_receives": 0, "receives": 200}
        },
    }
    table = modes.markdown(doc)
    assert "| figure | moto + in-process | MiniStack, deployed |" in table
    assert "| start-up to ready | 8 s | 57.6 s |" in table
    assert "| MiniStack | 0 of 25 items | 0 of 200 | 0 |" in table

"""The stack outputs the release it deploys (contract v1.3, "Versions")."""

from __future__ import annotations

from hourglass import contract
from hourglass.version import __version__

from tests.cdk.test_stack import synth


def test_the_stack_outputs_its_version() -> None:
    outputs = synth().find_outputs(contract.OUTPUT_VERSION, {"Value": __version__})
    assert list(outputs) == [contract.OUTPUT_VERSION]


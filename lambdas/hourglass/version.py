"""The release of Hourglass: the one place its version number is written (CHANGELOG.md, docs/upgrades.md).

The packaging metadata (pyproject.toml), `GET /health` and the stack's `Version` output read it; the SDK
(clients/python) is packaged apart and carries its own copy, which tests/unit/test_version.py holds equal.
"""

__version__ = "1.3.0"

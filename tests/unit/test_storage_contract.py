"""The storage contract (`adapters.storage`): `Store` implements every noun and nothing outside them, and each
service module calls only the nouns it declares (`StorageUsed`). mypy checks the signatures (`adapters.store`)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import hourglass.service
import pytest
from hourglass.adapters import storage
from hourglass.adapters.store import Store

SERVICE = Path(hourglass.service.__file__).parent
# The context holds the whole contract (`storage.Storage`) for the services to share.
HOLDS_EVERYTHING = {"hourglass.service.context"}


def _methods(noun: type) -> set[str]:
    return {name for name in vars(noun) if not name.startswith("_")}


NOUN_OF = {name: noun for noun in storage.NOUNS for name in _methods(noun)}


def _store_calls(tree: ast.Module) -> set[str]:
    """The contract's methods a module reaches through anything named like a store (`ctx.store.x`, `self.store.x`)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in NOUN_OF:
            receiver = ast.unparse(node.value).lower()
            if "store" in receiver and "body_store" not in receiver:
                found.add(node.attr)
    return found


def _declared(module: object) -> set[type]:
    used = getattr(module, "StorageUsed", None)
    if used is None:
        return set()
    return {noun for noun in storage.NOUNS if noun is used or noun in used.__mro__}


MODULES = {
    ".".join(("hourglass.service", *path.relative_to(SERVICE).with_suffix("").parts)): ast.parse(path.read_text())
    for path in sorted(SERVICE.rglob("*.py"))
}
CALLERS = sorted(name for name, tree in MODULES.items() if _store_calls(tree) and name not in HOLDS_EVERYTHING)


def test_every_public_method_of_the_store_belongs_to_exactly_one_noun() -> None:
    public = {
        name
        for name in dir(Store)
        if not name.startswith("_") and (callable(getattr(Store, name)) or isinstance(getattr(Store, name), property))
    }
    per_noun = [name for noun in storage.NOUNS for name in _methods(noun)]
    assert (sorted(public), len(per_noun)) == (sorted(per_noun), len(set(per_noun)))


def test_the_store_has_every_method_of_every_noun() -> None:
    missing = {name for name in NOUN_OF if not hasattr(Store, name)}
    assert missing == set()


def test_the_services_call_the_store_through_declared_nouns() -> None:
    assert len(CALLERS) > 10


@pytest.mark.parametrize("module", CALLERS)
def test_a_service_module_calls_exactly_the_storage_nouns_it_declares(module: str) -> None:
    called = {NOUN_OF[name].__name__ for name in _store_calls(MODULES[module])}
    declared = {noun.__name__ for noun in _declared(importlib.import_module(module))}
    assert called == declared

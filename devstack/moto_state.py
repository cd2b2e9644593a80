"""The embedded emulator's state kept in a file across restarts: every moto backend in use, pickled.

The emulator's process saves on SIGTERM (the runtime stops it so, and so does the kernel when the runtime
dies: `devstack.emulator.die_with_parent`) and loads at start-up, before it takes a request.
"""

from __future__ import annotations

import copyreg
import importlib
import io
import pickle
import sys
import threading
import weakref
from collections import defaultdict
from pathlib import Path
from typing import Any

import cloudpickle
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key
from moto.core.base_backend import BackendDict

# moto's objects hold locks, which pickle refuses: a loaded object gets a fresh one, unlocked.
_LOCKS: dict[type, Any] = {type(threading.Lock()): threading.Lock, type(threading.RLock()): threading.RLock}


# What pickle calls to make an object without its __init__ (`cls.__new__(cls)`).
NEW_OBJECT: Any = getattr(copyreg, "__newobj__")  # noqa: B009 (not in typeshed)
PRIVATE_KEYS = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)


def _restore_defaultdict(obj: Any, state: tuple[Any, dict[str, Any]]) -> None:
    obj.default_factory, attributes = state
    vars(obj).update(attributes)


def _private_key(pem: bytes) -> Any:
    return load_pem_private_key(pem, None)


def _fresh_lock(lock: Any) -> tuple[Any, tuple[()]]:
    return _LOCKS[type(lock)], ()


def _weak_values(mapping: weakref.WeakValueDictionary[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return weakref.WeakValueDictionary, (dict(mapping),)


def _backends() -> dict[tuple[str, str], BackendDict]:
    """Every backend moto has created, by the `moto.<service>.models` attribute that holds it."""
    found: dict[tuple[str, str], BackendDict] = {}
    for name, module in list(sys.modules.items()):
        if not (name.startswith("moto.") and name.endswith(".models")) or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, BackendDict) and len(value) and attr.endswith("_backends"):
                found[(name, attr)] = value
    return found


class _Pickler(cloudpickle.Pickler):
    """cloudpickle (moto keeps lambdas, a defaultdict's factory, that plain pickle refuses), with locks
    and weak mappings made anew."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) in _LOCKS:
            return _fresh_lock(obj)
        if type(obj) is weakref.WeakValueDictionary:
            return _weak_values(obj)
        if isinstance(obj, defaultdict) and type(obj) is not defaultdict:
            # A subclass's own __init__ may want arguments defaultdict's reduce does not give it.
            state = (obj.default_factory, dict(vars(obj)))
            return NEW_OBJECT, (type(obj),), state, None, iter(obj.items()), _restore_defaultdict
        if isinstance(obj, PRIVATE_KEYS):
            pem = obj.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
            return _private_key, (pem,)
        return super().reducer_override(obj)


def save(path: Path) -> None:
    """Writes every backend in use to `path` (whole or not at all)."""
    buffer = io.BytesIO()
    state = {key: dict(backend) for key, backend in _backends().items()}
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(buffer.getvalue())
    partial.replace(path)


def load(path: Path) -> int:
    """Puts the backends saved in `path` in place (the same objects moto's handlers hold); how many."""
    saved: dict[tuple[str, str], dict[str, Any]] = pickle.loads(path.read_bytes())
    for (module, attr), accounts in saved.items():
        backend: BackendDict = getattr(importlib.import_module(module), attr)
        backend.clear()
        backend.update(accounts)
    return len(saved)

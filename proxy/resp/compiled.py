"""Which RESP hot paths run compiled: the optional Cython modules beside their Python twins.

`pip install .` builds `_compiled_requests` and `_compiled_replies` from their `.pyx` sources when
Cython and a C compiler are at hand (setup.py); without them the package installs pure Python and
runs the same code paths more slowly. The pure modules are the reference: the compiled ones are
tested to behave identically (tests/resp). `REDIS_GUARD_PURE_PYTHON=1` in the environment makes
the proxy run the pure ones even when the compiled ones are installed.
"""

from __future__ import annotations

import importlib
import os

__all__ = ["PURE", "MODULES", "load", "status"]

PURE = bool(os.environ.get("REDIS_GUARD_PURE_PYTHON"))
MODULES = ("_compiled_requests", "_compiled_replies")


def load(name: str):
    """The compiled module `proxy.resp.<name>`, or None when it is not built or not wanted."""
    if PURE:
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None


def status() -> str:
    """One phrase for the start-up log: which of the hot paths run compiled."""
    if PURE:
        return "pure Python (REDIS_GUARD_PURE_PYTHON)"
    built = [name for name in MODULES if load(name) is not None]
    if len(built) == len(MODULES):
        return "compiled"
    if not built:
        return "pure Python (no compiled build)"
    return "partly compiled (" + ", ".join(name.removeprefix("_compiled_") for name in built) + ")"

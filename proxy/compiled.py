"""Which hot paths run compiled: optional Cython builds of modules whose Python twin is the reference.

`pip install .` builds them when Cython and a C compiler are at hand (setup.py); without them the
package installs pure Python and runs the same code paths more slowly. Two kinds:

* `PYX`: the `.pyx` modules, loaded by name (`load`) by the modules that use them: the RESP
  scanners, twins of Python code (`resp/reader.py`, `resp/replies.py`, `policy/classes.py`), and
  the direct writer (`upstream/connection.py`), whose pure counterpart is the transport's `write`,
  the reply queues' append and popleft (`_compiled_queues`, twins of the deque's methods) and the
  monitor's counting (`monitor/_compiled_counts`, twins in `monitor/counts.py`), and a cluster
  route's key owners (`backends/cluster/_compiled_owners`, twins in `backends/cluster/owners.py`); the
  compiled core also cimports them (their `.pxd` files), to call them in C;
* `CORE`: the session core, compiled from its own `.py` sources (with the `.pxd` beside each),
  so a built one sits next to its source and Python imports the built one first; and the
  monitor's rare paths (`monitor/keys.py`: the hot-key sample, big keys, the slow log), which
  run cold between requests, where interpreted code costs several times its warm cost.

`REDIS_GUARD_PURE_PYTHON=1` in the environment runs every pure module although built ones are
installed: `load` returns None, and `use_pure_core` (called by the package's `__init__` before
any of the core is imported) makes the import system take the core's `.py` files. It does the
same when a `PYX` module is missing (a build that failed for it alone): the compiled core calls
the reply splitter, the direct writer and the queue functions in C, so it runs only beside them. Both kinds are
tested to behave the same as their pure twins (tests/resp, and the unit suites run in both modes).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys

__all__ = ["PURE", "PYX", "CORE", "load", "use_pure_core", "status", "declared_fields"]

PURE = bool(os.environ.get("REDIS_GUARD_PURE_PYTHON"))
PYX = ("proxy.resp._compiled_requests", "proxy.resp._compiled_replies", "proxy.upstream._compiled_write",
       "proxy._compiled_queues", "proxy.monitor._compiled_counts")
PYX += ("proxy.backends.cluster._compiled_owners",)
CORE = ("proxy.pending", "proxy.monitor.live", "proxy.resp.reader", "proxy.upstream.connection",
        "proxy.session.states", "proxy.session.session", "proxy.backends.route", "proxy.backends.standalone",
        "proxy.backends.cluster.connection", "proxy.backends.cluster.scatter", "proxy.backends.cluster.route",
        "proxy.session.guard",
        "proxy.monitor.keys")
CORE += ("proxy.policy.memo",)


def load(name: str):
    """The compiled module `name` (one of PYX), or None when it is not built or not wanted."""
    if PURE:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class _PureCore:
    """A finder that gives the core's modules their `.py` source even where a build sits beside it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in CORE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.origin is None or spec.origin.endswith(".py"):
            return spec
        source = os.path.join(os.path.dirname(spec.origin), name.rsplit(".", 1)[1] + ".py")
        return importlib.util.spec_from_file_location(name, source)


def _pyx_built(name: str) -> bool:
    """Whether the extension of PYX module `name` sits in the package (found without importing it)."""
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), *name.split(".")[1:])
    return any(os.path.exists(base + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def use_pure_core() -> None:
    if (PURE or not all(_pyx_built(name) for name in PYX)) and _PureCore not in sys.meta_path:
        sys.meta_path.insert(0, _PureCore)


def _core_built(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin is not None and not spec.origin.endswith(".py")


def status() -> str:
    """One phrase for the start-up log: which of the hot paths run compiled."""
    if PURE:
        return "pure Python (REDIS_GUARD_PURE_PYTHON)"
    built = [name.rsplit(".", 1)[1].removeprefix("_compiled_") for name in PYX if load(name) is not None]
    built += [name.rsplit(".", 1)[1] for name in CORE if _core_built(name)]
    if len(built) == len(PYX) + len(CORE):
        return "compiled"
    if not built:
        return "pure Python (no compiled build)"
    return "partly compiled (" + ", ".join(built) + ")"


# A `cdef class` of a .pxd, and one of its field lines (`cdef [public|readonly] TYPE NAME[, NAME...]`).
_PXD_CLASS = re.compile(r"^cdef class (\w+)\s*(?:\([^)]*\))?\s*:\s*$")
_PXD_FIELD = re.compile(r"^\s+cdef\s+(?:public\s+|readonly\s+)?[\w.\[\]]+\s+(\w+(?:\s*,\s*\w+)*)\s*(?:#.*)?$")
_declared: dict[str, dict[str, tuple[str, ...]]] = {}


def declared_fields(module_file: str, name: str) -> tuple[str, ...]:
    """The fields that the `.pxd` beside `module_file` declares for its `cdef class name`, in
    order: the pure twin's `__slots__`, so that a compiled class's fields are listed once, in
    the .pxd, where Cython needs them typed (`__slots__ = compiled.declared_fields(__file__,
    "Session")`). A compiled module (a file other than a .py) gets (): its type's fields are the
    .pxd's C fields, made at build time, and `__slots__` in a cdef class's body is only a class
    attribute. tests/compiled/test_pxd_fields.py checks the fields against the methods."""
    if not module_file.endswith(".py"):
        return ()
    pxd = module_file[:-3] + ".pxd"
    classes = _declared.get(pxd)
    if classes is None:
        classes = {}
        current = None
        with open(pxd, encoding="utf-8") as lines:
            for line in lines:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if not line[0].isspace():
                    found = _PXD_CLASS.match(line)
                    current = found.group(1) if found else None
                    if current is not None:
                        classes[current] = ()
                    continue
                field = _PXD_FIELD.match(line)
                if current is not None and field is not None and "(" not in line:
                    classes[current] += tuple(part.strip() for part in field.group(1).split(","))
        _declared[pxd] = classes
    if name not in classes:
        raise LookupError(f"{pxd} declares no cdef class {name}")
    return classes[name]

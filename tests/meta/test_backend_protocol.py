"""The `Backend` protocol (proxy/backends/base.py) is whole: every backend class has each of its
members, and the code that works with any backend (the session, the common handlers, the server,
the monitor...) asks a backend for nothing the protocol does not declare. A backend's own modules
(its route, its handler column) may ask it for more: those members must then exist on it.

Inspect-based, no server: a class's members are its attributes along the MRO, its `__slots__`, and
the attributes its methods assign to `self`; what callers ask is every `<x>.backend.<name>` and
`backend.<name>` in the package's source."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

import proxy
from proxy.backends.base import Backend, SingleServer
from proxy.backends.cluster.backend import ClusterBackend
from proxy.backends.sentinel import SentinelBackend
from proxy.backends.standalone import StandaloneBackend

PACKAGE = Path(proxy.__file__).parent
# A backend's own modules, which know which backend they serve.
OWN = {ClusterBackend: PACKAGE / "backends" / "cluster", SentinelBackend: PACKAGE / "backends" / "sentinel.py"}
# The standalone column of handlers, served by the standalone and Sentinel backends (SingleServer).
STANDALONE_COLUMN = PACKAGE / "backends" / "handlers.py"


def declared(protocol) -> set[str]:
    """What a protocol declares: its annotated attributes and its methods (its own and its bases')."""
    names = set()
    for klass in protocol.__mro__:
        if klass in (object, typing.Protocol, typing.Generic):
            continue
        names |= set(getattr(klass, "__annotations__", {}))
        names |= {name for name, value in vars(klass).items()
                  if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    return names


def class_source(klass) -> ast.ClassDef:
    """The class's definition, read from its module's `.py` file (a compiled module's too: there
    `inspect.getsource` finds no source)."""
    path = PACKAGE.parent / (klass.__module__.replace(".", "/") + ".py")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == klass.__name__:
            return node
    raise LookupError(f"{klass.__qualname__} not found in {path}")


def provided(cls) -> set[str]:
    """What a backend class has: attributes along its MRO, slots, and what its methods assign to self."""
    names = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        names |= set(vars(klass)) | set(getattr(klass, "__slots__", ()))
        names |= {node.attr for node in ast.walk(class_source(klass))
                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id == "self"}
    return names


def asked(path: Path) -> set[str]:
    """The members `path` asks of a backend: `backend.<name>`, `<anything>.backend.<name>`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            value = node.value
            if (isinstance(value, ast.Name) and value.id == "backend") or (
                    isinstance(value, ast.Attribute) and value.attr == "backend"):
                names.add(node.attr)
    return names


def own_of(path: Path):
    for cls, place in OWN.items():
        if path == place or place in path.parents:
            return cls
    return None


BACKENDS = [StandaloneBackend, SentinelBackend, ClusterBackend]


@pytest.mark.parametrize("cls", BACKENDS, ids=lambda cls: cls.__name__)
def test_every_backend_has_every_member_of_the_protocol(cls):
    missing = sorted(declared(Backend) - provided(cls))
    assert not missing, f"{cls.__name__} lacks {missing} of proxy.backends.base.Backend"


@pytest.mark.parametrize("cls", [StandaloneBackend, SentinelBackend], ids=lambda cls: cls.__name__)
def test_single_server_backends_have_what_the_standalone_column_asks(cls):
    missing = sorted(declared(SingleServer) - provided(cls))
    assert not missing, f"{cls.__name__} lacks {missing} of proxy.backends.base.SingleServer"


def test_every_member_has_a_docstring_or_comment():
    source = inspect.getsource(Backend) + inspect.getsource(SingleServer)
    for name in declared(SingleServer):
        member = getattr(SingleServer, name, None)
        if callable(member):
            assert (member.__doc__ or "").strip(), f"Backend.{name} has no docstring"
        else:
            line = next(line for line in source.splitlines() if line.strip().startswith(f"{name}:"))
            assert "#" in line, f"Backend.{name} has no comment"


def test_callers_ask_only_what_the_protocol_declares():
    """A member used outside a backend's own modules and not declared in the protocol: declare it
    (with a docstring) and give it to every backend, or keep the call in the backend's own modules."""
    undeclared = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if own_of(path) is not None:
            continue
        protocol = SingleServer if path == STANDALONE_COLUMN else Backend
        extra = asked(path) - declared(protocol)
        if extra:
            undeclared[str(path.relative_to(PACKAGE))] = sorted(extra)
    assert not undeclared, f"members asked of a backend but not declared in the protocol: {undeclared}"


@pytest.mark.parametrize("cls", list(OWN), ids=lambda cls: cls.__name__)
def test_a_backend_own_modules_ask_only_what_it_has(cls):
    place = OWN[cls]
    paths = [place] if place.is_file() else sorted(place.rglob("*.py"))
    has = provided(cls)
    unknown = {str(path.relative_to(PACKAGE)): sorted(asked(path) - has) for path in paths}
    unknown = {path: names for path, names in unknown.items() if names}
    assert not unknown, f"members {cls.__name__}'s own modules ask of it but it lacks: {unknown}"


def test_the_scan_sees_the_callers():
    """The scan is not blind: the session asks for its routes, the server for the backend's start."""
    assert {"shared_route", "own_route", "stream_route", "handlers"} <= asked(PACKAGE / "session" / "session.py")
    assert {"start", "close", "pauses"} <= asked(PACKAGE / "server.py")
    assert "router" in asked(PACKAGE / "backends" / "cluster" / "handlers.py")


def test_the_scan_would_catch_an_undeclared_member(tmp_path):
    caller = tmp_path / "caller.py"
    caller.write_text("def f(session):\n    return session.backend.no_such_member(session)\n")
    assert asked(caller) - declared(Backend) == {"no_such_member"}



class _Bare:
    """Not a backend: a class with one member of the protocol, for the check below."""

    label = "bare"

    def shared_route(self, session):
        return None


def test_the_member_check_would_catch_a_missing_member():
    missing = declared(Backend) - provided(_Bare)
    assert "label" not in missing and "shared_route" not in missing
    assert {"own_route", "stream_route", "handlers", "pauses"} <= missing

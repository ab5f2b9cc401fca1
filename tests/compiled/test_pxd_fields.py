"""One declaration of a compiled class's fields: a `.pxd` twin of a `.py` module declares the C
fields of its `cdef class`es, the Python class takes its `__slots__` (the pure twin's) from there
(`compiled.declared_fields`) and assigns them in its methods. This test compares the methods
with the declaration: a field assigned but not declared works in the pure build only (or not in
the compiled one), one declared but never assigned is a leftover; and a class that lists its
slots by hand again (a second list) must list the same ones."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proxy import compiled

REPO = Path(__file__).resolve().parents[2]
CLASS = re.compile(r"^cdef class (\w+)\s*(?:\(([^)]*)\))?\s*:\s*$")
FIELD = re.compile(r"^\s+cdef\s+(?:public\s+|readonly\s+)?[\w.\[\]]+\s+(\w+(?:\s*,\s*\w+)*)\s*(?:#.*)?$")


def pxd_classes(text: str) -> dict[str, tuple[str | None, list[str]]]:
    """Each `cdef class` with a body in a .pxd: (its base's name or None, its fields in order)."""
    classes: dict[str, tuple[str | None, list[str]]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            found = CLASS.match(line)
            current = found.group(1) if found else None
            if current is not None:
                base = found.group(2).strip().split(".")[-1] if found.group(2) else None
                classes.setdefault(current, (base, []))
            continue
        if current is None:
            continue
        field = FIELD.match(line)
        if field is not None and "(" not in line:
            classes[current][1].extend(name.strip() for name in field.group(1).split(","))
    return classes


def py_classes(text: str) -> dict[str, tuple[list[str] | None, set[str], set[str]]]:
    """Each top-level class of a .py: (its __slots__ or None, the `self.X` it assigns in any method,
    those it assigns in __init__ and the methods __init__ calls on self)."""
    classes = {}
    for node in ast.parse(text).body:
        if not isinstance(node, ast.ClassDef):
            continue
        slots = None
        methods = {}
        for item in node.body:
            if isinstance(item, ast.Assign) and any(getattr(t, "id", None) == "__slots__" for t in item.targets):
                slots = derived_slots(item.value, node.name)
                if slots is None:
                    slots = [ast.literal_eval(element) for element in item.value.elts]
            elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[item.name] = item
        assigned_in = {name: _assigned(method) for name, method in methods.items()}
        everywhere = set().union(*assigned_in.values()) if assigned_in else set()
        init: set[str] = set()
        todo, seen = ["__init__"], set()
        while todo:  # __init__ and the methods it calls on self (Session.bind)
            name = todo.pop()
            if name in seen or name not in methods:
                continue
            seen.add(name)
            init |= assigned_in[name]
            todo.extend(_self_calls(methods[name]))
        classes[node.name] = (slots, everywhere, init)
    return classes


DERIVED = "derived"  # py_classes' slots of a class that takes them from its .pxd


def derived_slots(value, name: str):
    """DERIVED when `value` is `compiled.declared_fields(__file__, "<name>")`, else None (a list
    by hand); AssertionError when it names another class."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr == "declared_fields"):
        return None
    args = [ast.unparse(arg) for arg in value.args]
    assert args == ["__file__", repr(name)], f"{name}: __slots__ = declared_fields({', '.join(args)})"
    return DERIVED


def _assigned(function) -> set[str]:
    names = set()
    for node in ast.walk(function):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for element in ast.walk(target):
                if (isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)
                        and element.value.id == "self" and isinstance(element.ctx, ast.Store)):
                    names.add(element.attr)
    return names


def _self_calls(function) -> set[str]:
    return {node.func.attr for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"}


def twins() -> list[Path]:
    return sorted(pxd for pxd in (REPO / "proxy").rglob("*.pxd") if pxd.with_suffix(".py").exists())


def all_fields() -> dict[str, list[str]]:
    """Every compiled class's own fields, by name, across the twins (for the inherited ones)."""
    fields = {}
    for pxd in twins():
        for name, (_base, own) in pxd_classes(pxd.read_text()).items():
            fields[name] = own
    return fields


def inherited(name: str, bases: dict[str, str | None], fields: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    base = bases.get(name)
    while base is not None:
        out |= set(fields.get(base, ()))
        base = bases.get(base)
    return out


def cases():
    for pxd in twins():
        declared = pxd_classes(pxd.read_text())
        for name in declared:
            yield pytest.param(pxd, name, id=f"{pxd.relative_to(REPO)}:{name}")


def test_the_twins_are_found():
    names = {(pxd.relative_to(REPO).as_posix(), name) for pxd in twins() for name in pxd_classes(pxd.read_text())}
    assert ("proxy/session/session.pxd", "Session") in names
    assert ("proxy/upstream/connection.pxd", "UpstreamConnection") in names
    assert len(pxd_classes((REPO / "proxy/session/session.pxd").read_text())["Session"][1]) > 40


@pytest.mark.parametrize("pxd, name", list(cases()))
def test_the_pxd_declares_the_python_class_fields(pxd: Path, name: str):
    base, declared = pxd_classes(pxd.read_text())[name]
    python = py_classes(pxd.with_suffix(".py").read_text())
    assert name in python, f"{pxd.name} declares cdef class {name}, which {pxd.with_suffix('.py').name} lacks"
    slots, everywhere, init = python[name]
    fields = all_fields()
    bases = {}
    for twin in twins():
        for class_name, (class_base, _own) in pxd_classes(twin.read_text()).items():
            bases[class_name] = class_base
    from_bases = inherited(name, bases, fields)
    assert len(set(declared)) == len(declared), f"{name}: a field declared twice in {pxd.name}"
    problems = []
    if slots is not None and slots != DERIVED:
        only_pxd = sorted(set(declared) - set(slots))
        only_slots = sorted(set(slots) - set(declared))
        if only_pxd:
            problems.append(f"in {pxd.name} but not in __slots__: {only_pxd}")
        if only_slots:
            problems.append(f"in __slots__ but not in {pxd.name}: {only_slots}")
    undeclared = sorted(everywhere - set(declared) - from_bases)
    if undeclared:
        problems.append(f"assigned in {name}'s methods, declared neither in {pxd.name} nor in a base: {undeclared}")
    never = sorted(set(declared) - everywhere)
    if never:  # (a field left over, or set only from outside the class: give it its value in __init__)
        problems.append(f"in {pxd.name} but assigned in none of {name}'s methods: {never}")
    assert not problems, f"{pxd.relative_to(REPO)} cdef class {name}:\n  " + "\n  ".join(problems)


def test_the_session_assigns_every_field_in_init():
    """Session: every field has its value from __init__ (or `bind`, which __init__ calls), so
    that a field added to the .pxd is not left at the compiled build's None/0."""
    declared = pxd_classes((REPO / "proxy/session/session.pxd").read_text())["Session"][1]
    _slots, _everywhere, init = py_classes((REPO / "proxy/session/session.py").read_text())["Session"]
    assert sorted(set(declared) - init) == []
    assert sorted(init - set(declared)) == []


@pytest.mark.parametrize("pxd, name", list(cases()))
def test_the_pure_twin_takes_its_slots_from_the_pxd(pxd: Path, name: str):
    """Each compiled class lists its fields once, in the .pxd: the Python class's `__slots__` is
    `compiled.declared_fields(__file__, name)`, which reads the same fields as this test's parser
    (the pure build's slots; the compiled one's fields are the .pxd's C ones)."""
    slots = py_classes(pxd.with_suffix(".py").read_text())[name][0]
    assert slots == DERIVED, f"{pxd.with_suffix('.py').name}: {name} lists its __slots__ by hand: " \
        f"__slots__ = compiled.declared_fields(__file__, {name!r})"
    declared = tuple(pxd_classes(pxd.read_text())[name][1])
    assert compiled.declared_fields(str(pxd.with_suffix(".py")), name) == declared
    assert compiled.declared_fields(str(pxd.with_suffix(".cpython-311-x86_64-linux-gnu.so")), name) == ()


def test_the_pure_classes_have_the_declared_slots():
    """Imported pure (in a fresh interpreter, whatever this run's build), every twin class's
    __slots__ are its .pxd's fields, and an attribute that is not one is refused."""
    code = textwrap.dedent("""
        import importlib, json, sys
        from proxy import compiled
        out = {}
        for module_name, class_name in json.loads(sys.argv[1]):
            klass = getattr(importlib.import_module(module_name), class_name)
            assert importlib.import_module(module_name).__file__.endswith(".py"), module_name
            try:
                object.__new__(klass).not_a_field = 1
                refused = False
            except AttributeError:
                refused = True
            out[class_name] = [list(klass.__slots__), refused]
        print(json.dumps(out))
    """)
    wanted = {}
    for pxd in twins():
        module = ".".join(pxd.with_suffix("").relative_to(REPO).parts)
        for name, (_base, fields) in pxd_classes(pxd.read_text()).items():
            wanted[(module, name)] = fields
    out = subprocess.run([sys.executable, "-c", code, json.dumps(list(wanted))], cwd=REPO, capture_output=True,
                         text=True, check=True, env={**os.environ, "REDIS_GUARD_PURE_PYTHON": "1"}).stdout
    found = json.loads(out)
    assert found == {name: [fields, True] for (_module, name), fields in wanted.items()}


def test_the_parser_sees_a_difference():
    pxd = "cdef class A(B):\n    cdef public object x, y\n    cdef int z\n    cpdef f(self)\n"
    assert pxd_classes(pxd) == {"A": ("B", ["x", "y", "z"])}
    py = ("class A(B):\n    __slots__ = ('x', 'y')\n    def __init__(self):\n        self.x = 1\n"
          "        self.set()\n    def set(self):\n        self.y = 2\n    def other(self):\n        self.w = 3\n")
    slots, everywhere, init = py_classes(py)["A"]
    assert slots == ["x", "y"] and everywhere == {"x", "y", "w"} and init == {"x", "y"}

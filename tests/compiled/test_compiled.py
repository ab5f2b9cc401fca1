"""Which modules run: the compiled ones where built (required where CI says so), the pure ones
with REDIS_GUARD_PURE_PYTHON=1 even when built; and a rule the compiled session core needs its
subclasses to keep."""

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy import compiled
from proxy.resp import reader, replies

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


def test_the_compiled_modules_are_used_where_built():
    built = [name for name in compiled.PYX if compiled.load(name) is not None]
    core = {name: not importlib.import_module(name).__file__.endswith(".py") for name in compiled.CORE}
    if os.environ.get("REDIS_GUARD_EXPECT_COMPILED"):
        assert compiled.status() == "compiled" and all(core.values())
    assert (reader._split is not None) == ("proxy.resp._compiled_requests" in built)
    assert (replies.ReplySplitter is not replies.PureReplySplitter) == ("proxy.resp._compiled_replies" in built)
    from proxy.backends.cluster import owners
    assert (owners.key_owners is not owners.pure_key_owners) == ("proxy.backends.cluster._compiled_owners" in built)


def test_pure_python_on_request():
    code = ("import sys; from proxy import compiled; from proxy.resp import replies; "
            "from proxy.resp import reader; from proxy.resp.reader import RequestReader; import importlib; [importlib.import_module(name) for name in compiled.CORE]; "
            "print(compiled.status(), reader._split is None, replies.ReplySplitter is replies.PureReplySplitter, "
            "RequestReader.feed_read is RequestReader._feed_read, "
            "all(sys.modules[name].__file__.endswith('.py') for name in compiled.CORE))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "REDIS_GUARD_PURE_PYTHON": "1"}).stdout
    assert out.strip() == "pure Python (REDIS_GUARD_PURE_PYTHON) True True True True"


@pytest.mark.parametrize("name", [*compiled.PYX, *compiled.CORE])
def test_each_module_imports_first(name):
    """Each module, compiled or not, imported first in a fresh interpreter: a compiled module that
    imports its pure twin midway (replies.py takes the compiled functions from a module only that
    far initialised) must define what the twin takes before that import."""
    code = f"import importlib; importlib.import_module({name!r}); from proxy.resp import reader, replies"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)


def test_no_subclass_lists_a_slot_of_its_bases_again():
    """Compiled, a base's field is a C field: a subclass that lists it in `__slots__` again gets
    a second, empty slot that hides it from Python code while compiled code uses the first."""
    classes = {}  # name -> (base names, own slots), over the whole package
    for path in (REPO / "proxy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                slots = next((stmt.value for stmt in node.body if isinstance(stmt, ast.Assign)
                              and any(getattr(t, "id", None) == "__slots__" for t in stmt.targets)), None)
                if isinstance(slots, ast.Call):  # compiled.declared_fields(__file__, name): the .pxd's
                    names = set(compiled.declared_fields(str(path), node.name))
                else:
                    names = set(ast.literal_eval(slots)) if slots is not None else set()
                bases = [base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases]
                classes.setdefault(node.name, (bases, names))

    def inherited(name, seen=()):
        bases, _ = classes.get(name, ((), set()))
        found = set()
        for base in bases:
            if base in classes and base not in seen:
                found |= classes[base][1] | inherited(base, (*seen, name))
        return found

    again = {name: sorted(slots & inherited(name)) for name, (_, slots) in classes.items() if slots & inherited(name)}
    assert again == {}


def test_the_compiled_functions_refuse_none_as_their_pure_twins_do():
    """A typed `bytes`/`list` argument of a Cython function takes None unless it says `not None`:
    each would then read a None object's memory as a buffer. Refused with TypeError, as the
    pure twins refuse it."""
    import pytest

    requests = compiled.load("proxy.resp._compiled_requests")
    compiled_replies = compiled.load("proxy.resp._compiled_replies")
    compiled_owners = compiled.load("proxy.backends.cluster._compiled_owners")
    if requests is None or compiled_replies is None or compiled_owners is None:
        pytest.skip("the compiled RESP modules are not built")
    from proxy.backends.cluster import owners
    from proxy.policy import classes

    calls = [
        (requests.request_ends, reader.request_ends, (None,)),
        (requests.pick_requests, reader.pure_pick_requests, (None, None, 0, b"", 1)),
        (compiled_owners.key_owners, owners.pure_key_owners, (None, 0, 0, frozenset(), bytearray(16384))),
        (compiled_owners.key_owners, owners.pure_key_owners, ([], 0, 0, frozenset(), None)),
        (compiled_owners.key_owner, owners.pure_key_owner, (None, 0, frozenset(), bytearray(16384))),
        (compiled_owners.key_owner, owners.pure_key_owner, ([[b"GET", b"k"]], 0, frozenset(), None)),
        (requests.key_class, bytes.translate, (None, bytes(range(256)))),
        (requests.same_class, classes.pure_same_class, (None, bytes(range(256)), b"k")),
        (compiled_replies.interleave, replies.pure_interleave, (None, b"")),
    ]
    for built, pure, args in calls:
        with pytest.raises(TypeError):
            pure(*args)
        with pytest.raises(TypeError):
            built(*args)
    with pytest.raises(TypeError):  # (no pure twin: the Python reader parses with hiredis)
        requests.split_requests(b"*1\r\n$4\r\nPING\r\n", 8, 1000, None)
    assert classes.key_class is requests.key_class or compiled.PURE
    assert classes.same_class is requests.same_class or compiled.PURE


def test_the_core_runs_pure_where_a_compiled_module_it_calls_is_missing(tmp_path):
    """The compiled core calls the RESP splitter, the direct writer and the queue functions of
    the PYX modules in C (cimported): a build that made the core but not one of those (its own
    failure) must run the pure core, not fail to import. A copy of the package without one."""
    import pytest

    if not all(compiled._pyx_built(name) for name in compiled.PYX) or compiled.PURE:
        pytest.skip("the compiled modules are not built")
    import shutil

    copy = tmp_path / "proxy"
    shutil.copytree(REPO / "proxy", copy, ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    for missing in compiled.PYX:
        built = [path for path in copy.rglob("*.so") if path.name.startswith(missing.rsplit(".", 1)[1] + ".")]
        assert len(built) == 1, missing
        hidden = built[0].with_name(built[0].name + ".hidden")
        built[0].rename(hidden)
        code = ("import sys; from proxy import compiled; import importlib; "
                "[importlib.import_module(name) for name in compiled.CORE]; "
                "from proxy.session.session import Session; "
                "print(compiled.status().startswith('partly compiled'), "
                "all(sys.modules[name].__file__.endswith('.py') for name in compiled.CORE))")
        env = {key: value for key, value in os.environ.items() if key != "REDIS_GUARD_PURE_PYTHON"}
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                             env={**env, "PYTHONPATH": str(tmp_path)})
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True", "True"], missing
        hidden.rename(built[0])

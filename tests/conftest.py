"""Fixtures shared by all tests: real redis-server and proxy processes on free ports; and the
markers every test gets from what it starts (see `kinds_of`):

- `unit`: starts no process (no redis-server, no proxy);
- `server`: starts a redis-server or a proxy (a fixture of its, or its own body, does);
- `cluster`: a Redis Cluster (also `server`); `sentinel`: a Sentinel group (also `server`);
- `slow`: measured among the slowest on CI (tests/slow.txt: `pytest -m "not slow"` for a quick pass);
- `serial`: measures time or CPU, so it runs alone after the parallel pass (declared by the test);
- `compiled_twin`: tests code that has a Cython twin, run a second time with the pure modules by
  `./dev test` (declared by the module, or by its package's conftest).

`./dev test` runs the suite in pytest-xdist workers (the test extra holds pytest-xdist): most tests
wait on servers, sleeps and sockets, so on CI's two cores several workers finish the suite in a
third of the time of one process. What makes that reliable: each worker picks ports from its own
slice (tests/servers.py `free_port`, tests/cluster/nodes.py `pick_cluster_ports`), session- and
module-scoped fixtures are per worker, and `serial` tests run outside the workers.
docs/notes/ci.md has the measurements.
"""

import importlib.util
import os
import types

import pytest

from proxy import compiled
from tests import servers
from tests.servers import SERVER_VARIABLE, ProxyProcess, RedisServer, redis_server_binary, redis_server_version

MARKERS = {
    "unit": "starts no process (no redis-server, no proxy)",
    "server": "starts a redis-server or a proxy process",
    "cluster": "starts a Redis Cluster",
    "sentinel": "starts a Sentinel group",
    "slow": "among the slowest tests on CI (tests/slow.txt)",
    "serial": "measures time or CPU: runs alone, after the parallel pass",
    "compiled_twin": "tests code with a compiled twin: run again with REDIS_GUARD_PURE_PYTHON=1",
}

# The names whose use starts a process of each kind; a Cluster or a Sentinel group is also a server.
STARTERS = {
    "RedisServer": {"server"}, "ProxyProcess": {"server"},
    "RedisCluster": {"server", "cluster"}, "SentinelGroup": {"server", "sentinel"},
}
SLOW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow.txt")


def _names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _functions(obj) -> list:
    """The functions of the tests' own code behind `obj` (a function, or a class's methods)."""
    if isinstance(obj, type):
        return [f for f in vars(obj).values() if isinstance(f, types.FunctionType)]
    obj = getattr(obj, "__func__", obj)
    return [obj] if isinstance(obj, types.FunctionType) else []


def kinds_of(function, seen: dict) -> set[str]:
    """The kinds of process the code of `function` starts: the starters' names it uses, directly
    or through the functions and classes of tests/ that it names (followed through its globals).
    `seen` memoizes by code object (and stops cycles)."""
    code = function.__code__
    if code not in seen:
        seen[code] = found = set()
        for name in _names(code):
            found |= STARTERS.get(name, set())
            target = function.__globals__.get(name)
            if getattr(target, "__module__", None) and target.__module__.startswith("tests."):
                for called in _functions(target):
                    found |= kinds_of(called, seen)
    return seen[code]


def _share_ports_with_other_passes():
    """./dev test runs passes side by side (the parallel pass, the pure-Python pass, the Redis 8.x
    leg): REDIS_GUARD_TEST_SLOTS="first/total" numbers this pass's workers on from `first` among
    `total`, so that tests/servers.worker_slice and tests/cluster/nodes.py give every worker of
    every pass its own ports. Without it, gw0 of two passes would walk the same slice, and a port
    checked free by one could be bound by the other before its server started."""
    slots = os.environ.get("REDIS_GUARD_TEST_SLOTS")
    if not slots:
        return
    first, total = (int(n) for n in slots.split("/"))
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0
    os.environ["PYTEST_XDIST_WORKER"] = f"gw{first + index}"
    os.environ["PYTEST_XDIST_WORKER_COUNT"] = str(total)


_share_ports_with_other_passes()


def _slow_tests() -> set[str]:
    with open(SLOW, encoding="utf-8") as listed:
        return {line.split("#")[0].strip() for line in listed} - {""}


def pytest_configure(config):
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    _check_build()


def pytest_collection_modifyitems(config, items):
    seen: dict = {}
    slow = _slow_tests()
    for item in items:
        functions = _functions(getattr(item, "function", None))
        for defs in item._fixtureinfo.name2fixturedefs.values():
            for fixturedef in defs:
                functions += _functions(fixturedef.func)
        kinds = set().union(*(kinds_of(function, seen) for function in functions)) or {"unit"}
        for kind in sorted(kinds):
            item.add_marker(kind)
        if item.nodeid.split("[")[0] in slow:
            item.add_marker("slow")
    # The slowest first: the workers start them early instead of ending the run on one of them.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _unit_starts_nothing(request):
    """A test marked `unit` that starts a process after all (in a way `kinds_of` cannot see) errs:
    mark it `server` by hand (pytestmark = pytest.mark.server)."""
    servers.STARTED.clear()
    yield
    if servers.STARTED and request.node.get_closest_marker("unit"):
        pytest.fail(f"marked unit but started {', '.join(sorted(set(servers.STARTED)))}: mark it server")


def _check_build():
    """An in-place build of the session core older than its source would be tested instead of
    it (the build shadows the .py): stop at once and say how to rebuild."""
    if compiled.PURE:
        return
    for name in compiled.CORE:
        built = importlib.util.find_spec(name).origin
        if built.endswith(".py"):
            continue
        source = os.path.join(os.path.dirname(built), name.rsplit(".", 1)[1])
        newest = max(os.path.getmtime(source + suffix) for suffix in (".py", ".pxd") if os.path.exists(source + suffix))
        if newest > os.path.getmtime(built):
            pytest.exit(f"{built} is older than its source: rebuild it (./dev test does; or pip install -e .), "
                        "or test the pure modules with REDIS_GUARD_PURE_PYTHON=1", returncode=4)


def pytest_report_header(config):
    """Which redis-server the fixtures start (REDIS_GUARD_TEST_REDIS_SERVER chooses another)."""
    version = redis_server_version()
    shown = ".".join(map(str, version)) if version else "none"
    return f"redis-server: {redis_server_binary()} ({shown}; {SERVER_VARIABLE} names another)"


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def proxy(redis_server):
    process = ProxyProcess(redis_server.url)
    yield process
    process.stop()


@pytest.fixture
def own_redis():
    """A redis-server for one test (one that changes the server, or must start clean)."""
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture
def own_proxy(own_redis):
    """The passthrough proxy in front of `own_redis`."""
    process = ProxyProcess(own_redis.url)
    yield process
    process.stop()


@pytest.fixture
def direct(redis_server):
    import redis

    client = redis.Redis(port=redis_server.port)
    yield client
    client.close()


@pytest.fixture
def via_proxy(proxy):
    import redis

    client = redis.Redis(port=proxy.port)
    yield client
    client.close()

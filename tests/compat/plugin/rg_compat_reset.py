"""pytest plugin loaded into redis-py's suite run (-p rg_compat_reset): after each test, undo the
server-wide state a test can leave behind when its own teardown fails (through the proxy, a
teardown's AUTH can fail), so one failure does not cascade into every later test.

It holds a direct connection to the redis-server (to each node of a cluster behind the proxy) opened before any test, so it stays
authenticated when a test sets `requirepass`. Used identically in direct and proxied runs.
Every clean-up is appended to $RG_COMPAT_CLEANUP_LOG as "<test id>\t<what>".
"""

import os

import pytest
import redis

_admin = None


def _connect():
    """The admin connections, one per URL of $RG_COMPAT_ADMIN_URL (comma-separated: every node of a
    cluster behind the proxy)."""
    global _admin
    urls = [u for u in os.environ.get("RG_COMPAT_ADMIN_URL", "").split(",") if u]
    if urls and _admin is None:
        _admin = [redis.Redis.from_url(url, protocol=2, socket_timeout=5, single_connection_client=True)
                  for url in urls]
        for admin in _admin:
            admin.ping()
    return _admin


def pytest_sessionstart(session):
    _connect()


def _cleanup(nodeid):
    admins = _connect()
    if not admins:
        return
    done = []
    for admin in admins:
        password = admin.config_get("requirepass").get("requirepass")
        if password:
            admin.config_set("requirepass", "")
            done.append("requirepass")
        users = [u.decode() if isinstance(u, bytes) else u for u in admin.acl_users()]
        for user in users:
            if user != "default":
                admin.acl_deluser(user)
                done.append(f"acl user {user}")
    if done:
        path = os.environ.get("RG_COMPAT_CLEANUP_LOG")
        if path:
            with open(path, "a") as log:
                log.write(f"{nodeid}\t{', '.join(done)}\n")


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    global _admin
    try:
        _cleanup(item.nodeid)
    except redis.RedisError:
        # our connection was killed by a test (CLIENT KILL ...): a new one is authenticated
        # only if the server has no password now, which is the state worth restoring anyway
        _admin = None
        try:
            _cleanup(item.nodeid)
        except redis.RedisError:
            _admin = None

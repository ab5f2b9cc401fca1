"""/ready's decision, and its PING probe against a real redis-server."""

import pytest

from proxy.config import Address, Upstream
from proxy.monitor.ready import Readiness, ping
from tests.servers import RedisServer, free_port

UP = {"started": True, "draining": False, "policies": [{"name": "p"}]}


@pytest.mark.parametrize("state, policy_required, probe, ready, reason", [
    (UP, True, None, True, "ready"),
    ({**UP, "draining": True}, True, None, False, "draining"),
    ({**UP, "started": False}, True, None, False, "starting"),
    ({**UP, "policies": []}, True, None, False, "no policy loaded"),
    ({**UP, "policies": []}, False, None, True, "ready"),
    (UP, True, "Connection refused", False, "upstream unreachable"),
])
def test_readiness(state, policy_required, probe, ready, reason):
    readiness = Readiness([Upstream(Address("127.0.0.1", 1))], policy_required, probe=lambda upstream: probe)
    ok, why = readiness.check(state)
    assert ok is ready and reason in why


def test_a_cluster_is_ready_when_any_seed_answers():
    answers = {1: "Connection refused", 2: None}
    readiness = Readiness([Upstream(Address("h", port)) for port in (1, 2)], False,
                          probe=lambda upstream: answers[upstream.address.port])
    assert readiness.check(UP) == (True, "ready")


def test_ping_a_real_server_with_and_without_its_password():
    server = RedisServer(None, "--requirepass", "s3cret")
    try:
        address = Address("127.0.0.1", server.port)
        assert ping(Upstream(address, password="s3cret", db=2)) is None
        assert "NOAUTH" in ping(Upstream(address)) or "WRONGPASS" in ping(Upstream(address, password="bad"))
        assert "WRONGPASS" in ping(Upstream(address, password="bad"))
    finally:
        server.close()
    assert ping(Upstream(Address("127.0.0.1", free_port()))) is not None


def test_users_that_do_not_log_in_are_applied_again_or_named():
    """The probe logs in as the policy's users (upstream_acl.missing): missing ones are applied
    again when it may (`reapply`), else /ready says 503 naming them."""
    upstream = [Upstream(Address("127.0.0.1", 1))]
    gone = {"names": ["redis-guard:p"]}
    applied = []

    def reapply(users, up):
        applied.append(1)
        gone["names"] = []

    readiness = Readiness(upstream, False, probe=lambda up: None, users=object(),
                          missing=lambda users, up: list(gone["names"]), reapply=reapply)
    assert readiness.check(UP) == (True, "ready") and applied == [1]
    gone["names"] = ["redis-guard:p"]
    readiness = Readiness(upstream, False, probe=lambda up: None, users=object(),
                          missing=lambda users, up: list(gone["names"]))
    ok, why = readiness.check(UP)
    assert not ok and "redis-guard:p" in why and "do not log in" in why


def test_the_upstream_probed_is_located_each_time():
    """A Sentinel's master: `locate` names the upstream to probe now; none confirmed is a 503."""
    probed = []
    where = {"now": [Upstream(Address("127.0.0.1", 1))]}

    def locate():
        if where["now"] is None:
            raise ConnectionError("no master 'm' confirmed")
        return where["now"]

    clock = {"t": 0.0}
    readiness = Readiness([Upstream(Address("127.0.0.1", 9))], False, probe=lambda up: probed.append(up) or None,
                          clock=lambda: clock["t"], locate=locate)
    assert readiness.check(UP) == (True, "ready") and probed[-1].address.port == 1
    where["now"] = [Upstream(Address("127.0.0.1", 2))]
    clock["t"] += 2
    assert readiness.check(UP) == (True, "ready") and probed[-1].address.port == 2
    where["now"] = None
    clock["t"] += 2
    ok, why = readiness.check(UP)
    assert not ok and "no master 'm' confirmed" in why


def test_users_of_a_renamed_policy_are_not_probed_nor_applied():
    """A reload renamed the policy: the probe takes the current policy's users (or none)."""
    class Users:
        def __init__(self, name):
            self.policy_name = name

    applied, asked = [], []
    current = {"users": Users("new")}
    readiness = Readiness([Upstream(Address("127.0.0.1", 1))], False, probe=lambda up: None, users=Users("old"),
                          missing=lambda users, up: asked.append(users.policy_name) or ["x"],
                          reapply=lambda users, up: applied.append(users.policy_name),
                          current_users=lambda names: current["users"])
    merged = dict(UP, policies=[{"name": "new"}])
    readiness.check(merged)
    assert set(applied) == {"new"} and set(asked) == {"new"}
    readiness = Readiness([Upstream(Address("127.0.0.1", 1))], False, probe=lambda up: None, users=Users("old"),
                          missing=lambda users, up: ["x"], reapply=lambda users, up: applied.append("again"),
                          current_users=lambda names: None)
    assert readiness.check(merged) == (True, "ready") and "again" not in applied  # unknown: not probed


def test_users_are_looked_for_again_when_the_policy_names_change():
    class Users:
        def __init__(self, name):
            self.policy_name = name

    asked = []
    answers = {"b": None, "c": Users("c")}
    readiness = Readiness([], False, users=Users("a"), missing=lambda users, up: [],
                          current_users=lambda names: asked.append(set(names)) or answers[min(names)])
    readiness.follow_reloads({"b"})
    readiness.follow_reloads({"b"})
    assert readiness.users is None and asked == [{"b"}]  # unknown: not asked again for the same names
    readiness.follow_reloads({"c"})
    assert readiness.users.policy_name == "c" and asked == [{"b"}, {"c"}]
    readiness = Readiness([], False, current_users=lambda names: asked.append(names))
    readiness.follow_reloads({"d"})
    assert readiness.users is None and len(asked) == 2  # no users to begin with: none looked for

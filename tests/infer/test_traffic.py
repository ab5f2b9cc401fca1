"""Learning from traffic: the Learner's record (sans-IO, table-driven), its bounds, the record
read back into the draft, and `serve --learn FILE` end to end through a real proxy and Redis."""

from __future__ import annotations

import json

import pytest

from proxy.cli import main
from proxy.commands.table import CommandTable
from proxy.infer import traffic
from proxy.infer.draft import build, render
from proxy.infer.model import KeyspaceModel
from proxy.infer.traffic import Learned, Learner, Observers, load, merge, observing
from proxy.policy.loader import load_policy_text
from tests.servers import ProxyProcess

TABLE = CommandTable.from_snapshot()
PEER = ("10.1.2.3", 50000)


def _learn(commands, app=None, peer=PEER, clock=None):
    learner = Learner(TABLE, clock=clock or (lambda: 1000.0))
    for command in commands:
        args = [word.encode() for word in command.split()]
        learner.observe([args], 0, None, app, peer)
    return learner


CASES = [
    # (commands, shape, what the shape's record says)
    (["SET user:1 v EX 60", "SET user:2 v EX 120"], "user:{id}", {"ttl_writes": 2, "ttl_min": 60, "ttl_max": 120}),
    (["HSET cart:7 f v", "EXPIRE cart:7 300"], "cart:{id}", {"ttl_writes": 1, "plain_writes": 1}),
    (["get Session:5d41402abc4b2a76b9719d911017c592"], "Session:{hash}", {"count": 1, "commands": {"get": 1}}),
    (["PSETEX t:1 1500 v"], "t:{id}", {"ttl_min": 1, "ttl_max": 1}),
    (["SET k:1 v EXAT 1060"], "k:{id}", {"ttl_min": 60}),  # absolute: from the clock (1000)
]


@pytest.mark.parametrize("commands, shape, expected", CASES)
def test_shapes_and_ttls(commands, shape, expected):
    record = _learn(commands).snapshot()
    found = record["clients"]["10.1.2.3"]["shapes"][shape]
    for field, value in expected.items():
        assert found[field] == value, (field, found)


def test_per_application_commands_and_scripts():
    learner = _learn(["GET a:1", "EVAL return_1 0", "EVAL return_1 0", "EVALSHA abc 0", "CLIENT SETNAME x"],
                     app="checkout")
    client = learner.snapshot()["clients"]["checkout"]
    assert client["commands"] == {"eval": 2, "get": 1, "evalsha": 1, "client": 1}
    assert client["subcommands"] == {"client|setname": 1}
    scripts = client["scripts"]
    assert {s["kind"] for s in scripts.values()} == {"eval", "evalsha"}
    assert max(s["count"] for s in scripts.values()) == 2


def test_bounded(monkeypatch):
    monkeypatch.setattr(traffic, "SAMPLE_AFTER", 10**9)  # every call recorded
    learner = Learner(TABLE)
    for n in range(traffic.MAX_CLIENTS + 10):
        learner.observe([[b"GET", b"k:1"]], 0, None, None, (f"10.0.{n // 250}.{n % 250}", 1))
    record = learner.snapshot()
    assert len(record["clients"]) == traffic.MAX_CLIENTS + 1  # and "(other)"
    assert record["dropped"]["clients"] == 10  # commands of the clients past the bound
    assert record["clients"]["(other)"]["commands"] == {"get": 10}
    learner = Learner(TABLE)
    for n in range(traffic.MAX_SHAPES + 10):
        learner.observe([[b"GET", f"w{n}x:1".encode()]], 0, None, "app", PEER)
    record = learner.snapshot()
    assert len(record["clients"]["app"]["shapes"]) == traffic.MAX_SHAPES + 1
    assert record["dropped"]["shapes"] == 10


def test_never_raises(caplog):
    learner = Learner(TABLE)
    learner.observe([[b"GET", b"k"]], 0, None, None, None)  # the first command, without a peer
    learner.observe([[]], 0, None, None, PEER)  # an empty command: logged, not raised
    learner.observe([[b"GET", b"k"]], 0, None, None, None)  # no peer address
    learner.observe([[b"GET", b"k"]], 0, None, None, "")  # a Unix socket's
    learner.observe([[b"NOSUCHCOMMAND", b"x"]], 0, None, None, PEER)
    clients = learner.snapshot()["clients"]
    assert clients["10.1.2.3"]["commands"] == {"nosuchcommand": 1}
    assert clients["(local)"]["commands"] == {"get": 3}
    assert caplog.text.count("learn: failed") == 1  # the empty command only


def test_hot_commands_sampled_all_counted():
    learner = Learner(TABLE)
    for n in range(1000):
        learner.observe([[b"SET", f"s:{n}".encode(), b"v", b"EX", b"60"]], 0, None, "app", PEER)
    client = learner.snapshot()["clients"]["app"]
    assert client["commands"] == {"set": 1000}
    recorded = client["shapes"]["s:{id}"]["count"]
    assert traffic.SAMPLE_AFTER < recorded < traffic.SAMPLE_AFTER + 1000 // (traffic.SAMPLE_MASK + 1) + 2
    assert client["shapes"]["s:{id}"]["ttl_max"] == 60


def test_observing_keeps_the_shadow_policy():
    class Shadow:
        name = "candidate"
        seen = 0

        def observe(self, *args):
            Shadow.seen += 1

    learner = Learner(TABLE)
    assert observing(None, None) is None
    assert observing(Shadow, None) is Shadow
    assert observing(None, learner) is learner
    both = observing(Shadow(), learner)
    assert isinstance(both, Observers) and both.name == "candidate"
    both.observe([[b"GET", b"a:1"]], 0, None, None, PEER)
    assert Shadow.seen == 1 and learner.snapshot()["commands"] == 1


def test_merge_of_worker_records():
    a = _learn(["SET u:1 v EX 10"]).snapshot()
    b = _learn(["SET u:2 v EX 99", "GET u:3"]).snapshot()
    merged = merge([a, b])["clients"]["10.1.2.3"]
    assert merged["commands"] == {"set": 2, "get": 1}
    assert merged["shapes"]["u:{id}"]["ttl_min"] == 10 and merged["shapes"]["u:{id}"]["ttl_max"] == 99


def test_draft_from_traffic():
    model = KeyspaceModel(":")
    for n in range(50):
        model.add(f"user:{n}".encode(), "hash", 1_000_000, 3)
    record = _learn(["HSET user:1 f v", "EXPIRE user:1 86400", "HGETALL user:2", "SMEMBERS tags:all",
                     "EVAL return_1 0"]).snapshot()
    draft = build(model, traffic=Learned(record, TABLE))
    text = render(draft)
    policy = load_policy_text(text)
    assert policy.rule("C3") is not None and "HGETALL" in text and "SMEMBERS" in text
    assert "@pubsub" in text and "@stream" in text  # never used: denied
    assert "@scripting" not in text.split("C2:")[1].split("\n")[0]  # EVAL was used
    assert "tags:all" in text  # used by traffic, no pattern: to review
    assert "script EVAL sha1" in text
    pattern = next(p for p in draft.rules if p.text == "user:{id}")
    assert pattern.max_ttl == 86400 and pattern.traffic[1] == 1


def test_serve_learn_then_infer(own_redis, tmp_path, capsys):
    import redis

    record = tmp_path / "learned.json"
    proxy = ProxyProcess(own_redis.url, ProxyProcess.__init__.__defaults__[0], "--learn", str(record))
    try:
        client = redis.Redis(port=proxy.port)
        for n in range(20):
            client.set(f"session:{n}", "v", ex=600)
            client.hset(f"user:{n}", "f", "v")
        client.hgetall("user:1")
        client.close()
    finally:
        assert proxy.stop() == 0
    assert "learning:" in proxy.log
    data = json.loads(record.read_text())
    client_record = next(iter(data["clients"].values()))
    assert client_record["commands"]["set"] == 20
    assert client_record["shapes"]["session:{id}"]["ttl_max"] == 600
    draft = tmp_path / "draft.yaml"
    assert main(["policy", "infer", "--upstream", own_redis.url, "--from-traffic", str(record),
                 "-o", str(draft), "--quiet"]) == 0
    text = draft.read_text()
    assert "HGETALL: {action: warn}" in text and "# traffic: 20 commands" in text
    assert main(["policy", "check", str(draft)]) == 0
    assert main(["policy", "infer", "--upstream", own_redis.url, "--from-traffic", str(tmp_path / "nope.json"),
                 "--quiet"]) == 2
    assert "cannot read the learn file" in capsys.readouterr().err


def test_load_refuses_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"version": 99}')
    with pytest.raises(traffic.TrafficError):
        load(str(path))


def test_learn_setting_relative_to_the_configuration(tmp_path):
    from proxy.config import load_config

    path = tmp_path / "proxy.yaml"
    path.write_text("upstream: redis://127.0.0.1:6390\nlearn: traffic/learned.json\n")
    assert load_config(str(path)).learn == str(tmp_path / "traffic" / "learned.json")
    assert load_config(None).learn is None


def test_shadow_reload_keeps_the_learner(tmp_path):
    from proxy.policy.watcher import PolicyWatcher

    class Proxy:
        shadow = None

    proxy = Proxy()
    proxy.learner = Learner(TABLE)
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("name: candidate\nrules:\n  K4: {max_length: 10}\n")
    PolicyWatcher(proxy, str(candidate), TABLE, shadow=True).reload("test")
    assert isinstance(proxy.shadow, Observers) and proxy.shadow.learner is proxy.learner
    assert proxy.shadow.name == "candidate"

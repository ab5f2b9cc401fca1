"""Snapshots of several workers merged and exported in the Prometheus text format."""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.commands.table import CommandTable
from proxy.monitor import exporter, live, snapshot

live.setup(CommandTable.from_snapshot())


def worker(pid: int, gets: int, errors: int, clients: int, up: bool) -> dict:
    snap = snapshot.build()
    durations = [0] * (len(live.BOUNDS) + 1) + [0.0]
    durations[2] = gets
    durations[-1] = gets * 0.0004
    snap.update(pid=pid, started=True, names={"get": gets, "unknown": 1}, errors={"get": errors}, rejected={},
                durations={"get": durations}, clients=clients, upstream_connections={"shared": 1, "own": 0},
                upstreams={"127.0.0.1:6390": {"up": up, "failed": 2}},
                policy={"name": "strict", "mode": "enforce", "sha": "abc123", "loaded_at": 1700000000.0 + pid},
                registry=[["redis_guard_policy_findings", "counter", "findings",
                           [["redis_guard_policy_findings_total",
                             {"rule": "K2", "mode": "enforce", "outcome": "rejected", "policy": "strict", "app": ""},
                             3.0]]]],
                hot={"user:1": [5, 0]}, counts={"hot_samples": 10, "big_requests": 0, "big_replies": 0})
    return snap


def scrape(merged: dict) -> dict:
    registry = CollectorRegistry()
    registry.register(exporter.Collector(lambda: merged))
    samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_two_workers_are_added_up():
    samples = scrape(snapshot.merge([worker(1, 100, 3, 2, True), worker(2, 50, 0, 1, False)]))
    assert samples[("redis_guard_commands_total", (("command", "get"), ("result", "ok")))] == 147
    assert samples[("redis_guard_commands_total", (("command", "get"), ("result", "error")))] == 3
    assert samples[("redis_guard_commands_total", (("command", "unknown"), ("result", "ok")))] == 2
    assert samples[("redis_guard_command_duration_seconds_count", (("command", "get"),))] == 150
    assert samples[("redis_guard_command_duration_seconds_bucket", (("command", "get"), ("le", "0.0005")))] == 150
    assert samples[("redis_guard_command_duration_seconds_bucket", (("command", "get"), ("le", "0.00025")))] == 0
    assert samples[("redis_guard_client_connections", ())] == 3
    assert samples[("redis_guard_workers", ())] == 2
    assert samples[("redis_guard_upstream_up", (("upstream", "127.0.0.1:6390"),))] == 0  # one worker saw it down
    assert samples[("redis_guard_upstream_failed_requests_total", (("upstream", "127.0.0.1:6390"),))] == 4
    assert samples[("redis_guard_policy_info", (("mode", "enforce"), ("policy", "strict"), ("sha", "abc123")))] == 1
    assert samples[("redis_guard_policy_last_reload_timestamp_seconds", ())] == 1700000002.0
    finding = (("app", ""), ("mode", "enforce"), ("outcome", "rejected"), ("policy", "strict"), ("rule", "K2"))
    assert samples[("redis_guard_policy_findings_total", finding)] == 6
    assert samples[("redis_guard_hot_key_top_share", ())] == 0.5


def test_every_exported_name_is_in_a_scrape():
    registry = CollectorRegistry()
    registry.register(exporter.Collector(lambda: snapshot.merge([worker(1, 1, 0, 0, True)])))
    text = generate_latest(registry).decode()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    assert set(exporter.EXPORTED) <= names
    assert not [line for line in text.splitlines() if 'key="' in line]  # no per-key series

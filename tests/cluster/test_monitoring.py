"""Metrics of the proxy in front of a Redis Cluster: commands routed to several masters, pipelines
split into one request per master (the Scatter's runs are timed one by one), error replies."""

import hiredis

from tests.cluster.start import proxy_for
from tests.monitor.test_endpoints import command_count, scrape, send
from tests.servers import free_port


def test_metrics_count_cluster_traffic(redis_cluster):
    metrics = free_port()
    proxy = proxy_for(redis_cluster, "--metrics", str(metrics))
    try:
        sets = [("SET", f"key:{i}", "v") for i in range(120)]  # keys on every master
        gets = [("GET", f"key:{i}") for i in range(80)]
        wrong = [("LPUSH", "key:1", "x")] * 5
        replies = send(proxy.port, sets, 3) + send(proxy.port, gets, 2) + send(proxy.port, wrong)
        assert sum(isinstance(reply, hiredis.ReplyError) for reply in replies) == 5
        samples = scrape(metrics)
    finally:
        assert proxy.stop() == 0
    assert command_count(samples, "set", "ok") == 120
    assert command_count(samples, "get", "ok") == 80
    assert command_count(samples, "lpush", "error") == 5
    assert samples[("redis_guard_command_duration_seconds_count", (("command", "set"),))] == 120
    assert samples[("redis_guard_command_duration_seconds_count", (("command", "get"),))] == 80
    assert samples[("redis_guard_upstream_connections", (("kind", "shared"),))] >= 3
    masters = {label for (name, label) in samples if name == "redis_guard_upstream_up"}
    assert len(masters) >= 3 and all(samples[("redis_guard_upstream_up", label)] == 1 for label in masters)

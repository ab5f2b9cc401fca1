"""Pure parts of worker supervision and liveness: the restart back-off and when to give up, a dead
or silent worker's counters folded, one policy series per policy, and the loop probe answered
from a real event loop that turns or is stuck (in one process: the HTTP server's /healthz too)."""

import asyncio
import os
import threading
import time

import pytest

from proxy.commands.table import CommandTable
from proxy.config import Address, ConfigError, load_config
from proxy.monitor import keys, live, liveness, snapshot, workers
from proxy.monitor.http import MonitorServer
from proxy.monitor.ready import Readiness
from proxy.supervisor import FIRST_DELAY, MAX_DELAY, RestartPolicy, describe
from tests.monitor.test_exporter import scrape, worker
from tests.servers import free_port
from tests.servers import http_get as get

live.setup(CommandTable.from_snapshot())


def test_restart_delays_double_for_quick_deaths_and_reset_after_a_stable_run():
    policy = RestartPolicy(workers=1)
    policy.limit = 100  # the delays alone here
    now, delays = 0.0, []
    for _ in range(7):  # each dies 2 s after it started
        now += 2.0
        delays.append(policy.died(0, lived=2.0, now=now))
        now += delays[-1]
    assert delays == [FIRST_DELAY, 2.0, 4.0, 8.0, 16.0, MAX_DELAY, MAX_DELAY]
    assert policy.died(0, lived=61.0, now=now + 61) == FIRST_DELAY  # lived a minute: start over
    assert policy.died(1, lived=0.5, now=now + 62) == FIRST_DELAY  # slots have delays of their own


def test_giving_up_after_too_many_exits_within_the_window():
    assert RestartPolicy(workers=2).limit == 5 and RestartPolicy(workers=8).limit == 16
    policy = RestartPolicy(workers=2)
    assert [policy.died(slot % 2, 1.0, float(t)) is None for t, slot in enumerate(range(4))] == [False] * 4
    assert policy.died(0, 1.0, 4.0) is None  # the fifth within a minute
    spread = RestartPolicy(workers=2)
    # one exit every 20 s never has five within 60 s
    assert all(spread.died(0, 20.0, 20.0 * t) is not None for t in range(20))


def test_exit_statuses_in_words():
    assert describe(9) == "was killed by signal 9 (SIGKILL)"
    assert describe(1 << 8) == "exited with status 1"
    assert describe(0) == "exited with status 0"


def test_silent_and_dead_workers_add_counters_only():
    one, two = worker(1, 100, 3, 2, True), worker(2, 50, 0, 1, False)
    one["registry"].append(["redis_guard_clients", "gauge", "clients", [["redis_guard_clients", {}, 2.0]]])
    silent = snapshot.counters_only(two)
    samples = scrape(snapshot.merge([one, silent]))
    assert samples[("redis_guard_commands_total", (("command", "get"), ("result", "ok")))] == 147
    assert samples[("redis_guard_client_connections", ())] == 2  # the silent worker's gauges left out
    assert samples[("redis_guard_upstream_up", (("upstream", "127.0.0.1:6390"),))] == 1  # its "down" too
    assert samples[("redis_guard_upstream_failed_requests_total", (("upstream", "127.0.0.1:6390"),))] == 4
    assert samples[("redis_guard_clients", ())] == 2
    # a label only a silent worker saw has no up series (nobody answers for it), its counters stay
    alone = scrape(snapshot.merge([silent]))
    assert ("redis_guard_upstream_up", (("upstream", "127.0.0.1:6390"),)) not in alone
    assert alone[("redis_guard_upstream_failed_requests_total", (("upstream", "127.0.0.1:6390"),))] == 2


def test_dead_workers_fold_into_one_bounded_base():
    base = None
    for pid in range(1, 4):
        snap = worker(pid, 10, 1, 1, True)
        snap["hot"] = {f"key:{pid}:{i}": [i + 1, 0] for i in range(keys.HOT_CAPACITY)}
        base = snapshot.fold(base, snapshot.counters_only(snap))
    assert base["names"]["get"] == 30 and base["errors"]["get"] == 3
    assert base["durations"]["get"][2] == 30
    assert base["upstreams"]["127.0.0.1:6390"]["failed"] == 6
    assert len(base["hot"]) == keys.HOT_CAPACITY
    samples = scrape(snapshot.merge([worker(9, 5, 0, 1, True), base]))
    finding = (("app", ""), ("mode", "enforce"), ("outcome", "rejected"), ("policy", "strict"), ("rule", "K2"))
    assert samples[("redis_guard_policy_findings_total", finding)] == 12
    assert samples[("redis_guard_commands_total", (("command", "get"), ("result", "ok")))] == 32


def test_one_policy_info_series_for_workers_that_loaded_the_same_file_at_different_times():
    merged = snapshot.merge([worker(1, 1, 0, 0, True), worker(2, 1, 0, 0, True)])  # loaded_at differ
    assert len(merged["policies"]) == 1 and merged["policies"][0]["loaded_at"] == 1700000002.0
    text_samples = [key for key in scrape(merged) if key[0] == "redis_guard_policy_info"]
    assert text_samples == [("redis_guard_policy_info", (("mode", "enforce"), ("policy", "strict"),
                                                         ("sha", "abc123")))]
    other = worker(3, 1, 0, 0, True)
    other["policy"] = {**other["policy"], "sha": "def456"}  # mid-reload: two policies do run
    assert len(snapshot.merge([worker(1, 1, 0, 0, True), other])["policies"]) == 2


def test_liveness_timeout_is_a_setting(tmp_path):
    assert load_config(None).liveness_timeout == 5.0
    (tmp_path / "config.yaml").write_text("liveness_timeout: 2.5\n")
    assert load_config(str(tmp_path / "config.yaml")).liveness_timeout == 2.5
    (tmp_path / "config.yaml").write_text("liveness_timeout: 0\n")
    with pytest.raises(ConfigError, match="'liveness_timeout' must be a positive number"):
        load_config(str(tmp_path / "config.yaml"))


def test_ready_wants_every_configured_worker():
    readiness = Readiness([], policy_required=False, probe=lambda upstream: None, workers=2)
    assert readiness.check({"started": True, "workers": 1, "policies": []}) == (False, "1 of 2 workers answering")
    assert readiness.check({"started": True, "workers": 2, "policies": []}) == (True, "ready")


class LoopThread:
    """A real event loop on a thread of its own, which a callback can block."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def block(self, seconds: float) -> None:
        self.loop.call_soon_threadsafe(time.sleep, seconds)

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def test_loop_probe_sees_a_stuck_loop():
    runner = LoopThread()
    try:
        assert liveness.turns(runner.loop, 2.0)
        runner.block(1.5)
        started = time.monotonic()
        assert not liveness.turns(runner.loop, 0.5)
        assert time.monotonic() - started < 1.4  # bounded by the timeout, not by the stuck callback
        assert liveness.turns(runner.loop, 5.0)  # turns again once the callback returns
    finally:
        runner.close()
    assert not liveness.turns(runner.loop, 0.5)  # closed




def test_healthz_of_one_process_answers_503_while_its_loop_is_stuck():
    runner = LoopThread()
    port = free_port()
    server = MonitorServer(Address("127.0.0.1", port), lambda: {}, Readiness([], False),
                           lambda: liveness.check(0.5))
    server.start()
    try:
        assert get(port, "/healthz") == (200, "ok\n")  # no loop attached yet: starting
        liveness.attach(runner.loop)
        assert get(port, "/healthz") == (200, "ok\n")
        runner.block(2.0)
        assert get(port, "/healthz") == (503, "event loop stuck: it has not run a callback within 0.5s\n")
        time.sleep(2.0)
        assert get(port, "/healthz") == (200, "ok\n")
        runner.close()
        assert get(port, "/healthz") == (503, "event loop closed: shutting down\n")
    finally:
        liveness.attach(None)
        server.shutdown()
        server.server_close()
        runner.close()


def test_worker_socket_answers_liveness_only_through_its_loop():
    runner = LoopThread()
    directory = workers.make_directory()
    try:
        workers.serve(directory, lambda: {"pid": os.getpid()}, lambda: liveness.turns(runner.loop, 0.5))
        assert workers.liveness(directory, 0.5) == (True, "ok")
        assert workers.collect(directory) == [{"pid": os.getpid()}]
        runner.block(2.0)
        ok, reason = workers.liveness(directory, 0.5)
        assert not ok and reason == f"worker {os.getpid()}: event loop stuck: it has not run a callback within 0.5s"
        time.sleep(2.0)
        assert workers.liveness(directory, 0.5) == (True, "ok")
    finally:
        workers.remove_directory(directory)
        runner.close()

"""Supervised workers, with real processes: `serve --workers 2` under traffic, a worker SIGKILLed
(the parent logs it, forks a new one, counters never go backwards, one series per policy), workers
killed again and again (the parent stops, saying why, non-zero), a SIGSTOPped worker (/healthz
and /ready 503 naming it, 200 after SIGCONT), SIGHUP passed on, and a worker forked after the
policy file changed running the file as it is. Worker pids are read from /proc."""

import os
import signal
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.servers import ProxyProcess, RedisServer, free_port, scrape, wait_for
from tests.servers import http_get as get

POLICY = "name: counted\nrules:\n  K2: {style: lowercase}\n"


@pytest.fixture
def redis_server():
    server = RedisServer()
    yield server
    server.close()


def start(tmp_path, upstream: str, *extra: str, policy: str = POLICY) -> tuple[ProxyProcess, int]:
    (tmp_path / "policy.yaml").write_text(policy)
    (tmp_path / "config.yaml").write_text("policy: policy.yaml\nliveness_timeout: 1\nshutdown_timeout: 2\n")
    metrics = free_port()
    proxy = ProxyProcess(upstream, str(tmp_path / "config.yaml"), "--workers", "2", "--metrics", str(metrics),
                         *extra)
    return proxy, metrics


def children(pid: int) -> list[int]:
    """The processes `pid` forked (its threads' children lists, from /proc)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(child) for child in handle.read().split()]
        except FileNotFoundError:  # a thread that ended
            pass
    return sorted(found)






def commands(samples: dict) -> float:
    return sum(value for (name, _), value in samples.items() if name == "redis_guard_commands_total")


class Traffic:
    """Clients sending INCR through the proxy until stopped (bounded in count and time); a
    connection the proxy lost is replaced."""

    def __init__(self, port: int, clients: int = 4, limit: int = 200_000):
        self.port = port
        self.done = threading.Event()
        self.sent = 0
        self.failed = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(limit // clients,), daemon=True)
                        for _ in range(clients)]
        for thread in self.threads:
            thread.start()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=10, retry=Retry(NoBackoff(), 0))  # each attempt seen

    def run(self, limit: int) -> None:
        client = self.client()
        deadline = time.monotonic() + 120
        for _ in range(limit):
            if self.done.is_set() or time.monotonic() > deadline:
                break
            try:
                client.incr("counted:n")
                with self.lock:
                    self.sent += 1
            except redis.ConnectionError:
                with self.lock:
                    self.failed += 1
                client.close()
                client = self.client()
                time.sleep(0.01)
        client.close()

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(30)


class Scraper:
    """/metrics every 0.1 s: the total of redis_guard_commands_total at each scrape."""

    def __init__(self, port: int):
        self.port = port
        self.totals: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        for _ in range(3000):
            if self.done.wait(0.1):
                return
            self.totals.append(commands(scrape(self.port)))

    def stop(self) -> None:
        self.done.set()
        self.thread.join(30)


def test_a_killed_worker_is_replaced_and_counters_never_go_backwards(redis_server, tmp_path):
    proxy, metrics = start(tmp_path, redis_server.url)
    traffic = scraper = None
    try:
        assert get(metrics, "/ready") == (200, "ready\n")
        workers = children(proxy.process.pid)
        assert len(workers) == 2
        traffic = Traffic(proxy.port)
        scraper = Scraper(metrics)
        wait_for(lambda: commands(scrape(metrics)) >= 2000, 60, "traffic through both workers")
        victim = workers[0]
        os.kill(victim, signal.SIGKILL)
        assert get(metrics, "/ready") == (503, "1 of 2 workers answering\n")  # forked again after 1 s
        wait_for(lambda: f"worker {victim} was killed by signal 9 (SIGKILL)" in proxy.log, 10, "the exit logged")
        assert "restarting it in 1s" in proxy.log
        replaced = wait_for(lambda: len(now := children(proxy.process.pid)) == 2 and victim not in now and now,
                            20, "a new worker")
        assert not os.path.exists(f"/proc/{victim}")  # reaped: no zombie
        wait_for(lambda: f"serves in place of worker {victim}" in proxy.log, 20, "the new worker serving")
        wait_for(lambda: get(metrics, "/ready") == (200, "ready\n"), 20, "/ready again")
        before = commands(scrape(metrics))
        wait_for(lambda: commands(scrape(metrics)) >= before + 1000, 60, "traffic after the restart")
        traffic.stop()
        scraper.stop()
        final = scrape(metrics)
    finally:
        for helper in (traffic, scraper):
            if helper is not None:
                helper.stop()
        assert proxy.stop() == 0
    totals = scraper.totals
    assert len(totals) > 10
    assert all(later >= earlier for earlier, later in zip(totals, totals[1:])), totals
    incr = sum(value for (name, labels), value in final.items()
               if name == "redis_guard_commands_total" and ("command", "incrby") in labels)  # redis-py sends INCR as INCRBY
    assert traffic.sent - 2000 <= incr <= traffic.sent + traffic.failed  # none twice; lost: at most 0.1 s of one
    assert sorted(replaced) != sorted(workers)
    policy_info = [labels for name, labels in final if name == "redis_guard_policy_info"]
    assert len(policy_info) == 1 and ("policy", "counted") in policy_info[0]
    assert len([name for name, _ in final if name == "redis_guard_build_info"]) == 1
    assert final[("redis_guard_workers", ())] == 2
    assert final[("redis_guard_worker_exits_total", ())] == 1


def test_workers_that_keep_dying_stop_the_proxy_with_a_reason(redis_server, tmp_path):
    proxy, metrics = start(tmp_path, redis_server.url)
    killed = set()
    try:
        deadline = time.monotonic() + 90
        while proxy.process.poll() is None and time.monotonic() < deadline and len(killed) < 12:
            for pid in children(proxy.process.pid):
                if pid not in killed:
                    killed.add(pid)
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        code = proxy.process.wait(30)
    finally:
        proxy.stop()
    assert code == 1
    assert 5 <= len(killed) <= 6, killed
    assert "workers keep dying (5 exits within 60s), cannot keep them alive; stopping the proxy" in proxy.log
    assert "restarting it in 2s" in proxy.log  # the back-off doubled on the way


def test_a_stopped_worker_fails_healthz_and_ready_until_it_continues(redis_server, tmp_path):
    proxy, metrics = start(tmp_path, redis_server.url)
    victim = None
    try:
        client = redis.Redis(port=proxy.port)
        for i in range(200):
            client.set(f"k:{i}", i)
        client.close()
        assert get(metrics, "/healthz") == (200, "ok\n")
        before = commands(scrape(metrics))
        victim = children(proxy.process.pid)[0]
        os.kill(victim, signal.SIGSTOP)
        status, reason = get(metrics, "/healthz")
        assert status == 503
        assert reason == f"worker {victim}: event loop stuck: it has not run a callback within 1s\n"
        assert get(metrics, "/ready") == (503, "1 of 2 workers answering\n")
        stopped = scrape(metrics)
        assert commands(stopped) >= before  # its last counts stand in for it
        assert stopped[("redis_guard_workers", ())] == 1
        assert stopped[("redis_guard_worker_exits_total", ())] == 0
        os.kill(victim, signal.SIGCONT)
        victim = None
        wait_for(lambda: get(metrics, "/healthz") == (200, "ok\n"), 20, "/healthz again")
        wait_for(lambda: get(metrics, "/ready") == (200, "ready\n"), 20, "/ready again")
        assert commands(scrape(metrics)) >= before
        assert "was killed" not in proxy.log  # stopped is not dead: nothing restarted
    finally:
        if victim is not None:
            os.kill(victim, signal.SIGCONT)
        assert proxy.stop() == 0


def test_sighup_reaches_the_workers_and_a_new_worker_runs_the_file_as_it_is(redis_server, tmp_path):
    proxy, metrics = start(tmp_path, redis_server.url)
    try:
        first = children(proxy.process.pid)
        os.kill(proxy.process.pid, signal.SIGHUP)
        for pid in first:
            wait_for(lambda pid=pid: f"[{pid}]: enforcing policy reloaded (SIGHUP)" in proxy.log, 10,
                     f"worker {pid} reloading")
        assert proxy.process.poll() is None
        (tmp_path / "policy.yaml").write_text(POLICY.replace("counted", "renamed"))
        for pid in first:
            wait_for(lambda pid=pid: f"[{pid}]: enforcing policy reloaded (file changed): 'renamed'" in proxy.log,
                     10, f"worker {pid} reloading the file")
        os.kill(first[0], signal.SIGKILL)
        new = wait_for(lambda: [pid for pid in children(proxy.process.pid) if pid not in first], 20, "a new worker")[0]
        wait_for(lambda: f"[{new}]: enforcing policy reloaded (changed since the proxy started): 'renamed'"
                 in proxy.log, 20, "the new worker loading the file")
        wait_for(lambda: get(metrics, "/ready") == (200, "ready\n"), 20, "/ready again")
        policies = [dict(labels)["policy"] for name, labels in scrape(metrics) if name == "redis_guard_policy_info"]
        assert policies == ["renamed"]
    finally:
        assert proxy.stop() == 0

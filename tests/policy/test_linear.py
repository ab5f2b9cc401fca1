"""A policy decision is linear in the command's keys: an MGET of many bad names costs time in
proportion, its findings counted exactly, the first ones explained one by one (issue 49)."""

import time
from pathlib import Path

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.base import ENFORCE
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy
from tests.servers import REPO

STRICT = Path(REPO) / "configs" / "policies" / "strict-dotted.yaml"


@pytest.fixture(scope="module")
def table():
    return CommandTable.from_snapshot()


def decide(engine, args):
    return engine.decide(engine.plan_for(args), args, (), SessionState())


def cpu_seconds(table, n: int) -> float:
    """The least of three CPU times of deciding an MGET of n bad keys (CPU is shared: the least
    is the one least disturbed)."""
    best = float("inf")
    for _ in range(3):
        engine = Engine(load_policy(STRICT), table)  # fresh: no class of name seen before
        args = [b"MGET", *(b"Bad Key %d" % i for i in range(n))]
        started = time.process_time()
        decide(engine, args)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.serial  # measures time
def test_ten_times_the_keys_cost_far_less_than_a_hundred_times_the_time(table):
    small, large = cpu_seconds(table, 3_000), cpu_seconds(table, 30_000)
    assert large < 30 * max(small, 0.001), (small, large)  # quadratic: 100x


def test_past_the_explained_keys_findings_are_counted_exactly_by_rule(table):
    engine = Engine(load_policy(STRICT), table)
    n = 5_000
    # Bad names of two kinds ("Bad Key <n>" breaks three rules, "BAD.item:<n>:string" one) among good ones.
    keys = [b"Bad Key %d" % i if i % 2 else b"user.item:%d:string" % i for i in range(n)]
    keys += [b"BAD.item:%d:string" % i for i in range(n)]
    verdict = decide(engine, [b"MGET", *keys])
    explained = {}
    for finding in verdict.findings:
        explained[finding.rule] = explained.get(finding.rule, 0) + 1
    counted = {finding.rule: count for finding, count in verdict.more}
    total = {rule: explained.get(rule, 0) + counted.get(rule, 0) for rule in {*explained, *counted}}
    # Each key decided alone is the reference.
    expected = {}
    for key in keys:
        alone = decide(engine, [b"GET", key])
        for finding in alone.findings if alone is not None else ():
            expected[finding.rule] = expected.get(finding.rule, 0) + 1
    assert total == expected
    assert len(verdict.findings) <= 3 * Engine.EXPLAINED_KEYS  # the rest counted, not explained
    assert verdict.reject is not None and verdict.reject.mode == ENFORCE
    assert verdict.reject.subject == "key 'Bad Key 1'"  # the first bad key is the one the client is told about
    for finding, _ in verdict.more:  # each counted rule has a sample finding, with a key, to log
        assert finding.subject.startswith("key '") and finding.mode == ENFORCE


def test_a_few_bad_keys_are_all_explained(table):
    engine = Engine(load_policy(STRICT), table)
    verdict = decide(engine, [b"MGET", *(b"Bad Key %d" % i for i in range(10))])
    assert verdict.more == () and len(verdict.findings) == 30
    assert [finding.subject for finding in verdict.findings[::3]] == [f"key 'Bad Key {i}'" for i in range(10)]

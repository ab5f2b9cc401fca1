"""The engine's memo of passes: what it remembers, what it never does, and that a shape (key,
lengths, the bytes the rules read) decides a verdict as the full chain of rules would."""

from __future__ import annotations

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy, load_policy_text

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

TABLE = CommandTable.from_snapshot()

# Every rule that declares what it reads, with limits small enough that lengths matter.
POLICY = """\
name: memo
rules:
  K2: {style: lowercase}
  K6: {position: any}
  T1: {action: reject}
  T3: {min_ttl: 10, max_ttl: 1000}
  V1: {max_bytes: 8}
  V3: {max_element_bytes: 8}
"""

# Commands that pass POLICY, each alone in its pipeline.
PASSING = [
    ["SET", "app:1:string", "v", "EX", "60"],
    ["SET", "app:1:string", "value", "PX", "60000", "NX"],
    ["SET", "app:1:string", "v", "EX", "60", "GET"],
    ["SETEX", "app:1:string", "60", "v"],
    ["PSETEX", "app:1:string", "60000", "v"],
    ["EXPIRE", "app:1:string", "60"],
    ["EXPIRE", "app:1:string", "60", "NX"],
    ["GETEX", "app:1:string", "EX", "60"],
    ["LPUSHX", "app:1:list", "a", "bc"],
    ["LSET", "app:1:list", "0", "v"],
]
# Same-length replacements for an argument: option words a rule might look for, and filler.
WORDS = [b"EX", b"PX", b"NX", b"XX", b"GT", b"LT", b"CH", b"GET", b"EXAT", b"PXAT", b"INCR",
         b"KEEPTTL", b"PERSIST", b"0", b"-1", b"99999999"]


def engine(text: str = POLICY) -> Engine:
    return Engine(load_policy_text(text), TABLE)


def encoded(words) -> list[bytes]:
    return [word.encode() if isinstance(word, str) else word for word in words]


def decide(engine_, args, later=(), state=None):
    plan = engine_.plan_for(args)
    return None if plan is None else engine_.decide(plan, args, later, state or SessionState())


def same_length(arg: bytes) -> list[bytes]:
    return [word for word in WORDS if len(word) == len(arg) and word.lower() != arg.lower()] + [
        b"z" * len(arg), b"7" * len(arg)]


@pytest.mark.parametrize("words", PASSING, ids=lambda words: " ".join(words))
def test_a_shape_decides_as_the_rules_do(words):
    """Bytes the plan's shape leaves out (it keeps only their length) never change a verdict."""
    args = encoded(words)
    full = engine()
    assert decide(full, args) is None  # each sample passes: the check below is not vacuous
    plan = full.plan_for(args)
    assert plan.memo is not None
    for position in range(2, min(plan.memo_from, len(args))):
        for replacement in same_length(args[position]):
            varied = [*args[:position], replacement, *args[position + 1:]]
            assert plan.shape(varied) == plan.shape(args)
            assert decide(engine(), varied) is None, (position, replacement)


def test_a_pass_is_remembered_by_shape_and_a_longer_value_is_decided_again():
    memo = engine()
    state = SessionState()
    args = encoded(["SET", "app:1:string", "abc", "EX", "60"])
    plan = memo.plan_for(args)
    assert plan.memo_from == 3  # the value is read by length only
    assert not plan.memo_check.passed(args, state)
    assert decide(memo, args) is None
    assert plan.memo_check.passed(encoded(["SET", "app:1:string", "xyz", "EX", "60"]), state)
    too_big = encoded(["SET", "app:1:string", "x" * 9, "EX", "60"])
    assert not plan.memo_check.passed(too_big, state)
    assert decide(memo, too_big).reject.rule == "V1"
    assert not plan.memo_check.passed(encoded(["SET", "app:1:string", "abc", "EX", "5"]), state)
    # Another id is the same class of key (keyclass): the rules cannot tell them apart.
    assert plan.memo_check.passed(encoded(["SET", "app:2:string", "abc", "EX", "60"]), state)
    assert not plan.memo_check.passed(encoded(["SET", "app:22:string", "abc", "EX", "60"]), state)
    assert not plan.memo_check.passed(encoded(["SET", "app:2:strinG", "abc", "EX", "60"]), state)
    assert decide(memo, encoded(["SET", "app:2:strinG", "abc", "EX", "60"])).reject.rule == "K2"


def test_a_pass_owed_to_the_rest_of_the_pipeline_is_not_remembered():
    memo = engine()
    args = encoded(["SET", "app:1:string", "v"])
    later = [encoded(["EXPIRE", "app:1:string", "60"])]
    assert decide(memo, args, later) is None
    assert not memo.plan_for(args).memo_check.passed(args, SessionState())
    assert decide(memo, args).reject.rule == "T1"


def test_a_verdict_that_depends_on_the_clock_is_not_remembered():
    memo = engine()
    import time

    args = encoded(["SET", "app:1:string", "v", "EXAT", str(int(time.time()) + 60)])
    assert decide(memo, args) is None
    assert not memo.plan_for(args).memo_check.passed(args, SessionState())


def test_transactions_neither_use_nor_fill_the_memo():
    memo = engine()
    args = encoded(["SET", "app:1:string", "v", "EX", "60"])
    plan = memo.plan_for(args)
    in_multi = SessionState()
    in_multi.in_multi = True
    assert decide(memo, args, state=in_multi) is None
    assert not plan.memo
    assert decide(memo, args) is None
    assert not plan.memo_check.passed(args, in_multi)
    assert plan.memo_check.passed(args, SessionState())


def test_rejections_and_rewrites_are_never_remembered():
    memo = engine(POLICY + "  C4: {}\n")
    bad = encoded(["SET", "App:1:string", "v", "EX", "60"])
    for _ in range(2):
        assert decide(memo, bad).reject.rule == "K2"
    assert not memo.plan_for(bad).memo
    rewritten = encoded(["DEL", "app:1:string"])
    assert decide(memo, rewritten).commands[0][0].upper() == b"UNLINK"
    assert memo.plan_for(rewritten).memo is None  # C4 does not say what it reads


def test_plans_with_a_rule_that_asks_the_server_have_no_memo():
    capped = engine("name: m\nrules:\n  V2: {max_elements: 10}\n  K6: {}\n")
    assert capped.plan_for([b"HSET", b"a:hash", b"f", b"v"]).memo is None
    assert capped.plan_for([b"SET", b"a:string", b"v"]).memo is not None


def test_the_memo_is_bounded_in_entries_and_in_bytes(monkeypatch):
    memo = engine()
    monkeypatch.setattr(Engine, "MEMO_MAX", 4)
    for i in range(1, 11):
        assert decide(memo, encoded(["SET", f"app:{'1' * i}:string", "v", "EX", "60"])) is None
    plan = memo.plan_for([b"SET"])
    assert 0 < len(plan.memo) <= 4 and memo.memo_size == len(plan.memo)
    long_key = "app:" + "1" * 600 + ":string"
    assert decide(memo, encoded(["EXPIRE", long_key, "60"])) is None
    assert not memo.plan_for([b"EXPIRE"]).memo


def test_the_strictest_preset_remembers_the_benchmarks_set():
    strict = Engine(load_policy("configs/policies/strict-dotted.yaml"), TABLE)
    args = encoded(["SET", "bench:item:1:string", "xxx", "EX", "3600"])
    plan = strict.plan_for(args)
    assert decide(strict, args) is None
    assert plan.memo_check.passed(encoded(["SET", "bench:item:1:string", "yyy", "EX", "3600"]), SessionState())


def test_a_key_remembers_a_few_shapes():
    memo = engine()
    plan = memo.plan_for([b"SET"])
    state = SessionState()
    ttls = [str(ttl) for ttl in range(60, 60 + Engine.MEMO_SHAPES + 1)]
    for ttl in ttls[:-1]:
        assert decide(memo, encoded(["SET", "app:1:string", "v", "EX", ttl])) is None
    assert all(plan.memo_check.passed(encoded(["SET", "app:1:string", "v", "EX", ttl]), state) for ttl in ttls[:-1])
    assert decide(memo, encoded(["SET", "app:1:string", "v", "EX", ttls[-1]])) is None
    assert plan.memo_check.passed(encoded(["SET", "app:1:string", "v", "EX", ttls[-1]]), state)
    assert len(plan.shapes) == len(ttls) and memo.memo_size == 1


@pytest.mark.parametrize("longer, shorter", [
    (["SET", "app:1:string", "v", "XX", "GET", "EX", "60"], ["SET", "app:1:string", "v", "XX", "GET"]),
    (["SET", "app:1:string", "v", "NX", "PX", "60000"], ["SET", "app:1:string", "v", "NX", "PX"]),
])
def test_a_shorter_command_is_not_taken_for_a_remembered_longer_one(longer, shorter):
    """A remembered shape is compared whole: the first options of a longer command that passed
    are not a pass for a command that stops there (here: without its TTL)."""
    memo = engine()
    state = SessionState()
    assert decide(memo, encoded(longer)) is None
    plan = memo.plan_for(encoded(longer))
    assert plan.memo_check.passed(encoded(longer), state)
    assert not plan.memo_check.passed(encoded(shorter), state)
    assert decide(memo, encoded(shorter)) is not None


def test_the_last_class_kept_neither_hides_shapes_remembered_since_nor_vouches_for_another_class():
    """A Memo keeps the last class that passed with the shapes it had then: a shape the engine
    remembered later is still found, and another class is looked up, not taken for the kept one."""
    memo = engine()
    state = SessionState()
    plan = memo.plan_for([b"SET"])
    first, second = (encoded(["SET", "app:1:string", "v", "EX", ttl]) for ttl in ("60", "61"))
    assert decide(memo, first) is None
    assert plan.memo_check.passed(first, state)  # kept now
    assert not plan.memo_check.passed(second, state)
    assert decide(memo, second) is None  # remembered after the class was kept
    assert plan.memo_check.passed(second, state)
    assert plan.memo_check.passed(first, state)
    assert plan.memo_check.last_class is not None
    other = encoded(["SET", "app:11:string", "v", "EX", "60"])  # another class (keyclass: digit count)
    assert not plan.memo_check.passed(other, state)
    assert plan.memo_check.passed(first, state)

"""The engine's memo of refusals (policy/refusals.py): a remembered refusal is exactly the
verdict the full chain of rules gives, its reply byte for byte and its findings rule for rule,
and a command the rules would pass (or refuse otherwise) is never answered from the memo.

Table-driven: many commands (keys of many classes, values around the size limits, TTL options,
argument counts), in pipelines where later commands may give a key its TTL, decided by an
engine that remembers against one that decides every command in full."""

from __future__ import annotations

import os
import random

import pytest

from proxy import errors
from proxy.commands.table import CommandTable
from proxy.pending import LaterCommands
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy, load_policy_text
from proxy.policy.refusals import Refusal, shown
from proxy.policy.rules._keyshape import show
from tests.servers import REPO

TABLE = CommandTable.from_snapshot()
STRICT = os.path.join(REPO, "configs", "policies", "strict-dotted.yaml")

MEMO = """\
name: memo
rules:
  K1: {delimiter: ":", min_segments: 2, max_segments: 4}
  K2: {style: lowercase}
  K4: {max_length: 24}
  K6: {position: any}
  T1: {action: reject}
  T3: {min_ttl: 10, max_ttl: 1000}
  V1: {max_bytes: 8}
  V3: {max_element_bytes: 8}
"""
# The same with some rules audited: their findings are counted as audited, the reply is another's.
MIXED = """\
name: mixed
rules:
  K1: {delimiter: ":", min_segments: 2, max_segments: 4, mode: audit}
  K2: {style: lowercase}
  K3: {charset: "a-z0-9.:", first: letter}
  K4: {max_length: 24, mode: audit}
  T1: {action: reject}
  V1: {max_bytes: 8, mode: audit}
"""

KEYS = [b"BadKey1", b"BadKey22", b"BadKey333", b"badkey1", b"bad:key:1", b"app:1:string", b"app:22:string",
        b"App:1:String", b"a::b", b"a::c", b":lead", b"trail:", b"x", b"y", b"", b"a:b:c:d:e", b"q:w:e:r:t:y",
        b"k" * 30, b"k:" + b"z" * 30, b"bad key", b"bad\r\nkey", b"cl\xc3\xa9:1", b"\xff\xfe:1", b"\xff\xfe:2",
        b"user:1:list", b"user:1:STRING", b"n:" + b"9" * 98, b"N:" + b"9" * 120]
VALUES = [b"v", b"12345678", b"123456789", b"", b"x" * 40]
OPTIONS = [(), (b"EX", b"60"), (b"EX", b"5"), (b"EX", b"0"), (b"EX", b"-1"), (b"PX", b"60000"), (b"KEEPTTL",),
           (b"EX", b"60", b"NX"), (b"NX",), (b"GET",), (b"XX", b"EX", b"60"), (b"EX", b"60", b"GET"), (b"EX",),
           (b"ex", b"60"), (b"PERSIST",)]


def commands(rng: random.Random, count: int) -> list[list[bytes]]:
    """Writes and reads of every shape the rules read, on keys of many classes."""
    made = []
    for _ in range(count):
        key = rng.choice(KEYS)
        value = rng.choice(VALUES)
        kind = rng.randrange(12)
        if kind < 5:
            made.append([rng.choice((b"SET", b"set", b"Set")), key, value, *rng.choice(OPTIONS)])
        elif kind == 5:
            made.append([b"SETEX", key, rng.choice((b"60", b"5", b"0")), value])
        elif kind == 6:
            made.append([b"GETSET", key, value])
        elif kind == 7:
            made.append([b"EXPIRE", key, rng.choice((b"60", b"5", b"2000"))])
        elif kind == 8:
            made.append([b"GETEX", key, *rng.choice(((), (b"EX", b"60"), (b"PERSIST",)))])
        elif kind == 9:
            made.append([b"APPEND", key, value])
        elif kind == 10:
            made.append([b"GET", key])
        else:
            made.append([b"SET", key])  # (the wrong number of arguments)
    return made


def pipelines(rng: random.Random, count: int) -> list[list[list[bytes]]]:
    """Pipelines of one to eight commands; now and then a later EXPIRE of an earlier key."""
    out = []
    for _ in range(count):
        pipeline = commands(rng, rng.randrange(1, 9))
        if rng.random() < 0.3:
            pipeline.insert(rng.randrange(1, len(pipeline) + 1),
                            [b"EXPIRE", rng.choice(pipeline)[1] if len(rng.choice(pipeline)) > 1 else b"x", b"60"])
        out.append(pipeline)
    return out


def fresh(text: str) -> Engine:
    """An engine that decides every command in full: no refusal is remembered."""
    engine = Engine(load_policy_text(text) if "\n" in text else load_policy(text), TABLE)
    for plan in engine.plans.values():
        plan.refusals = None
    return engine


def memo_decide(engine: Engine, commands_, index: int):
    """What the session does (verdicts.decide): the memo of refusals first, else the engine."""
    args = commands_[index]
    plan = engine.plan_for(args)
    if plan is None:
        return None
    if plan.refusals:
        found = engine.refusal(plan, args)
        if found is not None:
            return found
    return engine.decide(plan, args, LaterCommands(commands_, index + 1), SessionState())


def full_decide(engine: Engine, commands_, index: int):
    args = commands_[index]
    plan = engine.plan_for(args)
    return None if plan is None else engine.decide(plan, args, LaterCommands(commands_, index + 1), SessionState())


def outcome(verdict, args):
    """(the reply when refused, else None; (rule, mode, outcome) of every finding)."""
    if verdict is None:
        return None, ()
    if type(verdict) is Refusal:
        return verdict.reply(args[1]), verdict.groups
    groups = tuple((f.rule, f.mode, "audited" if f.mode == "audit" else "rejected") for f in verdict.findings)
    return (errors.policy_violation(verdict.reject) if verdict.reject is not None else None), groups


@pytest.mark.parametrize("text", [MEMO, MIXED, STRICT], ids=["memo", "mixed", "strict-dotted"])
def test_remembered_refusals_are_the_full_verdicts(text):
    rng = random.Random(49)
    remembering = Engine(load_policy_text(text) if "\n" in text else load_policy(text), TABLE)
    full = fresh(text)
    hits = 0
    for pipeline in pipelines(rng, 1500):
        for index, args in enumerate(pipeline):
            got = memo_decide(remembering, pipeline, index)
            hits += type(got) is Refusal
            assert outcome(got, args) == outcome(full_decide(full, pipeline, index), args), (pipeline, index)
    assert hits > 1000  # the memo answered most refusals (the comparison is not vacuous)


def test_the_strict_preset_remembers_the_benchmark_refusal():
    remembering, full = Engine(load_policy(STRICT), TABLE), fresh(STRICT)
    rng = random.Random(3)
    pipeline = [[b"SET", b"BadKey%d" % rng.randrange(100_000), b"xxx"] for _ in range(64)]
    hits = 0
    for index, args in enumerate(pipeline):
        got = memo_decide(remembering, pipeline, index)
        hits += type(got) is Refusal
        expected = outcome(full_decide(full, pipeline, index), args)
        assert outcome(got, args) == expected
        assert {rule for rule, _, _ in expected[1]} == {"K1", "K2", "K3", "K6", "T1"}
    assert hits >= 64 - 5  # one decision per class of key (BadKey and one to five digits)
    assert expected[0].startswith(b"-NOPERM key 'BadKey") and b"breaks rule K1" in expected[0]


def test_a_refusal_that_read_the_pipeline_is_remembered_only_when_no_pipeline_changes_it():
    """T1 fired on `SET K v` after reading the rest of its pipeline: a later EXPIRE K would make
    it pass, but K fails an enforced key rule, so the policy refuses that EXPIRE too: T1 fires
    whatever follows, and the memo answers (the full decision agrees)."""
    engine, full = Engine(load_policy_text(MEMO), TABLE), fresh(MEMO)
    refused = memo_decide(engine, [[b"SET", b"App:1:string", b"v"]], 0)
    assert {f.rule for f in refused.findings} == {"K2", "T1"}
    for pipeline in ([[b"SET", b"App:2:string", b"v"], [b"EXPIRE", b"App:2:string", b"60"]],
                     [[b"SET", b"App:2:string", b"v"], [b"GET", b"x:1"], [b"SET", b"App:2:string", b"v", b"EX", b"60"]],
                     [[b"SET", b"App:2:string", b"v"], [b"DEL", b"App:2:string"]]):
        hit = memo_decide(engine, pipeline, 0)
        assert type(hit) is Refusal
        assert outcome(hit, pipeline[0]) == outcome(full_decide(full, pipeline, 0), pipeline[0])
    # A good key's T1 refusal (V1 refuses too) is not remembered: a later EXPIRE saves it from T1.
    alone = [[b"SET", b"app:1:string", b"123456789"]]
    assert {f.rule for f in memo_decide(engine, alone, 0).findings} == {"V1", "T1"}
    rescued = [[b"SET", b"app:2:string", b"123456789"], [b"EXPIRE", b"app:2:string", b"60"]]
    verdict = memo_decide(engine, rescued, 0)
    assert type(verdict) is not Refusal and {f.rule for f in verdict.findings} == {"V1"}


def test_a_command_of_another_shape_or_class_is_not_answered_from_the_memo():
    engine = Engine(load_policy_text(MEMO), TABLE)
    plan = engine.plan_for([b"SET"])
    verdict = engine.decide(plan, [b"SET", b"App:1:string", b"123456789", b"EX", b"60"], (), SessionState())
    assert [f.rule for f in verdict.findings] == ["K2", "V1"]  # the value is one byte too long
    assert engine.refusal(plan, [b"SET", b"App:2:string", b"987654321", b"EX", b"60"]) is not None
    for other in ([b"SET", b"App:2:string", b"12345678", b"EX", b"60"],  # one byte shorter: K2 alone
                  [b"SET", b"App:2:string", b"123456789", b"EX", b"60", b"NX"],  # another shape
                  [b"SET", b"App:2:string", b"123456789", b"EX", b"61"],  # another TTL (T3 reads it)
                  [b"SET", b"App:2:string", b"123456789", b"EX"],  # another count of arguments
                  [b"SET", b"App:22:string", b"123456789", b"EX", b"60"],  # another class
                  [b"SET", b"app:2:string", b"123456789", b"EX", b"60"]):  # another class: V1 alone
        assert engine.refusal(plan, other) is None, other
    # A refusal by a command rule alone (V1) is not remembered: its text may name anything.
    engine.decide(plan, [b"SET", b"app:1:string", b"123456789", b"EX", b"60"], (), SessionState())
    assert engine.refusal(plan, [b"SET", b"app:2:string", b"123456789", b"EX", b"60"]) is None


def test_transactions_neither_use_nor_fill_the_memo_of_refusals():
    engine = Engine(load_policy_text(MEMO), TABLE)
    args = [b"SET", b"BadKey:1", b"v", b"EX", b"60"]
    plan = engine.plan_for(args)
    in_multi = SessionState()
    in_multi.in_multi = True
    assert engine.decide(plan, args, (), in_multi).reject is not None
    assert not plan.refusals


@pytest.mark.parametrize("key", [b"BadKey1", b"bad key", b"bad\r\nkey", b"\xff\xfe", b"k" * 150, b"", b"cl\xc3\xa9",
                                 b"tab\there", b"\x7f"])
def test_shown_is_the_subject_as_the_reply_writes_it(key):
    text = key.decode("utf-8", "surrogateescape")
    assert shown(key) == errors.resp_error(show(text))[1:-2]


def test_the_template_is_used_only_where_the_advice_is_the_class_s():
    engine = Engine(load_policy_text(MEMO), TABLE)
    plan = engine.plan_for([b"SET"])
    engine.decide(plan, [b"SET", b"x", b"v", b"EX", b"60"], (), SessionState())  # K1: one segment
    engine.decide(plan, [b"SET", b"b::c", b"v", b"EX", b"60"], (), SessionState())  # K1: an empty segment
    counted = engine.refusal(plan, [b"SET", b"y", b"v", b"EX", b"60"])
    empty = engine.refusal(plan, [b"SET", b"c::d", b"v", b"EX", b"60"])
    assert counted.after is not None and empty.after is None  # 'c::d' is advised as 'c:d': worked out again
    full = fresh(MEMO)
    assert empty.reply(b"c::d") == errors.policy_violation(
        full.decide(full.plan_for([b"SET"]), [b"SET", b"c::d", b"v", b"EX", b"60"], (), SessionState()).reject)
    assert b"'c:d'" in empty.reply(b"c::d")


def test_the_memo_of_refusals_is_bounded():
    engine = Engine(load_policy_text(MEMO), TABLE)
    engine.REFUSALS_MAX = 10
    plan = engine.plan_for([b"SET"])
    for length in range(1, 40):
        engine.decide(plan, [b"SET", b"B" * length, b"v", b"EX", b"60"], (), SessionState())
    assert 0 < len(plan.refusals) <= 10 and engine.refusals_size <= 10

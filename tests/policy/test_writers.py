"""Every writer of the command table is checked by each value rule that bounds what it writes, or
listed in `writers.UNCHECKED` with the reason (issue 14: RESTORE, BITFIELD, PFADD, *STORE, COPY
and RENAME went unchecked while the rules' names promised otherwise). The tables of every release
the repository has a snapshot of (7.0, 8.2: HSETEX, VADD... issue 52)."""

from __future__ import annotations

from functools import cache

import pytest

from proxy.commands.table import SNAPSHOTS, CommandTable
from proxy.policy.loader import load_policy_text
from proxy.policy.writers import RELEVANT, UNCHECKED, value_kinds, writers


@cache
def table(release=(7, 0)) -> CommandTable:
    return CommandTable.from_snapshot(SNAPSHOTS[release])


@cache
def rules() -> dict:
    policy = load_policy_text("rules: {K6: {}, V1: {}, V2: {}, V3: {}}")
    return {rule.id: rule for rule in policy.rules}


# (release, spec, kinds): a writer new in a later release once, in the first that has it
WRITERS = []
for release in SNAPSHOTS:
    WRITERS += [(release, spec, kinds) for spec, kinds in writers(table(release))
                if not any(spec.name == seen.name for _, seen, _ in WRITERS)]


@pytest.mark.parametrize("release, spec, kinds", WRITERS,
                         ids=[f"{'.'.join(map(str, release))}-{spec.name}" for release, spec, _ in WRITERS])
def test_every_writer_is_checked_or_listed_with_a_reason(release, spec, kinds):
    for rule_id, bounded in RELEVANT.items():
        if not kinds & bounded:
            continue
        checked = rules()[rule_id].applies_to(spec)
        reason = UNCHECKED.get((rule_id, spec.name))
        assert checked or reason, f"{spec.name} writes {sorted(kinds)}: {rule_id} neither checks it nor says why"
        assert not (checked and reason), f"{rule_id} checks {spec.name}: drop it from UNCHECKED"


def test_the_unchecked_list_names_writers_only():
    names = {spec.name for _, spec, _ in WRITERS}
    for (rule_id, name), reason in UNCHECKED.items():
        assert name in names and rule_id in RELEVANT and len(reason) > 10, (rule_id, name)


@pytest.mark.parametrize("name, kinds", [
    ("set", {"string"}), ("pfadd", {"string"}), ("bitfield", {"string"}), ("hset", {"hash"}),
    ("geoadd", {"zset"}), ("xadd", {"stream"}), ("sort", {"list"}), ("copy", {"string", "hash", "list", "set",
                                                                                "zset", "stream", "vectorset"}),
    ("get", set()), ("del", set()), ("expire", set()), ("lpop", set()), ("move", set()), ("flushall", set()),
])
def test_value_kinds(name, kinds):
    assert value_kinds(table()[name]) == kinds


@pytest.mark.parametrize("name, kinds", [
    ("hsetex", {"hash"}), ("hexpire", {"hash"}), ("vadd", {"vectorset"}), ("vsetattr", {"vectorset"}),
    ("vcard", set()), ("vsim", set()), ("hgetdel", set()), ("xdelex", set()), ("bitop", {"string"}),
])
def test_value_kinds_of_8_2(name, kinds):
    assert value_kinds(table((8, 2))[name]) == kinds


def test_8_2_writers_are_checked_where_they_write():
    for name, rule_ids in {"hsetex": ("K6", "V2", "V3"), "vadd": ("K6", "V2", "V3"), "vsetattr": ("K6", "V3")}.items():
        for rule_id in rule_ids:
            assert rules()[rule_id].applies_to(table((8, 2))[name]), (rule_id, name)


def test_the_writers_issue_14_named_are_checked_now():
    for name, rule_ids in {"restore": ("K6", "V1", "V2"), "bitfield": ("V1",), "pfadd": ("V1",), "pfmerge": ("V1",),
                           "sunionstore": ("V2",), "zunionstore": ("V2",), "geosearchstore": ("V2",),
                           "sort": ("K6", "V2"), "copy": ("K6", "V1", "V2"), "rename": ("K6", "V1", "V2"),
                           "renamenx": ("K6", "V1", "V2"), "xadd": ("V2",)}.items():
        for rule_id in rule_ids:
            assert rules()[rule_id].applies_to(table()[name]), (rule_id, name)

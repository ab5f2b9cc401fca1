"""The Redis suite comparison's verdict (tests/conformance/redis_suite.py): differences sorted into
the expected table's and the rest, without running the suite."""

from tests.conformance import redis_suite
from tests.conformance.redis_suite import UnitRun, report, to_json, unexpected
from tests.conformance.redis_suite_expected import EXPECTED, classify, not_seen

KNOWN_UNIT, KNOWN_NAME = next(iter(EXPECTED))
KNOWN = EXPECTED[(KNOWN_UNIT, KNOWN_NAME)]


def result(differences: dict, units=None) -> dict:
    units = units or list(differences)
    runs = {kind: {unit: UnitRun(unit, kind) for unit in units} for kind in redis_suite.TARGETS}
    return {"version": "7.0.15", "units": units, "results": runs, "differences": differences, "flaky": {},
            "seconds": 1.0}


def test_every_entry_has_a_reason_and_outcomes_the_tool_gives():
    outcomes = {"ok", "err", "error", "hung", "skip", "ignore", "missing"}
    for (unit, name), entry in EXPECTED.items():
        assert unit.startswith(("unit/", "integration/")) and name
        assert {entry.direct, entry.proxy} <= outcomes and entry.direct != entry.proxy
        assert len(entry.reason) > 30


def test_an_expected_difference_is_not_counted():
    found = {(KNOWN_NAME, 1): (KNOWN.direct, KNOWN.proxy)}
    assert classify(KNOWN_UNIT, found) == (found, {})
    r = result({KNOWN_UNIT: found})
    assert unexpected(r) == {KNOWN_UNIT: {}}
    text = report(r)
    assert "0 unexpected differences" in text and KNOWN.reason in text
    assert text.endswith("RESULT: only the expected differences")
    assert to_json(r)["unexpected"] == []


def test_another_outcome_of_an_expected_test_is_unexpected():
    found = {(KNOWN_NAME, 1): (KNOWN.direct, "hung")}
    assert classify(KNOWN_UNIT, found) == ({}, found)
    assert "1 differences outside" in report(result({KNOWN_UNIT: found}))


def test_a_test_outside_the_table_is_unexpected_and_listed():
    found = {("PING forwarded", 2): ("ok", "err")}
    r = result({"unit/other": found})
    assert unexpected(r) == {"unit/other": found}
    text = report(r)
    assert "unit/other: PING forwarded #2: ok -> err" in text
    assert to_json(r)["unexpected"] == [["unit/other", "PING forwarded", 2, "ok", "err"]]


def test_an_entry_of_a_unit_run_that_did_not_differ_is_reported_not_seen():
    assert not_seen([KNOWN_UNIT], {KNOWN_UNIT: {}}) == [(KNOWN_UNIT, KNOWN_NAME)]
    assert not_seen(["unit/other"], {"unit/other": {}}) == []
    assert "expected but not seen" in report(result({KNOWN_UNIT: {}}))

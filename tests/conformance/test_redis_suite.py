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


def test_a_later_namesake_of_a_test_that_raised_may_be_missing_the_first_may_not():
    unit, name = "unit/scripting", "Script ACL check"
    assert EXPECTED[(unit, name)].proxy == "error"
    later = {(name, 1): ("ok", "error"), (name, 2): ("ok", "missing")}
    assert classify(unit, later) == (later, {})
    alone = {(name, 1): ("ok", "missing")}  # the unit did not run through the proxy at all
    assert classify(unit, alone) == ({}, alone)


def test_an_entry_of_a_unit_run_that_did_not_differ_is_reported_not_seen():
    assert not_seen([KNOWN_UNIT], {KNOWN_UNIT: {}}) == [key for key in EXPECTED if key[0] == KNOWN_UNIT]
    assert (KNOWN_UNIT, KNOWN_NAME) not in not_seen([KNOWN_UNIT], {KNOWN_UNIT: {(KNOWN_NAME, 1): ("ok", "err")}})
    assert not_seen(["unit/type/incr"], {"unit/type/incr": {}}) == []
    assert "expected but not seen" in report(result({KNOWN_UNIT: {}}))


def test_a_target_that_does_not_start_is_a_note_and_missing_tests_not_a_lost_run(monkeypatch, tmp_path):
    def no_start(kind, workdir):
        raise RuntimeError("proxy did not become ready:\nValueError: binary incompatibility")

    monkeypatch.setattr(redis_suite, "Target", no_start)
    run = redis_suite.run_unit(str(tmp_path), "unit/type/incr", "proxy", str(tmp_path), 60, 21111)
    assert run.outcomes == {} and run.attempts == 1
    assert "did not start" in run.notes[0] and "binary incompatibility" in run.notes[0]
    direct = UnitRun("unit/type/incr", "direct", {("INCR", 1): "ok"})
    found = redis_suite.differences(direct, run)
    assert found == {("INCR", 1): ("ok", "missing")}
    assert unexpected(result({"unit/type/incr": found})) == {"unit/type/incr": found}

"""Command rules C2-C6 and K6, through the loader and the engine, over Redis's own command table."""

from __future__ import annotations

import functools

import pytest

from proxy.commands.table import CommandTable
from proxy.errors import violation_text
from proxy.policy.base import AUDIT, ENFORCE, PolicyError
from proxy.policy.decision import SessionState
from proxy.policy.engine import Call, Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.rules import c3_onread
from proxy.policy.rules.c3_onread import SCRIPTS, WHOLE
from tests.policy.helpers import load_error, no_baseline

TABLE = CommandTable.from_snapshot()
SPECS = list(TABLE.walk())


def engine(rules: str, mode: str = "enforce") -> Engine:
    return Engine(load_policy_text(no_baseline(f"name: t\nmode: {mode}\nrules:\n{rules}\n")), TABLE)


cached_engine = functools.lru_cache(maxsize=None)(engine)  # for parametrised tests


def args_of(*args) -> list[bytes]:
    return [a if isinstance(a, bytes) else str(a).encode() for a in args]


def decide(eng: Engine, *args, protocol: int = 2):
    args = args_of(*args)
    plan = eng.plan_for(args)
    if plan is None:
        return None
    state = SessionState()
    state.protocol = protocol
    return eng.decide(plan, args, (), state)


def rejection(eng, *args, **kw):
    verdict = decide(eng, *args, **kw)
    return None if verdict is None else verdict.reject


def findings(eng, *args, **kw):
    verdict = decide(eng, *args, **kw)
    return () if verdict is None else verdict.findings


def rewritten(eng, *args, **kw):
    verdict = decide(eng, *args, **kw)
    return None if verdict is None else verdict.commands


def command_args(spec) -> list[bytes]:
    """A call of this command (or subcommand) by name, with a few placeholder arguments."""
    return args_of(*spec.name.split("|"), "a", "b", "c")


def policy_error(rules: str) -> PolicyError:
    return load_error(f"name: t\nrules:\n{rules}\n")




# -- C2: denied commands ------------------------------------------------------------------------


def test_c2_default_is_the_baseline_and_names_the_alternative():
    eng = engine("  C2: {}")
    for name in ("FLUSHALL", "flushdb", "FlushAll"):
        finding = rejection(eng, name)
        assert finding is not None and finding.rule == "C2"
    assert violation_text(rejection(eng, "FLUSHALL", "ASYNC")) == (
        "NOPERM command FLUSHALL breaks rule C2 (denied command): "
        "delete keys by pattern with SCAN + UNLINK; the baseline guard denies FLUSHALL")
    assert violation_text(rejection(eng, "CONFIG", "SET", "x", "y")) == (
        "NOPERM command CONFIG SET breaks rule C2 (denied command): "
        "the baseline guard denies CONFIG SET; ask the operators if the application needs it")
    assert decide(eng, "GET", "k") is None and decide(eng, "INFO") is None and decide(eng, "SORT", "k") is None
    eng = engine("  C2: {baseline: false}")  # without the baseline: FLUSHALL and FLUSHDB only
    assert rejection(eng, "FLUSHDB") is not None
    assert decide(eng, "CONFIG", "SET", "x", "y") is None and decide(eng, "SWAPDB", "0", "1") is None


# What the baseline denies beside @admin and @dangerous, by name (Redis's categories miss them).
BASELINE_NAMED = {"move", "script|debug", "script|flush", "function|load", "function|delete", "function|flush",
                  "function|restore"}
BASELINE_ALLOWED = {"info", "role", "lastsave", "sort", "sort_ro"}


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_c2_baseline_stays_under_any_deny_list(spec):
    """applications.yaml denied [FLUSHALL, FLUSHDB, "@admin"] and let SWAPDB (@dangerous) through:
    a deny list of one's own no longer replaces the baseline."""
    eng = cached_engine('  C2: {deny: [FLUSHALL, FLUSHDB, "@admin"], allow: []}')
    finding = rejection(eng, *command_args(spec))
    risky = bool({"admin", "dangerous"} & spec.acl_categories) or spec.name in BASELINE_NAMED
    denied = risky and spec.name not in BASELINE_ALLOWED and not spec.subcommands
    assert (finding is not None and finding.rule == "C2") == denied


def test_c2_baseline_is_reenabled_by_name_only():
    eng = engine('  C2: {allow: ["@admin", "@dangerous", "@scripting"]}')  # categories tie with the baseline's
    assert rejection(eng, "CONFIG", "GET", "x") is None and rejection(eng, "LATENCY", "LATEST") is None
    for named in (("SWAPDB", "0", "1"), ("CONFIG", "SET", "x", "y"), ("FUNCTION", "FLUSH"), ("SCRIPT", "DEBUG", "YES")):
        assert rejection(eng, *named) is not None, named
    eng = engine('  C2: {allow: [SWAPDB, "CONFIG|SET", FLUSHDB]}')
    assert rejection(eng, "SWAPDB", "0", "1") is None and rejection(eng, "CONFIG", "SET", "x", "y") is None
    assert rejection(eng, "FLUSHDB") is None and rejection(eng, "FLUSHALL") is not None


DANGEROUS_ALLOW = {"info", "client|list", "sort", "sort_ro"}


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_c2_dangerous_category_except_allowed(spec):
    eng = cached_engine('  C2: {baseline: false, deny: ["@dangerous"], allow: [INFO, "CLIENT|LIST", SORT, SORT_RO]}')
    finding = rejection(eng, *command_args(spec))
    container = spec.subcommands  # a container alone is resolved to nothing
    denied = "dangerous" in spec.acl_categories and spec.name not in DANGEROUS_ALLOW and not container
    assert (finding is not None and finding.rule == "C2") == denied
    if denied:
        assert finding.subject == "command " + spec.name.replace("|", " ").upper()
        assert "@dangerous" in finding.advice


def test_c2_container_name_covers_its_subcommands_and_specific_entries_win():
    eng = engine("  C2: {baseline: false, deny: [CONFIG, \"@admin\"], allow: [\"CONFIG|GET\", CLIENT]}")
    assert rejection(eng, "CONFIG", "SET", "maxmemory", "1") is not None
    assert rejection(eng, "config", "rewrite") is not None
    assert rejection(eng, "CONFIG", "GET", "maxmemory") is None      # subcommand name beats container
    assert rejection(eng, "CLIENT", "KILL", "ID", "1") is None       # container name beats @admin
    assert rejection(eng, "SHUTDOWN") is not None                    # @admin
    eng = engine('  C2: {baseline: false, deny: ["CLIENT|KILL"], allow: ["@admin", "@connection"]}')
    assert rejection(eng, "CLIENT", "KILL", "ID", "1") is not None   # own name beats a category
    eng = engine('  C2: {baseline: false, deny: ["@all"], allow: ["@read", PING]}')
    assert rejection(eng, "SET", "k", "v") is not None
    assert rejection(eng, "GET", "k") is None and rejection(eng, "PING") is None


def test_c2_audit_mode_forwards_and_reports():
    for rules, mode in (("  C2: {mode: audit}", "enforce"), ("  C2: {}", "audit")):
        verdict = decide(engine(rules, mode), "FLUSHDB")
        assert verdict.reject is None and verdict.commands is None
        assert [f.mode for f in verdict.findings] == [AUDIT]
    assert engine("  C2: {mode: \"off\"}").plan_for([b"FLUSHALL"]) is None


@pytest.mark.parametrize("rules, message, line", [
    ('  C2: {deny: ["@dangerus"]}', "unknown ACL category '@dangerus'", 3),
    ('  C2:\n    deny: [FLUSHALL]\n    allow: ["FLUSH ALL"]', "'FLUSH ALL' is neither a command name nor an @category", 5),
    ("  C2:\n    denied: [FLUSHALL]", "unknown setting(s): denied", 4),
    ("  C2:\n    deny: 5", "'deny' must be a list", 4),
    ("  C5:\n    deny: [\"@queue\"]", "unknown ACL category '@queue'", 4),
    ("  C5:\n    allow: [BLPOP]", "unknown setting(s): allow", 4),
])
def test_c2_c5_setting_errors_name_their_line(rules, message, line):
    err = policy_error(rules)
    assert message in err.message and err.line == line


# -- C5: queues -----------------------------------------------------------------------------

QUEUE = [s for s in SPECS if {"blocking", "pubsub", "stream"} & s.acl_categories]


@pytest.mark.parametrize("spec", QUEUE, ids=[s.name for s in QUEUE])
def test_c5_default_denies_blocking_pubsub_and_stream_commands(spec):
    eng = cached_engine("  C5: {}")
    finding = rejection(eng, *command_args(spec))
    assert finding is not None and finding.rule == "C5"
    assert finding.advice.startswith("use a message broker (Kafka, RocketMQ) for queues")


@pytest.mark.parametrize("name", ["GET", "SET", "LPUSH", "RPOP", "HGETALL", "ZADD", "EVAL", "PING"])
def test_c5_leaves_other_commands_alone(name):
    eng = cached_engine("  C5: {}")
    assert rejection(eng, name, "k", "0") is None


def test_c5_custom_deny_list():
    eng = engine('  C5: {deny: [BLPOP, "@pubsub"]}')
    assert violation_text(rejection(eng, "BLPOP", "q", "0")) == (
        "NOPERM command BLPOP breaks rule C5 (Redis is not a message queue): use a message broker "
        "(Kafka, RocketMQ) for queues; this policy denies BLPOP")
    assert rejection(eng, "SUBSCRIBE", "ch").subject == "command SUBSCRIBE"
    assert rejection(eng, "BRPOP", "q", "0") is None
    assert rejection(eng, "XADD", "s", "*", "f", "v") is None


# -- C4: DEL -> UNLINK --------------------------------------------------------------------------


def test_c4_rewrites_del_to_unlink_with_the_same_arguments():
    eng = engine("  C4: {}")
    verdict = decide(eng, "DEL", "a", "b:c", b"\x00\xff")
    assert verdict.reject is None and verdict.findings == ()
    assert verdict.commands == [[b"UNLINK", b"a", b"b:c", b"\x00\xff"]]
    assert [rule.id for rule in verdict.rewritten_by] == ["C4"]
    assert rewritten(eng, "del", "a") == [[b"UNLINK", b"a"]]
    assert decide(eng, "UNLINK", "a") is None and decide(eng, "GETDEL", "a") is None


def test_c4_only_rewrites_when_enforced_and_not_over_a_rejection():
    for audited in (engine("  C4: {mode: audit}"), engine("  C4: {}", mode="audit")):
        verdict = decide(audited, "DEL", "a")  # not rewritten, but counted: audit mode's "would rewrite"
        assert verdict.reject is None and verdict.commands is None
        assert [(f.rule, f.mode, f.subject) for f in verdict.findings] == [("C4", AUDIT, "command DEL")]
        assert verdict.findings[0].advice == "sent unchanged in audit mode; enforced, it is sent as: UNLINK a"
    verdict = decide(engine("  C4: {}\n  K2: {}"), "DEL", "ok", "Bad")
    assert verdict.reject.rule == "K2" and verdict.commands is None
    err = policy_error("  C4: {to: unlink}")
    assert "unknown setting(s): to" in err.message and err.line == 3


# -- C6: scripts --------------------------------------------------------------------------------

SCRIPTING = [s for s in SPECS if "scripting" in s.acl_categories]


@pytest.mark.parametrize("spec", SCRIPTING, ids=[s.name for s in SCRIPTING])
def test_c6_deny_rejects_every_scripting_command(spec):
    eng = cached_engine("  C6: {scripts: deny}")
    finding = rejection(eng, *command_args(spec))
    assert finding is not None and finding.rule == "C6"


def test_c6_deny_covers_the_ones_that_run_or_install_code():
    eng = engine("  C6: {scripts: deny}")
    for call in (["EVAL", "return 1", "0"], ["EVALSHA", "a" * 40, "0"], ["EVAL_RO", "return 1", "0"],
                 ["EVALSHA_RO", "a" * 40, "0"], ["FCALL", "f", "0"], ["FCALL_RO", "f", "0"],
                 ["SCRIPT", "LOAD", "return 1"], ["FUNCTION", "LOAD", "#!lua name=x"],
                 ["FUNCTION", "RESTORE", "x"], ["eval", "return 1", "notanumber"]):
        assert rejection(eng, *call).rule == "C6", call
    assert rejection(eng, "SCRIPT", "LOAD", "x").subject == "command SCRIPT LOAD"
    assert rejection(eng, "GET", "k") is None


def test_c6_declared_scripts_run_and_their_declared_keys_meet_the_key_rules():
    eng = engine("  C6: {}\n  K2: {}")
    assert decide(eng, "EVAL", "return 1", "1", "ok:key", "Not:A:Key") is None
    assert rejection(eng, "EVAL", "return 1", "2", "ok:key", "Bad:key").rule == "K2"
    assert rejection(eng, "FCALL_RO", "f", "1", "Bad").rule == "K2"
    assert rejection(eng, "EVALSHA", "a" * 40, "1", "Bad").subject == "key 'Bad'"
    # numkeys that Redis will refuse: no key is found, Redis answers with its own error
    for numkeys in ("x", "-1", "01", "3"):
        assert decide(eng, "EVAL", "return 1", numkeys, "Bad", "Bad") is None, numkeys
    assert decide(engine("  C6: {}"), "EVAL", "return 1", "0") is None


@pytest.mark.parametrize("call", [
    ["RENAME", "ok:a", "Bad:b"], ["COPY", "ok:a", "Bad:b"], ["SINTERSTORE", "Bad:d", "ok:a", "ok:b"],
    ["ZRANGESTORE", "Bad:d", "ok:a", "0", "-1"], ["SORT", "ok:a", "LIMIT", "0", "1", "STORE", "Bad:d"],
    ["LMOVE", "ok:a", "Bad:b", "LEFT", "RIGHT"], ["GEOSEARCHSTORE", "Bad:d", "ok:a", "FROMMEMBER", "m", "BYRADIUS", "1", "km"],
    ["MIGRATE", "h", "1", "", "0", "10", "KEYS", "ok:a", "Bad:b"], ["BITOP", "AND", "Bad:d", "ok:a"],
])
def test_c6_destination_keys_are_checked_like_source_keys(call):
    finding = rejection(engine("  C6: {}\n  K2: {}"), *call)
    assert finding is not None and finding.rule == "K2" and "Bad:" in finding.subject


def test_c6_setting_errors():
    err = policy_error("  C6:\n    scripts: never")
    assert "'scripts' must be one of approved, declared, deny" in err.message and err.line == 4


# -- C3: O(N) reads -------------------------------------------------------------------------


@pytest.mark.parametrize("call, size", [
    (["LRANGE", "k", "0", "99"], 100),
    (["LRANGE", "k", "0", "100"], 101),
    (["LRANGE", "k", "0", "-1"], (0, -1)),
    (["LRANGE", "k", "5", "-3"], (5, -3)),
    (["LRANGE", "k", "-100", "-1"], 100),
    (["LRANGE", "k", "-5", "1000"], 5),
    (["LRANGE", "k", "-1000", "2"], 3),
    (["LRANGE", "k", "7", "3"], 0),
    (["LRANGE", "k", "a", "3"], None),
    (["LRANGE", "k", "0"], None),
    (["ZRANGE", "k", "0", "-1", "WITHSCORES"], (0, -1)),
    (["ZRANGE", "k", "0", "9", "REV", "WITHSCORES"], 10),
    (["ZRANGE", "k", "-inf", "+inf", "BYSCORE"], WHOLE),
    (["ZRANGE", "k", "(1", "5", "byscore", "LIMIT", "10", "50"], 50),
    (["ZRANGE", "k", "[a", "[z", "BYLEX", "LIMIT", "0", "-1"], WHOLE),
    (["ZRANGE", "k", "-", "+", "BYLEX", "LIMIT", "0", "x"], None),
    (["ZREVRANGE", "k", "0", "-1"], (0, -1)),
    (["ZRANGESTORE", "d", "k", "0", "49"], 50),
    (["ZRANGESTORE", "d", "k", "0", "+inf", "BYSCORE"], WHOLE),
    (["ZRANGEBYSCORE", "k", "-inf", "+inf"], WHOLE),
    (["ZRANGEBYSCORE", "k", "-inf", "+inf", "WITHSCORES", "LIMIT", "0", "10"], 10),
    (["ZREVRANGEBYLEX", "k", "+", "-", "LIMIT", "5", "20"], 20),
    (["SORT", "k"], WHOLE),
    (["SORT", "k", "BY", "limit", "LIMIT", "0", "10", "GET", "#"], 10),
    (["SORT", "k", "LIMIT", "0", "-1", "ALPHA"], WHOLE),
    (["XRANGE", "s", "-", "+"], WHOLE),
    (["XRANGE", "s", "-", "+", "COUNT", "10"], 10),
    (["XREVRANGE", "s", "+", "-", "COUNT", "-1"], 0),
    (["XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "s", "0"], 5),
    (["XREAD", "STREAMS", "count", "0"], WHOLE),
    (["XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">"], 3),
    (["LMPOP", "2", "a", "b", "LEFT", "COUNT", "7"], 7),
    (["LMPOP", "1", "count", "LEFT"], 1),
    (["BLMPOP", "0", "1", "a", "RIGHT", "COUNT", "3"], 3),
    (["ZMPOP", "x", "a", "MIN"], None),
    (["SRANDMEMBER", "k", "-500"], 500),
    (["SPOP", "k"], 1),
    (["HRANDFIELD", "k", "5", "WITHVALUES"], 5),
    (["HGETALL", "k"], WHOLE),
    (["SINTER", "a", "b"], WHOLE),
])
def test_c3_measures_what_a_read_asks_for(call, size):
    args = args_of(*call)
    spec = TABLE.lookup(args)
    from proxy.commands.keyspecs import find_keys

    measure, _ = c3_onread.RANGES.get(spec.name, (c3_onread.whole, None))
    assert measure(args, find_keys(spec, args)) == size


def c3_rule(commands: str):
    policy = load_policy_text(f"rules:\n  C3: {{commands: {commands}}}\n")
    return policy.rule("C3")


def c3_check(rule, *args, protocol=2):
    """The rule's own check, without the engine (which does not call it yet: see the report)."""
    args = args_of(*args)
    spec = TABLE.lookup(args)
    state = SessionState()
    state.protocol = protocol
    assert rule.applies_to(spec)
    return rule.check(Call(args, spec, spec.name, None, (), state))


@pytest.mark.parametrize("call, rejected", [
    (["LRANGE", "k", "0", "99"], False),
    (["LRANGE", "k", "0", "100"], True),
    (["LRANGE", "k", "-100", "-1"], False),
    (["LRANGE", "k", "0", "-1"], False),                       # measured on the server
    (["LRANGE", "k", "x", "y"], False),                        # Redis answers
    (["ZRANGE", "k", "0", "-1", "BYSCORE", "LIMIT", "0", "100"], False),
    (["ZRANGE", "k", "0", "-1", "BYSCORE", "LIMIT", "0", "1000"], True),
    (["ZRANGEBYSCORE", "k", "-inf", "+inf", "LIMIT", "0", "101"], True),
    (["ZRANGEBYSCORE", "k", "-inf", "+inf"], False),           # measured on the server
    (["SORT", "k"], True),                                     # BY/GET keys: not measurable
    (["SORT", "k", "LIMIT", "0", "100"], False),
    (["XREAD", "STREAMS", "s", "0"], True),                    # blocking: not measurable
    (["XREAD", "COUNT", "100", "STREAMS", "s", "0"], False),
    (["BLMPOP", "0", "1", "a", "LEFT"], False),
    (["BLMPOP", "0", "1", "a", "LEFT", "COUNT", "500"], True),
    (["SRANDMEMBER", "k", "-101"], True),
    (["HGETALL", "k"], False),                                 # measured on the server
])
def test_c3_limit_checks_the_range_asked_for(call, rejected):
    rule = c3_rule("{LRANGE: {max: 100}, ZRANGE: {max: 100}, ZRANGEBYSCORE: {max: 100}, SORT: {max: 100}, "
                   "XREAD: {max: 100}, BLMPOP: {max: 100}, SRANDMEMBER: {max: 100}, HGETALL: {max: 100}}")
    finding = c3_check(rule, *call)
    assert (finding is not None) == rejected
    if finding:
        assert finding.rule == "C3" and finding.mode == ENFORCE
        assert finding.subject == f"command {call[0]}"


def test_c3_advice_names_the_incremental_alternative():
    rule = c3_rule("{LRANGE: {max: 100}, HGETALL: reject, SMEMBERS: warn, ZRANGE: reject, SORT: reject, SORT_RO: {max: 10}}")
    assert violation_text(c3_check(rule, "LRANGE", "k", "0", "999")) == (
        "NOPERM command LRANGE breaks rule C3 (O(N) reads on small collections only): it asks for 1000 "
        "elements, more than 100; read it in pages of at most 100 elements (LRANGE key 0 99, then 100 ...)")
    assert "HSCAN" in c3_check(rule, "HGETALL", "k").advice
    assert "SSCAN" in c3_check(rule, "SMEMBERS", "k").advice
    assert "ZSCAN" in c3_check(rule, "ZRANGE", "k", "0", "1").advice
    assert "sorted set" in c3_check(rule, "SORT", "k").advice
    assert "LIMIT <offset> 10" in c3_check(rule, "SORT_RO", "k").advice


def test_c3_actions():
    rule = c3_rule("{SMEMBERS: warn, SORT: {action: reject}, HKEYS: allow}")
    warned = c3_check(rule, "SMEMBERS", "k")
    assert warned.mode == AUDIT and warned.rule == "C3"
    assert c3_check(rule, "SORT", "k", "LIMIT", "0", "1").mode == ENFORCE
    assert not rule.applies_to(TABLE["hkeys"]) and not rule.applies_to(TABLE["hgetall"])
    eng = engine("  C3: {commands: {SMEMBERS: warn, HKEYS: allow}}")
    assert eng.plan_for([b"HKEYS"]) is None and eng.plan_for([b"HGETALL"]) is None


def test_c3_defaults_are_the_documented_ones():
    rule = load_policy_text("rules: {C3: {}}").rule("C3")
    assert rule.entries == {"hgetall": ("limit", 100), "lrange": ("limit", 100),
                            "sort": ("reject", None), "smembers": ("warn", None)}


def test_c3_engine_rejects_a_range_above_the_limit():
    eng = engine("  C3: {}")
    assert rejection(eng, "LRANGE", "k", "0", "100").rule == "C3"
    assert rejection(eng, "SORT", "k").rule == "C3"
    assert decide(eng, "LRANGE", "k", "0", "99") is None


def test_c3_engine_warn_forwards_with_an_audit_finding():
    verdict = decide(engine("  C3: {}"), "SMEMBERS", "k")
    assert verdict.reject is None and verdict.commands is None
    assert [(f.rule, f.mode) for f in verdict.findings] == [("C3", AUDIT)]


def test_c3_rewrites_data_dependent_reads_into_the_size_checking_script():
    eng = engine("  C3: {commands: {HGETALL: {max: 100}, LRANGE: {max: 10}, SINTERSTORE: {max: 5}, "
                 "ZRANGEBYSCORE: {max: 7}}}")
    [command] = rewritten(eng, "HGETALL", "user:1")
    error = (b"NOPERM command HGETALL breaks rule C3 (O(N) reads on small collections only): key 'user:1' "
             b"holds more than 100 elements; read it incrementally with HSCAN key <cursor> COUNT 100")
    assert command == [b"EVAL_RO", SCRIPTS[2], b"1", b"user:1", b"100", error, b"0", b"-1", b"1",
                       b"HGETALL", b"user:1"]
    [command] = rewritten(eng, "hgetall", "user:1", protocol=3)
    assert command[1] == SCRIPTS[3] and SCRIPTS[3].startswith(b"redis.setresp(3)\n")
    [command] = rewritten(eng, "LRANGE", "l", "5", "-2")
    assert command[2:4] == [b"1", b"l"] and command[4] == b"10" and command[6:9] == [b"5", b"-2", b"1"]
    assert b"the range would return more than 10 elements of key 'l'" in command[5]
    # measured keys first, then the others (the destination is declared, not measured)
    [command] = rewritten(eng, "SINTERSTORE", "dst", "a", "b")
    assert command[2:6] == [b"3", b"a", b"b", b"dst"] and command[8:11] == [b"0", b"-1", b"2"]
    assert command[11:] == [b"SINTERSTORE", b"dst", b"a", b"b"]
    assert b"a key it reads holds more than 5 elements" in command[7]
    [command] = rewritten(eng, "ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES")
    assert command[-5:] == [b"ZRANGEBYSCORE", b"z", b"-inf", b"+inf", b"WITHSCORES"]
    # bounded by the arguments, or malformed: no script
    assert decide(eng, "LRANGE", "l", "0", "9") is None
    assert decide(eng, "LRANGE", "l", "0", "x") is None
    assert decide(eng, "ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "0", "7") is None


def test_c3_error_text_in_the_script_has_no_line_breaks():
    [command] = rewritten(engine("  C3: {commands: {HGETALL: {max: 1}}}"), "HGETALL", b"a\r\nb")
    assert b"\r" not in command[5] and b"\n" not in command[5] and b"key 'a  b'" in command[5]


def test_c3_no_rewrite_unless_enforced():
    assert decide(engine("  C3: {mode: audit}"), "HGETALL", "k") is None
    assert decide(engine("  C3: {}", mode="audit"), "HGETALL", "k") is None


@pytest.mark.parametrize("commands, message", [
    ("{LRANGE: {action: limit}}", "'commands': LRANGE: 'limit' needs 'max'"),
    ("{LRANGE: {max: -1}}", "'limit' needs 'max', a whole number of elements >= 0, got -1"),
    ("{LRANGE: {max: ten}}", "got 'ten'"),
    ("{LRANGE: {max: true}}", "got True"),
    ("{SMEMBERS: {action: warn, max: 5}}", "'max' goes with action 'limit', not 'warn'"),
    ("{SORT: maybe}", "must be one of allow, warn, reject, limit, or {action: limit, max: N}, got action 'maybe'"),
    ("{SORT: {action: reject, why: x}}", "SORT: unknown setting(s): why"),
    ("{SORT: [reject]}", "got ['reject']"),
    ("{\"SORT BY\": reject}", "'SORT BY' is not a command name"),
    ("[LRANGE]", "'commands' must be a mapping"),
    ("{LRANGE: reject, lrange: warn}", "'commands': lrange appears twice"),
])
def test_c3_setting_errors_name_their_line(commands, message):
    err = policy_error(f"  C3:\n    mode: enforce\n    commands: {commands}")
    assert message in err.message and err.line == 5


# -- K6: type words -------------------------------------------------------------------------

# (command, arguments after the key, the type it writes)
WRITERS = [
    ("SET", ["v"], "string"), ("APPEND", ["v"], "string"), ("INCR", [], "string"),
    ("SETBIT", ["0", "1"], "string"), ("PFADD", ["e"], "string"), ("SET", ["v", "GET"], "string"),
    ("LPUSH", ["v"], "list"), ("RPUSHX", ["v"], "list"), ("LSET", ["0", "v"], "list"),
    ("HSET", ["f", "v"], "hash"), ("HINCRBY", ["f", "1"], "hash"),
    ("SADD", ["m"], "set"), ("ZADD", ["1", "m"], "zset"), ("GEOADD", ["0", "0", "m"], "zset"),
    ("ZINCRBY", ["1", "m"], "zset"), ("XADD", ["*", "f", "v"], "stream"),
]
WORDS = ["string", "list", "hash", "set", "zset"]


@pytest.mark.parametrize("command, rest, writes", WRITERS, ids=[f"{w[0]}-{'-'.join(w[1])}" for w in WRITERS])
@pytest.mark.parametrize("word", WORDS)
def test_k6_type_word_must_match_the_writing_command(command, rest, writes, word):
    eng = cached_engine("  K6: {}")
    key = f"app:thing:{word}:1"
    finding = rejection(eng, command, key, *rest)
    assert (finding is not None) == (word != writes)
    if finding is not None:
        assert finding.rule == "K6" and finding.subject == f"key '{key}'"
        assert f"{command} writes a {writes} but the key's type word '{word}' says {word}" in finding.advice


GENERIC_WRITES = {"copy", "rename", "renamenx", "sort", "restore", "restore-asking"}


def test_k6_applies_to_write_commands_of_a_type_group_with_written_keys():
    rule = load_policy_text("rules: {K6: {}}").rule("K6")
    applied = {spec.name for spec in SPECS if rule.applies_to(spec)}
    for spec in SPECS:
        if spec.name in applied and spec.name not in GENERIC_WRITES:
            assert "write" in spec.flags and spec.group not in ("generic", None)
    assert {"hset", "lpush", "sadd", "zadd", "set", "xadd", "geoadd", "pfmerge", "bitop",
            "sinterstore", "zrangestore", "lmove", "smove"} | GENERIC_WRITES <= applied
    assert not applied & {"del", "unlink", "expire", "get", "move", "hgetall", "lpop", "spop", "getdel", "hdel",
                          "srem", "lrem", "ltrim"}


@pytest.mark.parametrize("command, outcome", [
    # (command, K6 refuses it / None / "server": sent as the server-side check)
    ("RENAME x:hash y:string", "K6"),  # the source's own word says what it holds
    ("COPY x:list y:hash", "K6"),
    ("RENAMENX x:list y:list", None),
    ("RENAME x:hash y:plain", None),  # no type word on the destination
    ("RENAME x y:hash", "server"),  # only the server knows what x holds
    ("COPY x y:zset DB 1 REPLACE", "server"),
    ("SORT l STORE d:hash", "K6"),  # SORT ... STORE writes a list
    ("SORT l BY w:* LIMIT 0 5 STORE d:list", None),
    ("SORT x:hash", None),  # no STORE: a read
    ("RESTORE k:hash 0 \x0e", "K6"),  # a quicklist payload: a list
    ("RESTORE k:list 0 \x0e", None),
    ("RESTORE k:zset 0 \x11", None),  # a listpack sorted set
    ("RESTORE k:string 0 \x11", "K6"),
    ("RESTORE k:hash 0 \x06", None),  # a module's value: Redis decides
])
def test_k6_generic_writes(command, outcome):
    eng = engine("  K6: {}")
    args = [word.encode().decode("unicode_escape").encode("latin-1") for word in command.split()]
    verdict = decide(eng, *args)
    if outcome == "server":
        assert verdict.reject is None and verdict.commands[0][0] == b"EVAL", verdict.findings
        assert args[2].split(b":")[-1] in verdict.commands[0]  # the type the destination may hold
    elif outcome is None:
        assert verdict is None or (verdict.reject is None and verdict.commands is None), verdict.findings
    else:
        assert verdict.reject is not None and verdict.reject.rule == "K6", verdict


def test_k6_required_on_a_carried_value():
    eng = engine("  K6: {required: true}")
    assert "must name its type" in rejection(eng, "RENAME", "x", "y").advice
    assert rejection(eng, "RENAME", "x:list", "y:list") is None


def test_k6_ignores_generic_and_read_commands_and_removed_keys():
    eng = engine("  K6: {}")
    for call in (["DEL", "x:hash"], ["EXPIRE", "x:hash", "10"], ["MOVE", "x:hash", "1"],
                 ["GET", "x:hash"], ["HGETALL", "x:string"],
                 ["LPOP", "x:hash"], ["HDEL", "x:string", "f"]):
        assert rejection(eng, *call) is None, call
    # LMOVE's source is only read and removed from; its destination is written
    assert rejection(eng, "LMOVE", "a:hash", "b:list", "LEFT", "RIGHT") is None
    assert rejection(eng, "LMOVE", "a:list", "b:hash", "LEFT", "RIGHT").subject == "key 'b:hash'"
    assert rejection(eng, "SINTERSTORE", "d:string", "a:set", "b:set").subject == "key 'd:string'"


def test_k6_position_required_words_and_case():
    eng = engine("  K6: {position: last}")
    assert rejection(eng, "SADD", "chat:list:1") is None                 # 'list' is not last
    assert rejection(eng, "LPUSH", "chat:messages:list", "m") is None
    assert rejection(eng, "HSET", "user:1:set", "f", "v").rule == "K6"
    eng = engine("  K6: {required: true}")
    finding = rejection(eng, "HSET", "user:1", "f", "v")
    assert finding.rule == "K6" and finding.advice == (
        "HSET writes a hash: the key must name its type as a segment, e.g. 'user:1:hash'")
    assert rejection(eng, "HSET", "user:hash:1", "f", "v") is None
    assert rejection(eng, "XADD", "events:1", "*", "f", "v") is None      # no word for streams
    assert rejection(eng, "DEL", "user:1") is None
    eng = engine("  K6: {words: {hash: h, zset: [zset, sortedset], stream: stream}, required: true, delimiter: /}")
    assert rejection(eng, "HSET", "x/string/h", "f", "v") is None         # 'string' is no longer a word
    assert rejection(eng, "ZADD", "x/sortedset", "1", "m") is None
    assert rejection(eng, "SADD", "x/h", "m").advice.endswith("write it with hash commands or drop the type word")
    assert rejection(eng, "XADD", "events/1", "*", "f", "v").rule == "K6"
    assert rejection(eng, "SET", "plain/1", "v") is None                  # no word for strings
    eng = engine("  K6: {}")
    assert rejection(eng, "HSET", "x:HASH", "f", "v") is None
    assert rejection(eng, "SADD", "x:Hash", "m").rule == "K6"


@pytest.mark.parametrize("settings, message, line", [
    ("    words: {hash: h, map: m}", "'words' names unknown type 'map'", 4),
    ("    words: {hash: 'a:b'}", "hash needs a word without ':'", 4),
    ("    words: {hash: x, set: x}", "'x' names both hash and set", 4),
    ("    words: {hash: []}", "hash must be a word or a list of words", 4),
    ("    words: [hash]", "'words' must be a mapping", 4),
    ("    position: first", "'position' must be one of any, last", 4),
    ("    required: 'yes'", "'required' must be true/false", 4),
    ("    delimiter: ''", "'delimiter' must not be empty", 4),
    ("    type_words: {}", "unknown setting(s): type_words", 4),
])
def test_k6_setting_errors_name_their_line(settings, message, line):
    err = policy_error(f"  K6:\n{settings}")
    assert message in err.message and err.line == line

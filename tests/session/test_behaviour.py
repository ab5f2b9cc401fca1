"""What a session does with each command, derived from the command table: nothing reaches a
shared connection unless the proxy knows it is safe there (`proxy/session/behaviour.py`)."""

import pytest

from proxy.backends.cluster.handlers import CLUSTER as CLUSTER_HANDLERS
from proxy.backends.handlers import STANDALONE as STANDALONE_HANDLERS
from proxy.commands.table import CommandTable
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.session import behaviour
from proxy.session.behaviour import (
    CLIENT_ID,
    CLIENT_INFO,
    CLIENT_KILL,
    CLIENT_NO_EVICT,
    CLUSTER,
    CONFIG_SET,
    CONTROL,
    FANOUT,
    LEASE,
    LOCAL_OK,
    PASS,
    PIN,
    PROMOTE,
    REFUSE,
    SETINFO,
    STANDALONE,
    STREAM,
    SUBCOMMAND,
    TRACKING,
    UNKNOWN,
    WAIT,
    Behaviour,
    Guard,
    check_columns,
    dispatch_table,
    lane_tables,
    own_action,
)
from proxy.session.pause import paused_table
from proxy.session.states import LEASED, PINNED, SHARED, STREAMING

TABLE = CommandTable.from_snapshot()
BEHAVIOUR = Behaviour(TABLE)
SHARED_TABLE = lane_tables(BEHAVIOUR, STANDALONE)[SHARED]


def action(column: int, *words: str) -> int:
    args = [word.encode() for word in words]
    top = BEHAVIOUR.actions[column].get(words[0].lower(), behaviour.UNKNOWN_COMMAND[column])
    return BEHAVIOUR.subcommand(column, args) if top == SUBCOMMAND else top


@pytest.mark.parametrize("words, standalone, cluster", [
    # Redis sends no reply to REPLCONF ACK on a normal connection; these turn it into a stream.
    (["REPLCONF", "ACK", "0"], STREAM, STREAM),
    (["SYNC"], STREAM, STREAM),
    (["PSYNC", "?", "-1"], STREAM, STREAM),
    (["MONITOR"], STREAM, STREAM),
    (["SCRIPT", "DEBUG", "YES"], STREAM, STREAM),
    (["SUBSCRIBE", "c"], STREAM, STREAM),
    (["SUNSUBSCRIBE"], STREAM, STREAM),
    (["CLIENT", "REPLY", "OFF"], STREAM, STREAM),
    (["CLIENT", "TRACKING", "ON"], TRACKING, STREAM),
    # Control commands: never behind the work they control.
    (["SCRIPT", "KILL"], CONTROL, CONTROL),
    (["FUNCTION", "KILL"], CONTROL, CONTROL),
    (["CLIENT", "PAUSE", "10"], CONTROL, CONTROL),
    (["CLIENT", "UNPAUSE"], CONTROL, CONTROL),
    (["SHUTDOWN"], CONTROL, CONTROL),
    (["CLIENT", "KILL", "TYPE", "normal"], CLIENT_KILL, CLIENT_KILL),
    # Scripts and blocking commands hold only a connection lent to their client.
    (["EVAL", "return 1", "0"], LEASE, LEASE),
    (["EVALSHA_RO", "x", "0"], LEASE, LEASE),
    (["FCALL", "f", "0"], LEASE, LEASE),
    (["BLPOP", "k", "0"], LEASE, LEASE),
    (["XREAD", "BLOCK", "0", "STREAMS", "s", "$"], LEASE, LEASE),
    (["WAIT", "1", "0"], WAIT, WAIT),
    # Connection state: a connection of its own standalone; kept by the proxy, or refused, in a cluster.
    (["CLIENT", "NO-EVICT", "ON"], PIN, CLIENT_NO_EVICT),  # a cluster: noted by the proxy
    (["CLIENT", "CACHING", "YES"], PIN, REFUSE),
    (["CLIENT", "ID"], CLIENT_ID, CLIENT_ID),  # standalone: pinned, its id noted (tracking.py)
    (["CLIENT", "SETINFO", "LIB-NAME", "x"], SETINFO, SETINFO),
    (["READONLY"], PIN, LOCAL_OK),
    (["CLIENT", "BOGUS"], PIN, REFUSE),
    (["NOTACOMMAND"], UNKNOWN, UNKNOWN),
    # PING goes to Redis like any read (BUSY during a long script, SLOWLOG, commandstats).
    (["PING"], PASS, PASS),
    (["PING", "hello"], PASS, PASS),
    # CONFIG SET: requirepass refused (the proxy's own connections); a cluster's on every node.
    (["CONFIG", "SET", "maxmemory-samples", "5"], CONFIG_SET, FANOUT),
    (["CONFIG", "GET", "maxmemory-samples"], PASS, FANOUT),
    # Safe on a shared connection: one reply, no state.
    (["ECHO", "x"], PASS, PASS),
    (["COMMAND", "DOCS", "get"], PASS, PASS),
    (["GET", "k"], PASS, PASS),
    (["PUBLISH", "c", "m"], PASS, PASS),
    (["SCRIPT", "LOAD", "return 1"], PASS, FANOUT),  # every master: EVALSHA finds it on any key
    (["CLIENT", "LIST"], PASS, CLIENT_INFO),  # a cluster: the proxy's view (cluster/clientinfo.py)
    (["CLIENT", "INFO"], PIN, CLIENT_INFO),
    (["KEYS", "*"], PASS, FANOUT),
])
def test_actions(words, standalone, cluster):
    assert action(STANDALONE, *words) == standalone
    assert action(CLUSTER, *words) == cluster


@pytest.mark.parametrize("spec", [spec for spec in TABLE.walk() if not spec.subcommands], ids=lambda spec: spec.name)
def test_nothing_reaches_a_shared_connection_unless_known_safe(spec):
    """A command is PASS only when no derivation rule moves it and it is not an exception."""
    standalone, cluster = behaviour.classify(spec)
    if standalone != PASS:
        return
    assert spec.name in behaviour.EXCEPTIONS or spec.name.startswith("command|") or (
        "blocking" not in spec.flags
        and "allow_busy" not in spec.flags
        and not ("scripting" in spec.acl_categories and "movablekeys" in spec.flags)
        and not ("pubsub" in spec.flags and "noscript" in spec.flags)
        and ("connection" not in spec.acl_categories or spec.name in ("client|list", "client|help", "client|unblock"))
    ), spec.name


def test_every_action_has_a_handler_in_both_columns():
    check_columns(BEHAVIOUR, STANDALONE, STANDALONE_HANDLERS)
    check_columns(BEHAVIOUR, CLUSTER, CLUSTER_HANDLERS)
    with pytest.raises(RuntimeError, match="CONTROL"):
        check_columns(BEHAVIOUR, CLUSTER, {key: value for key, value in CLUSTER_HANDLERS.items() if key != CONTROL})


def test_every_command_has_a_cluster_behaviour():
    """A command that moves in one column has an explicit action in the other."""
    assert set(BEHAVIOUR.actions[STANDALONE]) == set(BEHAVIOUR.actions[CLUSTER])
    for name, standalone in BEHAVIOUR.actions[STANDALONE].items():
        if standalone in (PIN, STREAM, LEASE, CONTROL, WAIT):
            assert BEHAVIOUR.actions[CLUSTER][name] != PASS or name in ("select",), name


@pytest.mark.parametrize("shared, lane, expected", [
    (PASS, LEASED, PASS), (LEASE, LEASED, PASS), (PIN, LEASED, PROMOTE), (UNKNOWN, LEASED, PROMOTE),
    (STREAM, LEASED, STREAM), (CONTROL, LEASED, CONTROL),
    (PIN, PINNED, PASS), (LEASE, PINNED, PASS), (UNKNOWN, PINNED, PASS), (STREAM, PINNED, STREAM),
    (PIN, STREAMING, PASS), (CONTROL, STREAMING, PASS), (behaviour.QUIT, STREAMING, behaviour.QUIT),
    (PIN, SHARED, PIN),
])
def test_actions_on_a_connection_of_the_clients_own(shared, lane, expected):
    assert own_action(shared, lane) == expected


@pytest.mark.parametrize("column", [STANDALONE, CLUSTER])
def test_ping_goes_to_redis_while_a_pause_is_known(column):
    """Under CLIENT PAUSE ALL Redis holds PING back too: it goes there as always."""
    paused = paused_table(BEHAVIOUR, column)
    assert paused[b"ping"] == paused[b"PING"] == PASS
    assert paused[b"set"] == LEASE and paused[b"get"] == PASS


POLICY = """
name: dispatch
rules:
  K2: {style: lowercase}
  C2: {deny: ["@pubsub", "MONITOR", "CLIENT"]}
  T1: {action: reject}
"""
ENGINE = Engine(load_policy_text(POLICY), TABLE)


@pytest.mark.parametrize("lane", [SHARED, LEASED, PINNED])
def test_every_planned_name_gets_a_guard_with_its_action(lane):
    actions = lane_tables(BEHAVIOUR, STANDALONE)[lane]
    dispatch = dispatch_table(actions, ENGINE.plans)
    assert ENGINE.plans
    for name, plan in ENGINE.plans.items():
        entry = dispatch[name]
        assert type(entry) is Guard and entry.plan is plan
        assert entry.action == actions.get(name, PASS)
    unplanned = [name for name in actions if name not in ENGINE.plans]
    assert unplanned and all(dispatch[name] == actions[name] for name in unplanned)
    assert set(dispatch) == set(actions) | set(ENGINE.plans)


@pytest.mark.parametrize("name, expected", [
    (b"GET", PASS), (b"set", PASS), (b"SUBSCRIBE", STREAM), (b"monitor", STREAM), (b"CLIENT", SUBCOMMAND),
])
def test_a_guard_keeps_the_action_the_name_has_without_the_policy(name, expected):
    entry = dispatch_table(SHARED_TABLE, ENGINE.plans)[name]
    assert type(entry) is Guard and entry.action == expected == SHARED_TABLE[name]


def test_a_guard_reads_the_plan_once():
    dispatch = dispatch_table(SHARED_TABLE, ENGINE.plans)
    get, set_, publish = dispatch[b"GET"], dispatch[b"SET"], dispatch[b"PUBLISH"]
    assert get.keys_only and not set_.keys_only and not publish.keys_only
    assert set_.memo is set_.plan.memo_check is not None  # the memo of passes
    assert set_.memo.memo is set_.plan.memo  # read where the engine writes it
    # No memo: every command goes to the engine.
    assert publish.plan.memo_check is None and publish.memo is None


def test_without_plans_the_actions_are_the_table():
    assert dispatch_table(SHARED_TABLE, {}) is SHARED_TABLE


def test_with_the_servers_own_table_what_it_does_not_know_gets_its_own_error_on_any_connection():
    """Client libraries send subcommands older servers do not know (redis-py 8:
    CLIENT MAINT_NOTIFICATIONS, CLIENT SETINFO): from the server's own table, one error reply on
    the shared connection, no pinning; from the snapshot, never the shared connection."""
    trusted_table = CommandTable.from_snapshot()
    trusted_table.from_server = True
    trusted = Behaviour(trusted_table)
    maint = [b"CLIENT", b"MAINT_NOTIFICATIONS", b"ON"]
    assert trusted.subcommand(STANDALONE, maint) == PASS and trusted.subcommand(CLUSTER, maint) == PASS
    assert trusted.unknown(STANDALONE, SHARED) == PASS
    assert BEHAVIOUR.subcommand(STANDALONE, maint) == PIN and BEHAVIOUR.subcommand(CLUSTER, maint) == REFUSE
    assert BEHAVIOUR.unknown(STANDALONE, SHARED) == UNKNOWN

"""What a session does with each command: its action, derived from the command table.

Theory of operation: a command may go to a shared upstream connection only when the proxy knows
it is safe there: exactly one reply, no change to the connection's state, no takeover of the
connection. Everything else gets an action that moves it elsewhere. The action of a command is
derived from what Redis says about it in `COMMAND INFO` (flags, ACL categories), by the rules of
`classify`, in this order:

1. the short exception table `EXCEPTIONS` below, each entry with its reason;
2. the `blocking` flag: LEASE (a connection of the client's own until it is answered);
3. a script (`@scripting` with key specs given by the caller: EVAL, FCALL and their _RO forms):
   LEASE, so that a script that does not end holds only its own connection and every other
   client gets Redis's BUSY reply instead of waiting behind it;
4. the `allow_busy` flag (SCRIPT KILL, FUNCTION KILL, FUNCTION STATS, SHUTDOWN): CONTROL, the
   proxy's control connection, so that it is never queued behind the work it controls;
5. `@connection` (connection state: CLIENT SETNAME, READONLY...): PIN, a connection of the
   client's own for good;
6. `@pubsub` with `noscript` (the (un)subscribe family, whose replies are not paired with
   requests): STREAM;
7. anything else: PASS, the shared connection.

A container command (CLIENT, SCRIPT...) whose subcommands are not all PASS is dispatched by its
subcommand (`SUBCOMMAND`); CLIENT's subcommands have a table of their own (`CLIENT`), because
the proxy answers several of them itself. A command or subcommand the table does not know is
PASS when the table is the upstream's own (`COMMAND INFO` at start-up: the server does not know
it either and answers one error, as it does to the `CLIENT MAINT_NOTIFICATIONS` that client
libraries send on connect), and never reaches a shared connection when the table is the
snapshot (UNKNOWN: a connection of its own; a clear error in a cluster).

Every action has two columns, standalone (a server, or a Sentinel-managed master) and cluster,
because a cluster has no connection of the client's own for good and answers some connection
state itself; `classify` returns both, so a command that pins in one column cannot silently pass
in the other, and `check_columns` fails at start-up for an action a backend has no handler for.

The dispatch tables map command name bytes (lower and upper case precomputed) to actions, one
table per lane of the connection state (`states.py`): on a connection of the client's own most
actions become PASS (`own_action`). Under a policy, names the policy checks map to a `Guard`
(`guard.py`) that holds the plan too (`dispatch_table`), so the per-command decision is one dict
lookup.
"""

from __future__ import annotations

from ..backends.cluster.keyspace import fans_out
from ..monitor import live
from ..resp.reader import command_name
from .guard import Guard
from .states import LEASED, PINNED, SHARED, STREAMING

# -- actions --------------------------------------------------------------------------------
PASS = 0  # an ordinary command: the current route (the shared connection, or the client's own)
QUIT = 1  # answered by the proxy: +OK, then the connection closes
SUBCOMMAND = 2  # decided by its subcommand
LEASE = 3  # a connection of the client's own until it has answered (blocking commands, scripts)
PIN = 4  # a connection of the client's own for good (connection state)
STREAM = 5  # pinned, replies no longer paired with requests
CONTROL = 6  # the control connection, at once
SELECT = 7
HELLO = 8
AUTH = 9
RESET = 10
MULTI = 11
EXEC = 12
DISCARD = 13
WATCH = 14
UNWATCH = 15
WAIT = 16  # WAIT/WAITAOF: on a connection of the client's own, after the write it waits for
CLIENT_KILL = 17  # never reaches the proxy's own connections
SETINFO = 18  # CLIENT SETINFO: the library's name, answered by the proxy
UNKNOWN = 19  # not in the command table
PROMOTE = 20  # on a lent connection, a command that leaves state there: the lease becomes a pin
LOGIN = 21  # with applications: AUTH, HELLO answered by the proxy (credentials never forwarded)
LOCKED = 22  # with applications, before AUTH: NOAUTH
DRAIN = 23  # wait until the client's own connection has answered, then dispatch again
REFUSE = 24  # not possible through this backend: a clear error
# Cluster only:
FANOUT = 25  # every master, replies merged (KEYS, DBSIZE, FLUSHALL...)
SCAN = 26  # the masters one after another, with cursors that name them
CLIENT_ID = 27  # standalone: pinned, the id noted (tracking.py); a cluster: the proxy's own number
CLIENT_GETNAME = 28
CLIENT_SETNAME = 29
LOCAL_OK = 30  # READONLY, READWRITE, ASKING: +OK (the proxy routes by slot itself)
# Standalone only:
TRACKING = 31  # CLIENT TRACKING: pinned, its pushes go to the client apart from its paired replies
# Cluster only:
NO_CLUSTER = 33  # CLUSTER ...: answered as a server without cluster support (the proxy's one face)
CLIENT_INFO = 34  # CLIENT INFO/LIST: the proxy's own view of the client (cluster/clientinfo.py)
# Standalone only:
CONFIG_SET = 35  # CONFIG SET: refused when it sets requirepass (the proxy's new connections), else passed
# Cluster only:
CLIENT_NO_EVICT = 36  # CLIENT NO-EVICT: the proxy's connection to the client is the one Redis would spare

NAMES = {value: name for name, value in globals().items() if name.isupper() and isinstance(value, int)}

# -- the exceptions to the derived rules: (standalone, cluster), with the reason ---------------
EXCEPTIONS = {
    # @connection, but stateless: one reply on any connection. PING goes to Redis like any read
    # (Redis answers BUSY during a long script, SLOWLOG and INFO commandstats count it; forwarded,
    # it costs the proxy fewer instructions than an answer of its own: micro_session.py --case PING-1).
    "ping": (PASS, PASS),
    "echo": (PASS, PASS),
    "command": (PASS, PASS),  # COMMAND and its subcommands (all @connection, all stateless)
    # The proxy's own connection-state handling.
    "quit": (QUIT, QUIT),
    "select": (SELECT, PASS),  # a cluster has database 0 only: Redis answers
    "hello": (HELLO, HELLO),
    "auth": (AUTH, AUTH),
    "reset": (RESET, RESET),
    "multi": (MULTI, MULTI),
    "exec": (EXEC, EXEC),
    "discard": (DISCARD, DISCARD),
    "watch": (WATCH, WATCH),
    "unwatch": (UNWATCH, UNWATCH),
    # WAIT waits for the writes of its own connection to replicate (`connection` category).
    "wait": (WAIT, WAIT),
    # CONFIG SET requirepass would lock the proxy's own new connections out (handlers.config_set;
    # a cluster's fan-out refuses it too).
    "config|set": (CONFIG_SET, FANOUT),
    "waitaof": (WAIT, WAIT),
    # A cluster client's connection state the proxy keeps: it routes by slot itself.
    "readonly": (PIN, LOCAL_OK),
    "readwrite": (PIN, LOCAL_OK),
    "asking": (PIN, LOCAL_OK),
    # Commands that turn the connection into something else (reply shapes COMMAND INFO does not
    # describe): a replica link, a monitor, a debugger, no replies at all (REPLCONF ACK).
    "monitor": (STREAM, STREAM),
    "sync": (STREAM, STREAM),
    "psync": (STREAM, STREAM),
    "replconf": (STREAM, STREAM),
    "script|debug": (STREAM, STREAM),
    # Whole-keyspace commands: one server answers them; a cluster asks every master.
    "keys": (PASS, FANOUT),
    "flushall": (PASS, FANOUT),
    "flushdb": (PASS, FANOUT),
    "dbsize": (PASS, FANOUT),
    "randomkey": (PASS, FANOUT),
    "scan": (PASS, SCAN),
}

# CLIENT's subcommands: (standalone, cluster). All are @connection.
CLIENT = {
    "id": (CLIENT_ID, CLIENT_ID),  # (what a CLIENT TRACKING REDIRECT may name: session/tracking.py)
    "getname": (PIN, CLIENT_GETNAME),
    "setname": (PIN, CLIENT_SETNAME),
    "setinfo": (SETINFO, SETINFO),
    "info": (PIN, CLIENT_INFO),  # a cluster: the id and name the proxy gave (no node's connection)
    "list": (PASS, CLIENT_INFO),
    "help": (PASS, PASS),
    "unblock": (PASS, PASS),
    "kill": (CLIENT_KILL, CLIENT_KILL),
    "pause": (CONTROL, CONTROL),
    "unpause": (CONTROL, CONTROL),
    "reply": (STREAM, STREAM),  # OFF/SKIP break the one-reply-per-request pairing
    # Invalidation messages arrive unasked: as RESP3 pushes, cut from the replies of the client's
    # connection; a cluster's client is tied to one master's stream.
    "tracking": (TRACKING, STREAM),
    "caching": (PIN, REFUSE),
    "getredir": (PIN, CLIENT_INFO),  # a cluster: the REDIRECT's id as the client named it (cluster/redirects.py)
    "trackinginfo": (PIN, CLIENT_INFO),
    "no-evict": (PIN, CLIENT_NO_EVICT),  # a cluster: noted by the proxy (CLIENT INFO's flag e)
    "no-touch": (PIN, REFUSE),
}

# Commands Redis holds back during CLIENT PAUSE WRITE besides those flagged `write` (the
# `may_replicate` flag, which COMMAND INFO does not show).
MAY_REPLICATE = {"eval", "evalsha", "fcall", "publish", "spublish", "pfcount"}

STANDALONE, CLUSTER = 0, 1
# What a command the snapshot table does not know does, per column: never the shared connection.
UNKNOWN_COMMAND = (UNKNOWN, UNKNOWN)
UNKNOWN_SUBCOMMAND = (PIN, REFUSE)
# ... and one the upstream's own table does not know: the server answers its error.
UNKNOWN_TO_SERVER = (PASS, PASS)


def classify(spec) -> tuple[int, int]:
    """(standalone, cluster) action of a command or subcommand of the command table: the rules
    above, then, in the cluster column, CLUSTER's subcommands answered as a standalone server
    answers them, and keyless commands that concern every node (their `request_policy` tip, or
    `keyspace.SPECIAL`) sent to every master."""
    standalone, cluster = _classify(spec)
    name = spec.name
    # (CLIENT's subcommands are the connection's own state, whatever their tips: Redis 8 gives
    # CLIENT SETNAME and SETINFO `request_policy:all_nodes`, which would send them to every master.)
    if name in EXCEPTIONS or cluster in (LEASE, CONTROL, STREAM) or name.startswith("client|"):
        return standalone, cluster
    if name.startswith("cluster|"):
        return standalone, NO_CLUSTER
    if not spec.has_keys and fans_out(name, spec.tips):
        return standalone, FANOUT
    return standalone, cluster


def _classify(spec) -> tuple[int, int]:
    name = spec.name
    container = name.split("|")[0]
    if name in EXCEPTIONS:
        return EXCEPTIONS[name]
    if container == "client" and "|" in name:
        return CLIENT.get(name.split("|")[1], UNKNOWN_SUBCOMMAND)
    if container in ("command",):
        return EXCEPTIONS[container]
    flags, categories = spec.flags, spec.acl_categories
    if "blocking" in flags:
        return LEASE, LEASE
    if "scripting" in categories and "movablekeys" in flags:
        return LEASE, LEASE
    if "allow_busy" in flags:
        return CONTROL, CONTROL
    if "connection" in categories:
        return PIN, REFUSE
    if "pubsub" in flags and "noscript" in flags:
        return STREAM, STREAM
    return PASS, PASS


class Behaviour:
    """The actions of every command of a table, per column: `actions[column]` maps a top-level
    name to its action (SUBCOMMAND for containers dispatched by subcommand), `subcommands[column]`
    a container's name to {subcommand: action}."""

    def __init__(self, table):
        self.table = table
        trusted = getattr(table, "from_server", False)
        self.unknown_command = UNKNOWN_TO_SERVER if trusted else UNKNOWN_COMMAND
        self.unknown_subcommand = UNKNOWN_TO_SERVER if trusted else UNKNOWN_SUBCOMMAND
        self.actions = ({}, {})
        self.subcommands = ({}, {})
        self.pause_writes = set()  # names Redis holds back during CLIENT PAUSE WRITE
        for spec in table:
            name = spec.name
            if "write" in spec.flags or name in MAY_REPLICATE:
                self.pause_writes.add(name)
            if spec.subcommands:
                per_column = ({}, {})
                for sub_name, sub in spec.subcommands.items():
                    pair = classify(sub)
                    short = sub_name.split("|")[-1]
                    per_column[0][short] = pair[0]
                    per_column[1][short] = pair[1]
                    if "write" in sub.flags:
                        self.pause_writes.add(name)
                if name == "client" and not trusted:
                    for short, pair in CLIENT.items():  # the snapshot may lack the server's own
                        per_column[0].setdefault(short, pair[0])
                        per_column[1].setdefault(short, pair[1])
                for column in (STANDALONE, CLUSTER):
                    subs = per_column[column]
                    self.subcommands[column][name] = subs
                    own = EXCEPTIONS.get(name, (None, None))[column]
                    self.actions[column][name] = own if own is not None else (
                        PASS if all(action == PASS for action in subs.values()) else SUBCOMMAND)
            else:
                pair = classify(spec)
                self.actions[0][name] = pair[0]
                self.actions[1][name] = pair[1]

    def subcommand(self, column: int, args) -> int:
        """The action of a container command by its subcommand."""
        subs = self.subcommands[column].get(args[0].lower().decode("latin-1"))
        if subs is None or len(args) < 2:
            return PASS  # Redis answers the arity error
        return subs.get(args[1].lower().decode("latin-1"), self.unknown_subcommand[column])

    def used(self, column: int) -> set[int]:
        """Every action a backend of this column must handle."""
        used = set(self.actions[column].values())
        for subs in self.subcommands[column].values():
            used.update(subs.values())
        return used | {UNKNOWN_COMMAND[column], UNKNOWN_SUBCOMMAND[column], PROMOTE, DRAIN, LOGIN, LOCKED}

    def unknown(self, column: int, lane) -> int:
        """The action of a name the table does not know, on `lane`."""
        return own_action(self.unknown_command[column], lane)


def check_columns(behaviour: Behaviour, column: int, handlers: dict) -> None:
    """At start-up: every action of the column has a handler (a pinning command with no
    behaviour in a cluster would otherwise pass as a plain one)."""
    missing = sorted(NAMES[action] for action in behaviour.used(column) - {PASS} if action not in handlers)
    if missing:
        raise RuntimeError(f"no handler for action(s) {', '.join(missing)} in the "
                           f"{'standalone' if column == STANDALONE else 'cluster'} column")


# -- per lane -------------------------------------------------------------------------------

# On a connection of the client's own these carry no state of their own, or are handled there.
_KEPT_ON_OWN = {QUIT, CONTROL, CLIENT_KILL, SETINFO, MULTI, EXEC, DISCARD, WATCH, UNWATCH, WAIT, LOGIN,
                LOCKED, RESET, SUBCOMMAND, HELLO, REFUSE, FANOUT, SCAN, CLIENT_ID, CLIENT_GETNAME,
                CLIENT_SETNAME, LOCAL_OK, TRACKING, NO_CLUSTER, CONFIG_SET}


def own_action(action: int, lane) -> int:
    """The action of a command when the client is on `lane` (a standalone backend's lanes: the
    cluster's own connections are per transaction or per command, see its handlers)."""
    if lane is SHARED:
        return action
    if lane is STREAMING:  # (STREAM: a (P)UNSUBSCRIBE may end it, streamend.py; CLIENT's: `stream_table_extra`)
        return action if action in (QUIT, LOGIN, LOCKED, RESET, STREAM, TRACKING, CLIENT_KILL) else PASS
    if action == PASS or action == LEASE:
        return PASS
    if action in _KEPT_ON_OWN:
        return action
    if lane is LEASED:
        return STREAM if action == STREAM else PROMOTE  # state left on a lent connection: keep it
    return STREAM if action == STREAM else PASS  # PINNED: PIN, SELECT, AUTH, UNKNOWN run there


def both_cases(table: dict[str, int]) -> dict[bytes, int]:
    """Keyed by the names' bytes, lower and upper case: the proxy's one object for each
    (`reader.command_name`, what the compiled reader hands out)."""
    out = {}
    for name, action in table.items():
        out[command_name(name.encode())] = action
        out[command_name(name.upper().encode())] = action
    return out


def lane_tables(behaviour: Behaviour, column: int) -> dict:
    """{lane: name bytes -> action} for a standalone-style backend (both cases of every name)."""
    shared = behaviour.actions[column]
    tables = {lane: both_cases({name: own_action(action, lane) for name, action in shared.items()})
              for lane in (SHARED, LEASED, PINNED, STREAMING)}
    tables[STREAMING].update(stream_table_extra(shared))
    return tables


def stream_table_extra(shared: dict) -> dict[bytes, int]:
    """On a stream, CLIENT is still dispatched by its subcommand: a CLIENT TRACKING ... REDIRECT
    or CLIENT KILL sent there (after CLIENT REPLY OFF, on a MONITOR's connection) is checked as
    anywhere (session/tracking.py, clientkill.py); CLIENT's other subcommands end as they did, on
    the stream (PASS, or STREAM: `streamend.on_stream`)."""
    return both_cases({"client": SUBCOMMAND}) if shared.get("client") == SUBCOMMAND else {}


LOGIN_NAMES = {"auth": LOGIN, "hello": LOGIN, "reset": RESET}
UNLOCKED = {**LOGIN_NAMES, "quit": QUIT}


def with_login(table: dict[bytes, int]) -> dict[bytes, int]:
    """A table for a proxy that authenticates clients itself: AUTH/HELLO answered here."""
    return {**table, **both_cases(LOGIN_NAMES)}


def locked(table: dict[bytes, int]) -> dict[bytes, int]:
    """Before authentication: NOAUTH for everything but AUTH, HELLO, RESET and QUIT; a name
    missing from the table (an unknown command) is LOCKED too."""
    out = {name: LOCKED for name in table}
    out.update(both_cases(UNLOCKED))
    return out


def dispatch_table(actions: dict[bytes, int], plans: dict) -> dict:
    """`actions` with a Guard for every name in `plans` (a policy engine's name -> plan)."""
    if not plans:
        return actions
    table = dict(actions)
    for name, plan in plans.items():
        table[name] = Guard(plan, actions.get(name, PASS))
    return table


def counted(table: dict) -> dict:
    """A session's final dispatch table with every PASS (also a Guard's) replaced by the
    command's `Tally`: the loop counts a command where it passes it on, with no lookup of its
    own (monitor/live.py)."""
    out = {}
    for name, action in table.items():
        if action.__class__ is Guard:
            if action.action == PASS:
                action = copy_guard(action, live.tally(name))
        elif action == PASS:
            action = live.tally(name)
        out[name] = action
    return out


def counted_unknown(action):
    """The action for names not in the table: the commands outside the command table share one
    Tally."""
    return live.tally(live.UNKNOWN) if action == PASS else action


def copy_guard(guard: Guard, action) -> Guard:
    copy = Guard(guard.plan, guard.code)
    copy.action = action
    return copy


# A dispatch table without names: every command takes the table's `unknown` action (a cluster
# client's DRAIN while its own connection is answering). An empty dict, not a class of its own,
# so that the dispatch loop's table is always a dict (compiled: one C lookup a command).
NO_NAMES: dict = {}


def strict_int(value: bytes) -> int | None:
    """Redis's string2ll: Python's int() also takes '+1', ' 1' and '1_0', which Redis refuses."""
    if not value or len(value) > 20:
        return None
    digits = value[1:] if value[:1] == b"-" else value
    if not digits.isdigit() or (digits[:1] == b"0" and len(value) != 1):
        return None
    return int(value)


def authenticates(args: list[bytes]) -> bool:
    """AUTH, or HELLO with an AUTH option."""
    name = args[0].lower()
    if name == b"auth":
        return True
    return name == b"hello" and any(arg.lower() == b"auth" for arg in args[2:])
